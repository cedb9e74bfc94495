/*
 * test_results.c — merging results databases (row counts, renumbering,
 * duplicates, all-or-nothing) and the CSV export (pairing, quoting, parsing).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "results.h"
#include "store.h"

static char paths[6][64];

static void names(void)
{
	int i;

	for (i = 0; i < 6; i++) {
		snprintf(paths[i], sizeof paths[i], "/tmp/shardcast-res-%d-%d.db", (int)getpid(), i);
		unlink(paths[i]);
	}
}

static void remove_all(void)
{
	char side[512];
	int i;

	for (i = 0; i < 6; i++) {
		unlink(paths[i]);
		snprintf(side, sizeof side, "%s-wal", paths[i]);
		unlink(side);
		snprintf(side, sizeof side, "%s-shm", paths[i]);
		unlink(side);
	}
}

TestSuite(results, .init = names, .fini = remove_all);

static long long count(const char *path, const char *sql)
{
	struct store st;
	struct err e = {0};
	sqlite3_stmt *q;
	long long n = -1;

	cr_assert_eq(store_open_readonly(&st, path, &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_prepare_v2(st.db, sql, -1, &q, NULL), SQLITE_OK, "%s", sqlite3_errmsg(st.db));
	if (sqlite3_step(q) == SQLITE_ROW)
		n = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	store_close(&st);
	return n;
}

/* A database with n simulate runs (3 predictions each; hashes base..base+n-1),
 * one validate run with 2 measurements, and one calibration. */
static void make_db(const char *path, int n, int base)
{
	struct store st;
	struct err e = {0};
	int i;

	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	for (i = 0; i < n; i++) {
		struct store_run r = {"simulate", "x.ini", "[model]\nname = gpt2\n", (unsigned long long)(base + i),
				      NULL, "a100", "{\"max_micro_batch\": 4, \"step\": {\"time_s\": 2.0},"
				      " \"memory\": {\"peak_bytes\": 100}}", NULL, "{}", NULL, NULL};
		cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	}
	{
		struct store_run v = {"validate", "v.ini", "[model]\nname = gpt-tiny\n", (unsigned long long)(base + 1000),
				      "training.micro_batch=2\n", "cpu", "{\"step\": {\"time_s\": 2.0}}",
				      "{\"step_time_s\": 2.5, \"peak_bytes\": 80}", "{}", NULL, NULL};
		cr_assert_eq(store_add_run(&st, &v, NULL, &e), 0, "%s", e.msg);
	}
	cr_assert_eq(sqlite3_exec(st.db, "INSERT INTO calibrations(device, created_at, params_json, n_points)"
				  " VALUES ('cpu', '2024-01-01T00:00:00Z', '{\"eff\": 0.5}', 3)", NULL, NULL, NULL),
		     SQLITE_OK);
	store_close(&st);
}

Test(results, merge_copies_every_row_and_renumbers)
{
	struct results_merged m;
	struct err e = {0};
	const char *in[] = {paths[0], paths[1]};

	make_db(paths[0], 2, 0);    /* 3 runs: 2 x 3 predictions + 1, 2 measurements */
	make_db(paths[1], 3, 100);  /* 4 runs */
	cr_assert_eq(results_merge(paths[2], in, 2, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 7);
	cr_expect_eq(m.duplicates, 0);
	/* the two calibrations are the same row (device, time, parameters) */
	cr_expect_eq(m.calibrations, 1);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM runs"), 7);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM predictions"), 2 * 3 + 1 + 3 * 3 + 1);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM measurements"), 2 + 2);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM outputs"), 7);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM calibrations"), 1);
	cr_expect_eq(count(paths[2], "SELECT max(id) FROM runs"), 7, "ids 1..7, renumbered");
	/* every copied row belongs to a copied run */
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM predictions WHERE run_id NOT IN (SELECT id FROM runs)"), 0);
	/* the second input's validate run kept its measurements under its new id */
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM measurements m JOIN runs r ON r.id = m.run_id"
			   " WHERE r.scenario_hash = printf('%016x', 1100)"), 2);

	/* merging again adds nothing: every run is a duplicate */
	cr_assert_eq(results_merge(paths[2], in, 2, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 0);
	cr_expect_eq(m.duplicates, 7);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM runs"), 7);
}

Test(results, duplicates_inside_the_inputs_are_skipped)
{
	struct results_merged m;
	struct err e = {0};
	const char *in[] = {paths[0], paths[0]};

	make_db(paths[0], 2, 0);
	cr_assert_eq(results_merge(paths[1], in, 2, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 3);
	cr_expect_eq(m.duplicates, 3);
}

Test(results, bad_inputs_change_nothing)
{
	struct results_merged m;
	struct err e = {0};
	const char *missing[] = {paths[0], "/tmp/shardcast-no-such.db"};
	const char *self[] = {paths[0], paths[2]};
	const char *text[] = {paths[0], paths[3]};
	const char *wrong[] = {paths[0], paths[4]};
	FILE *f;

	make_db(paths[0], 2, 0);
	/* a missing input: error, and the output it would have created is not there */
	cr_expect_eq(results_merge(paths[1], missing, 2, &m, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "/tmp/shardcast-no-such.db: cannot open"), "%s", e.msg);
	cr_expect_neq(access(paths[1], F_OK), 0, "no output left behind");
	/* the output among the inputs */
	make_db(paths[2], 1, 500);
	err_clear(&e);
	cr_expect_eq(results_merge(paths[2], self, 2, &m, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "is the output database itself"), "%s", e.msg);
	/* a text file */
	f = fopen(paths[3], "w");
	fputs("run_id,created_at\n1,2024\n", f);
	fclose(f);
	err_clear(&e);
	cr_expect_eq(results_merge(paths[2], text, 2, &m, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "not a results database"), "%s", e.msg);
	/* SQLite with the right table names but a broken runs table: found only
	 * while copying, so the transaction rolls back what the first input added */
	{
		struct store st;
		cr_assert_eq(sqlite3_open(paths[4], &st.db), SQLITE_OK);
		cr_assert_eq(sqlite3_exec(st.db, "CREATE TABLE runs(id INTEGER PRIMARY KEY, command TEXT);"
					  "CREATE TABLE predictions(x); CREATE TABLE measurements(x);"
					  "CREATE TABLE outputs(x); CREATE TABLE calibrations(x);"
					  "INSERT INTO runs(command) VALUES ('simulate'); PRAGMA user_version = 1;",
					  NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(st.db);
	}
	err_clear(&e);
	cr_expect_neq(results_merge(paths[2], wrong, 2, &m, &e), 0);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM runs"), 2, "only its own 2 runs, none of the first input's");
}

/* Two runs of identical content recorded in the same millisecond (4 writers
 * at once did it; here the time is set equal) are two runs: merge keeps both,
 * and a second merge knows both by their ids. */
Test(results, runs_of_the_same_millisecond_stay_two_runs)
{
	struct results_merged m;
	struct err e = {0};
	struct store st;
	struct store_run r = {"simulate", "x.ini", "[model]\nname = gpt2\n", 7, NULL, "a100",
			      "{\"max_micro_batch\": 4}", NULL, "{}", NULL, NULL};
	const char *in[] = {paths[0]};

	cr_assert_eq(store_open(&st, paths[0], &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_exec(st.db, "UPDATE runs SET created_at = '2025-01-01T00:00:00.000Z'", NULL, NULL,
				  NULL), SQLITE_OK);
	store_close(&st);
	cr_assert_eq(results_merge(paths[1], in, 1, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 2);
	cr_expect_eq(m.duplicates, 0);
	cr_expect_eq(count(paths[1], "SELECT count(*) FROM predictions"), 2);
	cr_assert_eq(results_merge(paths[1], in, 1, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 0);
	cr_expect_eq(m.duplicates, 2);
}

/* Turns a database of this version into one of schema version 2 (no run ids). */
static void downgrade_to_v2(const char *path)
{
	sqlite3 *db;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	/* the runs table as schema.sql version 2 created it */
	cr_assert_eq(sqlite3_exec(db, "CREATE TABLE runs_v2 (id INTEGER PRIMARY KEY, command TEXT NOT NULL,"
				  " scenario_path TEXT, scenario_text TEXT, scenario_hash TEXT, overrides TEXT,"
				  " version TEXT NOT NULL, host TEXT, device TEXT, created_at TEXT NOT NULL);"
				  "INSERT INTO runs_v2 SELECT id, command, scenario_path, scenario_text, scenario_hash,"
				  " overrides, version, host, device, created_at FROM runs;"
				  "DROP TABLE runs; ALTER TABLE runs_v2 RENAME TO runs;"
				  "CREATE INDEX runs_hash ON runs(scenario_hash); PRAGMA user_version = 2",
				  NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	size_t n;

	cr_assert(a && b);
	while ((n = fread(buf, 1, sizeof buf, a)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, b), n);
	fclose(a);
	fclose(b);
}

/* A version 2 database (runs without ids) holding two twins (identical rows
 * and outputs) and two other runs: migrated, each run gets an id of its
 * content (version 8), the twins two different ones; a merge of an
 * unmigrated copy derives the same ids, so it finds every run already there,
 * and merging the copy first and the migrated one second likewise. */
Test(results, old_runs_get_the_same_ids_everywhere)
{
	struct results_merged m;
	struct err e = {0};
	struct store st;
	struct store_run r = {"simulate", "x.ini", "[model]\nname = gpt2\n", 7, NULL, "a100", NULL, NULL, "{}",
			      NULL, NULL};
	const char *old[] = {paths[1]}, *migrated[] = {paths[0]};

	make_db(paths[0], 1, 0);   /* a simulate and a validate run */
	cr_assert_eq(store_open(&st, paths[0], &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_exec(st.db, "UPDATE runs SET created_at = '2025-01-01T00:00:00.000Z' WHERE id > 2",
				  NULL, NULL, NULL), SQLITE_OK);
	store_close(&st);
	downgrade_to_v2(paths[0]);
	copy_file(paths[0], paths[1]);
	cr_expect_eq(count(paths[1], "PRAGMA user_version"), 2);

	cr_assert_eq(store_open(&st, paths[0], &e), 0, "%s", e.msg);   /* migrates */
	store_close(&st);
	cr_expect_eq(count(paths[0], "PRAGMA user_version"), 3);
	cr_expect_eq(count(paths[0], "SELECT count(DISTINCT uuid) FROM runs"
			   " WHERE uuid LIKE '________-____-8___-____-____________'"), 4);
	cr_assert_eq(results_merge(paths[0], old, 1, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 0);
	cr_expect_eq(m.duplicates, 4);
	cr_assert_eq(results_merge(paths[2], old, 1, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 4);
	cr_assert_eq(results_merge(paths[2], migrated, 1, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.runs, 0);
	cr_expect_eq(m.duplicates, 4);
	cr_expect_eq(count(paths[2], "SELECT count(*) FROM runs"), 4);
}

/* Splits one CSV record (RFC 4180) into at most n fields; returns the count. */
static int csv_split(const char *line, char fields[][128], int n)
{
	int k = 0, len = 0, quoted = 0;
	const char *p;

	for (p = line; *p && *p != '\n' && k < n; p++) {
		if (quoted) {
			if (*p == '"' && p[1] == '"')
				fields[k][len++] = *p++;
			else if (*p == '"')
				quoted = 0;
			else
				fields[k][len++] = *p;
		} else if (*p == '"') {
			quoted = 1;
		} else if (*p == ',') {
			fields[k++][len] = '\0';
			len = 0;
		} else {
			fields[k][len++] = *p;
		}
	}
	fields[k][len] = '\0';
	return k + 1;
}

Test(results, export_pairs_measurements_with_predictions)
{
	struct store st;
	struct err e = {0};
	struct store_run v = {"validate", "odd, \"name\".ini", "", 7, NULL, "cpu",
			      "{\"max_micro_batch\": 4, \"step\": {\"time_s\": 2.0}, \"memory\": {\"peak_bytes\": 100}}",
			      "{\"max_micro_batch\": 3, \"step_time_s\": 2.5, \"peak_bytes\": 80,"
			      " \"fixed_overhead_bytes\": 5}", NULL, NULL, NULL};
	char *buf = NULL, *line, f[12][128];
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int rows = 0, seen = 0;

	cr_assert_eq(store_open(&st, paths[0], &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &v, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(results_export_csv(&st, out, 1, &e), 0, "%s", e.msg);
	fclose(out);
	store_close(&st);
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"), rows++) {
		cr_assert_eq(csv_split(line, f, 12), 9, "row %d: '%s' has not 9 fields", rows, line);
		if (rows == 0) {
			cr_expect_str_eq(f[0], "run_id");
			continue;
		}
		cr_expect_str_eq(f[3], "odd, \"name\".ini", "quoted and unquoted back");
		if (!strcmp(f[5], "step.time_s")) {
			/* validate's step_time_s is compared with the prediction step.time_s */
			cr_expect_eq(atof(f[6]), 2.0);
			cr_expect_eq(atof(f[7]), 2.5);
			cr_expect_float_eq(atof(f[8]), -0.2, 1e-9, "(2 - 2.5) / 2.5");
			seen++;
		} else if (!strcmp(f[5], "memory.peak_bytes")) {
			cr_expect_float_eq(atof(f[8]), 0.25, 1e-9, "(100 - 80) / 80");
			seen++;
		} else if (!strcmp(f[5], "max_micro_batch")) {
			cr_expect_float_eq(atof(f[8]), 1.0 / 3, 1e-6);
			seen++;
		} else {
			cr_expect_str_eq(f[5], "fixed_overhead_bytes");
			cr_expect_str_eq(f[6], "", "no prediction of it");
		}
	}
	cr_expect_eq(seen, 3);
	cr_expect_eq(rows, 1 + 4, "header + the 4 measured keys (--measured-only)");
	free(buf);
}

Test(results, list_is_newest_first_and_show_finds_the_run)
{
	struct store st;
	struct err e = {0};
	char *buf = NULL;
	size_t len = 0;
	FILE *out;

	make_db(paths[0], 2, 0);
	/* give run 1 the latest time: the order is by time, then id */
	cr_assert_eq(store_open(&st, paths[0], &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_exec(st.db, "UPDATE runs SET created_at = '2999-01-01T00:00:00Z' WHERE id = 1",
				  NULL, NULL, NULL), SQLITE_OK);
	out = open_memstream(&buf, &len);
	cr_assert_eq(results_list(&st, out, 0, &e), 0, "%s", e.msg);
	fclose(out);
	cr_expect(strstr(buf, "\n    1  2999-") && strstr(buf, "    3  ") &&
		  strstr(buf, "\n    1  2999-") < strstr(buf, "    3  "), "%s", buf);
	cr_expect(strstr(buf, "2.500 s     -          80 B"), "the measured step time of run 3: %s", buf);
	free(buf);
	buf = NULL;
	out = open_memstream(&buf, &len);
	cr_assert_eq(results_show(&st, 3, out, &e), 0, "%s", e.msg);
	fclose(out);
	cr_expect(strstr(buf, "run 3: validate") && strstr(buf, "training.micro_batch=2") &&
		  strstr(buf, "name = gpt-tiny") && strstr(buf, "step_time_s"), "%s", buf);
	free(buf);
	cr_expect_eq(results_show(&st, 99, stdout, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "no run with id 99"), "%s", e.msg);
	store_close(&st);
}

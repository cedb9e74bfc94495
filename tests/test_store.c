/*
 * test_store.c — the SQLite results store: schema, one transaction per run.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "store.h"

static long long count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *q;
	long long n = -1;
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	if (sqlite3_step(q) == SQLITE_ROW)
		n = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return n;
}

Test(store, records_a_run_with_flattened_predictions)
{
	char path[64];
	struct store st;
	struct err e = {0};
	struct store_run r = {"simulate", "x.ini", "[model]\n", 42, NULL, "a100",
			      "{\"memory\":{\"peak_bytes\":123,\"fits\":true},\"max_micro_batch\":7}", NULL, "{}", NULL, NULL};
	long long id = 0;

	snprintf(path, sizeof path, "/tmp/shardcast-store-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, &id, &e), 0, "%s", e.msg);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs"), 1);
	cr_expect_eq(count(st.db, "SELECT value FROM predictions WHERE key = 'memory.peak_bytes'"), 123);
	cr_expect_eq(count(st.db, "SELECT value FROM predictions WHERE key = 'memory.fits'"), 1);
	cr_expect_eq(count(st.db, "SELECT value FROM predictions WHERE key = 'max_micro_batch'"), 7);
	cr_expect_eq(count(st.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	store_close(&st);
	/* reopening keeps the data and does not re-create the schema */
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs"), 1);
	store_close(&st);
	unlink(path);
}

Test(store, a_failed_run_leaves_nothing)
{
	char path[64];
	struct store st;
	struct err e = {0};
	/* invalid predicted JSON makes the insert fail after the runs row */
	struct store_run r = {"simulate", "x.ini", "", 1, NULL, "a100", "{not json", NULL, NULL, NULL, NULL};

	snprintf(path, sizeof path, "/tmp/shardcast-store2-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	cr_expect_neq(store_add_run(&st, &r, NULL, &e), 0);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs"), 0, "the runs row was rolled back");
	store_close(&st);
	unlink(path);
}

Test(store, refuses_a_newer_schema_and_non_databases)
{
	char path[64];
	struct store st;
	struct err e = {0};
	FILE *f;

	snprintf(path, sizeof path, "/tmp/shardcast-store3-%d.db", (int)getpid());
	f = fopen(path, "w");
	fputs("this is not a database, it is a text file that is long enough to have a header", f);
	fclose(f);
	cr_expect_neq(store_open(&st, path, &e), 0);
	unlink(path);
}

/* A version 1 database (results/schema.sql as first released, with a run in
 * it) is migrated forward on open: the candidates table of version 2 appears,
 * user_version says 2, the old run stays; readers open version 1 as it is. */
Test(store, migrates_version_1_forward)
{
	static const char v1[] =
		"CREATE TABLE runs (id INTEGER PRIMARY KEY, command TEXT NOT NULL, scenario_path TEXT,"
		" scenario_text TEXT, scenario_hash TEXT, overrides TEXT, version TEXT NOT NULL, host TEXT,"
		" device TEXT, created_at TEXT NOT NULL);"
		"CREATE TABLE predictions (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
		" key TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, key));"
		"CREATE TABLE measurements (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
		" key TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, key));"
		"CREATE TABLE outputs (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
		" format TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, format));"
		"CREATE TABLE calibrations (id INTEGER PRIMARY KEY, device TEXT NOT NULL, created_at TEXT NOT NULL,"
		" params_json TEXT NOT NULL, n_points INTEGER NOT NULL, error_before REAL, error_after REAL);"
		"INSERT INTO runs(command, version, created_at) VALUES ('simulate', '0.1.0', '2024-01-01T00:00:00.000Z');"
		"PRAGMA user_version = 1;";
	char path[64];
	struct store st;
	struct err e = {0};
	sqlite3 *db;

	snprintf(path, sizeof path, "/tmp/shardcast-store4-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
	cr_assert_eq(store_open_readonly(&st, path, &e), 0, "a version 1 database reads as it is: %s", e.msg);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM sqlite_master WHERE name = 'candidates'"), 0);
	store_close(&st);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	cr_expect_eq(count(st.db, "PRAGMA user_version"), 2);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM sqlite_master WHERE name = 'candidates'"), 1);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs WHERE command = 'simulate'"), 1);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM candidates"), 0);
	store_close(&st);
	unlink(path);
}

/*
 * test_store.c — the SQLite results store: schema, one transaction per run,
 * run ids, a full disk, a corrupted page.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "results.h"
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
	cr_expect_eq(count(st.db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM sqlite_master WHERE name = 'candidates'"), 1);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs WHERE command = 'simulate'"), 1);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs WHERE length(uuid) = 36"), 1, "version 3: the run got an id");
	cr_expect_eq(count(st.db, "SELECT count(*) FROM candidates"), 0);
	store_close(&st);
	unlink(path);
}

/* Every run gets its own id: 36 characters, RFC 9562 version 4 (the 13th hex
 * digit is 4, the 17th one of 8, 9, a, b), different for identical runs. */
Test(store, each_run_gets_a_random_id)
{
	char path[64], a[STORE_UUID_LEN + 1], b[STORE_UUID_LEN + 1];
	struct store st;
	struct err e = {0};
	struct store_run r = {"simulate", "x.ini", "[model]\n", 42, NULL, "a100", NULL, NULL, "{}", NULL, NULL};
	sqlite3_stmt *q;

	cr_assert_eq(store_uuid(a), 0);
	cr_assert_eq(store_uuid(b), 0);
	cr_expect_eq(strlen(a), 36);
	cr_expect(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-', "%s", a);
	cr_expect_eq(a[14], '4', "%s", a);
	cr_expect(strchr("89ab", a[19]) != NULL, "%s", a);
	cr_expect_str_neq(a, b);
	snprintf(path, sizeof path, "/tmp/shardcast-store5-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_expect_eq(count(st.db, "SELECT count(DISTINCT uuid) FROM runs WHERE uuid LIKE '________-____-4___-____-____________'"), 2);
	/* the id is unique in the table */
	cr_assert_eq(sqlite3_prepare_v2(st.db, "UPDATE runs SET uuid = (SELECT uuid FROM runs WHERE id = 1) WHERE id = 2",
					-1, &q, NULL), SQLITE_OK);
	cr_expect_eq(sqlite3_step(q), SQLITE_CONSTRAINT);
	sqlite3_finalize(q);
	store_close(&st);
	unlink(path);
}

/* A full disk while recording (SQLite's max_page_count stands in for the disk:
 * the same SQLITE_FULL): exit code 1 (a system failure), a message that says
 * so, and nothing of the run written. tests/store.sh fills a real tmpfs. */
Test(store, a_full_disk_is_a_system_failure)
{
	char path[64], big[64 * 1024];
	struct store st;
	struct err e = {0};
	struct store_run r = {"simulate", "x.ini", big, 42, NULL, "a100", NULL, NULL, "{}", NULL, NULL};
	char sql[64];

	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	snprintf(path, sizeof path, "/tmp/shardcast-store6-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", count(st.db, "PRAGMA page_count"));
	cr_assert_eq(sqlite3_exec(st.db, sql, NULL, NULL, NULL), SQLITE_OK);
	cr_expect_eq(store_add_run(&st, &r, NULL, &e), ERR_SYSTEM);
	cr_expect(strstr(e.msg, "recording the run: the disk is full"), "%s", e.msg);
	cr_expect_eq(count(st.db, "SELECT count(*) FROM runs"), 0);
	store_close(&st);
	unlink(path);
}

/* Page `page` (1-based) of a database of page size 4096, read or overwritten. */
static void page_io(const char *path, long page, unsigned char *buf, int write)
{
	FILE *f = fopen(path, "r+b");

	cr_assert(f);
	cr_assert_eq(fseek(f, (page - 1) * 4096, SEEK_SET), 0);
	if (write)
		cr_assert_eq(fwrite(buf, 1, 4096, f), 4096);
	else
		cr_assert_eq(fread(buf, 1, 4096, f), 4096);
	fclose(f);
}

/* A corrupted page away from where a new run goes (the leftmost leaf of the
 * runs table: SQLite appends at the right, so a write would succeed without
 * reading it) is found before anything is written: ERR_INPUT, "corrupted",
 * the database unchanged. The page's layout: SQLite's file format, section
 * 1.6 (an interior table page: type 5, cell pointers from byte 12, each cell a
 * 4-byte left child page number). */
Test(store, a_corrupted_database_is_not_written_to)
{
	char path[64], text[2000];
	unsigned char page[4096];
	struct store st;
	struct err e = {0};
	struct store_run r = {"simulate", "x.ini", text, 42, NULL, "a100", NULL, NULL, "{}", NULL, NULL};
	long long root;
	long leaf;
	int i, cell;

	memset(text, 'x', sizeof text - 1);
	text[sizeof text - 1] = '\0';
	snprintf(path, sizeof path, "/tmp/shardcast-store7-%d.db", (int)getpid());
	unlink(path);
	cr_assert_eq(store_open(&st, path, &e), 0, "%s", e.msg);
	for (i = 0; i < 40; i++)
		cr_assert_eq(store_add_run(&st, &r, NULL, &e), 0, "%s", e.msg);
	cr_assert_eq(count(st.db, "PRAGMA page_size"), 4096);
	root = count(st.db, "SELECT rootpage FROM sqlite_master WHERE name = 'runs'");
	store_close(&st);  /* the last connection checkpoints the WAL into the file */
	page_io(path, root, page, 0);
	cr_assert_eq(page[0], 5, "the runs table's root is an interior page");
	cell = page[12] << 8 | page[13];
	leaf = (long)page[cell] << 24 | page[cell + 1] << 16 | page[cell + 2] << 8 | page[cell + 3];
	page_io(path, leaf, page, 0);
	cr_assert_eq(page[0], 13, "its leftmost child is a leaf page");
	memset(page, 0xA5, sizeof page);
	page_io(path, leaf, page, 1);

	cr_expect_eq(store_open(&st, path, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "the database is corrupted (quick_check: "), "%s", e.msg);
	cr_expect(strstr(e.msg, "nothing was written to it"), "%s", e.msg);
	{
		sqlite3 *db;
		cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
		cr_expect_eq(count(db, "SELECT max(id) FROM runs"), 40, "no run 41");
		sqlite3_close(db);
	}
	/* nor is it merged into another: refused before the merge begins */
	{
		char out[64];
		const char *in[] = {path};
		struct results_merged m;
		snprintf(out, sizeof out, "/tmp/shardcast-store7m-%d.db", (int)getpid());
		err_clear(&e);
		cr_expect_eq(results_merge(out, in, 1, &m, &e), ERR_INPUT);
		cr_expect(strstr(e.msg, "the database is corrupted"), "%s", e.msg);
		cr_expect_neq(access(out, F_OK), 0, "no output left behind");
	}
	unlink(path);
}

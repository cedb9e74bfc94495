/*
 * store.c — SQLite results store (see store.h).
 */
#include "store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "schema_sql.h"  /* generated from results/schema.sql: schema_sql[] */

#ifndef SHARDCAST_VERSION
#define SHARDCAST_VERSION "0.1.0"
#endif

const char *store_version(void)
{
	return SHARDCAST_VERSION;
}

static int fail(struct store *st, struct err *e, const char *what)
{
	return err_set(e, ERR_SYSTEM, st->path, 0, "%s: %s", what, sqlite3_errmsg(st->db));
}

/* Brings the schema to STORE_SCHEMA_VERSION, one version at a time, in one
 * transaction. results/schema.sql is the current schema, all of it CREATE ...
 * IF NOT EXISTS: applying it creates a new database (0 -> current) and adds
 * the tables of each later version (1 -> 2: candidates). A change that is not
 * an addition gets its own statement in steps[] below. */
static int migrate(struct store *st, struct err *e)
{
	static const char *const steps[STORE_SCHEMA_VERSION + 1] = {
		NULL,   /* -> 1: the initial schema */
		NULL,   /* -> 2: candidates (additive) */
	};
	sqlite3_stmt *q;
	char sql[64];
	int version = 0, v;

	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
		return fail(st, e, "reading the schema version");
	if (sqlite3_step(q) == SQLITE_ROW)
		version = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	if (version > STORE_SCHEMA_VERSION)
		return err_set(e, ERR_INPUT, st->path, 0,
			       "results database has schema version %d; this build knows up to %d",
			       version, STORE_SCHEMA_VERSION);
	if (version == STORE_SCHEMA_VERSION)
		return 0;
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return fail(st, e, "locking the database to migrate the schema");
	/* another process may have migrated it while we waited for the lock */
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		version = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	for (v = version + 1; version > 0 && v <= STORE_SCHEMA_VERSION; v++)  /* 0: all new */
		if (steps[v] && sqlite3_exec(st->db, steps[v], NULL, NULL, NULL) != SQLITE_OK)
			goto fail;
	snprintf(sql, sizeof sql, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
	if (version < STORE_SCHEMA_VERSION &&
	    (sqlite3_exec(st->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
	     sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK))
		goto fail;
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		return fail(st, e, "committing the schema");
	return 0;
fail:
	{
		int rc = fail(st, e, "migrating the schema");
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
}

int store_open(struct store *st, const char *path, struct err *e)
{
	memset(st, 0, sizeof *st);
	snprintf(st->path, sizeof st->path, "%s", path);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
		int rc = err_set(e, ERR_INPUT, path, 0, "cannot open the results database: %s",
				 st->db ? sqlite3_errmsg(st->db) : "out of memory");
		store_close(st);
		return rc;
	}
	sqlite3_busy_timeout(st->db, 30000);
	if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; "
			 "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK ||
	    migrate(st, e)) {
		int rc = e->code ? e->code : fail(st, e, "preparing the database (is it a SQLite file?)");
		store_close(st);
		return rc;
	}
	return 0;
}

int store_open_readonly(struct store *st, const char *path, struct err *e)
{
	sqlite3_stmt *q = NULL;
	struct stat sb;
	int version = -1, tables = 0, want, rc = 0;

	memset(st, 0, sizeof *st);
	snprintf(st->path, sizeof st->path, "%s", path);
	if (stat(path, &sb) != 0)
		return err_set(e, ERR_INPUT, path, 0, "cannot open the results database: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return err_set(e, ERR_INPUT, path, 0, "not a results database (not a regular file)");
	/* read-write without create, but query_only: a read-only connection to a
	 * WAL database leaves its -wal and -shm files behind when it closes; a
	 * writable one removes them. Read-only when the file is not writable. */
	if (sqlite3_open_v2(path, &st->db, access(path, W_OK) == 0 ? SQLITE_OPEN_READWRITE :
			    SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		rc = err_set(e, ERR_INPUT, path, 0, "cannot open the results database: %s",
			     st->db ? sqlite3_errmsg(st->db) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(st->db, 30000);
	sqlite3_exec(st->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_step(q) != SQLITE_ROW) {
		rc = err_set(e, ERR_INPUT, path, 0, "not a results database: %s", sqlite3_errmsg(st->db));
		goto out;
	}
	version = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	if (sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
			       "('runs', 'predictions', 'measurements', 'outputs', 'calibrations', 'candidates')",
			       -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
		tables = sqlite3_column_int(q, 0);
	/* version 1 has 5 tables, version 2 adds candidates; an older version is
	 * read as it is (a reader does not migrate) */
	want = version >= 2 ? 6 : 5;
	if (version > STORE_SCHEMA_VERSION)
		rc = err_set(e, ERR_INPUT, path, 0, "results database has schema version %d; this "
			     "build knows up to %d", version, STORE_SCHEMA_VERSION);
	else if (version < 1 || tables != want)
		rc = err_set(e, ERR_INPUT, path, 0, "a SQLite file, but not a shardcast results "
			     "database (schema version %d, %d of its %d tables)", version, tables, want);
out:
	if (q)
		sqlite3_finalize(q);
	if (rc)
		store_close(st);
	return rc;
}

void store_close(struct store *st)
{
	if (st->db)
		sqlite3_close(st->db);
	st->db = NULL;
}

/* Inserts every number of json (flattened as a.b.c) into table for run id. */
static int add_numbers(sqlite3_stmt *q, const cJSON *o, const char *prefix, long long id)
{
	const cJSON *c;
	char key[256];

	cJSON_ArrayForEach(c, o) {
		snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", c->string ? c->string : "");
		if (cJSON_IsObject(c)) {
			if (add_numbers(q, c, key, id))
				return -1;
		} else if (cJSON_IsNumber(c) || cJSON_IsBool(c)) {
			sqlite3_reset(q);
			sqlite3_bind_int64(q, 1, id);
			sqlite3_bind_text(q, 2, key, -1, SQLITE_TRANSIENT);
			sqlite3_bind_double(q, 3, cJSON_IsBool(c) ? cJSON_IsTrue(c) : c->valuedouble);
			if (sqlite3_step(q) != SQLITE_DONE)
				return -1;
		}
	}
	return 0;
}

static int add_json(sqlite3 *db, const char *table, const char *json, long long id)
{
	char sql[128];
	sqlite3_stmt *q;
	cJSON *o;
	int rc;

	if (!json)
		return 0;
	o = cJSON_Parse(json);
	if (!o)
		return -1;
	snprintf(sql, sizeof sql, "INSERT INTO %s(run_id, key, value) VALUES (?, ?, ?)", table);
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
		cJSON_Delete(o);
		return -1;
	}
	rc = add_numbers(q, o, "", id);
	sqlite3_finalize(q);
	cJSON_Delete(o);
	return rc;
}

int store_add_run(struct store *st, const struct store_run *r, long long *run_id, struct err *e)
{
	sqlite3_stmt *q = NULL;
	char host[256] = "", when[48], hash[32];
	struct timespec now;
	struct tm tm;
	long long id;

	gethostname(host, sizeof host - 1);
	/* milliseconds: two runs of one scenario in the same second stay two runs
	 * for results merge, which skips (hash, created_at, host, command) twins */
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof when - strlen(when), ".%03ldZ", now.tv_nsec / 1000000);
	snprintf(hash, sizeof hash, "%016llx", r->scenario_hash);
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return fail(st, e, "starting a transaction");
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO runs(command, scenario_path, scenario_text, scenario_hash, overrides,"
			       " version, host, device, created_at) VALUES (?,?,?,?,?,?,?,?,?)", -1, &q, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_text(q, 1, r->command, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, r->scenario_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, r->scenario_text, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 4, hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 5, r->overrides, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 6, store_version(), -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 7, host, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 8, r->device, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 9, when, -1, SQLITE_STATIC);
	if (sqlite3_step(q) != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(q);
	q = NULL;
	id = sqlite3_last_insert_rowid(st->db);
	if (add_json(st->db, "predictions", r->predicted_json, id) ||
	    add_json(st->db, "measurements", r->measured_json, id))
		goto fail;
	if (r->output_json) {
		if (sqlite3_prepare_v2(st->db, "INSERT INTO outputs(run_id, format, body) VALUES (?, 'json', ?)",
				       -1, &q, NULL) != SQLITE_OK)
			goto fail;
		sqlite3_bind_int64(q, 1, id);
		sqlite3_bind_text(q, 2, r->output_json, -1, SQLITE_STATIC);
		if (sqlite3_step(q) != SQLITE_DONE)
			goto fail;
		sqlite3_finalize(q);
		q = NULL;
	}
	if (r->extra && r->extra(st->db, id, r->extra_ctx))
		goto fail;
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	if (run_id)
		*run_id = id;
	return 0;
fail:
	{
		int rc = fail(st, e, "recording the run");
		if (q)
			sqlite3_finalize(q);
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
}

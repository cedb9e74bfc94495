/*
 * store.c — SQLite results store (see store.h).
 *
 * Run ids are RFC 9562 UUIDs: version 4 (122 random bits from getrandom(2))
 * for new runs, version 8 holding an FNV-1a 128 hash (Fowler, Noll, Vo;
 * offset basis and prime from draft-eastlake-fnv) for runs of older databases.
 */
#include "store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
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

/* ---- errors ----------------------------------------------------------------------- */

static int path_error(int sys)
{
	return sys == ENOENT || sys == ENOTDIR || sys == EISDIR || sys == EACCES || sys == ENAMETOOLONG;
}

int store_fail(struct store *st, struct err *e, const char *what)
{
	int x = st->db ? sqlite3_extended_errcode(st->db) : SQLITE_NOMEM;
	int sys = st->db ? sqlite3_system_errno(st->db) : 0;
	const char *msg = st->db ? sqlite3_errmsg(st->db) : "out of memory";
	const char *why = sys ? strerror(sys) : msg;

	switch (x & 0xff) {
	case SQLITE_FULL:
		return err_set(e, ERR_SYSTEM, st->path, 0, "%s: the disk is full (%s)", what, why);
	case SQLITE_IOERR:
		if (sys == ENOSPC || sys == EDQUOT)
			return err_set(e, ERR_SYSTEM, st->path, 0, "%s: the disk is full (%s)", what, why);
		return err_set(e, ERR_SYSTEM, st->path, 0, "%s: I/O error (%s%s%s)", what, msg,
			       sys ? ": " : "", sys ? strerror(sys) : "");
	case SQLITE_CORRUPT:
		return err_set(e, ERR_INPUT, st->path, 0, "%s: the database is corrupted (%s)", what, msg);
	case SQLITE_NOTADB:
		return err_set(e, ERR_INPUT, st->path, 0, "%s: not a SQLite database (%s)", what, msg);
	case SQLITE_READONLY:
		return err_set(e, ERR_SYSTEM, st->path, 0, "%s: the database or its folder is read-only (%s)",
			       what, why);
	case SQLITE_CANTOPEN:
		return err_set(e, path_error(sys) ? ERR_INPUT : ERR_SYSTEM, st->path, 0,
			       "%s: cannot open the file (%s)", what, why);
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return err_set(e, ERR_SYSTEM, st->path, 0, "%s: another process kept the database locked "
			       "for more than 30 s (%s)", what, msg);
	default:
		return err_set(e, ERR_SYSTEM, st->path, 0, "%s: %s", what, msg);
	}
}

int store_check(struct store *st, struct err *e)
{
	sqlite3_stmt *q;
	char first[256] = "";
	int rc;

	if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check", -1, &q, NULL) != SQLITE_OK)
		return store_fail(st, e, "checking the database");
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		snprintf(first, sizeof first, "%s", (const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	if (rc != SQLITE_ROW)
		return store_fail(st, e, "checking the database");
	if (strcmp(first, "ok") == 0)
		return 0;
	return err_set(e, ERR_INPUT, st->path, 0, "the database is corrupted (quick_check: %s); nothing "
		       "was written to it. 'sqlite3 %s .recover | sqlite3 NEW.db' saves what is readable",
		       first, st->path);
}

/* ---- ids -------------------------------------------------------------------------- */

static void uuid_text(unsigned char b[16], int version, char out[STORE_UUID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	int i, o = 0;

	b[6] = (unsigned char)((b[6] & 0x0f) | (version << 4));
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);  /* the RFC 9562 variant */
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 15];
	}
	out[o] = '\0';
}

int store_uuid(char out[STORE_UUID_LEN + 1])
{
	unsigned char b[16];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof b) {
		n = getrandom(b + got, sizeof b - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	uuid_text(b, 4, out);
	return 0;
}

__extension__ typedef unsigned __int128 u128;

static void fnv_add(u128 *h, const void *p, size_t n)
{
	const u128 prime = ((u128)0x0000000001000000ULL << 64) | 0x000000000000013BULL;
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++) {
		*h ^= c[i];
		*h *= prime;
	}
}

/* Hashes every column of every row of q (bound to a run id) as length + bytes. */
static int fnv_rows(u128 *h, sqlite3_stmt *q)
{
	int rc, i;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW)
		for (i = 0; i < sqlite3_column_count(q); i++) {
			const unsigned char *t = sqlite3_column_text(q, i);
			long long len = t ? sqlite3_column_bytes(q, i) : -1;
			fnv_add(h, &len, sizeof len);
			if (t)
				fnv_add(h, t, (size_t)len);
		}
	return rc == SQLITE_DONE ? 0 : rc;
}

int store_legacy_uuid(sqlite3 *db, long long id, int ordinal, char out[STORE_UUID_LEN + 1])
{
	static const char *const sql[] = {
		"SELECT command, scenario_path, scenario_text, scenario_hash, overrides, version, host,"
		" device, created_at FROM runs WHERE id = ?",
		"SELECT format, body FROM outputs WHERE run_id = ? ORDER BY format"};
	u128 h = ((u128)0x6c62272e07bb0142ULL << 64) | 0x62b821756295c58dULL;
	unsigned char b[16];
	sqlite3_stmt *q;
	int k, i, rc = 0;

	for (k = 0; !rc && k < 2; k++) {
		rc = sqlite3_prepare_v2(db, sql[k], -1, &q, NULL);
		if (rc)
			break;
		sqlite3_bind_int64(q, 1, id);
		rc = fnv_rows(&h, q);
		sqlite3_finalize(q);
	}
	if (ordinal > 0)
		fnv_add(&h, &ordinal, sizeof ordinal);
	for (i = 0; i < 16; i++)
		b[i] = (unsigned char)(h >> (8 * (15 - i)));
	uuid_text(b, 8, out);
	return rc;
}

/* The ids of runs, in order (malloc'd, *n of them); NULL with *n = -1 on error. */
static long long *run_ids(sqlite3 *db, int *n)
{
	sqlite3_stmt *q;
	long long *ids = NULL, *more;
	int cap = 0, rc;

	*n = -1;
	if (sqlite3_prepare_v2(db, "SELECT id FROM runs ORDER BY id", -1, &q, NULL) != SQLITE_OK)
		return NULL;
	*n = 0;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			if (!(more = realloc(ids, (size_t)cap * sizeof *ids)))
				break;
			ids = more;
		}
		ids[(*n)++] = sqlite3_column_int64(q, 0);
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE) {
		free(ids);
		*n = -1;
		return NULL;
	}
	return ids;
}

/* Version 3: each run gets an id; those of older runs are their legacy ids, a
 * twin of identical content taking the next ordinal. */
static int add_run_ids(sqlite3 *db)
{
	sqlite3_stmt *u = NULL;
	char id[STORE_UUID_LEN + 1];
	long long *ids = NULL;
	int rc, i, n = 0, ordinal;

	rc = sqlite3_exec(db, "ALTER TABLE runs ADD COLUMN uuid TEXT;"
			  "CREATE UNIQUE INDEX IF NOT EXISTS runs_uuid ON runs(uuid)", NULL, NULL, NULL);
	if (!rc && !(ids = run_ids(db, &n)) && n < 0)
		rc = SQLITE_NOMEM;
	if (!rc)
		rc = sqlite3_prepare_v2(db, "UPDATE runs SET uuid = ? WHERE id = ?", -1, &u, NULL);
	for (i = 0; !rc && i < n; i++) {
		for (ordinal = 0; !rc; ordinal++) {
			rc = store_legacy_uuid(db, ids[i], ordinal, id);
			sqlite3_reset(u);
			sqlite3_bind_text(u, 1, id, -1, SQLITE_TRANSIENT);
			sqlite3_bind_int64(u, 2, ids[i]);
			if (!rc && (rc = sqlite3_step(u)) == SQLITE_DONE)
				break;
			if (rc == SQLITE_CONSTRAINT)  /* an earlier twin holds this one */
				rc = 0;
		}
		rc = rc == SQLITE_DONE ? 0 : rc;
	}
	sqlite3_finalize(u);
	free(ids);
	return rc;
}

/* ---- opening ---------------------------------------------------------------------- */

static int user_version(sqlite3 *db, int *v)
{
	sqlite3_stmt *q;
	int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL);

	if (rc)
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	return rc == SQLITE_ROW ? 0 : rc;
}

/* Brings the schema to STORE_SCHEMA_VERSION, one version at a time, in one
 * transaction. results/schema.sql is the current schema, all of it CREATE ...
 * IF NOT EXISTS: applying it creates a new database (0 -> current) and adds
 * the tables of each later version (1 -> 2: candidates). A change that is not
 * an addition has its function in steps[] (2 -> 3: run ids). */
static int migrate(struct store *st, struct err *e)
{
	static int (*const steps[STORE_SCHEMA_VERSION + 1])(sqlite3 *) = {
		[1] = NULL,          /* the initial schema */
		[2] = NULL,          /* candidates (additive) */
		[3] = add_run_ids,   /* runs.uuid */
	};
	char sql[64];
	int version = 0, v;

	if (user_version(st->db, &version))
		return store_fail(st, e, "reading the schema version");
	if (version > STORE_SCHEMA_VERSION)
		return err_set(e, ERR_INPUT, st->path, 0,
			       "results database has schema version %d; this build knows up to %d",
			       version, STORE_SCHEMA_VERSION);
	if (version == STORE_SCHEMA_VERSION)
		return 0;
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return store_fail(st, e, "locking the database to migrate the schema");
	/* another process may have migrated it while we waited for the lock */
	if (user_version(st->db, &version))
		goto fail;
	for (v = version + 1; version > 0 && v <= STORE_SCHEMA_VERSION; v++)  /* 0: all new */
		if (steps[v] && steps[v](st->db) != SQLITE_OK)
			goto fail;
	snprintf(sql, sizeof sql, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
	if (version < STORE_SCHEMA_VERSION &&
	    (sqlite3_exec(st->db, schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
	     sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK))
		goto fail;
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return 0;
fail:
	{
		int rc = store_fail(st, e, "migrating the schema");
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
}

/* 0 when the folder of path can be written (SQLite keeps its -wal and -shm
 * files there), else errno. */
static int folder_writable(const char *path)
{
	char dir[600];
	const char *slash = strrchr(path, '/');

	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	return access(dir, W_OK) == 0 ? 0 : errno;
}

/* 1 when path's folder cannot be written (SQLite could not make its -shm file
 * there) and no write-ahead log waits to be read: open immutable. -1 when the
 * folder cannot be written but a log is pending (nothing can read it). */
static int read_only_folder(const char *path)
{
	char wal[600];
	struct stat sb;

	if (!folder_writable(path))
		return 0;
	snprintf(wal, sizeof wal, "%s-wal", path);
	return stat(wal, &sb) == 0 && sb.st_size > 0 ? -1 : 1;
}

/* Builds a new database with the whole schema beside path and links it into
 * place, so that a process opening path meets either no file or a results
 * database (validate's ranks, concurrent writers). When another process links
 * its own first, that one is used. */
static int create_whole(struct store *st, struct err *e)
{
	char tmp[sizeof st->path + 48], side[sizeof tmp + 8], id[STORE_UUID_LEN + 1], sql[64];
	struct store t = {0};
	int rc = 0;

	if (store_uuid(id))
		return err_set(e, ERR_SYSTEM, st->path, 0, "no random bytes for a temporary name: %s",
			       strerror(errno));
	snprintf(tmp, sizeof tmp, "%s.new-%.8s", st->path, id);
	snprintf(t.path, sizeof t.path, "%s", st->path);
	snprintf(sql, sizeof sql, "PRAGMA user_version = %d; COMMIT", STORE_SCHEMA_VERSION);
	/* in WAL mode already: its first openers need not switch it (an exclusive lock) */
	if (sqlite3_open_v2(tmp, &t.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK ||
	    sqlite3_exec(t.db, "PRAGMA journal_mode=WAL; BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(t.db, schema_sql, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(t.db, sql, NULL, NULL, NULL) != SQLITE_OK)
		rc = store_fail(&t, e, "creating the results database");
	/* closing checkpoints the log into the file and removes it: the file is whole */
	if (t.db && sqlite3_close(t.db) != SQLITE_OK && !rc)
		rc = err_set(e, ERR_SYSTEM, st->path, 0, "creating the results database: closing %s failed", tmp);
	snprintf(side, sizeof side, "%s-wal", tmp);
	if (!rc && access(side, F_OK) == 0)
		rc = err_set(e, ERR_SYSTEM, st->path, 0, "creating the results database: %s was not "
			     "checkpointed (is the disk full?)", side);
	if (!rc && link(tmp, st->path) != 0 && errno != EEXIST &&
	    /* a file system without hard links: a rename, unless one appeared meanwhile */
	    access(st->path, F_OK) != 0 && rename(tmp, st->path) != 0)
		rc = err_set(e, path_error(errno) ? ERR_INPUT : ERR_SYSTEM, st->path, 0,
			     "creating the results database: %s", strerror(errno));
	unlink(tmp);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", tmp);
	unlink(side);
	return rc;
}

int store_open(struct store *st, const char *path, struct err *e)
{
	int rc = 0;

	memset(st, 0, sizeof *st);
	if (strlen(path) >= sizeof st->path)
		return err_set(e, ERR_INPUT, NULL, 0, "results database path longer than %zu bytes",
			       sizeof st->path - 1);
	snprintf(st->path, sizeof st->path, "%s", path);
	if (access(path, F_OK) != 0 && errno == ENOENT)
		rc = create_whole(st, e);
	else if (access(path, W_OK) != 0 || (errno = folder_writable(path)) != 0)
		/* SQLite would open it read-only and fail later, less clearly */
		rc = err_set(e, errno == EROFS ? ERR_SYSTEM : ERR_INPUT, path, 0, "cannot write to the results "
			     "database or its folder: %s", strerror(errno));
	if (!rc && sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		rc = store_fail(st, e, "opening the results database");
	if (!rc) {
		sqlite3_busy_timeout(st->db, 30000);
		if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; "
				 "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK)
			rc = store_fail(st, e, "opening the results database");
	}
	if (!rc)
		rc = store_check(st, e);
	if (!rc)
		rc = migrate(st, e);
	if (rc)
		store_close(st);
	return rc;
}

/* "file:PATH?immutable=1" with PATH's URI characters escaped (RFC 3986). */
static void immutable_uri(const char *path, char *out, size_t n)
{
	size_t o = (size_t)snprintf(out, n, "file:");

	for (; *path && o + 4 < n; path++) {
		if (*path == '%' || *path == '?' || *path == '#')
			o += (size_t)snprintf(out + o, n - o, "%%%02X", (unsigned char)*path);
		else
			out[o++] = *path;
	}
	snprintf(out + o, n - o, "?immutable=1");
}


/* The schema check of a reader: version and tables (a reader does not migrate). */
static int check_schema(struct store *st, struct err *e)
{
	sqlite3_stmt *q = NULL;
	int version = -1, tables = 0, want, rc;

	rc = user_version(st->db, &version);
	if (rc == SQLITE_NOTADB)
		return err_set(e, ERR_INPUT, st->path, 0, "not a results database: %s", sqlite3_errmsg(st->db));
	if (rc)
		return store_fail(st, e, "reading the results database");
	if (sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
			       "('runs', 'predictions', 'measurements', 'outputs', 'calibrations', 'candidates')",
			       -1, &q, NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW) {
		sqlite3_finalize(q);
		return store_fail(st, e, "reading the results database");
	}
	tables = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	/* version 1 has 5 tables, version 2 adds candidates, version 3 runs.uuid */
	want = version >= 2 ? 6 : 5;
	if (version > STORE_SCHEMA_VERSION)
		return err_set(e, ERR_INPUT, st->path, 0, "results database has schema version %d; this "
			       "build knows up to %d", version, STORE_SCHEMA_VERSION);
	if (version < 1 || tables != want)
		return err_set(e, ERR_INPUT, st->path, 0, "a SQLite file, but not a shardcast results "
			       "database (schema version %d, %d of its %d tables)", version, tables, want);
	return 0;
}

int store_open_readonly(struct store *st, const char *path, struct err *e)
{
	char uri[1200];
	struct stat sb;
	int ro, rc;

	memset(st, 0, sizeof *st);
	snprintf(st->path, sizeof st->path, "%s", path);
	if (stat(path, &sb) != 0)
		return err_set(e, path_error(errno) ? ERR_INPUT : ERR_SYSTEM, path, 0,
			       "cannot open the results database: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return err_set(e, ERR_INPUT, path, 0, "not a results database (not a regular file)");
	/* read-write without create, but query_only: a read-only connection to a
	 * WAL database leaves its -wal and -shm files behind when it closes; a
	 * writable one removes them. Read-only when the file is not writable;
	 * immutable when SQLite could not create the -shm file beside it. */
	ro = read_only_folder(path);
	immutable_uri(path, uri, sizeof uri);
	if (ro == 1)
		rc = sqlite3_open_v2(uri, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
	else
		rc = sqlite3_open_v2(path, &st->db, access(path, W_OK) == 0 ? SQLITE_OPEN_READWRITE :
				     SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		rc = store_fail(st, e, "opening the results database");
		goto out;
	}
	sqlite3_busy_timeout(st->db, 30000);
	sqlite3_exec(st->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
	rc = check_schema(st, e);
	if (rc && ro == -1) {
		err_clear(e);
		rc = err_set(e, ERR_SYSTEM, path, 0, "cannot read the database: its write-ahead log (%s-wal) "
			     "needs a %s-shm file that its read-only folder cannot hold; copy the database "
			     "with its -wal to a writable folder", path, path);
	}
out:
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

/* ---- writing ---------------------------------------------------------------------- */

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
	char host[256] = "", when[48], hash[32], uuid[STORE_UUID_LEN + 1];
	struct timespec now;
	struct tm tm;
	long long id;

	gethostname(host, sizeof host - 1);
	/* the time says when; the id (not the time) tells runs apart */
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + strlen(when), sizeof when - strlen(when), ".%03ldZ", now.tv_nsec / 1000000);
	snprintf(hash, sizeof hash, "%016llx", r->scenario_hash);
	if (store_uuid(uuid))
		return err_set(e, ERR_SYSTEM, st->path, 0, "recording the run: no random bytes for its id: %s",
			       strerror(errno));
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return store_fail(st, e, "recording the run");
	if (sqlite3_prepare_v2(st->db,
			       "INSERT INTO runs(command, scenario_path, scenario_text, scenario_hash, overrides,"
			       " version, host, device, created_at, uuid) VALUES (?,?,?,?,?,?,?,?,?,?)", -1, &q, NULL) != SQLITE_OK)
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
	sqlite3_bind_text(q, 10, uuid, -1, SQLITE_STATIC);
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
		int rc = store_fail(st, e, "recording the run");
		if (q)
			sqlite3_finalize(q);
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
}

/*
 * store.h — the SQLite results store (results/schema.sql).
 *
 * Opening applies the schema (versioned with PRAGMA user_version, migrated
 * forward), sets WAL mode and a busy timeout so several processes can write at
 * once. A run is written in one transaction: a killed writer leaves nothing.
 * A new database appears at its path whole (built beside it, then linked into
 * place), so a reader never meets one without its schema; a database is checked
 * (PRAGMA quick_check) before anything is written to it. Every run carries a
 * random 128-bit id (RFC 9562 version 4 UUID) by which merges recognise it.
 *
 * Exit codes of failures (store_fail): a path that cannot name a database, a
 * file that is not one, a corrupted or newer database are ERR_INPUT (2); a
 * full disk, an I/O error, a read-only file system, a lock held too long,
 * running out of memory are ERR_SYSTEM (1).
 */
#ifndef SHARDCAST_STORE_H
#define SHARDCAST_STORE_H

#include <sqlite3.h>

#include "err.h"

#define STORE_SCHEMA_VERSION 3
#define STORE_UUID_LEN 36  /* 8-4-4-4-12 hex digits */

struct store {
	sqlite3 *db;
	char path[512];
};

/* A run to record: the JSON body's numbers are flattened into predictions
 * (or measurements) as dotted keys. */
struct store_run {
	const char *command;
	const char *scenario_path;
	const char *scenario_text;
	unsigned long long scenario_hash;
	const char *overrides;   /* may be NULL */
	const char *device;
	const char *predicted_json;  /* may be NULL */
	const char *measured_json;   /* may be NULL */
	const char *output_json;     /* the whole output, may be NULL */
	/* More rows of the run (a sweep's candidates, more outputs), written
	 * inside the run's transaction; non-zero rolls the whole run back.
	 * May be NULL. */
	int (*extra)(sqlite3 *db, long long run_id, void *ctx);
	void *extra_ctx;
};

/* Opens path for writing, creating it (whole, with the schema) when missing;
 * migrates an older schema; refuses a database that fails PRAGMA quick_check
 * (ERR_INPUT: "corrupted", with how to recover what is readable). */
int store_open(struct store *st, const char *path, struct err *e);
void store_close(struct store *st);

/* Opens an existing results database for reading only (PRAGMA query_only;
 * list, show, export, merge's inputs). A missing file, a file that is not SQLite, or a SQLite file without
 * this schema (or with a newer version) is ERR_INPUT naming the path. Where
 * the database's folder cannot be written (a read-only file system, a folder
 * without write permission) and no write-ahead log is pending, it is opened
 * immutable: SQLite needs no -shm file beside it. */
int store_open_readonly(struct store *st, const char *path, struct err *e);

/* Runs PRAGMA quick_check; a database that fails it is ERR_INPUT naming the
 * first problem. */
int store_check(struct store *st, struct err *e);

/* Records the last failed SQLite call on st->db as the error of doing what,
 * with the exit code its cause deserves (see the header) and a message that
 * says what happened ("the disk is full"). Returns the code. */
int store_fail(struct store *st, struct err *e, const char *what);

/* Writes r in one transaction under a new random id; *run_id gets the new row id. */
int store_add_run(struct store *st, const struct store_run *r, long long *run_id, struct err *e);

/* A new random id: a version 4 UUID from getrandom(2). Returns 0, or -1 when
 * the system has no randomness to give. */
int store_uuid(char out[STORE_UUID_LEN + 1]);

/* The id of run `id` of a database written before version 3 (runs without an
 * id): a version 8 UUID of the FNV-1a 128 hash of the run's row and outputs, so
 * the same old run gets the same id in every copy of it; ordinal > 0 tells
 * apart the ordinal-th earlier twin of identical content in one database.
 * Returns 0 or an SQLite error code. */
int store_legacy_uuid(sqlite3 *db, long long id, int ordinal, char out[STORE_UUID_LEN + 1]);

/* The version string of this build. */
const char *store_version(void);

#endif

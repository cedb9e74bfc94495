/*
 * store.h — the SQLite results store (results/schema.sql).
 *
 * Opening applies the schema (versioned with PRAGMA user_version, migrated
 * forward), sets WAL mode and a busy timeout so several processes can write at
 * once. A run is written in one transaction: a killed writer leaves nothing.
 */
#ifndef SHARDCAST_STORE_H
#define SHARDCAST_STORE_H

#include <sqlite3.h>

#include "err.h"

#define STORE_SCHEMA_VERSION 2

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

int store_open(struct store *st, const char *path, struct err *e);
void store_close(struct store *st);

/* Opens an existing results database for reading only (PRAGMA query_only;
 * list, show, export, merge's inputs). A missing file, a file that is not SQLite, or a SQLite file without
 * this schema (or with a newer version) is ERR_INPUT naming the path. */
int store_open_readonly(struct store *st, const char *path, struct err *e);

/* Writes r in one transaction; *run_id gets the new row id. */
int store_add_run(struct store *st, const struct store_run *r, long long *run_id, struct err *e);

/* The version string of this build. */
const char *store_version(void);

#endif

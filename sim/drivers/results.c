/*
 * results.c — list, show, export and merge results databases (see results.h).
 */
#include "results.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "units.h"

static int sql_fail(struct store *st, struct err *e, const char *what)
{
	return store_fail(st, e, what);
}

static const char *text(sqlite3_stmt *q, int col)
{
	const unsigned char *t = sqlite3_column_text(q, col);
	return t ? (const char *)t : "";
}

/* ---- list ------------------------------------------------------------------------- */

/* The measured keys as validate --json's "measured" object names them, stored
 * bare or under "measured."; and the prediction each one is compared with. */
#define MEASURED(k) "(SELECT value FROM measurements WHERE run_id = r.id AND key IN ('" k "', 'measured." k "'))"
#define PREDICTED(k) "(SELECT value FROM predictions WHERE run_id = r.id AND key = '" k "')"

static const char *cell(char *b, size_t n, sqlite3_stmt *q, int col, enum unit u)
{
	if (sqlite3_column_type(q, col) == SQLITE_NULL)
		return "-";
	if (u == UNIT_NONE)
		snprintf(b, n, "%.0f", sqlite3_column_double(q, col));
	else
		units_format(b, n, sqlite3_column_double(q, col), u);
	return b;
}

int results_list(struct store *st, FILE *out, long limit, struct err *e)
{
	static const char sql[] =
		"SELECT r.id, r.created_at, r.command, r.device, r.scenario_path, "
		PREDICTED("max_micro_batch") ", " MEASURED("max_micro_batch") ", "
		PREDICTED("step.time_s") ", " MEASURED("step_time_s") ", "
		PREDICTED("memory.peak_bytes") ", " MEASURED("peak_bytes")
		" FROM runs r ORDER BY r.created_at DESC, r.id DESC LIMIT ?";
	sqlite3_stmt *q;
	char b[6][32];
	int rc, rows = 0;

	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return sql_fail(st, e, "listing runs");
	sqlite3_bind_int64(q, 1, limit > 0 ? limit : -1);
	fprintf(out, "%5s  %-24s  %-9s  %-16s  %-7s %-7s  %-10s %-10s  %-10s %-10s  %s\n", "id", "time (UTC)",
		"command", "device", "mb pred", "meas", "step pred", "meas", "peak pred", "meas", "scenario");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		rows++;
		fprintf(out, "%5lld  %-24s  %-9s  %-16.16s  %-7s %-7s  %-10s %-10s  %-10s %-10s  %s\n",
			(long long)sqlite3_column_int64(q, 0), text(q, 1), text(q, 2), text(q, 3),
			cell(b[0], 32, q, 5, UNIT_NONE), cell(b[1], 32, q, 6, UNIT_NONE),
			cell(b[2], 32, q, 7, UNIT_TIME), cell(b[3], 32, q, 8, UNIT_TIME),
			cell(b[4], 32, q, 9, UNIT_BYTES), cell(b[5], 32, q, 10, UNIT_BYTES), text(q, 4));
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		return sql_fail(st, e, "listing runs");
	if (!rows)
		fprintf(out, "(no runs in %s)\n", st->path);
	return 0;
}

/* ---- show ------------------------------------------------------------------------- */

static int show_values(struct store *st, long long id, const char *table, FILE *out, struct err *e)
{
	char sql[96];
	sqlite3_stmt *q;
	int rc, rows = 0;

	snprintf(sql, sizeof sql, "SELECT key, value FROM %s WHERE run_id = ? ORDER BY key", table);
	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return sql_fail(st, e, "reading the run");
	sqlite3_bind_int64(q, 1, id);
	fprintf(out, "\n%s:\n", table);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		rows++;
		fprintf(out, "  %-32s %.17g\n", text(q, 0), sqlite3_column_double(q, 1));
	}
	sqlite3_finalize(q);
	if (!rows)
		fprintf(out, "  (none)\n");
	return rc == SQLITE_DONE ? 0 : sql_fail(st, e, "reading the run");
}

static int has_column(sqlite3 *db, const char *table, const char *col);

/* "id UUID" of run id (schema version 3 on). */
static void show_uuid(struct store *st, long long id, FILE *out)
{
	sqlite3_stmt *q;

	if (!has_column(st->db, "runs", "uuid") ||
	    sqlite3_prepare_v2(st->db, "SELECT uuid FROM runs WHERE id = ?", -1, &q, NULL) != SQLITE_OK)
		return;
	sqlite3_bind_int64(q, 1, id);
	if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
		fprintf(out, "id %s\n", text(q, 0));
	sqlite3_finalize(q);
}

int results_show(struct store *st, long long id, FILE *out, struct err *e)
{
	sqlite3_stmt *q;
	int rc;

	if (sqlite3_prepare_v2(st->db, "SELECT command, created_at, host, device, version, scenario_path,"
			       " scenario_hash, overrides, scenario_text FROM runs WHERE id = ?", -1, &q,
			       NULL) != SQLITE_OK)
		return sql_fail(st, e, "reading the run");
	sqlite3_bind_int64(q, 1, id);
	rc = sqlite3_step(q);
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(q);
		if (rc != SQLITE_DONE)
			return sql_fail(st, e, "reading the run");
		return err_set(e, ERR_INPUT, st->path, 0, "no run with id %lld ('results list' shows them)", id);
	}
	fprintf(out, "run %lld: %s at %s on %s, device %s, shardcast %s\n", id, text(q, 0), text(q, 1),
		text(q, 2), text(q, 3), text(q, 4));
	fprintf(out, "scenario %s (hash %s)\n", text(q, 5), text(q, 6));
	show_uuid(st, id, out);
	if (*text(q, 7))
		fprintf(out, "overrides:\n%s", text(q, 7));
	fprintf(out, "\nscenario text:\n%s%s", text(q, 8),
		*text(q, 8) && text(q, 8)[strlen(text(q, 8)) - 1] != '\n' ? "\n" : "");
	sqlite3_finalize(q);
	if (show_values(st, id, "predictions", out, e) || show_values(st, id, "measurements", out, e))
		return e->code;
	return 0;
}

/* ---- export ----------------------------------------------------------------------- */

static void csv_field(FILE *out, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void csv_number(FILE *out, sqlite3_stmt *q, int col)
{
	if (sqlite3_column_type(q, col) != SQLITE_NULL)
		fprintf(out, "%.17g", sqlite3_column_double(q, col));
}

int results_export_csv(struct store *st, FILE *out, int measured_only, struct err *e)
{
	/* measurement keys named like predictions: validate --json's "measured"
	 * object against the simulate object it embeds as "predicted" */
	static const char sql[] =
		"WITH map(mkey, pkey) AS (VALUES ('peak_bytes', 'memory.peak_bytes'),"
		"  ('step_time_s', 'step.time_s'), ('tokens_per_s', 'step.tokens_per_s'), ('mfu', 'step.mfu')),"
		" m AS (SELECT run_id, COALESCE((SELECT pkey FROM map WHERE mkey = bare), bare) AS key, value"
		"  FROM (SELECT run_id, CASE WHEN key LIKE 'measured.%' THEN substr(key, 10) ELSE key END AS bare,"
		"        value FROM measurements)),"
		" k AS (SELECT run_id, key FROM predictions UNION SELECT run_id, key FROM m)"
		" SELECT r.id, r.created_at, r.command, r.scenario_path, r.device, k.key, p.value, m.value"
		" FROM k JOIN runs r ON r.id = k.run_id"
		" LEFT JOIN predictions p ON p.run_id = k.run_id AND p.key = k.key"
		" LEFT JOIN m ON m.run_id = k.run_id AND m.key = k.key"
		" WHERE ? = 0 OR m.value IS NOT NULL ORDER BY r.id, k.key";
	sqlite3_stmt *q;
	int rc, i;

	if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK)
		return sql_fail(st, e, "exporting");
	sqlite3_bind_int(q, 1, measured_only);
	fprintf(out, "run_id,created_at,command,scenario,device,key,predicted,measured,rel_error\n");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		fprintf(out, "%lld", (long long)sqlite3_column_int64(q, 0));
		for (i = 1; i <= 5; i++) {
			fputc(',', out);
			csv_field(out, text(q, i));
		}
		fputc(',', out);
		csv_number(out, q, 6);
		fputc(',', out);
		csv_number(out, q, 7);
		fputc(',', out);
		/* (predicted - measured) / measured, where both exist */
		if (sqlite3_column_type(q, 6) != SQLITE_NULL && sqlite3_column_type(q, 7) != SQLITE_NULL &&
		    sqlite3_column_double(q, 7) != 0)
			fprintf(out, "%.6g", (sqlite3_column_double(q, 6) - sqlite3_column_double(q, 7)) /
				fabs(sqlite3_column_double(q, 7)));
		fputc('\n', out);
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : sql_fail(st, e, "exporting");
}

/* ---- merge ------------------------------------------------------------------------ */

/* Copies table's rows of run old_id (in src) as run new_id (in dst). */
static int copy_values(sqlite3 *src, sqlite3 *dst, const char *table, const char *cols,
		       long long old_id, long long new_id)
{
	char sel[1024], ins[1024], marks[256] = "?";
	sqlite3_stmt *s = NULL, *d = NULL;
	const char *c;
	int rc, i, n;

	for (c = cols; *c && strlen(marks) + 3 < sizeof marks; c++)
		if (*c == ',')
			strcat(marks, ", ?");
	snprintf(sel, sizeof sel, "SELECT %s FROM %s WHERE run_id = ?", cols, table);
	snprintf(ins, sizeof ins, "INSERT INTO %s(run_id, %s) VALUES (?, %s)", table, cols, marks);
	if (sqlite3_prepare_v2(src, sel, -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(dst, ins, -1, &d, NULL) != SQLITE_OK) {
		rc = -1;
		goto out;
	}
	n = sqlite3_column_count(s);
	sqlite3_bind_int64(s, 1, old_id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		sqlite3_reset(d);
		sqlite3_bind_int64(d, 1, new_id);
		for (i = 0; i < n; i++)
			sqlite3_bind_value(d, i + 2, sqlite3_column_value(s, i));
		if (sqlite3_step(d) != SQLITE_DONE) {
			rc = -1;
			goto out;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(s);
	sqlite3_finalize(d);
	return rc;
}

#define RUN_COLS "command, scenario_path, scenario_text, scenario_hash, overrides, version, host, device, created_at"
#define RUN_NCOLS 9

/* 1 when dst already holds the run with id uuid. */
static int is_duplicate(sqlite3 *dst, const char *uuid, int *dup)
{
	sqlite3_stmt *q;
	int rc;

	if (sqlite3_prepare_v2(dst, "SELECT 1 FROM runs WHERE uuid = ?", -1, &q, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(q, 1, uuid, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	*dup = rc == SQLITE_ROW;
	sqlite3_finalize(q);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* The id of src's run at row s of merge_runs' query: its uuid column, or for
 * an input older than version 3 the id a writer would give it when migrating
 * (store_legacy_uuid; the temporary table legacy of dst remembers this input's
 * ids so that a twin takes the next ordinal, as in the migration). */
static int run_uuid(sqlite3 *src, sqlite3 *dst, sqlite3_stmt *s, int has_uuid, char *out)
{
	sqlite3_stmt *q;
	int ordinal, rc = SQLITE_DONE;

	if (has_uuid && sqlite3_column_type(s, RUN_NCOLS + 1) != SQLITE_NULL) {
		snprintf(out, STORE_UUID_LEN + 1, "%s", (const char *)sqlite3_column_text(s, RUN_NCOLS + 1));
		return 0;
	}
	if (sqlite3_prepare_v2(dst, "INSERT OR IGNORE INTO temp.legacy(uuid) VALUES (?)", -1, &q, NULL) != SQLITE_OK)
		return -1;
	for (ordinal = 0; rc == SQLITE_DONE; ordinal++) {
		if (store_legacy_uuid(src, sqlite3_column_int64(s, 0), ordinal, out))
			break;
		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, out, -1, SQLITE_STATIC);
		rc = sqlite3_step(q);
		if (rc == SQLITE_DONE && sqlite3_changes(dst) == 1)
			break;
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* 1 when table has column col. */
static int has_column(sqlite3 *db, const char *table, const char *col)
{
	char sql[128];
	sqlite3_stmt *q;
	int yes = 0;

	snprintf(sql, sizeof sql, "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?", table);
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(q, 1, col, -1, SQLITE_STATIC);
	yes = sqlite3_step(q) == SQLITE_ROW;
	sqlite3_finalize(q);
	return yes;
}

/* The candidates table's columns after run_id (schema version 2). */
#define CAND_COLS "cell, candidate, model, model_params, seq_len, batch, strategy, label, precision, " \
	"activation_checkpointing, offload, tensor_parallel, nodes, gpus, status, rank, micro_batch, " \
	"grad_accum, global_batch, max_micro_batch, peak_bytes, capacity_bytes, params_bytes, grads_bytes, " \
	"optimizer_bytes, activations_bytes, buffers_bytes, overhead_bytes, step_time_s, tokens_per_s, mfu, " \
	"exposed_comm_s, gpu_hours_per_mtok, train_days, ettr, score, note"

static int has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *q;
	int yes = 0;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1, &q,
			       NULL) != SQLITE_OK)
		return 0;
	sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	yes = sqlite3_step(q) == SQLITE_ROW;
	sqlite3_finalize(q);
	return yes;
}

/* Copies one run (row s of src) and its rows under a new id. */
static int copy_run(sqlite3 *src, sqlite3 *dst, sqlite3_stmt *s, sqlite3_stmt *ins, const char *uuid,
		    int cands)
{
	long long old_id = sqlite3_column_int64(s, 0), new_id;
	int i;

	sqlite3_reset(ins);
	for (i = 0; i < RUN_NCOLS; i++)
		sqlite3_bind_value(ins, i + 1, sqlite3_column_value(s, i + 1));
	sqlite3_bind_text(ins, RUN_NCOLS + 1, uuid, -1, SQLITE_STATIC);
	if (sqlite3_step(ins) != SQLITE_DONE)
		return -1;
	new_id = sqlite3_last_insert_rowid(dst);
	if (copy_values(src, dst, "predictions", "key, value", old_id, new_id) ||
	    copy_values(src, dst, "measurements", "key, value", old_id, new_id) ||
	    copy_values(src, dst, "outputs", "format, body", old_id, new_id) ||
	    (cands && copy_values(src, dst, "candidates", CAND_COLS, old_id, new_id)))
		return -1;
	return 0;
}

static int merge_runs(sqlite3 *src, sqlite3 *dst, struct results_merged *m)
{
	sqlite3_stmt *s = NULL, *ins = NULL;
	char uuid[STORE_UUID_LEN + 1];
	int rc, dup, cands = has_table(src, "candidates");  /* a version 1 input has none */
	int has_uuid = has_column(src, "runs", "uuid");     /* nor a version 2 input ids */

	if (sqlite3_exec(dst, "CREATE TEMP TABLE IF NOT EXISTS legacy(uuid TEXT PRIMARY KEY);"
			 "DELETE FROM temp.legacy", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(src, has_uuid ? "SELECT id, " RUN_COLS ", uuid FROM runs ORDER BY id" :
			       "SELECT id, " RUN_COLS " FROM runs ORDER BY id", -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(dst, "INSERT INTO runs(" RUN_COLS ", uuid) VALUES (?,?,?,?,?,?,?,?,?,?)", -1,
			       &ins, NULL) != SQLITE_OK) {
		rc = -1;
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (run_uuid(src, dst, s, has_uuid, uuid) || is_duplicate(dst, uuid, &dup) ||
		    (!dup && copy_run(src, dst, s, ins, uuid, cands))) {
			rc = -1;
			goto out;
		}
		if (dup)
			m->duplicates++;
		else
			m->runs++;
	}
	rc = rc == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(s);
	sqlite3_finalize(ins);
	return rc;
}

static int merge_calibrations(sqlite3 *src, sqlite3 *dst, struct results_merged *m)
{
	static const char cols[] = "device, created_at, params_json, n_points, error_before, error_after";
	char sql[256];
	sqlite3_stmt *s = NULL, *ins = NULL;
	int rc, i;

	snprintf(sql, sizeof sql, "SELECT %s FROM calibrations ORDER BY id", cols);
	if (sqlite3_prepare_v2(src, sql, -1, &s, NULL) != SQLITE_OK)
		return -1;
	snprintf(sql, sizeof sql, "INSERT INTO calibrations(%s) SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS"
		 " (SELECT 1 FROM calibrations WHERE device IS ?1 AND created_at IS ?2 AND params_json IS ?3)", cols);
	if (sqlite3_prepare_v2(dst, sql, -1, &ins, NULL) != SQLITE_OK) {
		rc = -1;
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		sqlite3_reset(ins);
		for (i = 0; i < 6; i++)
			sqlite3_bind_value(ins, i + 1, sqlite3_column_value(s, i));
		if (sqlite3_step(ins) != SQLITE_DONE) {
			rc = -1;
			goto out;
		}
		m->calibrations += sqlite3_changes(dst);
	}
	rc = rc == SQLITE_DONE ? 0 : -1;
out:
	sqlite3_finalize(s);
	sqlite3_finalize(ins);
	return rc;
}

/* The inputs: readable results databases, none of them the output. */
static int check_inputs(const char *out_path, const char *const *in, int n, struct err *e)
{
	struct stat so, si;
	struct store st;
	int i, have_out = stat(out_path, &so) == 0;

	if (n < 1)
		return err_set(e, ERR_INPUT, NULL, 0, "merge needs at least one input database");
	for (i = 0; i < n; i++) {
		if (store_open_readonly(&st, in[i], e) || store_check(&st, e)) {
			store_close(&st);
			return e->code;
		}
		store_close(&st);
		if (have_out && stat(in[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
			return err_set(e, ERR_INPUT, in[i], 0, "is the output database itself");
	}
	return 0;
}

static void remove_db(const char *path)
{
	char side[600];

	unlink(path);
	snprintf(side, sizeof side, "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", path);
	unlink(side);
}

/* The error of a failed merge step: the input's when its last call failed
 * (SQLITE_ERROR there: tables without the columns of a results database),
 * else the output's (a full disk, ...). */
static int merge_fail(struct store *src, struct store *dst, struct err *e)
{
	char what[600];
	int x = sqlite3_errcode(src->db);

	if (x == SQLITE_ERROR)
		return err_set(e, ERR_INPUT, src->path, 0, "not a results database as this build reads "
			       "them: %s", sqlite3_errmsg(src->db));
	if (x != SQLITE_OK && x != SQLITE_ROW && x != SQLITE_DONE)
		return store_fail(src, e, "reading it for the merge");
	snprintf(what, sizeof what, "merging %s", src->path);
	return store_fail(dst, e, what);
}

int results_merge(const char *out_path, const char *const *in, int n, struct results_merged *m,
		  struct err *e)
{
	struct store dst, src;
	struct stat sb;
	int created = stat(out_path, &sb) != 0, i, rc;

	memset(m, 0, sizeof *m);
	if (check_inputs(out_path, in, n, e))
		return e->code;
	if (store_open(&dst, out_path, e)) {
		if (created)
			remove_db(out_path);
		return e->code;
	}
	if (sqlite3_exec(dst.db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
		rc = sql_fail(&dst, e, "starting the merge transaction");
		goto out;
	}
	for (i = 0, rc = 0; i < n && !rc; i++) {
		rc = store_open_readonly(&src, in[i], e);
		if (rc)
			break;
		if (merge_runs(src.db, dst.db, m) || merge_calibrations(src.db, dst.db, m))
			rc = merge_fail(&src, &dst, e);
		store_close(&src);
	}
	if (!rc && sqlite3_exec(dst.db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = sql_fail(&dst, e, "committing the merge");
	if (rc)
		sqlite3_exec(dst.db, "ROLLBACK", NULL, NULL, NULL);
out:
	store_close(&dst);
	if (rc && created)
		remove_db(out_path);
	return rc;
}

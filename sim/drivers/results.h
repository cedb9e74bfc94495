/*
 * results.h — reading and combining results databases (results/schema.sql):
 * the queries behind `bin/results list|show|export|merge`.
 *
 * A validation campaign on a cluster writes one database per job (SQLite's WAL
 * does not work over network file systems, so jobs must not share one);
 * results_merge gathers them into one, and export writes predictions against
 * measurements for plotting.
 */
#ifndef SHARDCAST_RESULTS_H
#define SHARDCAST_RESULTS_H

#include <stdio.h>

#include "err.h"
#include "store.h"

/* One line per run, newest first: id, time, command, device, scenario and the
 * key figures (predicted and measured max micro-batch, step time, peak memory).
 * limit <= 0: all runs. */
int results_list(struct store *st, FILE *out, long limit, struct err *e);

/* Run id: its row, overrides, scenario text, predictions and measurements.
 * An unknown id is ERR_INPUT. */
int results_show(struct store *st, long long id, FILE *out, struct err *e);

/* CSV (RFC 4180) of predictions against measurements, one row per run and
 * key: run_id, created_at, command, scenario, device, key, predicted, measured,
 * rel_error. A measurement is paired with the prediction of the same meaning
 * (validate's measured.step_time_s with step.time_s, peak_bytes with
 * memory.peak_bytes, ...). measured_only: rows with a measurement only. */
int results_export_csv(struct store *st, FILE *out, int measured_only, struct err *e);

struct results_merged {
	long runs;          /* copied */
	long duplicates;    /* skipped: a run with the same id (runs.uuid) */
	long calibrations;  /* copied (duplicates by device, created_at, params skipped) */
};

/* Copies the runs (with their predictions, measurements and outputs) and the
 * calibrations of the n databases in[] into out_path (created if missing),
 * renumbering ids, all in one transaction: on any error nothing is added, and
 * an out_path this call created is removed. Runs already in out (or met earlier
 * in in[]) with the same id are skipped (a run of an input older than schema
 * version 3 has the id store_legacy_uuid derives, as a writer would give it).
 * An input that is missing, not SQLite, not a results database, corrupted
 * (PRAGMA quick_check), or the output itself is ERR_INPUT. */
int results_merge(const char *out_path, const char *const *in, int n, struct results_merged *m,
		  struct err *e);

#endif

/*
 * test_calib.c — `validate --calibrate` (sim/models/calib.c) on runs whose step times
 * are known: each run's "measured" time is the step model's own with known
 * device parameters (the catalog's gemm_efficiency x 0.4 and
 * memory_efficiency x 0.7), so a fit that recovers them predicts every run,
 * held out or not, to rounding. And the rules of item 4 of issue 12: no
 * calibration is read unless a database is named; one run is refused; a fit
 * has fewer parameters than runs; the error is measured on held-out runs and
 * stored; an applied calibration is described (device, when, runs, error).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "predict.h"
#include "record.h"
#include "scenario.h"
#include "step.h"
#include "store.h"

static char db[64], scn_path[64];

static const char scn[] =
	"[model]\nname = gpt-tiny\nseq_len = 32\n[cluster]\ngpu = cpu\ngpu_memory = 16MiB\n"
	"[training]\nstrategy = single\nframework = shardcast\n";

/* The runs: overrides and the measured micro-batch. */
static const struct {
	const char *sets[2];
	int nset;
	int64_t batch;
} runs[] = {
	{{NULL}, 0, 4},
	{{"model.seq_len=16"}, 1, 8},
	{{"model.name=gpt-mini"}, 1, 2},
	{{"training.activation_checkpointing=full"}, 1, 6},
	{{"model.seq_len=64"}, 1, 2},
	{{"model.name=gpt-mini", "model.seq_len=16"}, 2, 3},
};

static void setup(void)
{
	FILE *f;

	snprintf(db, sizeof db, "/tmp/shardcast-calib-%d.db", (int)getpid());
	snprintf(scn_path, sizeof scn_path, "/tmp/shardcast-calib-%d.ini", (int)getpid());
	unlink(db);
	f = fopen(scn_path, "w");
	cr_assert(f);
	fputs(scn, f);
	fclose(f);
}

static void teardown(void)
{
	char side[96];

	unlink(db);
	unlink(scn_path);
	snprintf(side, sizeof side, "%s-wal", db);
	unlink(side);
	snprintf(side, sizeof side, "%s-shm", db);
	unlink(side);
}

TestSuite(calib, .init = setup, .fini = teardown);

/* The truth: the catalog's parameters with gemm_efficiency x 0.4 and
 * memory_efficiency x 0.7. */
static void truth(struct scenario *s)
{
	struct calib c;

	calib_get(s, &c);
	c.v[0] *= 0.4;
	c.v[2] *= 0.7;
	calib_set(s, &c);
}

/* Records run i as a validate run of device cpu, its step time the truth's. */
static void record(int i)
{
	struct scenario s;
	struct graph g;
	struct graph_opts o;
	struct step_sim ss;
	struct step_result r;
	struct err e = {0};
	char meas[128];

	cr_assert_eq(scenario_load(&s, scn_path, runs[i].sets, runs[i].nset, &e), 0, "%s", e.msg);
	truth(&s);
	predict_graph_opts(&s, &o);
	cr_assert_eq(graph_build(&g, &s.model, &o, &e), 0, "%s", e.msg);
	cr_assert_eq(step_sim_create(&ss), 0);
	cr_assert_eq(step_simulate(&ss, &s, &g, runs[i].batch, &r, &e), 0, "%s", e.msg);
	snprintf(meas, sizeof meas, "{\"max_micro_batch\": %lld, \"step_time_s\": %.17g}",
		 (long long)runs[i].batch, r.time);
	cr_assert_eq(record_run(db, "validate", &s, runs[i].sets, runs[i].nset, "cpu", NULL, meas, NULL, &e), 0,
		     "%s", e.msg);
	step_sim_delete(&ss);
	graph_free(&g);
	scenario_free(&s);
}

static int calibrate(char **out, struct err *e)
{
	size_t n = 0;
	FILE *f = open_memstream(out, &n);
	int rc;

	cr_assert(f);
	rc = calib_run(db, "cpu", f, e);
	fclose(f);
	return rc;
}

/* The latest calibration row: n_points, error_after and params_json. */
static void latest(int *n, double *after, char *json, size_t len)
{
	struct store st;
	struct err e = {0};
	sqlite3_stmt *q;

	cr_assert_eq(store_open_readonly(&st, db, &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_prepare_v2(st.db, "SELECT n_points, error_after, params_json FROM calibrations "
					"ORDER BY id DESC LIMIT 1", -1, &q, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
	*n = sqlite3_column_int(q, 0);
	*after = sqlite3_column_double(q, 1);
	snprintf(json, len, "%s", (const char *)sqlite3_column_text(q, 2));
	sqlite3_finalize(q);
	store_close(&st);
}

/* One stored run used to fit all 8 parameters to one point, and the result
 * was applied by default: refused now. */
Test(calib, one_run_is_refused)
{
	struct err e = {0};
	char *out = NULL;

	record(0);
	cr_expect_eq(calibrate(&out, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "one validate run of device cpu") && strstr(e.msg, "at least 2"), "%s", e.msg);
	free(out);
}

/* Fewer parameters than runs: 3 runs fit at most 2, and say which. */
Test(calib, fits_fewer_parameters_than_runs)
{
	struct err e = {0};
	char *out = NULL, json[2048];
	int i, n, fitted = 0;
	double after;
	const char *p;

	for (i = 0; i < 3; i++)
		record(i);
	cr_assert_eq(calibrate(&out, &e), 0, "%s", e.msg);
	latest(&n, &after, json, sizeof json);
	cr_expect_eq(n, 3);
	p = strstr(json, "\"fitted\":[");
	cr_assert(p, "%s", json);
	for (p += 10; *p && *p != ']'; p++)
		fitted += *p == ',';
	fitted += p[-1] != '[';
	cr_expect(fitted >= 1 && fitted <= 2, "%d parameters fitted to 3 runs: %s", fitted, json);
	cr_expect(strstr(json, "\"heldout\":\"leave-one-out\""), "%s", json);
	cr_expect(strstr(out, "held out"), "%s", out);
	free(out);
}

/* Six runs made by known parameters: the fit finds them, so the runs held
 * out of each fold are predicted as well as those in it (< 1%), and that
 * held-out error is what is stored (error_after) and reported by simulate. */
Test(calib, held_out_runs_are_predicted_and_the_error_is_stored, .timeout = 120)
{
	struct err e = {0};
	struct scenario s;
	char *out = NULL, json[2048], line[512];
	int i, n;
	double after;

	for (i = 0; i < 6; i++)
		record(i);
	cr_assert_eq(calibrate(&out, &e), 0, "%s", e.msg);
	latest(&n, &after, json, sizeof json);
	cr_expect_eq(n, 6);
	cr_expect(after >= 0 && after < 0.01, "held-out median error %.4f", after);
	cr_expect(strstr(out, "on runs held out of it (leave-one-out"), "%s", out);
	free(out);
	/* not read without a database named; named, it is applied and described */
	cr_assert_eq(scenario_load(&s, scn_path, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(calib_apply_latest(NULL, &s, &e), 0, "%s", e.msg);
	cr_expect_eq(s.calib.applied, 0);
	cr_expect(strstr(calib_describe(&s.calib, line, sizeof line), "none"), "%s", line);
	cr_assert_eq(calib_apply_latest(db, &s, &e), 0, "%s", e.msg);
	cr_expect_eq(s.calib.applied, 1);
	cr_expect_eq(s.calib.runs, 6);
	cr_expect_float_eq(s.calib.heldout_error, after, 1e-12);
	cr_expect_str_eq(s.calib.method, "leave-one-out");
	calib_describe(&s.calib, line, sizeof line);
	cr_expect(strstr(line, "cpu, fitted ") && strstr(line, "to 6 runs, held-out error") && strstr(line, db),
		  "%s", line);
	scenario_free(&s);
}

/* A calibration stored by an earlier version (no held-out error): applied
 * when its database is named, and said to be unmeasured. */
Test(calib, an_older_calibration_says_its_error_was_not_measured)
{
	struct store st;
	struct scenario s;
	struct err e = {0};
	char line[512];

	record(0);
	cr_assert_eq(store_open(&st, db, &e), 0, "%s", e.msg);
	cr_assert_eq(sqlite3_exec(st.db, "INSERT INTO calibrations(device, created_at, params_json, n_points, "
				  "error_before, error_after) VALUES ('cpu', '2024-01-01T00:00:00Z', '{\"gemm_efficiency\": 0.4, "
				  "\"gemm_half_dim\": 16, \"memory_efficiency\": 0.7, \"kernel_gap\": 1e-7, \"dispatch_native\": "
				  "1e-6, \"dispatch_collective\": 5e-6, \"intra_latency\": 1e-6, \"intra_bandwidth\": 1e10}', 1, "
				  "0.5, 0.0)", NULL, NULL, NULL), SQLITE_OK);
	store_close(&st);
	cr_assert_eq(scenario_load(&s, scn_path, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(calib_apply_latest(db, &s, &e), 0, "%s", e.msg);
	cr_expect_eq(s.calib.applied, 1);
	cr_expect(s.calib.heldout_error < 0);
	cr_expect_float_eq(s.eff.gemm_efficiency, 0.4, 1e-12);
	calib_describe(&s.calib, line, sizeof line);
	cr_expect(strstr(line, "to 1 run, held-out error not measured"), "%s", line);
	scenario_free(&s);
}

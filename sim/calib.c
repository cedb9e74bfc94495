/*
 * calib.c — fitting the simulator to measurements (see calib.h).
 */
#include "calib.h"

#include <cjson/cJSON.h>
#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "graph.h"
#include "predict.h"
#include "step.h"
#include "store.h"

static const char *const names[CALIB_NPARAM] = {
	"gemm_efficiency", "gemm_half_dim", "memory_efficiency", "kernel_gap",
	"dispatch_native", "dispatch_collective", "intra_latency", "intra_bandwidth",
	"dispatch_eager", "dispatch_autograd", "dispatch_op", "dispatch_unit_fwd", "dispatch_unit_bwd"};

/* Parameters a calibration stored before these were fitted may lack: the
 * first CALIB_NPARAM_V1 are required, the later ones keep the catalog's. */
enum { CALIB_NPARAM_V1 = 8 };

const char *calib_name(int k)
{
	return names[k];
}

void calib_get(const struct scenario *s, struct calib *c)
{
	c->v[0] = s->eff.gemm_efficiency;
	c->v[1] = s->eff.gemm_half_dim;
	c->v[2] = s->eff.memory_efficiency;
	c->v[3] = s->eff.kernel_gap;
	c->v[4] = s->eff.dispatch_native;
	c->v[5] = s->eff.dispatch_collective;
	c->v[6] = s->intra.latency;
	c->v[7] = s->intra.bandwidth * s->intra.efficiency;
	c->v[8] = s->eff.dispatch_eager;
	c->v[9] = s->eff.dispatch_autograd;
	c->v[10] = s->eff.dispatch_op;
	c->v[11] = s->eff.dispatch_unit_fwd;
	c->v[12] = s->eff.dispatch_unit_bwd;
}

void calib_set(struct scenario *s, const struct calib *c)
{
	s->eff.gemm_efficiency = c->v[0];
	s->eff.gemm_half_dim = c->v[1];
	s->eff.memory_efficiency = c->v[2];
	s->eff.kernel_gap = c->v[3];
	s->eff.dispatch_native = c->v[4];
	s->eff.dispatch_collective = c->v[5];
	s->intra.latency = c->v[6];
	s->intra.bandwidth = c->v[7];  /* the fitted bandwidth is the achieved one */
	s->intra.efficiency = 1.0;
	s->eff.dispatch_eager = c->v[8];
	s->eff.dispatch_autograd = c->v[9];
	s->eff.dispatch_op = c->v[10];
	s->eff.dispatch_unit_fwd = c->v[11];
	s->eff.dispatch_unit_bwd = c->v[12];
}

static int parse_params(const char *json, struct calib *c)
{
	cJSON *o = cJSON_Parse(json);
	int k, ok = o != NULL;

	for (k = 0; ok && k < CALIB_NPARAM; k++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(o, names[k]);
		if (!v && k >= CALIB_NPARAM_V1)
			continue;  /* an older calibration: the catalog value stays */
		ok = cJSON_IsNumber(v) && v->valuedouble > 0;
		if (ok)
			c->v[k] = v->valuedouble;
	}
	cJSON_Delete(o);
	return ok ? 0 : -1;
}

int calib_apply_latest(const char *db, struct scenario *s, struct err *e)
{
	struct store st;
	sqlite3_stmt *q = NULL;
	struct calib c;
	int rc = 0;

	if (!db) {
		if (access("results/results.db", R_OK) != 0)
			return 0;
		db = "results/results.db";
	}
	if (access(db, R_OK) != 0)
		return 0;  /* a database still to be written (validate --db NEW) */
	rc = store_open_readonly(&st, db, e);
	if (rc)
		return rc;
	if (sqlite3_prepare_v2(st.db, "SELECT params_json FROM calibrations WHERE device = ? ORDER BY id DESC LIMIT 1",
			       -1, &q, NULL) != SQLITE_OK) {
		rc = err_set(e, ERR_SYSTEM, db, 0, "reading calibrations: %s", sqlite3_errmsg(st.db));
		goto out;
	}
	sqlite3_bind_text(q, 1, s->gpu.name, -1, SQLITE_STATIC);
	if (sqlite3_step(q) == SQLITE_ROW) {
		calib_get(s, &c);
		if (parse_params((const char *)sqlite3_column_text(q, 0), &c))
			rc = err_set(e, ERR_INPUT, db, 0, "the latest calibration of %s is not valid JSON of the "
				     "fitted parameters", s->gpu.name);
		else
			calib_set(s, &c);
	}
out:
	if (q)
		sqlite3_finalize(q);
	store_close(&st);
	return rc;
}

/* ---- the fit -------------------------------------------------------------- */

struct point {
	struct scenario s;
	struct graph g;
	long long run;
	long long batch;
	double measured;           /* s per step */
};

struct fit {
	struct point *pt;
	int n;
	struct calib c0;           /* catalog values: the prior */
	struct step_sim ss;
	int failed;
};

static double simulate(struct fit *f, struct point *p, const struct calib *c)
{
	struct step_result r;
	struct err e = {0};

	calib_set(&p->s, c);
	if (step_simulate(&f->ss, &p->s, &p->g, p->batch, &r, &e) || !(r.time > 0)) {
		f->failed = 1;
		return 1e9;
	}
	return r.time;
}

static void unlog(const gsl_vector *x, struct calib *c)
{
	for (int k = 0; k < CALIB_NPARAM; k++)
		c->v[k] = exp(gsl_vector_get(x, (size_t)k));
}

static int residuals(const gsl_vector *x, void *arg, gsl_vector *r)
{
	struct fit *f = arg;
	struct calib c;
	int i, k;

	unlog(x, &c);
	for (i = 0; i < f->n; i++)
		gsl_vector_set(r, (size_t)i, log(simulate(f, &f->pt[i], &c) / f->pt[i].measured));
	for (k = 0; k < CALIB_NPARAM; k++)  /* a weak pull toward the catalog values */
		gsl_vector_set(r, (size_t)(f->n + k), 0.05 * (gsl_vector_get(x, (size_t)k) - log(f->c0.v[k])));
	return GSL_SUCCESS;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median |simulated / measured - 1| over the points at c. */
static double median_error(struct fit *f, const struct calib *c, double *each)
{
	double *v = malloc((size_t)f->n * sizeof *v), m;
	int i;

	for (i = 0; i < f->n; i++) {
		each[i] = simulate(f, &f->pt[i], c) / f->pt[i].measured - 1;
		v[i] = fabs(each[i]);
	}
	qsort(v, (size_t)f->n, sizeof *v, cmpd);
	m = f->n % 2 ? v[f->n / 2] : 0.5 * (v[f->n / 2 - 1] + v[f->n / 2]);
	free(v);
	return m;
}

/* Loads one stored run as a point: its scenario text and overrides, at the
 * measured micro-batch. */
static int load_point(struct point *p, const char *text, const char *overrides, struct err *e)
{
	char path[] = "/tmp/shardcast-calib-XXXXXX.ini", *ov = NULL, *line, *save = NULL;
	const char *sets[70];
	struct graph_opts o;
	int fd, n = 0, rc;
	FILE *f;

	fd = mkstemps(path, 4);
	if (fd < 0 || !(f = fdopen(fd, "w")))
		return err_set(e, ERR_SYSTEM, NULL, 0, "cannot write a temporary scenario");
	fputs(text, f);
	fclose(f);
	if (overrides && (ov = strdup(overrides)))
		for (line = strtok_r(ov, "\n", &save); line && n < 64; line = strtok_r(NULL, "\n", &save))
			sets[n++] = line;
	sets[n++] = "training.framework=shardcast";
	rc = scenario_load(&p->s, path, sets, n, e);
	unlink(path);
	free(ov);
	if (rc)
		return rc;
	predict_graph_opts(&p->s, &o);
	return graph_build(&p->g, &p->s.model, &o, e);
}

static int load_points(struct fit *f, const char *db, const char *device, struct err *e)
{
	static const char *sql =
		"SELECT r.id, r.scenario_text, r.overrides, t.value, b.value FROM runs r"
		" JOIN measurements t ON t.run_id = r.id AND t.key = 'step_time_s'"
		" JOIN measurements b ON b.run_id = r.id AND b.key = 'max_micro_batch'"
		" LEFT JOIN measurements w ON w.run_id = r.id AND w.key = 'emulated_world'"
		" WHERE r.command = 'validate' AND r.device = ? AND t.value > 0 AND b.value > 0"
		" AND COALESCE(w.value, 0) = 0 ORDER BY r.id";
	struct store st;
	sqlite3_stmt *q;
	int rc = store_open_readonly(&st, db, e);

	if (rc)
		return rc;
	if (sqlite3_prepare_v2(st.db, sql, -1, &q, NULL) != SQLITE_OK) {
		rc = err_set(e, ERR_SYSTEM, db, 0, "reading runs: %s", sqlite3_errmsg(st.db));
		store_close(&st);
		return rc;
	}
	sqlite3_bind_text(q, 1, device, -1, SQLITE_STATIC);
	while (!rc && sqlite3_step(q) == SQLITE_ROW) {
		struct point *np = realloc(f->pt, (size_t)(f->n + 1) * sizeof *np), *p;
		if (!np) {
			rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
			break;
		}
		f->pt = np;
		p = memset(&f->pt[f->n], 0, sizeof *p);
		p->run = sqlite3_column_int64(q, 0);
		p->measured = sqlite3_column_double(q, 3);
		p->batch = (long long)sqlite3_column_double(q, 4);
		rc = load_point(p, (const char *)sqlite3_column_text(q, 1), (const char *)sqlite3_column_text(q, 2), e);
		if (rc) {
			scenario_free(&p->s);
			graph_free(&p->g);
		} else {
			f->n++;
		}
	}
	sqlite3_finalize(q);
	store_close(&st);
	return rc;
}

static int store_calib(const char *db, const char *device, const struct calib *c, int n, double before,
		       double after, struct err *e)
{
	static const char *sql = "INSERT INTO calibrations(device, created_at, params_json, n_points, "
				 "error_before, error_after) VALUES (?, ?, ?, ?, ?, ?)";
	cJSON *o = cJSON_CreateObject();
	char when[32], *json;
	struct store st;
	sqlite3_stmt *q = NULL;
	time_t now = time(NULL);
	struct tm tm;
	int k, rc;

	for (k = 0; k < CALIB_NPARAM; k++)
		cJSON_AddNumberToObject(o, names[k], c->v[k]);
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	rc = store_open(&st, db, e);
	if (!rc && sqlite3_prepare_v2(st.db, sql, -1, &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, device, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, when, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, json, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 4, n);
		sqlite3_bind_double(q, 5, before);
		sqlite3_bind_double(q, 6, after);
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = err_set(e, ERR_SYSTEM, db, 0, "storing the calibration: %s", sqlite3_errmsg(st.db));
	} else if (!rc) {
		rc = err_set(e, ERR_SYSTEM, db, 0, "storing the calibration: %s", sqlite3_errmsg(st.db));
	}
	if (q)
		sqlite3_finalize(q);
	store_close(&st);
	free(json);
	return rc;
}

static int solve(struct fit *f, struct calib *best, struct err *e)
{
	gsl_multifit_nlinear_parameters prm = gsl_multifit_nlinear_default_parameters();
	gsl_multifit_nlinear_fdf fdf;
	gsl_multifit_nlinear_workspace *w;
	gsl_vector *x = gsl_vector_alloc(CALIB_NPARAM);
	int k, info = 0, status;

	memset(&fdf, 0, sizeof fdf);
	fdf.f = residuals;
	fdf.n = (size_t)(f->n + CALIB_NPARAM);
	fdf.p = CALIB_NPARAM;
	fdf.params = f;
	prm.h_df = 1e-4;  /* finite-difference step in log parameters */
	w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &prm, fdf.n, fdf.p);
	if (!x || !w) {
		gsl_vector_free(x);
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory for the fit");
	}
	for (k = 0; k < CALIB_NPARAM; k++)
		gsl_vector_set(x, (size_t)k, log(f->c0.v[k]));
	gsl_multifit_nlinear_init(x, &fdf, w);
	status = gsl_multifit_nlinear_driver(200, 1e-8, 1e-8, 1e-10, NULL, NULL, &info, w);
	unlog(gsl_multifit_nlinear_position(w), best);
	gsl_multifit_nlinear_free(w);
	gsl_vector_free(x);
	if (status != GSL_SUCCESS && status != GSL_EMAXITER)
		return err_set(e, ERR_SYSTEM, NULL, 0, "the fit failed: %s", gsl_strerror(status));
	return 0;
}

int calib_run(const char *db, const char *device, FILE *out, struct err *e)
{
	struct fit f;
	struct calib c;
	double before, after, *eb = NULL, *ea = NULL;
	int rc, i, k;

	memset(&f, 0, sizeof f);
	if (access(db, R_OK) != 0)
		return err_set(e, ERR_INPUT, db, 0, "no results database (record runs with validate --db %s)", db);
	rc = load_points(&f, db, device, e);
	if (!rc && f.n == 0)
		rc = err_set(e, ERR_INPUT, db, 0, "no validate runs of device %s with a measured step time", device);
	if (!rc && step_sim_create(&f.ss))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (rc)
		goto out;
	calib_get(&f.pt[0].s, &f.c0);  /* the catalog values (scenario_load resolves them) */
	for (k = 0; k < CALIB_NPARAM; k++)  /* log parameters: a zero (no kernel gap) starts at 0.1 us */
		if (!(f.c0.v[k] > 1e-7))
			f.c0.v[k] = 1e-7;
	eb = malloc((size_t)f.n * sizeof *eb);
	ea = malloc((size_t)f.n * sizeof *ea);
	if (!eb || !ea) {
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
		goto out;
	}
	before = median_error(&f, &f.c0, eb);
	rc = solve(&f, &c, e);
	if (rc)
		goto out;
	after = median_error(&f, &c, ea);
	if (f.failed) {
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "a step simulation failed during the fit");
		goto out;
	}
	fprintf(out, "validate --calibrate: device %s, %d runs of %s\n\n", device, f.n, db);
	fprintf(out, "  %-6s %-34s %6s %12s %10s %10s\n", "run", "scenario", "batch", "measured", "before", "after");
	for (i = 0; i < f.n; i++)
		fprintf(out, "  %-6lld %-34.34s %6lld %10.2f ms %+9.1f%% %+9.1f%%\n", f.pt[i].run, f.pt[i].s.file[0] ?
			f.pt[i].s.model.name : "?", f.pt[i].batch, 1e3 * f.pt[i].measured, 100 * eb[i], 100 * ea[i]);
	fprintf(out, "\n  median |error| of the step time: %.1f%% before, %.1f%% after\n\n", 100 * before, 100 * after);
	fprintf(out, "  %-20s %14s %14s\n", "parameter", "catalog", "fitted");
	for (k = 0; k < CALIB_NPARAM; k++)
		fprintf(out, "  %-20s %14.6g %14.6g\n", names[k], f.c0.v[k], c.v[k]);
	rc = store_calib(db, device, &c, f.n, before, after, e);
	if (!rc)
		fprintf(out, "\nstored as the latest calibration of %s: simulate and validate use it with --db %s\n",
			device, db);
out:
	for (i = 0; i < f.n; i++) {
		scenario_free(&f.pt[i].s);
		graph_free(&f.pt[i].g);
	}
	if (f.pt)
		step_sim_delete(&f.ss);
	free(f.pt);
	free(eb);
	free(ea);
	return rc;
}

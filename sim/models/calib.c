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
	/* the fp32 and TF32 asymptotes (compute.h) keep their ratio to it */
	if (s->eff.gemm_efficiency > 0) {
		s->eff.gemm_efficiency_fp32 *= c->v[0] / s->eff.gemm_efficiency;
		s->eff.gemm_efficiency_tf32 *= c->v[0] / s->eff.gemm_efficiency;
	}
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

static int parse_params(const char *json, struct calib *c, struct scn_calibration *info)
{
	cJSON *o = cJSON_Parse(json), *v;
	int k, ok = o != NULL;

	for (k = 0; ok && k < CALIB_NPARAM; k++) {
		v = cJSON_GetObjectItemCaseSensitive(o, names[k]);
		if (!v && k >= CALIB_NPARAM_V1)
			continue;  /* an older calibration: the catalog value stays */
		ok = cJSON_IsNumber(v) && v->valuedouble > 0;
		if (ok)
			c->v[k] = v->valuedouble;
	}
	/* what this version records beside the parameters (calib_run) */
	v = o ? cJSON_GetObjectItemCaseSensitive(o, "fitted") : NULL;
	info->fitted = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
	v = o ? cJSON_GetObjectItemCaseSensitive(o, "heldout") : NULL;
	snprintf(info->method, sizeof info->method, "%s", cJSON_IsString(v) ? v->valuestring : "");
	cJSON_Delete(o);
	return ok ? 0 : -1;
}

int calib_apply_latest(const char *db, struct scenario *s, struct err *e)
{
	static const char *sql = "SELECT id, created_at, params_json, n_points, error_after FROM calibrations "
				 "WHERE device = ? ORDER BY id DESC LIMIT 1";
	struct scn_calibration *info = &s->calib;
	struct store st;
	sqlite3_stmt *q = NULL;
	struct calib c;
	int rc;

	memset(info, 0, sizeof *info);
	if (!db || access(db, R_OK) != 0)
		return 0;  /* none asked for, or a database still to be written (--db NEW) */
	rc = store_open_readonly(&st, db, e);
	if (rc)
		return rc;
	if (sqlite3_prepare_v2(st.db, sql, -1, &q, NULL) != SQLITE_OK) {
		rc = err_set(e, ERR_SYSTEM, db, 0, "reading calibrations: %s", sqlite3_errmsg(st.db));
		goto out;
	}
	sqlite3_bind_text(q, 1, s->gpu.name, -1, SQLITE_STATIC);
	if (sqlite3_step(q) == SQLITE_ROW) {
		calib_get(s, &c);
		if (parse_params((const char *)sqlite3_column_text(q, 2), &c, info)) {
			rc = err_set(e, ERR_INPUT, db, 0, "the latest calibration of %s is not valid JSON of the "
				     "fitted parameters", s->gpu.name);
			goto out;
		}
		calib_set(s, &c);
		info->applied = 1;
		info->id = sqlite3_column_int64(q, 0);
		snprintf(info->db, sizeof info->db, "%s", db);
		snprintf(info->device, sizeof info->device, "%s", s->gpu.name);
		snprintf(info->created_at, sizeof info->created_at, "%s", (const char *)sqlite3_column_text(q, 1));
		info->runs = sqlite3_column_int(q, 3);
		/* error_after is the held-out error when the row says how it was held out */
		info->heldout_error = info->method[0] && sqlite3_column_type(q, 4) != SQLITE_NULL ?
			sqlite3_column_double(q, 4) : -1;
	}
out:
	if (q)
		sqlite3_finalize(q);
	store_close(&st);
	return rc;
}

const char *calib_describe(const struct scn_calibration *c, char *buf, size_t n)
{
	char err[96];

	if (!c->applied) {
		snprintf(buf, n, "none: the catalog's efficiencies (models/hw/efficiency.ini)");
		return buf;
	}
	if (c->heldout_error >= 0)
		snprintf(err, sizeof err, "held-out error %.1f%% (%s)", 100 * c->heldout_error, c->method);
	else
		snprintf(err, sizeof err, "held-out error not measured (fitted by an older version)");
	snprintf(buf, n, "%s, fitted %s to %d run%s, %s; #%lld of %s", c->device, c->created_at, c->runs,
		 c->runs == 1 ? "" : "s", err, c->id, c->db);
	return buf;
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
	int n;                     /* runs loaded */
	int *use, nuse;            /* the runs of the current fit */
	int idx[CALIB_NPARAM], m;  /* the parameters fitted (indices into struct calib) */
	struct calib c0;           /* catalog values: the prior, and the parameters not fitted */
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

/* The catalog's values with the fitted ones (log) of x. */
static void unlog(const struct fit *f, const gsl_vector *x, struct calib *c)
{
	*c = f->c0;
	for (int j = 0; j < f->m; j++)
		c->v[f->idx[j]] = exp(gsl_vector_get(x, (size_t)j));
}

static int residuals(const gsl_vector *x, void *arg, gsl_vector *r)
{
	struct fit *f = arg;
	struct calib c;
	int i, j;

	unlog(f, x, &c);
	for (i = 0; i < f->nuse; i++) {
		struct point *p = &f->pt[f->use[i]];
		gsl_vector_set(r, (size_t)i, log(simulate(f, p, &c) / p->measured));
	}
	for (j = 0; j < f->m; j++)  /* a weak pull toward the catalog values */
		gsl_vector_set(r, (size_t)(f->nuse + j),
			       0.05 * (gsl_vector_get(x, (size_t)j) - log(f->c0.v[f->idx[j]])));
	return GSL_SUCCESS;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_abs(const double *x, int n)
{
	double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v), m;
	int i;

	if (!v || n == 0) {
		free(v);
		return 0;
	}
	for (i = 0; i < n; i++)
		v[i] = fabs(x[i]);
	qsort(v, (size_t)n, sizeof *v, cmpd);
	m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
	free(v);
	return m;
}

/* Each run's simulated / measured - 1 at c into each; their median |error|. */
static double median_error(struct fit *f, const struct calib *c, double *each)
{
	int i;

	for (i = 0; i < f->n; i++)
		each[i] = simulate(f, &f->pt[i], c) / f->pt[i].measured - 1;
	return median_abs(each, f->n);
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

/* What a calibration found, stored and printed. */
struct summary {
	struct calib c;            /* the fit to every run */
	double before;             /* median |error| at the catalog's values */
	double in_sample;          /* ... at c, over the runs it was fitted to */
	double heldout;            /* ... of each run predicted by a fit without it */
	const char *method;        /* how runs were held out */
};

static char *params_json(const struct fit *f, const struct summary *y)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *json;
	int k;

	if (!o)
		return NULL;
	for (k = 0; k < CALIB_NPARAM; k++)
		cJSON_AddNumberToObject(o, names[k], y->c.v[k]);
	a = cJSON_AddArrayToObject(o, "fitted");
	for (k = 0; a && k < f->m; k++)
		cJSON_AddItemToArray(a, cJSON_CreateString(names[f->idx[k]]));
	cJSON_AddStringToObject(o, "heldout", y->method);
	cJSON_AddNumberToObject(o, "in_sample_error", y->in_sample);
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return json;
}

/* One row: n_points the runs, error_before the catalog's median error,
 * error_after the held-out one (params_json says how runs were held out and
 * which parameters were fitted). */
static int store_calib(const char *db, const char *device, const struct fit *f, const struct summary *y,
		       struct err *e)
{
	static const char *sql = "INSERT INTO calibrations(device, created_at, params_json, n_points, "
				 "error_before, error_after) VALUES (?, ?, ?, ?, ?, ?)";
	char when[32], *json = params_json(f, y);
	struct store st;
	sqlite3_stmt *q = NULL;
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	if (!json)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	rc = store_open(&st, db, e);
	if (!rc && sqlite3_prepare_v2(st.db, sql, -1, &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, device, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, when, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, json, -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 4, f->n);
		sqlite3_bind_double(q, 5, y->before);
		sqlite3_bind_double(q, 6, y->heldout);
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

/* Fits f's parameters to its current runs (f->use) into best. */
static int solve(struct fit *f, struct calib *best, struct err *e)
{
	gsl_multifit_nlinear_parameters prm = gsl_multifit_nlinear_default_parameters();
	gsl_multifit_nlinear_fdf fdf;
	gsl_multifit_nlinear_workspace *w;
	gsl_vector *x = gsl_vector_alloc((size_t)f->m);
	int j, info = 0, status;

	memset(&fdf, 0, sizeof fdf);
	fdf.f = residuals;
	fdf.n = (size_t)(f->nuse + f->m);
	fdf.p = (size_t)f->m;
	fdf.params = f;
	prm.h_df = 1e-4;  /* finite-difference step in log parameters */
	w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &prm, fdf.n, fdf.p);
	if (!x || !w) {
		gsl_vector_free(x);
		if (w)
			gsl_multifit_nlinear_free(w);
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory for the fit");
	}
	for (j = 0; j < f->m; j++)
		gsl_vector_set(x, (size_t)j, log(f->c0.v[f->idx[j]]));
	gsl_multifit_nlinear_init(x, &fdf, w);
	status = gsl_multifit_nlinear_driver(200, 1e-8, 1e-8, 1e-10, NULL, NULL, &info, w);
	unlog(f, gsl_multifit_nlinear_position(w), best);
	gsl_multifit_nlinear_free(w);
	gsl_vector_free(x);
	if (status != GSL_SUCCESS && status != GSL_EMAXITER)
		return err_set(e, ERR_SYSTEM, NULL, 0, "the fit failed: %s", gsl_strerror(status));
	return 0;
}

/* The parameters to fit: those the runs inform (a 10% change of the parameter
 * moves some run's simulated step time by more than CALIB_INFORMS), most
 * informative first, and at most n - 1 of them, so that every fit, the held-
 * out folds' included, has at least as many runs as parameters. sens gets
 * each parameter's largest relative change. */
static int choose(struct fit *f, double *sens, struct err *e)
{
	double *base = malloc((size_t)f->n * sizeof *base), d;
	struct calib c;
	int i, k, j, t;

	if (!base)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	for (i = 0; i < f->n; i++)
		base[i] = simulate(f, &f->pt[i], &f->c0);
	f->m = 0;
	for (k = 0; k < CALIB_NPARAM; k++) {
		c = f->c0;
		c.v[k] *= 1.1;
		for (sens[k] = 0, i = 0; i < f->n; i++) {
			d = fabs(log(simulate(f, &f->pt[i], &c) / base[i]));
			if (d > sens[k])
				sens[k] = d;
		}
		if (sens[k] > CALIB_INFORMS)
			f->idx[f->m++] = k;
	}
	free(base);
	for (j = 1; j < f->m; j++)  /* most informative first (insertion sort, stable) */
		for (t = j; t > 0 && sens[f->idx[t]] > sens[f->idx[t - 1]]; t--) {
			k = f->idx[t];
			f->idx[t] = f->idx[t - 1];
			f->idx[t - 1] = k;
		}
	if (f->m > f->n - 1)
		f->m = f->n - 1;
	return 0;
}

/* Each run predicted by a fit to the others (leave-one-out up to
 * CALIB_LOO_MAX runs, else CALIB_FOLDS folds, run i in fold i mod folds):
 * each[i] = simulated / measured - 1. */
static int held_out(struct fit *f, double *each, const char **method, struct err *e)
{
	int folds = f->n <= CALIB_LOO_MAX ? f->n : CALIB_FOLDS, k, i;
	struct calib c;

	for (k = 0; k < folds; k++) {
		f->nuse = 0;
		for (i = 0; i < f->n; i++)
			if (i % folds != k)
				f->use[f->nuse++] = i;
		if (solve(f, &c, e))
			return e->code;
		for (i = k; i < f->n; i += folds)
			each[i] = simulate(f, &f->pt[i], &c) / f->pt[i].measured - 1;
	}
	*method = folds == f->n ? "leave-one-out" : "5-fold";
	return 0;
}

static void print(FILE *out, const char *db, const char *device, const struct fit *f,
		  const struct summary *y, const double *sens, double *const *each)
{
	int i, k, j;

	fprintf(out, "validate --calibrate: device %s, %d runs of %s\n\n", device, f->n, db);
	fprintf(out, "  %-6s %-24s %6s %12s %9s %9s %9s\n", "run", "scenario", "batch", "measured", "catalog",
		"fitted", "held out");
	for (i = 0; i < f->n; i++)
		fprintf(out, "  %-6lld %-24.24s %6lld %9.2f ms %+8.1f%% %+8.1f%% %+8.1f%%\n", f->pt[i].run,
			f->pt[i].s.model.name, f->pt[i].batch, 1e3 * f->pt[i].measured, 100 * each[0][i],
			100 * each[1][i], 100 * each[2][i]);
	fprintf(out, "\n  median |error| of the step time: %.1f%% with the catalog's values, %.1f%% in the fit,\n"
		"  %.1f%% on runs held out of it (%s: each run predicted by a fit without it)\n\n",
		100 * y->before, 100 * y->in_sample, 100 * y->heldout, y->method);
	fprintf(out, "  %-20s %14s %14s\n", "parameter", "catalog", "fitted");
	for (k = 0; k < CALIB_NPARAM; k++) {
		for (j = 0; j < f->m && f->idx[j] != k; j++)
			;
		if (j < f->m)
			fprintf(out, "  %-20s %14.6g %14.6g\n", names[k], f->c0.v[k], y->c.v[k]);
		else
			fprintf(out, "  %-20s %14.6g %14s  (%s)\n", names[k], f->c0.v[k], "kept",
				sens[k] > CALIB_INFORMS ? "no more parameters than runs - 1" : "the runs do not inform it");
	}
}

static int fit_all(struct fit *f, const char *db, const char *device, FILE *out, struct err *e)
{
	struct summary y;
	double sens[CALIB_NPARAM], *each[3];
	int rc = 0, i;

	for (i = 0; i < 3; i++)
		each[i] = calloc((size_t)f->n, sizeof *each[i]);
	f->use = malloc((size_t)f->n * sizeof *f->use);
	if (!each[0] || !each[1] || !each[2] || !f->use)
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (!rc)
		rc = choose(f, sens, e);
	if (!rc && f->m == 0)
		rc = err_set(e, ERR_INPUT, db, 0, "the %d runs of %s do not inform any parameter of the step model",
			     f->n, device);
	if (!rc) {
		y.before = median_error(f, &f->c0, each[0]);
		for (f->nuse = 0; f->nuse < f->n; f->nuse++)
			f->use[f->nuse] = f->nuse;
		rc = solve(f, &y.c, e);
	}
	if (!rc) {
		y.in_sample = median_error(f, &y.c, each[1]);
		rc = held_out(f, each[2], &y.method, e);
	}
	if (!rc && f->failed)
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "a step simulation failed during the fit");
	if (!rc) {
		y.heldout = median_abs(each[2], f->n);
		print(out, db, device, f, &y, sens, each);
		rc = store_calib(db, device, f, &y, e);
	}
	if (!rc)
		fprintf(out, "\nstored as the latest calibration of %s: simulate, validate and recommend use it "
			"with --db %s\n", device, db);
	for (i = 0; i < 3; i++)
		free(each[i]);
	free(f->use);
	return rc;
}

int calib_run(const char *db, const char *device, FILE *out, struct err *e)
{
	struct fit f;
	int rc, i, k;

	memset(&f, 0, sizeof f);
	if (access(db, R_OK) != 0)
		return err_set(e, ERR_INPUT, db, 0, "no results database (record runs with validate --db %s)", db);
	rc = load_points(&f, db, device, e);
	if (!rc && f.n == 0)
		rc = err_set(e, ERR_INPUT, db, 0, "no validate runs of device %s with a measured step time", device);
	if (!rc && f.n < 2)
		rc = err_set(e, ERR_INPUT, db, 0, "one validate run of device %s: a calibration fits fewer parameters "
			     "than it has runs and measures its error on runs held out of the fit, so it needs at "
			     "least 2 (record more with validate --db %s)", device, db);
	if (!rc && step_sim_create(&f.ss))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	if (rc)
		goto out;
	calib_get(&f.pt[0].s, &f.c0);  /* the catalog values (scenario_load resolves them) */
	for (k = 0; k < CALIB_NPARAM; k++)  /* log parameters: a zero (no kernel gap) starts at 0.1 us */
		if (!(f.c0.v[k] > 1e-7))
			f.c0.v[k] = 1e-7;
	rc = fit_all(&f, db, device, out, e);
out:
	for (i = 0; i < f.n; i++) {
		scenario_free(&f.pt[i].s);
		graph_free(&f.pt[i].g);
	}
	if (f.pt)
		step_sim_delete(&f.ss);
	free(f.pt);
	return rc;
}

/*
 * job.c — the job discrete-event simulation, its Monte Carlo, the interval
 * search and the closed forms of Young (1974) and Daly (2006) (see job.h).
 *
 * Events live in a few fixed slots (the job's next transition, the async
 * write, the window's end, the merged exponential clock, the next repair, one
 * clock per Weibull component); the next event is the slot with the least
 * (time, insertion count), so equal times resolve the same way on every run.
 * Between two non-job events the checkpoint cycle is periodic, so whole
 * periods are skipped arithmetically (no_skip turns that off for the tests
 * that check it changes nothing).
 */
#include "job.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_min.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sf_gamma.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

#define EPS 1e-6              /* s: times closer than this are equal */
#define REPAIR_SLACK 4096     /* nodes in repair beyond the spares */

enum { EV_JOB, EV_WRITE, EV_END, EV_EXP, EV_REPAIR, EV_WEIBULL, EV_MAX = EV_WEIBULL + FAIL_MAX };

struct evq {
	double t[EV_MAX];        /* s; INFINITY = not set */
	uint64_t seq[EV_MAX];    /* insertion count, orders equal times */
	uint64_t next;
	int n;                   /* slots in use */
};

static void evq_init(struct evq *q, int n)
{
	int i;

	q->n = n;
	q->next = 0;
	for (i = 0; i < n; i++)
		q->t[i] = INFINITY;
}

static void evq_set(struct evq *q, int slot, double t)
{
	q->t[slot] = t;
	q->seq[slot] = q->next++;
}

static void evq_clear(struct evq *q, int slot)
{
	q->t[slot] = INFINITY;
}

/* The slot of the next event, -1 if none. */
static int evq_next(const struct evq *q)
{
	int i, best = -1;

	for (i = 0; i < q->n; i++)
		if (q->t[i] < INFINITY &&
		    (best < 0 || q->t[i] < q->t[best] || (q->t[i] == q->t[best] && q->seq[i] < q->seq[best])))
			best = i;
	return best;
}

/* The earliest time among the slots other than skip. */
static double evq_min_except(const struct evq *q, int skip)
{
	double m = INFINITY;
	int i;

	for (i = 0; i < q->n; i++)
		if (i != skip && q->t[i] < m)
			m = q->t[i];
	return m;
}

/* A min-heap of repair completion times (s). */
struct heap {
	double *t;               /* (cap) */
	int64_t n, cap;
};

static int heap_push(struct heap *h, double t)
{
	int64_t i = h->n;

	if (h->n == h->cap)
		return -1;
	h->n++;
	while (i > 0 && h->t[(i - 1) / 2] > t) {
		h->t[i] = h->t[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->t[i] = t;
	return 0;
}

static void heap_pop(struct heap *h)
{
	double last = h->t[--h->n];
	int64_t i = 0, c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && h->t[c + 1] < h->t[c])
			c++;
		if (h->t[c] >= last)
			break;
		h->t[i] = h->t[c];
		i = c;
	}
	if (h->n)
		h->t[i] = last;
}

enum { ST_COMPUTE, ST_BLOCK, ST_DRAIN, ST_SAVE, ST_DOWN, ST_WAIT, ST_RESTART, ST_DONE };

/* One run. Progress is in seconds of training. */
struct trial {
	double t, t_phase;       /* s: now; when the current state began */
	double p;                /* training done (at t_phase while computing) */
	double p_saved;          /* training in the last complete checkpoint */
	double p_write;          /* training in the async write in flight; < 0: none */
	double p_next;           /* where the next checkpoint starts */
	double wait_until;       /* s: the repair in place the job waits for */
	int st;
	int final;               /* the checkpoint under way is the last one */
	int fresh;               /* no save since the start or the last restart */
	int64_t spares, deficit; /* free spare nodes; nodes the job lacks */
	double compute, ckpt, down, lost, checkpoints, waits;
	double unexpected, planned;
	double left[EV_MAX];     /* s: what each failure clock had left when it stopped */
};

struct job_sim {
	const struct job_params *p;
	gsl_rng *r_exp, *r_weib, *r_aux;
	struct heap repairs;
	struct evq q;
	struct trial r;
	double exp_rate;         /* 1/s, all exponential components */
	double cum[FAIL_MAX];    /* cumulative rates of the exponential components */
	int exp_comp[FAIL_MAX], nexp;
	double *wall, *useful, *scratch; /* (trials) */
	int64_t cap;
	double by_comp[FAIL_MAX];
	int err;                 /* set inside a trial: ERR_* */
};

int job_sim_new(struct job_sim **out, const struct job_params *p, struct err *e)
{
	struct job_sim *w = calloc(1, sizeof *w);

	*out = NULL;
	if (!w)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	w->r_exp = gsl_rng_alloc(gsl_rng_mt19937);
	w->r_weib = gsl_rng_alloc(gsl_rng_mt19937);
	w->r_aux = gsl_rng_alloc(gsl_rng_mt19937);
	w->cap = p->trials;
	w->wall = malloc((size_t)w->cap * sizeof *w->wall);
	w->useful = malloc((size_t)w->cap * sizeof *w->useful);
	w->scratch = malloc((size_t)w->cap * sizeof *w->scratch);
	w->repairs.cap = p->spares + REPAIR_SLACK;
	w->repairs.t = malloc((size_t)w->repairs.cap * sizeof *w->repairs.t);
	if (!w->r_exp || !w->r_weib || !w->r_aux || !w->wall || !w->useful || !w->scratch || !w->repairs.t) {
		job_sim_free(w);
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory for %lld trials", (long long)p->trials);
	}
	*out = w;
	return 0;
}

void job_sim_free(struct job_sim *w)
{
	if (!w)
		return;
	if (w->r_exp)
		gsl_rng_free(w->r_exp);
	if (w->r_weib)
		gsl_rng_free(w->r_weib);
	if (w->r_aux)
		gsl_rng_free(w->r_aux);
	free(w->wall);
	free(w->useful);
	free(w->scratch);
	free(w->repairs.t);
	free(w);
}

/* ---- one run ------------------------------------------------------------ */

/* Leaves the current state at r->t, adding its time where it belongs. */
static void enter(struct trial *r, int st)
{
	double dt = r->t - r->t_phase;

	switch (r->st) {
	case ST_COMPUTE: r->compute += dt; r->p += dt; break;
	case ST_BLOCK: case ST_DRAIN: case ST_SAVE: r->ckpt += dt; break;
	case ST_DOWN: case ST_WAIT: case ST_RESTART: r->down += dt; break;
	default: break;
	}
	r->st = st;
	r->t_phase = r->t;
}

/* Training runs until the next checkpoint (or the end of the work). */
static void compute(struct job_sim *w, struct trial *r)
{
	const struct job_params *p = w->p;

	enter(r, ST_COMPUTE);
	r->p_next = r->p + p->interval;
	if (p->work > 0 && r->p_next > p->work - EPS)
		r->p_next = p->work;
	evq_set(&w->q, EV_JOB, r->t + (r->p_next - r->p));
}

static void saved(struct trial *r, double progress)
{
	r->p_saved = progress;
	r->checkpoints++;
}

/* Skips n whole checkpoint periods when nothing else happens in them: at a
 * block start the state repeats every period (block, then interval of training
 * and, for async, waiting for the write when it is longer). */
static void skip(struct job_sim *w, struct trial *r)
{
	const struct job_params *p = w->p;
	double tau = p->interval, wait = p->background > tau ? p->background - tau : 0;
	double period = p->block + tau + wait, n, nw;

	if (p->no_skip || r->final || period <= 0)
		return;
	n = floor((evq_min_except(&w->q, EV_JOB) - r->t) / period) - 1;
	if (p->work > 0) {
		nw = ceil((p->work - EPS - r->p) / tau) - 1;  /* blocks that stay non-final */
		if (nw < n)
			n = nw;
	}
	if (!(n >= 1))
		return;
	r->t += n * period;
	r->t_phase = r->t;
	r->compute += n * tau;
	r->ckpt += n * (p->block + wait);
	r->checkpoints += n;
	r->p_saved = r->p + (n - 1) * tau;
	r->p += n * tau;
}

static void block(struct job_sim *w, struct trial *r)
{
	double extra = 0;

	enter(r, ST_BLOCK);
	if (!r->fresh)
		skip(w, r);
	else if (w->p->background <= 0)
		extra = w->p->first_extra;  /* a sync save's first plan */
	evq_set(&w->q, EV_JOB, r->t + w->p->block + extra);
}

/* Failure clocks run while the job keeps its hardware busy (training,
 * checkpointing, restarting): they stop when it fails and go on at the restart
 * with what they had left. */
static void clocks_stop(struct job_sim *w, struct trial *r)
{
	int s;

	for (s = EV_EXP; s < w->q.n; s++) {
		if (s == EV_REPAIR)
			continue;
		r->left[s] = w->q.t[s] - r->t;
		evq_clear(&w->q, s);
	}
}

static void clocks_go(struct job_sim *w, struct trial *r)
{
	int s;

	for (s = EV_EXP; s < w->q.n; s++)
		if (s != EV_REPAIR && r->left[s] < INFINITY)
			evq_set(&w->q, s, r->t + r->left[s]);
}

static void restart(struct job_sim *w, struct trial *r)
{
	if (r->st == ST_DOWN || r->st == ST_WAIT)
		clocks_go(w, r);
	enter(r, ST_RESTART);
	r->fresh = 1;
	evq_set(&w->q, EV_JOB, r->t + w->p->restart);
}

static void done(struct job_sim *w, struct trial *r)
{
	enter(r, ST_DONE);
	evq_init(&w->q, w->q.n);
}

/* Training reached the next checkpoint. */
static void ckpt_start(struct job_sim *w, struct trial *r)
{
	enter(r, ST_BLOCK);
	r->p = r->p_next;
	r->final = w->p->work > 0 && r->p > w->p->work - EPS;
	if (r->p_write >= 0) {
		enter(r, ST_DRAIN);      /* the previous write is still going */
		evq_clear(&w->q, EV_JOB);
	} else {
		block(w, r);
	}
}

static void block_end(struct job_sim *w, struct trial *r)
{
	double extra = r->fresh ? w->p->first_extra : 0;

	r->fresh = 0;
	if (w->p->background <= 0) {
		saved(r, r->p);
		if (r->final)
			done(w, r);
		else
			compute(w, r);
		return;
	}
	r->p_write = r->p;
	evq_set(&w->q, EV_WRITE, r->t + w->p->background + extra);
	if (r->final) {
		enter(r, ST_DRAIN);
		evq_clear(&w->q, EV_JOB);
	} else {
		compute(w, r);
	}
}

static void write_end(struct job_sim *w, struct trial *r)
{
	saved(r, r->p_write);
	r->p_write = -1;
	if (r->st != ST_DRAIN)
		return;
	if (r->final && r->p_saved > w->p->work - EPS)
		done(w, r);
	else
		block(w, r);
}

/* The job is down; it restarts when it has its nodes and no repair to wait for. */
static void try_restart(struct job_sim *w, struct trial *r)
{
	if (r->deficit > 0) {
		evq_clear(&w->q, EV_JOB);
	} else if (r->wait_until > r->t + EPS) {
		evq_set(&w->q, EV_JOB, r->wait_until);
	} else {
		restart(w, r);
		return;
	}
	if (r->st != ST_WAIT) {
		enter(r, ST_WAIT);
		r->waits++;
	}
}

static void job_event(struct job_sim *w, struct trial *r)
{
	switch (r->st) {
	case ST_COMPUTE: ckpt_start(w, r); break;
	case ST_BLOCK: block_end(w, r); break;
	case ST_SAVE:
		saved(r, r->p);
		if (w->p->work > 0 && r->p > w->p->work - EPS)
			done(w, r);
		else
			restart(w, r);
		break;
	case ST_DOWN: case ST_WAIT: try_restart(w, r); break;
	case ST_RESTART: compute(w, r); break;
	default: break;
	}
}

static void repair_done(struct job_sim *w, struct trial *r)
{
	heap_pop(&w->repairs);
	if (w->repairs.n)
		evq_set(&w->q, EV_REPAIR, w->repairs.t[0]);
	else
		evq_clear(&w->q, EV_REPAIR);
	if (r->deficit > 0)
		r->deficit--;
	else
		r->spares++;
	if (r->st == ST_WAIT)
		try_restart(w, r);
}

/* A planned stop: save, then restart; nothing is lost. (One while a planned
 * save is under way is part of that stop.) */
static void planned(struct job_sim *w, struct trial *r, int i)
{
	if (r->st == ST_COMPUTE || r->st == ST_BLOCK || r->st == ST_DRAIN) {
		enter(r, ST_SAVE);
		r->p_write = -1;  /* superseded by this save */
		r->final = 0;
		evq_clear(&w->q, EV_WRITE);
		evq_set(&w->q, EV_JOB, r->t + w->p->block_sync);
	} else if (r->st == ST_RESTART) {
		restart(w, r);
	} else {
		return;
	}
	r->planned++;
	w->by_comp[i]++;
}

static void fail(struct job_sim *w, struct trial *r, int i)
{
	const struct job_component *c = &w->p->c[i];
	double repair = c->repair == FAIL_REPAIR_NONE ? 0 : gsl_ran_lognormal(w->r_aux, c->repair_mu, c->repair_sigma);

	if (c->planned) {
		planned(w, r, i);
		return;
	}
	r->unexpected++;
	w->by_comp[i]++;
	enter(r, ST_DOWN);
	clocks_stop(w, r);
	r->lost += r->p - r->p_saved;
	r->p = r->p_saved;
	r->p_write = -1;
	r->final = 0;
	evq_clear(&w->q, EV_WRITE);
	if (c->repair == FAIL_REPAIR_SWAP) {
		if (heap_push(&w->repairs, r->t + repair)) {
			w->err = ERR_INPUT;
			return;
		}
		evq_set(&w->q, EV_REPAIR, w->repairs.t[0]);
		if (r->spares > 0)
			r->spares--;
		else
			r->deficit++;
	} else if (c->repair == FAIL_REPAIR_IN_PLACE && r->t + repair > r->wait_until) {
		r->wait_until = r->t + repair;
	}
	evq_set(&w->q, EV_JOB, r->t + c->detect);
}

static void exp_failure(struct job_sim *w, struct trial *r)
{
	double u = gsl_rng_uniform(w->r_aux) * w->exp_rate;
	int k = 0;

	while (k < w->nexp - 1 && u >= w->cum[k])
		k++;
	evq_set(&w->q, EV_EXP, r->t + gsl_ran_exponential(w->r_exp, 1 / w->exp_rate));
	fail(w, r, w->exp_comp[k]);
}

static void weibull_failure(struct job_sim *w, struct trial *r, int i)
{
	const struct job_component *c = &w->p->c[i];

	evq_set(&w->q, EV_WEIBULL + i, r->t + gsl_ran_weibull(w->r_weib, c->scale, c->shape));
	fail(w, r, i);
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static void start(struct job_sim *w, int64_t trial)
{
	const struct job_params *p = w->p;
	struct trial *r = &w->r;
	uint64_t base = splitmix(p->seed) ^ splitmix((uint64_t)trial * 4 + 0x5eed);
	int i;

	gsl_rng_set(w->r_exp, (unsigned long)(splitmix(base + 1) & 0xffffffffu));
	gsl_rng_set(w->r_weib, (unsigned long)(splitmix(base + 2) & 0xffffffffu));
	gsl_rng_set(w->r_aux, (unsigned long)(splitmix(base + 3) & 0xffffffffu));
	memset(r, 0, sizeof *r);
	r->p_write = -1;
	r->fresh = 1;
	r->spares = p->spares;
	r->st = ST_DONE;  /* nothing accounted before the start */
	w->repairs.n = 0;
	evq_init(&w->q, EV_WEIBULL + p->n);
	if (w->exp_rate > 0)
		evq_set(&w->q, EV_EXP, gsl_ran_exponential(w->r_exp, 1 / w->exp_rate));
	for (i = 0; i < p->n; i++)
		if (p->c[i].dist == FAIL_WEIBULL && p->c[i].rate > 0)
			evq_set(&w->q, EV_WEIBULL + i, gsl_ran_weibull(w->r_weib, p->c[i].scale, p->c[i].shape));
	if (p->work <= 0)
		evq_set(&w->q, EV_END, p->window);
	compute(w, r);
}

static int run_trial(struct job_sim *w, int64_t trial, struct err *e)
{
	const struct job_params *p = w->p;
	struct trial *r = &w->r;
	double limit = p->work > 0 ? JOB_MAX_STRETCH * p->work : INFINITY;
	char b[4][32];
	int ev;

	start(w, trial);
	while (r->st != ST_DONE && (ev = evq_next(&w->q)) >= 0) {
		r->t = w->q.t[ev];
		if (r->t > limit)  /* it would finish, but at an ETTR below 1 / JOB_MAX_STRETCH */
			return err_set(e, ERR_INPUT, NULL, 0, "the job makes almost no progress: a run had kept "
				       "only %.1f%% of its %s of training after %s, %.0f times as long (ETTR below "
				       "%.1f%%); failures (one every %s) outpace restarts (%s) and waits for "
				       "repairs: add spare nodes, shorten restarts, or use fewer nodes",
				       100 * r->p_saved / p->work, units_format(b[0], 32, p->work, UNIT_TIME),
				       units_format(b[1], 32, r->t, UNIT_TIME), JOB_MAX_STRETCH,
				       100 / JOB_MAX_STRETCH, units_format(b[2], 32, job_mtbf(p), UNIT_TIME),
				       units_format(b[3], 32, p->restart, UNIT_TIME));
		switch (ev) {
		case EV_JOB: job_event(w, r); break;
		case EV_WRITE: evq_clear(&w->q, EV_WRITE); write_end(w, r); break;
		case EV_END: done(w, r); break;
		case EV_EXP: exp_failure(w, r); break;
		case EV_REPAIR: repair_done(w, r); break;
		default: weibull_failure(w, r, ev - EV_WEIBULL); break;
		}
		if (w->err)
			return err_set(e, w->err, NULL, 0, "more than %lld nodes wait for repair at once: "
				       "the job cannot keep going (add spare nodes or shorten repairs)",
				       (long long)w->repairs.cap);
	}
	return 0;
}

/* ---- Monte Carlo ------------------------------------------------------- */

static void setup(struct job_sim *w, const struct job_params *p)
{
	int i;

	w->p = p;
	w->err = 0;
	w->nexp = 0;
	w->exp_rate = 0;
	for (i = 0; i < p->n; i++) {
		if (p->c[i].dist != FAIL_EXPONENTIAL || p->c[i].rate <= 0)
			continue;
		w->exp_rate += p->c[i].rate;
		w->cum[w->nexp] = w->exp_rate;
		w->exp_comp[w->nexp++] = i;
	}
	memset(w->by_comp, 0, sizeof w->by_comp);
}

/* Mean and 95% interval of the mean of x (n values). */
static void mean_ci(const double *x, int64_t n, double *mean, double *sd, double *lo, double *hi)
{
	double half;

	*mean = gsl_stats_mean(x, 1, (size_t)n);
	*sd = n > 1 ? gsl_stats_sd_m(x, 1, (size_t)n, *mean) : 0;
	half = 1.959964 * *sd / sqrt((double)n);
	*lo = *mean - half;
	*hi = *mean + half;
}

static void quantiles_of(struct job_sim *w, int64_t n, struct job_stats *st)
{
	memcpy(w->scratch, w->wall, (size_t)n * sizeof *w->scratch);
	gsl_sort(w->scratch, 1, (size_t)n);
	st->wall_p025 = gsl_stats_quantile_from_sorted_data(w->scratch, 1, (size_t)n, 0.025);
	st->wall_p975 = gsl_stats_quantile_from_sorted_data(w->scratch, 1, (size_t)n, 0.975);
}

int job_sim_run(struct job_sim *w, const struct job_params *p, int quantiles, struct job_stats *st,
		struct err *e)
{
	const struct trial *r = &w->r;
	double n = (double)p->trials, sd;
	int64_t k;
	int i, rc;

	memset(st, 0, sizeof *st);
	if (p->trials > w->cap || p->spares + REPAIR_SLACK > w->repairs.cap || p->interval <= 0)
		return err_set(e, ERR_SYSTEM, NULL, 0, "internal: job workspace or interval does not fit the parameters");
	setup(w, p);
	for (k = 0; k < p->trials; k++) {
		if (p->tick)
			p->tick(p->tick_ctx, k);
		rc = run_trial(w, k, e);
		if (rc)
			return rc;
		w->wall[k] = p->work > 0 ? r->t : p->window;
		w->useful[k] = p->work > 0 ? p->work : r->p;
		st->unexpected += r->unexpected / n;
		st->planned += r->planned / n;
		st->lost += r->lost / n;
		st->ckpt += r->ckpt / n;
		st->down += r->down / n;
		st->checkpoints += r->checkpoints / n;
		st->waits += r->waits / n;
	}
	st->trials = p->trials;
	st->interruptions = st->unexpected + st->planned;
	for (i = 0; i < p->n; i++)
		st->by_comp[i] = w->by_comp[i] / n;
	mean_ci(w->wall, p->trials, &st->wall, &st->wall_sd, &st->wall_lo, &st->wall_hi);
	mean_ci(w->useful, p->trials, &st->useful, &sd, &st->useful_lo, &st->useful_hi);
	st->ettr = st->useful / st->wall;
	if (quantiles)
		quantiles_of(w, p->trials, st);
	return 0;
}

/* ---- closed forms ------------------------------------------------------ */

double job_mtbf(const struct job_params *p)
{
	double rate = 0;
	int i;

	for (i = 0; i < p->n; i++)
		if (!p->c[i].planned)
			rate += p->c[i].rate;
	return rate > 0 ? 1 / rate : INFINITY;
}

double job_young(double delta, double mtbf)
{
	return sqrt(2 * delta * mtbf);
}

double job_daly(double delta, double mtbf)
{
	double x = delta / (2 * mtbf);

	if (delta >= 2 * mtbf)
		return mtbf;
	return sqrt(2 * delta * mtbf) * (1 + sqrt(x) / 3 + x / 9) - delta;
}

double job_daly_wall(double work, double interval, double delta, double restart, double mtbf)
{
	return mtbf * exp(restart / mtbf) * expm1((interval + delta) / mtbf) * work / interval;
}

/* ---- the interval search ----------------------------------------------- */

#define GRID 13               /* points of the log grid */
#define GRID_HALF 6
#define GRID_STEP 1.2599210498948732  /* 2^(1/3): the grid spans x/4 .. x4 */
#define FINE 64               /* points of the scan of the fit */

struct search {
	struct job_sim *w;
	struct job_params q;      /* a copy whose interval is varied */
	struct err *e;
	int rc;
	double cap;               /* s: longest useful interval */
};

/* 1 / ETTR at interval tau, by Monte Carlo. */
static double objective(struct search *s, double tau)
{
	struct job_stats st;

	if (s->rc)
		return INFINITY;
	s->q.interval = tau < s->cap ? tau : s->cap;
	s->rc = job_sim_run(s->w, &s->q, 0, &st, s->e);
	return s->rc ? INFINITY : st.wall / st.useful;
}

/* The fit A/x + B + C x + D q(x) in x = tau / tau_best, where q is the part of
 * (e^{τ/M} − 1)/τ beyond its linear terms, scaled to ≈ x² for τ ≪ M: with
 * these four functions Daly's T_w(τ) = M e^{R/M}(e^{(τ+δ)/M} − 1)/τ · T_s is
 * represented exactly, and other failure processes smoothly. */
struct fit {
	double c[4];
	double u;                 /* tau_best / M */
};

static double tail(double x, double u)
{
	double z = x * u;

	if (z < 1e-3)             /* (e^z − 1 − z − z²/2) / z by its series */
		return 6 * (z / 6 + z * z / 24 + z * z * z / 120) * x / u;
	return 6 * (expm1(z) - z - z * z / 2) / (z * u * u);
}

static double fitted(double x, void *params)
{
	const struct fit *f = params;
	return f->c[0] / x + f->c[1] + f->c[2] * x + f->c[3] * tail(x, f->u);
}

/* Least-squares fit of n points (x, y) into f (f->u set); 0 on success. */
static int fit_points(const double *x, const double *y, int n, struct fit *f)
{
	gsl_matrix *X = gsl_matrix_alloc((size_t)n, 4), *cov = gsl_matrix_alloc(4, 4);
	gsl_vector *Y = gsl_vector_alloc((size_t)n), *c = gsl_vector_alloc(4);
	gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, 4);
	double chisq;
	int i, rc = -1;

	if (X && cov && Y && c && ws) {
		for (i = 0; i < n; i++) {
			gsl_matrix_set(X, (size_t)i, 0, 1 / x[i]);
			gsl_matrix_set(X, (size_t)i, 1, 1);
			gsl_matrix_set(X, (size_t)i, 2, x[i]);
			gsl_matrix_set(X, (size_t)i, 3, tail(x[i], f->u));
			gsl_vector_set(Y, (size_t)i, y[i]);
		}
		rc = gsl_multifit_linear(X, Y, c, cov, &chisq, ws);
		for (i = 0; i < 4 && !rc; i++)
			f->c[i] = gsl_vector_get(c, (size_t)i);
	}
	gsl_multifit_linear_free(ws);
	gsl_vector_free(c);
	gsl_vector_free(Y);
	gsl_matrix_free(cov);
	gsl_matrix_free(X);
	return rc;
}

/* Brent's minimiser on the fit over [a, b] from m (x units); m if the fit has
 * no minimum inside. */
static double brent(struct fit *f, double a, double m, double b)
{
	gsl_min_fminimizer *s;
	gsl_function fn = {fitted, f};
	double x = m;
	int it, status;

	if (!(fitted(m, f) < fitted(a, f) && fitted(m, f) < fitted(b, f)))
		return m;
	s = gsl_min_fminimizer_alloc(gsl_min_fminimizer_brent);
	if (!s || gsl_min_fminimizer_set(s, &fn, m, a, b)) {
		if (s)
			gsl_min_fminimizer_free(s);
		return m;
	}
	for (it = 0; it < 100; it++) {
		status = gsl_min_fminimizer_iterate(s);
		x = gsl_min_fminimizer_x_minimum(s);
		if (status || gsl_min_test_interval(gsl_min_fminimizer_x_lower(s),
						    gsl_min_fminimizer_x_upper(s), 1e-6, 0) == GSL_SUCCESS)
			break;
	}
	gsl_min_fminimizer_free(s);
	return x;
}

/* The argmin of the fit over [a, b] (x units): a fine scan, refined by Brent. */
static double fit_min(struct fit *f, double a, double b)
{
	double x[FINE], r = pow(b / a, 1.0 / (FINE - 1));
	int k, m = 0;

	for (k = 0; k < FINE; k++) {
		x[k] = a * pow(r, k);
		if (fitted(x[k], f) < fitted(x[m], f))
			m = k;
	}
	if (m == 0 || m == FINE - 1)
		return x[m];
	return brent(f, x[m - 1], x[m], x[m + 1]);
}

int job_optimize(struct job_sim *w, const struct job_params *p, double *best, struct err *e)
{
	struct search s = {w, *p, e, 0, p->work > 0 ? p->work : p->window};
	double mtbf = job_mtbf(p), x0, t0, tau[GRID], y[GRID], xs[7];
	/* s: saving async more often than its write takes only adds waiting */
	double floor_ = p->background > 1e-3 ? p->background : 1e-3;
	gsl_error_handler_t *old;
	struct fit f;
	int k, kb, shifts, lo;

	if (!(mtbf < INFINITY)) {
		*best = s.cap;      /* nothing fails: save at the end only */
		return 0;
	}
	x0 = job_daly(p->block, mtbf);  /* Daly's interval for the blocking cost */
	if (!(x0 > floor_))
		x0 = floor_;
	for (shifts = 0;; shifts++) {
		t0 = x0 * pow(GRID_STEP, -GRID_HALF);
		if (t0 < floor_)
			t0 = floor_;
		for (k = 0; k < GRID; k++) {
			tau[k] = t0 * pow(GRID_STEP, k);
			y[k] = objective(&s, tau[k]);
		}
		if (s.rc)
			return s.rc;
		for (kb = 0, k = 1; k < GRID; k++)
			if (y[k] < y[kb])
				kb = k;
		if (((kb > 0 || t0 <= floor_) && (kb < GRID - 1 || tau[GRID - 1] >= s.cap)) || shifts == 4)
			break;
		x0 = tau[kb];  /* the best is at an edge: re-centre there */
	}
	/* smooth the noise: fit the 7 points around the best, minimise the fit,
	 * and keep the answer within a grid step of the best point */
	lo = kb - 3 < 0 ? 0 : kb + 3 >= GRID ? GRID - 7 : kb - 3;
	for (k = 0; k < 7; k++)
		xs[k] = tau[lo + k] / tau[kb];
	*best = tau[kb];
	old = gsl_set_error_handler_off();
	f.u = tau[kb] / mtbf;
	if (!fit_points(xs, y + lo, 7, &f)) {
		double a = kb > 0 ? tau[kb - 1] : tau[0], b = kb < GRID - 1 ? tau[kb + 1] : tau[GRID - 1];
		*best = tau[kb] * fit_min(&f, a / tau[kb], b / tau[kb]);
	}
	gsl_set_error_handler(old);
	if (*best > s.cap)
		*best = s.cap;
	return 0;
}

/*
 * search.c — trials, the max-batch search and step timing (see search.h).
 */
#include "search.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strategy.h"

/* All ranks agree on rc: the worst outcome wins (error 1/2 over OOM over 0). */
static int agree_rc(struct backend *be, struct rt_comm *world, int rc, struct err *e)
{
	double v[2] = {rc == RT_EOOM, rc != 0 && rc != RT_EOOM};
	int r2 = be->allreduce_host(be, world, v, 2, 1, e);

	if (r2)
		return r2;
	if (v[1])
		return rc && rc != RT_EOOM ? rc : err_set(e, ERR_SYSTEM, NULL, 0, "another rank failed");
	if (v[0])
		return rc ? rc : err_set(e, RT_EOOM, NULL, 0, "another rank ran out of memory");
	return 0;
}

int rt_trial(const struct scenario *s, struct backend *be, struct rt_comm *world, int64_t B,
	     int steps, double capacity, struct rt_trial *out, struct err *e)
{
	struct strat_opts o;
	struct strat st;
	int rc, i, dev = 0;
	double v[1];

	memset(out, 0, sizeof *out);
	strat_opts_from(&o, s);
	o.micro_batch = (int)B;
	o.agree = 1;
	if (capacity > 0)
		o.capacity = capacity;
	if (o.plan.mech == MECH_DP)
		o.devices = (int)s->world;
	rc = strat_init(&st, &o, &s->model, (int)s->seq_len, s->dropout, be, world, e);
	rc = agree_rc(be, world, rc, e);
	for (i = 0; !rc && i < steps; i++)
		rc = strat_step(&st, e);
	if (!rc) {
		v[0] = (double)strat_peak(&st, &dev);
		out->peak_dev = dev;
		out->loss = st.loss;
	}
	if (rc != 0 && rc != RT_EOOM) {
		strat_free(&st);
		return rc;
	}
	strat_free(&st);
	if (rc == RT_EOOM) {
		err_clear(e);
		return 0;
	}
	rc = be->allreduce_host(be, world, v, 1, 1, e);
	out->fits = 1;
	out->peak = v[0];
	return rc;
}

int rt_max_batch(const struct scenario *s, struct backend *be, struct rt_comm *world,
		 double capacity, int64_t limit, int64_t *best, int *trials, struct err *e)
{
	struct rt_trial t;
	int64_t lo = 0, hi = 1;
	int rc;

	*trials = 0;
	/* grow: 1, 2, 4, ... until one fails */
	for (;;) {
		rc = rt_trial(s, be, world, hi, 1, capacity, &t, e);
		++*trials;
		if (rc)
			return rc;
		if (!t.fits)
			break;
		lo = hi;
		if (hi >= limit) {
			*best = hi;
			return 0;
		}
		hi = hi * 2 < limit ? hi * 2 : limit;
	}
	/* bisect: lo fits (or is 0), hi does not */
	while (hi - lo > 1) {
		int64_t mid = lo + (hi - lo) / 2;
		rc = rt_trial(s, be, world, mid, 1, capacity, &t, e);
		++*trials;
		if (rc)
			return rc;
		if (t.fits)
			lo = mid;
		else
			hi = mid;
	}
	/* confirm from clean states: lo fits, lo + 1 does not */
	if (lo > 0) {
		rc = rt_trial(s, be, world, lo, 1, capacity, &t, e);
		++*trials;
		if (!rc && !t.fits)
			return err_set(e, ERR_SYSTEM, NULL, 0, "micro-batch %lld fitted, then did not: "
				       "the trials are not repeatable", (long long)lo);
	}
	rc = rt_trial(s, be, world, lo + 1, 1, capacity, &t, e);
	++*trials;
	if (!rc && t.fits)
		return err_set(e, ERR_SYSTEM, NULL, 0, "micro-batch %lld failed, then fitted: "
			       "the trials are not repeatable", (long long)(lo + 1));
	*best = lo;
	return rc;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int rt_time_steps(const struct scenario *s, struct backend *be, struct rt_comm *world, int64_t B,
		  int warmup, int n, double *median, struct err *e)
{
	struct strat_opts o;
	struct strat st;
	double *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t), v[1];
	int rc, i;

	if (!t)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	strat_opts_from(&o, s);
	o.micro_batch = (int)B;
	o.capacity = 0;  /* the batch is known to fit: no agreement, no limit */
	rc = strat_init(&st, &o, &s->model, (int)s->seq_len, s->dropout, be, world, e);
	rc = agree_rc(be, world, rc, e);
	for (i = 0; !rc && i < warmup + n; i++) {
		double t0;
		rc = be->barrier(be, world, e);
		t0 = now();
		if (!rc)
			rc = strat_step(&st, e);
		be->sync(be);
		v[0] = now() - t0;
		if (!rc)  /* the step ends when the slowest rank's does */
			rc = be->allreduce_host(be, world, v, 1, 1, e);
		if (i >= warmup)
			t[i - warmup] = v[0];
	}
	if (!rc && n > 0) {
		qsort(t, (size_t)n, sizeof *t, cmp);
		*median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
	}
	strat_free(&st);  /* safe after a failed setup too (it leaves st zeroed) */
	free(t);
	return rc;
}

/*
 * jobrun.c — a scenario's job: parameters, run, results and plot (see jobrun.h).
 */
#include "jobrun.h"

#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "progress.h"
#include "units.h"

#define PLOT_POINTS 25
#define PLOT_TRIALS 200       /* per point at most: the plot shows the shape */
#define PLOT_WORK 2e5         /* per point at most, as JOBRUN_SEARCH_WORK */

static int line_of(const struct scenario *s, const char *section, const char *key)
{
	int i = cfg_index(scenario_keys(), section, key), l = i < 0 ? 0 : s->line[i];
	return l < 0 ? 0 : l;
}

static int step_time(const struct scenario *s, const struct prediction *pr, double *step, struct err *e)
{
	if (s->s.job.step_time > 0)
		*step = s->s.job.step_time;
	else if (pr->step.valid && pr->step.time > 0)
		*step = pr->step.time;
	else
		return err_set(e, ERR_INPUT, s->file, line_of(s, "failures", "catalog"),
			       "[failures] needs the step time: set [job] step_time (e.g. step_time = 6.5s), "
			       "or use a scenario the step model can time");
	return 0;
}

/* Failure-free training time (s) of the job, 0 for a fixed window. */
static int work_of(const struct scenario *s, const struct prediction *pr, double step, double *work,
		   struct err *e)
{
	const struct scn_job *j = &s->s.job;
	const struct scn_training *t = &s->s.training;
	double tokens = j->tokens_per_step, mb = t->micro_batch > 0 ? (double)t->micro_batch
		: (double)pr->max_micro_batch;

	*work = 0;
	if (j->steps > 0)
		*work = (double)j->steps * step;
	if (j->train_tokens <= 0)
		return 0;
	if (tokens <= 0 && mb > 0)
		tokens = mb * (double)t->grad_accum * (double)s->dp * (double)s->seq_len;
	if (tokens <= 0)
		return err_set(e, ERR_INPUT, s->file, line_of(s, "job", "train_tokens"),
			       "[job] train_tokens needs the tokens per step: set [job] tokens_per_step, "
			       "or a number for [training] micro_batch");
	*work = ceil(j->train_tokens / tokens - 1e-9) * step;
	return 0;
}

static void components(const struct scenario *s, struct job_params *p)
{
	const struct fail_catalog *cat = &s->failures;
	double timeout = s->s.checkpoint.collective_timeout_minutes * 60;
	int i;

	p->n = cat->n;
	for (i = 0; i < cat->n; i++) {
		const struct fail_component *f = &cat->c[i];
		struct job_component *c = &p->c[i];
		memset(c, 0, sizeof *c);
		c->rate = fail_job_rate(f, s->world, s->s.cluster.nodes);
		c->dist = f->dist;
		c->shape = f->shape;
		if (f->dist == FAIL_WEIBULL && c->rate > 0)
			c->scale = 1 / c->rate / gsl_sf_gamma(1 + 1 / f->shape);
		c->repair = f->repair;
		c->repair_mu = f->repair_median > 0 ? log(f->repair_median) : 0;
		c->repair_sigma = f->repair_sigma;
		c->planned = f->planned;
		c->detect = f->detection == FAIL_DETECT_TIMEOUT ? timeout : s->s.failures.detection_minutes * 60;
	}
}

/* The interval in whole steps: at least one. */
static double in_steps(double interval, double step, int up)
{
	double n = up ? ceil(interval / step - 1e-9) : floor(interval / step + 0.5);
	return (n < 1 ? 1 : n) * step;
}

int jobrun_params(const struct scenario *s, const struct prediction *pr, int mode,
		  struct job_params *p, struct ckpt_cost *c, double *step, struct err *e)
{
	const struct scn_failures *f = &s->s.failures;
	int rc;

	memset(p, 0, sizeof *p);
	rc = step_time(s, pr, step, e);
	if (!rc)
		rc = work_of(s, pr, *step, &p->work, e);
	if (rc)
		return rc;
	if (p->work <= 0)
		p->window = s->s.job.wall_days * 86400;
	ckpt_cost(s, pr->params, pr->step.valid && pr->step.time > 0 ? pr->step.exposed_comm / pr->step.time : 0,
		  mode, c);
	/* an async save's slowdown of training counts as training time lost: the
	 * first interfere seconds of its write hold progress, the rest runs free */
	p->block = c->block + c->interfere;
	p->background = c->background > 0 ? c->background - c->interfere : 0;
	p->block_sync = c->block_sync;
	/* the first save after a start or restart plans anew */
	p->first_extra = mode == CKPT_SYNC ? c->plan_first - c->plan : c->background_first - c->background;
	p->restart = f->restart_minutes * 60 + c->load;
	p->spares = f->spare_nodes;
	p->trials = f->trials;
	p->seed = (uint64_t)f->seed;
	if (s->s.checkpoint.interval_minutes > 0)
		p->interval = in_steps(s->s.checkpoint.interval_minutes * 60, *step, 1);
	components(s, p);
	return 0;
}

/* ---- bounding the work (jobrun.h) ---------------------------------------- */

struct bound {
	double wall;          /* s, expected wall time of a run */
	double rate;          /* interruptions per s of busy time, planned ones too */
	double per_run;       /* expected interruptions of a run */
	double interval;      /* s, the interval estimated at */
};

/* The interval a run is estimated at: the scenario's, else Daly's for the
 * blocking cost (not below an async write) in whole steps, as the search ends. */
static double estimate_interval(const struct job_params *p, double step)
{
	double m = job_mtbf(p), tau;

	if (p->interval > 0)
		return p->interval;
	tau = m < INFINITY ? job_daly(p->block, m) : p->work > 0 ? p->work : p->window;
	if (tau < p->background)
		tau = p->background;
	return in_steps(tau, step, 0);
}

static void estimate(const struct job_params *p, double step, struct bound *x)
{
	double m = job_mtbf(p);
	int i;

	x->interval = estimate_interval(p, step);
	x->rate = 0;
	for (i = 0; i < p->n; i++)
		x->rate += p->c[i].rate;
	if (p->work <= 0)
		x->wall = p->window;
	else if (m < INFINITY)
		x->wall = job_daly_wall(p->work, x->interval, p->block, p->restart, m);
	else
		x->wall = p->work;
	x->per_run = x->rate * x->wall;
}

static const char *length_key(const struct scenario *s)
{
	return s->s.job.train_tokens > 0 ? "train_tokens" : s->s.job.steps > 0 ? "steps" : "wall_days";
}

static int hopeless(const struct scenario *s, const struct job_params *p, double step,
		    const struct bound *x, struct err *e)
{
	char b[5][32];
	/* a step longer than the MTBF is the cause when it is: name it */
	int line = s->s.job.step_time > 0 && step > job_mtbf(p) ? line_of(s, "job", "step_time")
		: line_of(s, "failures", "catalog");

	return err_set(e, ERR_INPUT, s->file, line,
		       "the job cannot keep up with its failures: one every %s (the job's MTBF), restarts of %s "
		       "and checkpoints every %s of training (steps of %s) give an expected wall time (Daly "
		       "2006) more than %.0f times its %s of training, an ETTR below %.1f%%: add spare nodes, "
		       "shorten restarts or steps, or use fewer nodes",
		       units_format(b[0], 32, job_mtbf(p), UNIT_TIME), units_format(b[1], 32, p->restart, UNIT_TIME),
		       units_format(b[2], 32, x->interval, UNIT_TIME), units_format(b[3], 32, step, UNIT_TIME),
		       JOB_MAX_STRETCH, units_format(b[4], 32, p->work, UNIT_TIME), 100 / JOB_MAX_STRETCH);
}

/* Rejects a job whose simulation would not end in useful time (jobrun.h). */
static int bound(const struct scenario *s, const struct job_params *p, double step, struct bound *x,
		 struct err *e)
{
	char b[2][32];
	double most;

	estimate(p, step, x);
	if (p->work > 0 && !(x->wall <= JOB_MAX_STRETCH * p->work))
		return hopeless(s, p, step, x, e);
	if (x->per_run > JOBRUN_MAX_PER_RUN)
		return err_set(e, ERR_INPUT, s->file, line_of(s, "job", length_key(s)),
			       "[job] %s: one run of this job meets about %.3g interruptions (%s at one every %s); "
			       "the job model simulates at most %.0e per run: shorten the job",
			       length_key(s), x->per_run, units_format(b[0], 32, x->wall, UNIT_TIME),
			       units_format(b[1], 32, 1 / x->rate, UNIT_TIME), JOBRUN_MAX_PER_RUN);
	if ((double)p->trials * (x->per_run + JOBRUN_TRIAL_COST) > JOBRUN_MAX_WORK) {
		most = floor(JOBRUN_MAX_WORK / (x->per_run + JOBRUN_TRIAL_COST));
		return err_set(e, ERR_INPUT, s->file, line_of(s, "failures", "trials"),
			       "[failures] trials = %lld: %lld runs of about %.3g interruptions each are more than the "
			       "job model simulates in one go (%.0e trial-interruptions, about a minute): use at "
			       "most %.0f trials", (long long)p->trials, (long long)p->trials, x->per_run,
			       JOBRUN_MAX_WORK, most);
	}
	return 0;
}

/* Trials per interval of the auto search (jobrun.h). */
static int64_t search_trials(const struct job_params *p, const struct bound *x)
{
	double n = floor(JOBRUN_SEARCH_WORK / (x->per_run + JOBRUN_TRIAL_COST));

	if (n > JOBRUN_SEARCH_TRIALS)
		n = JOBRUN_SEARCH_TRIALS;
	if (n > (double)p->trials)
		n = (double)p->trials;
	return n < 1 ? 1 : (int64_t)n;
}

/* Progress over every trial of a prediction: the search's and the final run's. */
struct ticker {
	struct progress pr;
	double base, done, total;
};

static void tick(void *ctx, int64_t k)
{
	struct ticker *t = ctx;

	if (k == 0)
		t->base = t->done;
	t->done = t->base + (double)k;
	if (t->done > t->total)
		t->total = t->done;
	if ((k & 63) == 0)
		progress_show(&t->pr, t->done, t->total, "trials", "(job model)");
}

/* Progress of about total trials, shown after a second (progress.h). */
static void ticker_start(struct ticker *t, double total)
{
	memset(t, 0, sizeof *t);
	progress_start(&t->pr, 1, 1.0);
	t->total = total;
}

/* An error of the simulation itself (job.c knows no file) placed in the
 * scenario's [failures]. */
static int located(const struct scenario *s, int rc, struct err *e)
{
	struct err l = {0};

	if (rc != ERR_INPUT || strncmp(e->msg, s->file, strlen(s->file)) == 0)
		return rc;
	err_set(&l, rc, s->file, line_of(s, "failures", "catalog"), "%s", e->msg);
	*e = l;
	return rc;
}

/* ---- the prediction -------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void warn(struct job_result *j, const char *fmt, ...)
{
	va_list ap;

	if (j->nwarn == JOB_MAX_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(j->warn[j->nwarn++], sizeof j->warn[0], fmt, ap);
	va_end(ap);
}

static void fill(const struct scenario *s, const struct job_params *p, const struct ckpt_cost *c,
		 const struct job_stats *st, double step, struct job_result *j)
{
	double mtbf = job_mtbf(p);
	int i;

	j->valid = 1;
	j->work = p->work;
	j->window = p->window;
	j->step_time = step;
	j->step_from_scenario = s->s.job.step_time > 0;
	j->steps = p->work > 0 ? floor(p->work / step + 0.5) : 0;
	j->wall_days = st->wall / 86400;
	j->wall_days_lo = st->wall_lo / 86400;
	j->wall_days_hi = st->wall_hi / 86400;
	j->wall_days_p025 = st->wall_p025 / 86400;
	j->wall_days_p975 = st->wall_p975 / 86400;
	j->useful = st->useful;
	j->ettr = st->ettr;
	j->ettr_lo = p->work > 0 ? p->work / st->wall_hi : st->useful_lo / p->window;
	j->ettr_hi = p->work > 0 ? p->work / st->wall_lo : st->useful_hi / p->window;
	j->interruptions = st->interruptions;
	j->unexpected = st->unexpected;
	j->planned = st->planned;
	j->ckpt_interval = p->interval;
	j->mtbf = mtbf < INFINITY ? mtbf : 0;
	j->young = mtbf < INFINITY ? job_young(p->block, mtbf) : 0;
	j->daly = mtbf < INFINITY ? job_daly(p->block, mtbf) : 0;
	j->lost = st->lost;
	j->ckpt_overhead = st->ckpt;
	j->downtime = st->down;
	j->checkpoints = st->checkpoints;
	j->waits = st->waits;
	j->ckpt_bytes = c->bytes;
	j->ckpt_bytes_per_param = c->bytes_per_param;
	j->ckpt_block = c->block;
	j->ckpt_background = c->background;
	j->ckpt_background_first = c->background_first;
	j->ckpt_stage = c->stage;
	j->ckpt_state_dict = c->state_dict;
	j->ckpt_plan = c->plan;
	j->ckpt_plan_first = c->plan_first;
	j->ckpt_gather = c->gather;
	j->ckpt_serialize = c->serialize;
	j->ckpt_store = c->store;
	j->ckpt_node_bw = c->node_bw;
	j->ckpt_meta = c->meta;
	j->ckpt_slowdown = c->slowdown;
	j->ckpt_interfere = c->interfere;
	j->ckpt_node_bytes = c->l.node;
	j->ckpt_rank_bytes = c->l.rank;
	j->ckpt_writers = c->l.writers;
	j->ckpt_block_sync = c->block_sync;
	j->ckpt_host = c->host;
	j->ckpt_load = c->load;
	j->restart = p->restart;
	j->trials = p->trials;
	j->seed = (int64_t)p->seed;
	j->spares = p->spares;
	j->ncomp = s->failures.n;
	for (i = 0; i < s->failures.n; i++) {
		snprintf(j->comp[i], sizeof j->comp[i], "%s", s->failures.c[i].name);
		j->comp_planned[i] = s->failures.c[i].planned;
		j->comp_interruptions[i] = st->by_comp[i];
	}
	for (i = 0; i < c->nwarn; i++)
		warn(j, "%s", c->warn[i]);
}

int jobrun_predict(const struct scenario *s, struct prediction *pr, struct err *e)
{
	struct job_params p, q;
	struct ckpt_cost c;
	struct job_stats st;
	struct job_sim *w = NULL;
	struct job_result *j = &pr->job;
	struct bound x;
	struct ticker t;
	double step, best;
	char b[2][32];
	int rc, is_auto;

	memset(j, 0, sizeof *j);
	if (s->s.job.step_time <= 0 && pr->step.valid && !pr->step.timed) {
		j->not_run = 1;  /* no step time: the configuration does not fit in memory */
		return 0;
	}
	rc = jobrun_params(s, pr, s->s.checkpoint.mode, &p, &c, &step, e);
	if (!rc)
		rc = bound(s, &p, step, &x, e);
	if (rc)
		return rc;
	is_auto = p.interval <= 0;
	q = p;
	q.trials = search_trials(&p, &x);
	ticker_start(&t, (double)p.trials + (is_auto ? 13.0 * (double)q.trials : 0));
	p.tick = q.tick = tick;
	p.tick_ctx = q.tick_ctx = &t;
	rc = job_sim_new(&w, &p, e);
	if (!rc && is_auto) {
		rc = job_optimize(w, &q, &best, e);
		p.interval = in_steps(best, step, 0);
	}
	if (!rc)
		rc = job_sim_run(w, &p, 1, &st, e);
	progress_end(&t.pr);
	job_sim_free(w);
	if (rc)
		return located(s, rc, e);
	fill(s, &p, &c, &st, step, j);
	j->interval_auto = is_auto;
	j->search_trials = is_auto ? q.trials : 0;
	j->expected_interruptions = x.per_run;
	if (!is_auto && p.background > p.interval)
		warn(j, "checkpoints every %s of training are closer than the background write (%s): "
		     "training waits for each write", units_format(b[0], 32, p.interval, UNIT_TIME),
		     units_format(b[1], 32, p.background, UNIT_TIME));
	if (st.waits >= 0.5)
		warn(j, "the job waited %.1f times per run for a node back from repair: spare_nodes = %lld "
		     "is too few for the repair times", st.waits, (long long)p.spares);
	return 0;
}

/* ---- the plot ---------------------------------------------------------- */

/* Trials per point of the plot: PLOT_TRIALS at most, and PLOT_WORK. */
static int plot_trials(const struct scenario *s, const struct prediction *pr, int64_t *n, struct err *e)
{
	struct job_params p;
	struct ckpt_cost c;
	struct bound x;
	double step, k;
	int rc = jobrun_params(s, pr, s->s.checkpoint.mode, &p, &c, &step, e);

	if (rc)
		return rc;
	estimate(&p, step, &x);
	k = floor(PLOT_WORK / (x.per_run + JOBRUN_TRIAL_COST));
	if (k > PLOT_TRIALS)
		k = PLOT_TRIALS;
	if (k > (double)p.trials)
		k = (double)p.trials;
	*n = k < 1 ? 1 : (int64_t)k;
	return 0;
}

/* ETTR at n intervals taus for mode with trials trials each; into ettr. */
static int sweep(const struct scenario *s, const struct prediction *pr, int mode, const double *taus,
		 int n, int64_t trials, double *ettr, struct ticker *t, struct err *e)
{
	struct job_params p;
	struct ckpt_cost c;
	struct job_stats st;
	struct job_sim *w = NULL;
	double step;
	int rc, i;

	rc = jobrun_params(s, pr, mode, &p, &c, &step, e);
	p.trials = trials;
	p.tick = tick;
	p.tick_ctx = t;
	if (!rc)
		rc = job_sim_new(&w, &p, e);
	for (i = 0; i < n && !rc; i++) {
		p.interval = taus[i];
		rc = job_sim_run(w, &p, 0, &st, e);
		ettr[i] = st.ettr;
	}
	job_sim_free(w);
	return rc;
}

/* The intervals to plot: log-spaced around both modes' Daly intervals. */
static int grid(const struct scenario *s, const struct prediction *pr, double *taus, struct err *e)
{
	struct job_params ps, pa;
	struct ckpt_cost cs, ca;
	double step, mtbf, ts, ta, lo, hi, cap;
	int rc, i;

	rc = jobrun_params(s, pr, CKPT_SYNC, &ps, &cs, &step, e);
	if (!rc)
		rc = jobrun_params(s, pr, CKPT_ASYNC, &pa, &ca, &step, e);
	if (rc)
		return rc;
	mtbf = job_mtbf(&ps);
	cap = ps.work > 0 ? ps.work : ps.window;
	ts = mtbf < INFINITY ? job_daly(ps.block, mtbf) : cap;
	ta = mtbf < INFINITY ? job_daly(pa.block, mtbf) : cap;
	if (ta < pa.background)
		ta = pa.background;
	lo = (ts < ta ? ts : ta) / 8;
	hi = (ts > ta ? ts : ta) * 8;
	if (lo < step)
		lo = step;
	if (hi > cap)
		hi = cap;
	if (hi < lo * 4)
		hi = lo * 4;
	for (i = 0; i < PLOT_POINTS; i++)
		taus[i] = lo * pow(hi / lo, (double)i / (PLOT_POINTS - 1));
	return 0;
}

static void script(FILE *g, const struct scenario *s, const struct prediction *pr, const char *out,
		   const double *taus, const double *es, const double *ea, int64_t trials)
{
	int i;

	fprintf(g, "set terminal pngcairo size 960,600 font 'sans,10'\n");
	fprintf(g, "set output '%s'\n", out);
	fprintf(g, "set title \"%s on %lld x %s: ETTR against checkpoint interval (%lld trials per point)\" noenhanced\n",
		s->model.name, (long long)s->world, s->gpu.name, (long long)trials);
	fprintf(g, "set logscale x\nset grid\nset key bottom center\n");
	fprintf(g, "set xlabel 'checkpoint interval (minutes of training)'\nset ylabel 'ETTR (%%)'\n");
	fprintf(g, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'gray40'\n",
		pr->job.ckpt_interval / 60, pr->job.ckpt_interval / 60);
	fprintf(g, "set label 'scenario: %.3g min' at %g, graph 0.05 offset 0.5,0 noenhanced\n",
		pr->job.ckpt_interval / 60, pr->job.ckpt_interval / 60);
	fprintf(g, "$sync << EOD\n");
	for (i = 0; i < PLOT_POINTS; i++)
		fprintf(g, "%.9g %.9g\n", taus[i] / 60, 100 * es[i]);
	fprintf(g, "EOD\n$async << EOD\n");
	for (i = 0; i < PLOT_POINTS; i++)
		fprintf(g, "%.9g %.9g\n", taus[i] / 60, 100 * ea[i]);
	fprintf(g, "EOD\n");
	fprintf(g, "plot $sync using 1:2 with linespoints pt 7 ps 0.6 title 'sync save', "
		"$async using 1:2 with linespoints pt 5 ps 0.6 title 'async save'\n");
}

int jobrun_plot(const struct scenario *s, const struct prediction *pr, const char *png,
		struct err *e)
{
	double taus[PLOT_POINTS], es[PLOT_POINTS], ea[PLOT_POINTS];
	char tmp[4096];
	struct ticker t;
	int64_t trials = 0;
	FILE *g;
	int rc, status;

	if (pr->job.not_run)
		return err_set(e, ERR_INPUT, s->file, 0, "--plot: the job was not simulated (the configuration does "
			       "not fit in memory, so it has no step time; set [job] step_time)");
	if (!pr->job.valid)
		return err_set(e, ERR_INPUT, s->file, 0, "--plot needs a [failures] section (the job simulation)");
	if (strpbrk(png, "'\"\n\\") || strlen(png) + 8 > sizeof tmp)
		return err_set(e, ERR_INPUT, "--plot", 0, "'%s': the path may not contain quotes, backslashes or newlines", png);
	rc = grid(s, pr, taus, e);
	if (!rc)
		rc = plot_trials(s, pr, &trials, e);
	ticker_start(&t, 2.0 * PLOT_POINTS * (double)trials);
	if (!rc)
		rc = sweep(s, pr, CKPT_SYNC, taus, PLOT_POINTS, trials, es, &t, e);
	if (!rc)
		rc = sweep(s, pr, CKPT_ASYNC, taus, PLOT_POINTS, trials, ea, &t, e);
	progress_end(&t.pr);
	if (rc)
		return rc;
	snprintf(tmp, sizeof tmp, "%s.tmp", png);
	g = popen("gnuplot", "w");
	if (!g)
		return err_set(e, ERR_SYSTEM, NULL, 0, "--plot: cannot run gnuplot");
	script(g, s, pr, tmp, taus, es, ea, trials);
	status = pclose(g);
	if (status != 0) {
		unlink(tmp);
		return err_set(e, ERR_SYSTEM, NULL, 0, "--plot: gnuplot failed (status %d); is gnuplot installed (make deps)?", status);
	}
	if (rename(tmp, png) != 0) {
		unlink(tmp);
		return err_set(e, ERR_SYSTEM, png, 0, "--plot: cannot write the plot");
	}
	return 0;
}

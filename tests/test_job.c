/*
 * test_job.c — the job simulation against Daly's closed forms (Daly 2006,
 * "A higher order estimate of the optimum checkpoint interval for restart
 * dumps", FGCS 22(3)), the Llama 3 interruption counts its catalog is derived
 * from, and the mechanisms: async against sync saves, spare nodes, the
 * accounting of time, determinism and the catalog loader (checkpoint costs:
 * test_ckpt.c).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "failures.h"
#include "job.h"
#include "jobrun.h"
#include "predict.h"
#include "report.h"
#include "scenario.h"

#define MIN 60.0
#define HOUR 3600.0

/* One exponential component of MTBF mtbf, nothing to repair, detected at once:
 * Daly's model. */
static void daly_job(struct job_params *p, double mtbf, double delta, double restart, double tau,
		     double work, int64_t trials)
{
	memset(p, 0, sizeof *p);
	p->work = work;
	p->interval = tau;
	p->block = delta;
	p->block_sync = delta;
	p->restart = restart;
	p->trials = trials;
	p->seed = 1;
	p->n = 1;
	p->c[0].rate = 1 / mtbf;
	p->c[0].dist = FAIL_EXPONENTIAL;
}

static int run(struct job_params *p, struct job_stats *st)
{
	struct job_sim *w = NULL;
	struct err e = {0};
	int rc = job_sim_new(&w, p, &e);

	if (!rc)
		rc = job_sim_run(w, p, 1, st, &e);
	job_sim_free(w);
	cr_assert_eq(rc, 0, "%s", e.msg);
	return rc;
}

/* Daly's T_w = M e^{R/M} (e^{(τ+δ)/M} − 1) T_s/τ is exact for exponential
 * failures that may also strike during checkpoints and restarts, which is what
 * the simulation does: over δ/M from 0.001 to 0.5 its mean wall time must
 * contain the closed form. The interval is 3 standard errors (99.7%): the six
 * comparisons share one seed (the default, 1) and so one failure history, and
 * across 40 other seeds the deviation at δ/M = 0.001 was distributed as
 * N(−0.04, 1.03) standard errors — the model has no bias the test could miss. */
Test(job, daly_closed_form_wall_time)
{
	const double ratios[] = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5};
	const double M = 6 * HOUR, R = 10 * MIN;
	size_t i;

	for (i = 0; i < sizeof ratios / sizeof ratios[0]; i++) {
		struct job_params p;
		struct job_stats st;
		double delta = ratios[i] * M, tau = job_daly(delta, M);
		double work = ceil(40 * M / tau) * tau;  /* whole intervals, about 40 failures a run */
		double want, se;

		daly_job(&p, M, delta, R, tau, work, 2000);
		run(&p, &st);
		want = job_daly_wall(work, tau, delta, R, M);
		se = st.wall_sd / sqrt((double)st.trials);
		cr_expect(fabs(st.wall - want) <= 3 * se,
			  "delta/M = %g: simulated %.6g s, Daly %.6g s (%.3f%%), 3 SE = %.3g s", ratios[i],
			  st.wall, want, 100 * (st.wall / want - 1), 3 * se);
		cr_expect(fabs(st.wall / want - 1) < 0.01, "delta/M = %g: %.3f%% off", ratios[i],
			  100 * (st.wall / want - 1));
	}
}

/* Daly (2006) works his estimate for R = 10 min, δ = 5 min: 117, 57 and 9.1
 * min for M = 24 h, 6 h and 15 min. */
Test(job, daly_estimate_reproduces_dalys_examples)
{
	cr_expect_float_eq(job_daly(5 * MIN, 24 * HOUR) / MIN, 117, 117 * 0.005);
	cr_expect_float_eq(job_daly(5 * MIN, 6 * HOUR) / MIN, 57, 57 * 0.006);
	cr_expect_float_eq(job_daly(5 * MIN, 15 * MIN) / MIN, 9.1, 9.1 * 0.006);
	cr_expect_float_eq(job_young(5 * MIN, 24 * HOUR) / MIN, 120, 1e-9, "sqrt(2 x 5 x 1440)");
}

/* The search finds the interval that minimises the simulated wall time; where
 * δ ≪ M (δ/M = 0.0035 and 0.014 in Daly's examples) that is Daly's estimate
 * within 2%. For M = 15 min (δ/M = 1/3, not small) Daly's estimate and the
 * exact optimum of T_w (9.17 min) still agree within 1%. */
Test(job, optimum_interval_matches_daly)
{
	const double mtbfs[] = {24 * HOUR, 6 * HOUR, 15 * MIN};
	const double tol[] = {0.02, 0.02, 0.03};
	size_t i;

	for (i = 0; i < 3; i++) {
		struct job_params p;
		struct job_sim *w = NULL;
		struct err e = {0};
		double M = mtbfs[i], daly = job_daly(5 * MIN, M), best = 0;
		int rc;

		daly_job(&p, M, 5 * MIN, 10 * MIN, daly, 200 * M, 2000);
		rc = job_sim_new(&w, &p, &e);
		if (!rc)
			rc = job_optimize(w, &p, &best, &e);
		job_sim_free(w);
		cr_assert_eq(rc, 0, "%s", e.msg);
		fprintf(stderr, "optimum: M = %g h: %.3f min, Daly %.3f min (%+.2f%%)\n", M / HOUR, best / MIN, daly / MIN, 100 * (best / daly - 1));
		cr_expect(fabs(best / daly - 1) < tol[i], "M = %g h: optimum %.2f min, Daly %.2f min (%.2f%%)",
			  M / HOUR, best / MIN, daly / MIN, 100 * (best / daly - 1));
	}
}

/* Where δ is not small Daly's estimate is off, and the search must find the
 * simulated optimum instead: for δ = 2M Daly gives τ = M, while the exact
 * optimum of T_w (the root of e^{x+δ/M}(1 − x) = 1, where d/dτ of
 * (e^{(τ+δ)/M} − 1)/τ vanishes) is τ = 0.94753 M, 5.2% below. */
Test(job, optimum_interval_where_daly_is_off)
{
	struct job_params p;
	struct job_sim *w = NULL;
	struct err e = {0};
	double M = HOUR, best = 0;
	int rc;

	/* a long window rather than a fixed amount of work, whose last, shorter
	 * interval would put a saw-tooth in the wall time as τ varies */
	daly_job(&p, M, 2 * M, 10 * MIN, M, 0, 1000);
	p.window = 2000 * M;
	rc = job_sim_new(&w, &p, &e);
	if (!rc)
		rc = job_optimize(w, &p, &best, &e);
	job_sim_free(w);
	cr_assert_eq(rc, 0, "%s", e.msg);
	fprintf(stderr, "optimum: delta = 2M: %.4f M (exact 0.94753 M, Daly 1)\n", best / M);
	cr_expect(fabs(best / (0.94753 * M) - 1) < 0.02, "optimum %.4f M, exact 0.94753 M", best / M);
}

static char path[64];

static void write_file(const char *text)
{
	FILE *f;
	snprintf(path, sizeof path, "/tmp/shardcast-job-%d.ini", (int)getpid());
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

static void predict(const char *file, const char *const *sets, int nset, struct scenario *s,
		    struct prediction *p)
{
	struct err e = {0};
	int rc = scenario_load(s, file, sets, nset, &e);

	if (!rc)
		rc = predict_run(s, p, &e);
	cr_assert_eq(rc, 0, "%s", e.msg);
}

/* The catalog is derived from the Llama 3 paper's 54-day table: at 16,384
 * GPUs over 54 days it must give its 419 unexpected (and 47 planned)
 * interruptions. The spread of a Poisson count of 419 is sqrt(419) per run.
 * (The failure clocks stop while a hang waits for the collective timeout:
 * 7 hangs x 10 min a run take about 0.4 off the 419.) */
Test(job, llama3_catalog_gives_419_unexpected_interruptions)
{
	struct scenario s;
	struct prediction p;
	double se = sqrt(419.0 / 1000);

	predict("scenarios/llama3-405b-16k.ini", NULL, 0, &s, &p);
	cr_assert_eq(p.job.trials, 1000);
	cr_assert(p.job.valid);
	cr_expect_eq(s.world, 16384);
	cr_expect(fabs(p.job.unexpected - 419) < 3 * se + 0.5, "unexpected %.2f, want 419", p.job.unexpected);
	cr_expect(fabs(p.job.planned - 47) < 3 * sqrt(47.0 / 1000), "planned %.2f, want 47", p.job.planned);
	cr_expect_float_eq(p.job.mtbf / HOUR, 1296.0 / 419, 1e-9, "one unexpected per 3.09 h");
	/* the paper reports an effective training time above 90% */
	cr_expect(p.job.ettr > 0.90, "ETTR %.3f", p.job.ettr);
	scenario_free(&s);
}

static const char *small =
	"[model]\nname = llama-2-70b\nseq_len = 4096\n"
	"[cluster]\ngpu = h100-sxm5-80gb\nnodes = 128\ngpus_per_node = 8\nintra_node = nvlink4\n"
	"inter_node = ib-ndr\nnics_per_node = 8\n"
	"[training]\nstrategy = fsdp\nprecision = bf16\nmicro_batch = 1\ntensor_parallel = 8\n"
	"[failures]\ncatalog = llama3-h100\ntrials = 300\nspare_nodes = 16\n"
	"[checkpoint]\nmode = sync\nstorage_bandwidth = 100GB/s\n"
	"[job]\nstep_time = 4s\ntrain_tokens = 2e11\n";

static char *render(const struct scenario *s, const struct prediction *p)
{
	char *text = NULL, *json = report_json(s, p);
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	cr_assert(f && json);
	report_text(f, s, p);
	fputs(json, f);
	fclose(f);
	free(json);
	return text;
}

/* Same scenario and seed: byte-identical report and JSON (STYLE.md). */
Test(job, identical_seeds_give_identical_reports)
{
	const char *other[] = {"failures.seed=2"};
	struct scenario s;
	struct prediction p;
	char *a, *b, *c;

	write_file(small);
	predict(path, NULL, 0, &s, &p);
	a = render(&s, &p);
	scenario_free(&s);
	predict(path, NULL, 0, &s, &p);
	b = render(&s, &p);
	scenario_free(&s);
	predict(path, other, 1, &s, &p);
	c = render(&s, &p);
	scenario_free(&s);
	cr_expect_str_eq(a, b);
	cr_expect(strcmp(a, c) != 0, "another seed must give other trials");
	free(a);
	free(b);
	free(c);
}

/* A slow write (a 70B model's 0.84 TB at 1 GB/s: 14 min) blocks a sync save
 * for all of it, an async one only for the copy to host memory: async must
 * finish sooner, and the sync save must be warned about as longer than the
 * 10-minute collective timeout. */
Test(job, async_beats_sync_when_the_write_is_slow)
{
	const char *sync[] = {"checkpoint.storage_bandwidth=1GB/s", "checkpoint.mode=sync"};
	const char *async[] = {"checkpoint.storage_bandwidth=1GB/s", "checkpoint.mode=async"};
	struct scenario s;
	struct prediction ps, pa;

	write_file(small);
	predict(path, sync, 2, &s, &ps);
	scenario_free(&s);
	predict(path, async, 2, &s, &pa);
	scenario_free(&s);
	cr_assert(ps.job.valid && pa.job.valid);
	cr_expect(ps.job.ckpt_block > 10 * MIN, "sync save %.0f s", ps.job.ckpt_block);
	cr_expect(pa.job.wall_days_hi < ps.job.wall_days_lo, "async %.3f [%.3f, %.3f] days, sync %.3f [%.3f, %.3f]",
		  pa.job.wall_days, pa.job.wall_days_lo, pa.job.wall_days_hi, ps.job.wall_days,
		  ps.job.wall_days_lo, ps.job.wall_days_hi);
	cr_expect(ps.job.nwarn >= 1 && strstr(ps.job.warn[0], "collective timeout"), "%s", ps.job.warn[0]);
	cr_expect_eq(pa.job.nwarn, 0);
}

/* Hardware failures take a node out for its repair (lognormal, median 24-48 h
 * in the catalog): without spares the job waits for it; with spares it does
 * not. */
Test(job, spares_shorten_the_job_when_repairs_are_slow)
{
	const char *none[] = {"failures.spare_nodes=0"};
	const char *some[] = {"failures.spare_nodes=16"};
	struct scenario s;
	struct prediction p0, p16;

	write_file(small);
	predict(path, none, 1, &s, &p0);
	scenario_free(&s);
	predict(path, some, 1, &s, &p16);
	scenario_free(&s);
	cr_expect(p16.job.wall_days_hi < p0.job.wall_days_lo, "16 spares %.2f days, none %.2f days",
		  p16.job.wall_days, p0.job.wall_days);
	cr_expect(p0.job.waits > 0.5, "waits without spares: %.2f", p0.job.waits);
	cr_expect(p16.job.waits < 0.05, "waits with 16 spares: %.2f", p16.job.waits);
}

/* A mix of everything (Weibull and exponential, swaps, a repair in place, a
 * hang, planned stops, async saves): every second of a run is training kept,
 * training lost, blocked by checkpoints or down, so the means add up; and
 * skipping whole checkpoint periods between events changes nothing. */
static void mixed(struct job_params *p, double work, double window)
{
	memset(p, 0, sizeof *p);
	p->work = work;
	p->window = window;
	p->interval = 20 * MIN;
	p->block = 5;
	p->background = 25 * MIN;  /* longer than the interval: training waits */
	p->block_sync = 90;
	p->restart = 8 * MIN;
	p->spares = 2;
	p->trials = 400;
	p->seed = 11;
	p->n = 4;
	p->c[0] = (struct job_component){.rate = 1 / (5 * HOUR), .dist = FAIL_WEIBULL, .shape = 0.7,
		.scale = 5 * HOUR / 1.26582, .repair = FAIL_REPAIR_SWAP, .repair_mu = log(20 * HOUR), .repair_sigma = 1};
	p->c[1] = (struct job_component){.rate = 1 / (9 * HOUR), .repair = FAIL_REPAIR_IN_PLACE,
		.repair_mu = log(HOUR), .repair_sigma = 0.5};
	p->c[2] = (struct job_component){.rate = 1 / (30 * HOUR), .detect = 10 * MIN};
	p->c[3] = (struct job_component){.rate = 1 / (40 * HOUR), .planned = 1};
}

Test(job, time_accounting_closes_and_skipping_changes_nothing)
{
	struct job_params p, q;
	struct job_stats a, b;
	int mode;

	for (mode = 0; mode < 2; mode++) {
		mixed(&p, mode ? 0 : 30 * 24 * HOUR, mode ? 30 * 24 * HOUR : 0);
		run(&p, &a);
		cr_expect_float_eq(a.wall, a.useful + a.lost + a.ckpt + a.down, 1e-6 * a.wall,
				   "wall %.6g = kept %.6g + lost %.6g + ckpt %.6g + down %.6g", a.wall, a.useful,
				   a.lost, a.ckpt, a.down);
		q = p;
		q.no_skip = 1;
		run(&q, &b);
		cr_expect_float_eq(a.wall, b.wall, 1e-9 * a.wall);
		cr_expect_float_eq(a.useful, b.useful, 1e-9 * a.useful);
		cr_expect_float_eq(a.lost, b.lost, 1e-6 * a.lost);
		cr_expect_float_eq(a.checkpoints, b.checkpoints, 1e-9 * a.checkpoints);
		cr_expect_float_eq(a.interruptions, b.interruptions, 1e-12);
		cr_expect(a.waits > 0 && a.planned > 0, "every path taken");
	}
}

/* A Weibull component is a renewal process whose mean time between failures
 * is 1 / rate: over a window T it fails about T x rate times (renewal theorem;
 * starting at a renewal adds (CV² − 1)/2 ≈ 0.57 for shape 0.7). */
Test(job, weibull_component_keeps_its_rate)
{
	struct job_params p;
	struct job_stats st;
	double k = 0.7, mean = HOUR, T = 1000 * HOUR, failures;

	memset(&p, 0, sizeof p);
	p.window = T;
	p.interval = 30 * MIN;
	p.block = 10;
	p.block_sync = 10;
	p.restart = 1;
	p.trials = 500;
	p.seed = 3;
	p.n = 1;
	p.c[0] = (struct job_component){.rate = 1 / mean, .dist = FAIL_WEIBULL, .shape = k,
		.scale = mean / tgamma(1 + 1 / k)};
	run(&p, &st);
	failures = st.interruptions;
	cr_expect(fabs(failures - 1000.57) < 0.01 * 1000, "%.1f failures in 1000 mean intervals", failures);
}

/* Without [job] step_time and without a step model there is no step time to
 * simulate with: a clear error, not an invented figure. */
Test(job, no_step_time_is_an_error)
{
	const char *sets[] = {"job.step_time=1s"};
	struct scenario s;
	struct prediction p;
	struct job_params jp;
	struct ckpt_cost c;
	struct err e = {0};
	double step;
	char *text = strdup(small), *cut = strstr(text, "step_time = 4s\n");

	memmove(cut, cut + strlen("step_time = 4s\n"), strlen(cut + strlen("step_time = 4s\n")) + 1);
	write_file(text);
	free(text);
	cr_assert_eq(scenario_load(&s, path, NULL, 0, &e), 0, "%s", e.msg);
	memset(&p, 0, sizeof p);
	p.params = 7e10;
	cr_expect_eq(jobrun_params(&s, &p, CKPT_SYNC, &jp, &c, &step, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "[failures] needs the step time: set [job] step_time") != NULL, "%s", e.msg);
	scenario_free(&s);
	/* the step model's time when there is one, [job] step_time over it */
	err_clear(&e);
	cr_assert_eq(scenario_load(&s, path, NULL, 0, &e), 0, "%s", e.msg);
	p.step.valid = 1;
	p.step.time = 3;
	cr_expect_eq(jobrun_params(&s, &p, CKPT_SYNC, &jp, &c, &step, &e), 0, "%s", e.msg);
	cr_expect_eq(step, 3);
	scenario_free(&s);
	cr_assert_eq(scenario_load(&s, path, sets, 1, &e), 0, "%s", e.msg);
	cr_expect_eq(jobrun_params(&s, &p, CKPT_SYNC, &jp, &c, &step, &e), 0, "%s", e.msg);
	cr_expect_eq(step, 1);
	/* 2e11 tokens in steps of 1 x 1 x 128 x 4096 tokens */
	cr_expect_float_eq(jp.work, ceil(2e11 / (128.0 * 4096)) * 1, 1e-6);
	scenario_free(&s);
}

/* The catalog's rates are its counts over the window and the fleet. */
Test(job, llama3_catalog_rates)
{
	struct fail_catalog cat;
	struct err e = {0};
	double unexpected = 0;
	int i;

	cr_assert_eq(fail_load("llama3-h100", &cat, "test", 0, &e), 0, "%s", e.msg);
	cr_expect_eq(cat.n, 19);
	cr_expect_str_eq(cat.c[0].name, "faulty-gpu");
	cr_expect_float_eq(cat.c[0].rate, 148.0 / (1296 * 16384), 1e-18);
	for (i = 0; i < cat.n; i++)
		if (!cat.c[i].planned)
			unexpected += fail_job_rate(&cat.c[i], 16384, 2048) * 1296 * HOUR;
	cr_expect_float_eq(unexpected, 419, 1e-9, "the paper's counts sum to 419");
	cr_expect_float_eq(fail_job_rate(&cat.c[0], 8, 1) * HOUR, 8 * 148.0 / (1296 * 16384), 1e-15,
			   "a GPU part scales with GPUs");
}

static void expect_catalog_error(const char *text, const char *want)
{
	struct fail_catalog cat;
	struct err e = {0};

	write_file(text);
	cr_expect_eq(fail_load(path, &cat, "test", 0, &e), ERR_INPUT, "%s", text);
	cr_expect(strstr(e.msg, want) != NULL, "'%s' lacks '%s'", e.msg, want);
}

Test(job, catalog_errors)
{
	expect_catalog_error("[a]\nper = gpu\ndistribution = weibull\nrate = 1e-5\n",
			     ":1: [a]: distribution = weibull needs shape");
	expect_catalog_error("[a]\nper = gpu\nrate = 1e-5\n[b]\nper = node\ncount_in_window = 3\n",
			     ":4: [b]: count_in_window needs window_hours");
	expect_catalog_error("[a]\nrate = 1e-5\n", "[a]: missing key 'per'");
	expect_catalog_error("[a]\nper = gpu\nrate = 1e-5\nrepair = swap\n", "repair = swap needs repair_median");
	expect_catalog_error("[a]\nper = gpu\nrate = 1e-5\nrepiar = swap\n", "did you mean 'repair'?");
	expect_catalog_error("; nothing\n", "no components");
}

/* The job model's work is bounded before it runs (jobrun.h). Each of these
 * ran without end before (a 10 s timeout fails the test): too many trials,
 * a job of billions of interruptions, a step far longer than the MTBF, and a
 * job whose failures outpace its restarts. The small job meets about 44
 * interruptions a run (its report), a trial costs about 6 more
 * (JOBRUN_TRIAL_COST): 6e7 / 50 = 1.2 million trials at most. */
static int predict_error(const char *const *sets, int nset, struct err *e)
{
	struct scenario s;
	struct prediction p;
	int rc;

	memset(e, 0, sizeof *e);
	write_file(small);
	rc = scenario_load(&s, path, sets, nset, e);
	cr_assert_eq(rc, 0, "%s", e->msg);
	rc = predict_run(&s, &p, e);
	scenario_free(&s);
	return rc;
}

Test(job, too_many_trials_are_refused_with_the_most_allowed, .timeout = 10)
{
	const char *sets[] = {"failures.trials=10000000"}, *most;
	struct err e;
	double n;

	cr_assert_eq(predict_error(sets, 1, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "shardcast-job-") && strstr(e.msg, "[failures] trials = 10000000"), "%s", e.msg);
	most = strstr(e.msg, "use at most ");
	cr_assert(most, "%s", e.msg);
	n = atof(most + strlen("use at most "));
	cr_expect(n > 1.0e6 && n < 1.4e6, "about 1.2 million trials: %s", e.msg);
}

Test(job, a_job_of_billions_of_interruptions_is_refused, .timeout = 10)
{
	/* 1e18 tokens at 524,288 a step of 4 s: 7.6e12 s, one interruption per ~10 h */
	const char *sets[] = {"job.train_tokens=1e18"};
	struct err e;

	cr_assert_eq(predict_error(sets, 1, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "[job] train_tokens") && strstr(e.msg, "at most 1e+06 per run"), "%s", e.msg);
}

Test(job, a_step_far_longer_than_the_mtbf_is_refused, .timeout = 10)
{
	/* a checkpoint only between steps: a step of 11.6 days against an MTBF
	 * of 15 h almost never completes (Daly's T_w: e^(1e6 / 5.5e4) ~ 1e8) */
	const char *sets[] = {"job.step_time=1e6"};
	struct err e;

	cr_assert_eq(predict_error(sets, 1, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "cannot keep up with its failures") && strstr(e.msg, "ETTR below 0.1%"), "%s", e.msg);
}

Test(job, a_job_that_makes_no_progress_says_so_without_contradiction, .timeout = 10)
{
	/* 800,000 GPUs: an interruption every 4.5 min against restarts of hours
	 * (reading the checkpoint): refused before it runs, by Daly's T_w */
	const char *big[] = {"cluster.nodes=100000"};
	/* 160,000 GPUs, no spare node, 1-2 day repairs: runs wait for repairs,
	 * which the estimate does not see; the run stops at 1000 x its work. The
	 * message used to say "does not finish" and, in the same sentence, that
	 * 93.9% was kept: the run progresses, at an ETTR below 0.1% */
	const char *waits[] = {"cluster.nodes=20000", "failures.spare_nodes=0"};
	struct err e;

	cr_assert_eq(predict_error(big, 1, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "does not finish") == NULL, "%s", e.msg);
	cr_expect(strstr(e.msg, "cannot keep up with its failures") && strstr(e.msg, "ETTR below 0.1%"), "%s", e.msg);
	cr_assert_eq(predict_error(waits, 2, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "does not finish") == NULL, "%s", e.msg);
	cr_expect(strstr(e.msg, "makes almost no progress") && strstr(e.msg, "ETTR below 0.1%") &&
		  strstr(e.msg, "waits for repairs"), "%s", e.msg);
	cr_expect(strstr(e.msg, "shardcast-job-"), "names the scenario: %s", e.msg);
}

Test(job, the_interval_search_is_bounded_and_says_so, .timeout = 30)
{
	const char *sets[] = {"failures.trials=3000"};
	struct scenario s;
	struct prediction p;

	write_file(small);
	predict(path, sets, 1, &s, &p);
	cr_expect_eq(p.job.trials, 3000);
	cr_expect_eq(p.job.search_trials, JOBRUN_SEARCH_TRIALS, "at most 1000 per interval");
	cr_expect(p.job.expected_interruptions > 20 && p.job.expected_interruptions < 80, "%g per run",
		  p.job.expected_interruptions);
	scenario_free(&s);
}

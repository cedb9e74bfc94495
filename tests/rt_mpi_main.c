/*
 * rt_mpi_main.c — the strategies under mpirun (tests/mpi.sh runs it with 4
 * ranks): every strategy's loss sequence against one rank training on the same
 * global batch, gathered shards against the single-rank parameters, sharded
 * checkpoint resume, and agreement on an out-of-memory trial.
 *
 * The reference runs on every rank alone (a world of one) with micro-batch
 * world x B, so the same samples make up each step; the strategies differ from
 * it only in the order of fp32 summations: relative difference < 1e-5.
 * Prints "ok"/"FAIL" lines and "mpi: N passed, N failed" (rank 0).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "rtckpt.h"
#include "strategy.h"

enum { STEPS = 10, B = 2, T = 32 };

static struct backend *be;
static struct rt_comm world, self;
static struct model model;
static int pass, fail;

#include <stdarg.h>
__attribute__((format(printf, 2, 3)))
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (world.rank == 0) {
		printf("%s ", ok ? "ok  " : "FAIL");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	if (ok)
		pass++;
	else
		fail++;
}

static struct strat_opts opts(const char *spec, int mb, int group)
{
	struct strat_opts o;

	memset(&o, 0, sizeof o);
	if (strat_parse(spec, &o)) {
		fprintf(stderr, "bad spec %s\n", spec);
		exit(1);
	}
	o.optimizer = OPT_ADAMW;
	o.micro_batch = mb;
	o.grad_accum = 1;
	o.bucket_mb = 0.1;   /* several buckets on gpt-tiny (0.48 MB of gradients) */
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01;
	o.momentum = 0.9;
	o.seed = 99;
	o.group = group;
	o.devices = 1;
	plan_set_prefetch(&o.plan, 0, PREFETCH_BACKWARD_PRE);
	return o;
}

static int run(struct strat_opts *o, struct rt_comm *c, double *loss, float *params, struct err *e)
{
	struct strat s;
	int rc = strat_init(&s, o, &model, T, 0.0, be, c, e), i;

	for (i = 0; !rc && i < STEPS; i++) {
		rc = strat_step(&s, e);
		loss[i] = s.loss;
	}
	if (!rc && params)
		rc = strat_gather_params(&s, params, e);
	strat_free(&s);
	return rc;
}

static double maxrel(const double *a, const double *b, int n)
{
	double w = 0;
	for (int i = 0; i < n; i++)
		w = fmax(w, fabs(a[i] - b[i]) / fabs(b[i]));
	return w;
}

/* max |a - b| over max |b|: the parameters' relative difference */
static double prel(const float *a, const float *b, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)b[i]));
	}
	return d / m;
}

static void strategies(const double *ref, const double *ref_sgd, const float *refp, size_t np)
{
	static const struct { const char *spec; int accum, recompute, fwd_prefetch, bwd_prefetch; } cases[] = {
		{"ddp", 1, 0, 0, 0}, {"zero1", 1, 0, 0, 0}, {"zero2", 1, 0, 0, 0}, {"zero3", 1, 0, 0, 0},
		{"fsdp:full_shard", 1, 0, 0, PREFETCH_BACKWARD_PRE},
		{"fsdp:full_shard", 1, 0, 1, PREFETCH_BACKWARD_POST},
		{"fsdp:shard_grad_op", 1, 0, 0, PREFETCH_BACKWARD_PRE},
		{"fsdp:no_shard", 1, 0, 0, 0}, {"fsdp:hybrid_shard", 1, 0, 0, PREFETCH_BACKWARD_PRE},
		{"fsdp:hybrid_shard_zero2", 1, 0, 0, PREFETCH_NONE},
		{"ddp", 2, 0, 0, 0}, {"zero2", 2, 1, 0, 0}, {"fsdp:full_shard", 2, 1, 0, PREFETCH_BACKWARD_PRE},
		/* FSDP2: per-parameter shards, copy-in and copy-out buffers */
		{"fsdp2", 1, 0, 0, 0}, {"fsdp2", 1, 0, 1, 0}, {"fsdp2:hybrid_shard", 1, 0, 0, 0},
		{"fsdp2", 2, 1, 0, 0},
	};
	double loss[STEPS];
	float *p = malloc(np * sizeof *p);
	char name[128];

	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		struct strat_opts o = opts(cases[k].spec, B / cases[k].accum, world.size >= 4 ? 2 : 1);
		struct err e = {0};
		int rc;
		o.grad_accum = cases[k].accum;
		o.recompute = cases[k].recompute ? RECOMPUTE_FULL : RECOMPUTE_NONE;
		plan_set_prefetch(&o.plan, cases[k].fwd_prefetch, cases[k].bwd_prefetch);
		snprintf(name, sizeof name, "%s x%d accum %d%s%s%s", cases[k].spec, world.size, cases[k].accum,
			 cases[k].recompute ? " recompute" : "", cases[k].fwd_prefetch ? " fwd-prefetch" : "",
			 cases[k].bwd_prefetch == PREFETCH_BACKWARD_POST ? " bwd-post" : "");
		rc = run(&o, &world, loss, NULL, &e);
		if (!rc)
			check(maxrel(loss, ref, STEPS) < 1e-5, "%s: AdamW, 10 losses = single rank's, max rel diff %.2e",
			      name, maxrel(loss, ref, STEPS));
		/* parameters after SGD with momentum, whose update is linear in the
		 * gradient (Adam's g/sqrt(v) turns fp32 noise of near-zero gradients
		 * into whole learning-rate steps) */
		o.optimizer = OPT_SGD_MOMENTUM;
		o.lr = 0.05;
		if (!rc)
			rc = run(&o, &world, loss, p, &e);
		if (rc) {
			check(0, "%s: failed (rc %d)", name, rc);
			if (world.rank == 0)
				fprintf(stderr, "  %s\n", e.msg);
			continue;
		}
		check(maxrel(loss, ref_sgd, STEPS) < 1e-5 && prel(p, refp, np) < 1e-5,
		      "%s: SGD momentum, losses and gathered parameters = single rank's, params rel diff %.2e",
		      name, prel(p, refp, np));
	}
	free(p);
}

static void initial_shards_gather_exactly(size_t np)
{
	static const char *specs[] = {"zero3", "fsdp:shard_grad_op", "fsdp:hybrid_shard", "fsdp2", "fsdp2:hybrid_shard"};
	float *a = malloc(np * sizeof *a), *b = malloc(np * sizeof *b);
	struct strat s;
	struct err e = {0};

	for (int k = 0; k < 5; k++) {
		struct strat_opts o = opts("single", B, 2), so = opts(specs[k], B, world.size >= 4 ? 2 : 1);
		int ok = strat_init(&s, &o, &model, T, 0, be, &self, &e) == 0 &&
			strat_gather_params(&s, a, &e) == 0;
		strat_free(&s);
		ok = ok && strat_init(&s, &so, &model, T, 0, be, &world, &e) == 0 &&
			strat_gather_params(&s, b, &e) == 0;
		strat_free(&s);
		check(ok && memcmp(a, b, np * sizeof *a) == 0, "%s: gathered initial shards are the model, bit for bit", specs[k]);
	}
	free(a);
	free(b);
}

static void resume(void)
{
	static const char *specs[] = {"ddp", "zero2", "fsdp:full_shard", "fsdp:hybrid_shard"};
	char dir[256];

	snprintf(dir, sizeof dir, "%s/sc-mpi-ckpt", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	for (int k = 0; k < 4; k++) {
		struct strat_opts o = opts(specs[k], B, world.size >= 4 ? 2 : 1);
		struct strat s;
		struct rtckpt c = {0};
		struct err e = {0};
		double ref[8], got[8];
		int i, ok = 1, same = 1;
		ok = strat_init(&s, &o, &model, T, 0, be, &world, &e) == 0;
		for (i = 0; ok && i < 8; i++) {
			ok = strat_step(&s, &e) == 0;
			ref[i] = s.loss;
			if (ok && i == 3)
				ok = rtckpt_save(&c, &s, dir, k % 2, &e) == 0;
		}
		ok = ok && rtckpt_wait(&c, &s, &e) == 0;
		strat_free(&s);
		ok = ok && strat_init(&s, &o, &model, T, 0, be, &world, &e) == 0 && rtckpt_load(&s, dir, &e) == 0;
		for (i = 4; ok && i < 8; i++) {
			ok = strat_step(&s, &e) == 0;
			got[i] = s.loss;
			same = same && got[i] == ref[i];
		}
		strat_free(&s);
		if (!ok && world.rank == 0)
			fprintf(stderr, "  %s\n", e.msg);
		check(ok && same, "%s: resumed from a sharded checkpoint, losses bit-identical", specs[k]);
		if (world.rank == 0)
			printf("      (%s)\n", k % 2 ? "async" : "sync");
	}
}

/* A rank of a real job allocates exactly what rank 0 of an emulated world of
 * the same size does (the memory grid of tests/test_grid.c relies on it). */
static void emulated_peaks(void)
{
	static const char *specs[] = {"ddp", "zero1", "zero2", "zero3", "fsdp:shard_grad_op",
				      "fsdp:hybrid_shard", "fsdp:no_shard", "fsdp2", "fsdp2:hybrid_shard"};
	for (int k = 0; k < 9; k++) {
		struct strat_opts o = opts(specs[k], 3, world.size >= 4 ? 2 : 1);
		struct rt_comm em;
		struct strat s;
		struct err e = {0};
		double real = -1, emu = -2;
		int ok;
		o.recompute = k % 2 ? RECOMPUTE_FULL : RECOMPUTE_NONE;
		backend_emulated_world(&em, world.size);
		ok = strat_init(&s, &o, &model, T, 0.1, be, &world, &e) == 0 && strat_step(&s, &e) == 0 &&
			strat_step(&s, &e) == 0;
		real = (double)strat_peak(&s, NULL);
		strat_free(&s);
		ok = ok && be->allreduce_host(be, &world, &real, 1, 1, &e) == 0;
		ok = ok && strat_init(&s, &o, &model, T, 0.1, be, &em, &e) == 0 && strat_step(&s, &e) == 0 &&
			strat_step(&s, &e) == 0;
		emu = (double)strat_peak(&s, NULL);
		strat_free(&s);
		check(ok && real == emu, "%s: peak of a real rank %.0f = emulated rank %.0f bytes", specs[k], real, emu);
	}
}

/* The Llama-style decoder under three strategies: the same loss sequence. */
static void llama(void)
{
	static const char *specs[] = {"ddp", "zero2", "zero3", "fsdp:hybrid_shard"};
	struct model keep = model;
	struct err e = {0};
	double ref[STEPS], loss[STEPS];

	if (model_load("llama-tiny", &model, NULL, 0, &e)) {
		check(0, "llama-tiny: %s", e.msg);
		model = keep;
		return;
	}
	{
		struct strat_opts o = opts("single", B * world.size, 1);
		if (run(&o, &self, ref, NULL, &e))
			check(0, "llama-tiny reference: %s", e.msg);
	}
	for (int k = 0; k < 4; k++) {
		struct strat_opts o = opts(specs[k], B, world.size >= 4 ? 2 : 1);
		int rc = run(&o, &world, loss, NULL, &e);
		check(!rc && maxrel(loss, ref, STEPS) < 1e-5, "llama-tiny %s x%d: 10 losses = single rank's, max rel diff %.2e",
		      specs[k], world.size, rc ? 1.0 : maxrel(loss, ref, STEPS));
	}
	model = keep;
}

/* Mixed precision through every strategy: bf16 (and fp16 under its loss
 * scale) losses of a real multi-rank run against the single rank's at the
 * same precision. The ranks' 16-bit gradients are rounded after each
 * reduction, the single rank's after each accumulation, so the sums differ
 * in the last 16-bit bit: 1e-3 relative (bf16's quantum is 2^-8). */
static void mixed_precision(void)
{
	static const struct { const char *spec; int prec; } c[] = {
		{"ddp", PREC_BF16}, {"zero1", PREC_BF16}, {"zero2", PREC_BF16}, {"zero3", PREC_BF16},
		{"fsdp:full_shard", PREC_BF16}, {"fsdp:hybrid_shard", PREC_BF16}, {"fsdp:no_shard", PREC_BF16},
		{"ddp", PREC_FP16}, {"fsdp:full_shard", PREC_FP16}, {"fsdp2", PREC_BF16}, {"fsdp2", PREC_FP16},
	};
	double ref[2][STEPS], loss[STEPS];
	struct err e = {0};

	for (int p = 0; p < 2; p++) {
		struct strat_opts o = opts("single", B * world.size, 1);
		plan_from_spec(&o.plan, "single", p ? PREC_FP16 : PREC_BF16);
		if (run(&o, &self, ref[p], NULL, &e))
			check(0, "mixed-precision reference: %s", e.msg);
	}
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		struct strat_opts o = opts(c[k].spec, B, world.size >= 4 ? 2 : 1);
		const double *r = ref[c[k].prec == PREC_FP16];
		int rc;
		plan_from_spec(&o.plan, c[k].spec, c[k].prec);
		plan_set_prefetch(&o.plan, 0, PREFETCH_BACKWARD_PRE);
		rc = run(&o, &world, loss, NULL, &e);
		check(!rc && maxrel(loss, r, STEPS) < 1e-3, "%s %s x%d: 10 losses = single rank's at that precision, "
		      "max rel diff %.2e", c[k].spec, c[k].prec == PREC_FP16 ? "fp16" : "bf16", world.size,
		      rc ? 1.0 : maxrel(loss, r, STEPS));
	}
}

static void oom_agreement(void)
{
	/* only rank 0 gets a small capacity: it fails in forward, the others must
	 * not hang and must report the trial as out of memory too */
	struct strat_opts o = opts("ddp", 16, 1);
	struct strat s;
	struct err e = {0};
	int rc;

	o.capacity = world.rank == 0 ? 3 << 20 : 0;
	o.agree = 1;
	rc = strat_init(&s, &o, &model, T, 0, be, &world, &e);
	if (!rc)
		rc = strat_step(&s, &e);
	strat_free(&s);
	check(rc == RT_EOOM, "ddp: a rank's out-of-memory is every rank's trial outcome (rc %d)", rc);
}

int main(void)
{
	struct err e = {0};
	struct strat s;
	double ref[STEPS], ref_sgd[STEPS];
	float *refp;
	size_t np;

	if (backend_open("cpu", &be, &world, &e) || backend_cpu_self(&self) ||
	    model_load("gpt-tiny", &model, NULL, 0, &e)) {
		fprintf(stderr, "rt_mpi_test: %s\n", e.msg);
		return 1;
	}
	{
		struct strat_opts o = opts("single", B, 1);
		if (strat_init(&s, &o, &model, T, 0, be, &self, &e)) {
			fprintf(stderr, "rt_mpi_test: %s\n", e.msg);
			return 1;
		}
		np = s.m.nparams;
		strat_free(&s);
	}
	refp = malloc(np * sizeof *refp);
	{
		struct strat_opts o = opts("single", B * world.size, 1);
		if (run(&o, &self, ref, NULL, &e)) {
			fprintf(stderr, "rt_mpi_test: reference: %s\n", e.msg);
			return 1;
		}
		o.optimizer = OPT_SGD_MOMENTUM;
		o.lr = 0.05;
		if (run(&o, &self, ref_sgd, refp, &e)) {
			fprintf(stderr, "rt_mpi_test: reference: %s\n", e.msg);
			return 1;
		}
	}
	if (world.rank == 0)
		printf("reference: single rank, micro-batch %d, losses %.6f .. %.6f\n", B * world.size, ref[0],
		       ref[STEPS - 1]);
	initial_shards_gather_exactly(np);
	strategies(ref, ref_sgd, refp, np);
	resume();
	llama();
	mixed_precision();
	if (world.size > 1) {
		emulated_peaks();
		oom_agreement();
	}
	if (world.rank == 0)
		printf("mpi (%d ranks): %d passed, %d failed\n", world.size, pass, fail);
	free(refp);
	backend_close(be);
	return fail ? 1 : 0;
}

/*
 * test_reference.c — the cpu backend against an independent PyTorch reference
 * (tests/ref/make_reference.py, float64): gpt-tiny's and llama-tiny's logits,
 * loss, every gradient, and the losses of 5 AdamW steps, for the same weights
 * and data.
 *
 * Error measure: per tensor, max |c - ref| / max |ref| (the relative error of
 * the tensor in the max norm; elementwise ratios are meaningless for entries
 * near zero). Bound 1e-5: fp32 rounding over the step's sums is ~1e-6.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "strategy.h"

struct ref {
	int B, T, V, np, nloss, seed;
	double *logits, *grads, *losses;
};

static void load_ref(struct ref *r, const char *path)
{
	FILE *f = fopen(path, "rb");
	char magic[8];
	int32_t h[6];
	size_t nl;

	cr_assert_not_null(f, "%s is missing (run from the repository root)", path);
	cr_assert_eq(fread(magic, 1, 8, f), 8);
	cr_assert_eq(memcmp(magic, "SCREF001", 8), 0);
	cr_assert_eq(fread(h, sizeof h, 1, f), 1);
	r->B = h[0], r->T = h[1], r->V = h[2], r->np = h[3], r->nloss = h[4], r->seed = h[5];
	nl = (size_t)r->B * r->T * r->V;
	r->logits = malloc(nl * sizeof(double));
	r->grads = malloc((size_t)r->np * sizeof(double));
	r->losses = malloc((size_t)r->nloss * sizeof(double));
	cr_assert_eq(fread(r->logits, sizeof(double), nl, f), nl);
	cr_assert_eq(fread(r->grads, sizeof(double), (size_t)r->np, f), (size_t)r->np);
	cr_assert_eq(fread(r->losses, sizeof(double), (size_t)r->nloss, f), (size_t)r->nloss);
	fclose(f);
}

static double relerr(const float *c, const double *ref, size_t n)
{
	double d = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs(c[i] - ref[i]));
		m = fmax(m, fabs(ref[i]));
	}
	return d / m;
}

static struct strat_opts adamw(int B, uint64_t seed)
{
	struct strat_opts o;
	memset(&o, 0, sizeof o);
	cr_assert_eq(strat_parse("single", &o), 0);
	o.optimizer = OPT_ADAMW;
	o.micro_batch = B;
	o.grad_accum = 1;
	o.devices = 1;
	o.group = 1;
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01;
	o.seed = seed;
	return o;
}

static void match(const char *model, const char *path)
{
	struct backend *be;
	struct rt_comm world;
	struct model m;
	struct strat s;
	struct ref r;
	struct err e = {0};
	struct strat_opts o;
	int32_t *ids;
	float *logits;
	double worst = 0;
	int p, i;

	load_ref(&r, path);
	cr_assert_eq(backend_open("cpu", &be, &world, &e), 0, "%s", e.msg);
	cr_assert_eq(model_load(model, &m, NULL, 0, &e), 0, "%s", e.msg);
	o = adamw(r.B, (uint64_t)r.seed);
	cr_assert_eq(strat_init(&s, &o, &m, r.T, 0.0, be, &world, &e), 0, "%s", e.msg);
	cr_assert_eq((int)s.m.nparams, r.np);
	ids = malloc((size_t)r.B * 2 * r.T * sizeof *ids);
	logits = malloc((size_t)r.B * r.T * r.V * sizeof *logits);
	for (i = 0; i < r.B; i++)  /* step 0's samples: 0 .. B-1 */
		rtm_sample(&s.m, (uint64_t)r.seed, (uint64_t)i, ids + (size_t)i * 2 * r.T);
	s.m.loss_scale = 1.0f / (float)(r.B * r.T);
	s.m.ar = &s.ar[0];
	s.m.capture_logits = logits;
	cr_assert_eq(rtm_micro_step(&s.m, r.B, ids, &e), 0, "%s", e.msg);
	s.m.capture_logits = NULL;
	cr_expect_lt(relerr(logits, r.logits, (size_t)r.B * r.T * r.V), 1e-5, "logits: %.3g",
		     relerr(logits, r.logits, (size_t)r.B * r.T * r.V));
	cr_expect_lt(fabs(s.m.loss_sum * s.m.loss_scale - r.losses[0]) / r.losses[0], 1e-5,
		     "loss %.9f vs %.9f", s.m.loss_sum * s.m.loss_scale, r.losses[0]);
	for (p = 0; p < s.m.np; p++) {
		const struct rt_param *q = &s.m.p[p];
		double err = relerr(s.m.h.grad(s.m.h.ctx, p), r.grads + q->goff, q->n);
		worst = fmax(worst, err);
		cr_expect_lt(err, 1e-5, "gradient of %s: relative error %.3g", q->name, err);
	}
	cr_log_info("PyTorch reference, %s: logits %.2e, worst gradient tensor %.2e\n", model,
		    relerr(logits, r.logits, (size_t)r.B * r.T * r.V), worst);
	strat_free(&s);

	/* the losses of steps 0..5 under AdamW, from a fresh start */
	cr_assert_eq(strat_init(&s, &o, &m, r.T, 0.0, be, &world, &e), 0, "%s", e.msg);
	for (i = 0; i < r.nloss; i++) {
		cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		cr_expect_lt(fabs(s.loss - r.losses[i]) / r.losses[i], 1e-5, "step %d: loss %.9f vs %.9f", i,
			     s.loss, r.losses[i]);
		cr_log_info("step %d loss %.7f (PyTorch %.7f, rel %.1e)\n", i, s.loss, r.losses[i],
			    fabs(s.loss - r.losses[i]) / r.losses[i]);
	}
	strat_free(&s);
	free(ids);
	free(logits);
	free(r.logits);
	free(r.grads);
	free(r.losses);
}

Test(reference, gpt_tiny_matches_pytorch)
{
	match("gpt-tiny", "tests/ref/gpt_tiny_ref.bin");
}

Test(reference, llama_tiny_matches_pytorch)
{
	/* RMSNorm, rotary positions, SwiGLU, grouped-query attention, untied head */
	match("llama-tiny", "tests/ref/llama_tiny_ref.bin");
}

/*
 * test_runtime.c — the runtime on the cpu backend in one process: the arena's
 * accounting, the backward pass against finite differences, recomputation,
 * nn.DataParallel-style devices and checkpoint resume. (Several ranks:
 * tests/rt_mpi_main.c under mpirun.)
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "backend.h"
#include "rtckpt.h"
#include "model_rt.h"
#include "strategy.h"

static struct backend *be;
static struct rt_comm world;

static void setup(void)
{
	struct err e = {0};
	cr_assert_eq(backend_open("cpu", &be, &world, &e), 0, "%s", e.msg);
}

static struct model load_model(const char *name)
{
	struct model m;
	struct err e = {0};
	cr_assert_eq(model_load(name, &m, NULL, 0, &e), 0, "%s", e.msg);
	return m;
}

static struct model tiny(void)
{
	return load_model("gpt-tiny");
}

static struct strat_opts opts(const char *spec, int B)
{
	struct strat_opts o;
	memset(&o, 0, sizeof o);
	cr_assert_eq(strat_parse(spec, &o), 0);
	o.optimizer = OPT_ADAMW;
	o.micro_batch = B;
	o.grad_accum = 1;
	o.bucket_mb = 25;
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01;
	o.momentum = 0.9;
	o.seed = 1234;
	o.group = 1;
	if (!o.devices)
		o.devices = 1;
	return o;
}

Test(arena, counts_rounded_bytes_and_refuses_beyond_capacity)
{
	struct arena a;
	struct err e = {0};
	void *p, *q, *r;

	arena_init(&a, &arena_host_dev, 4096, 0);
	/* 256-byte rounding (the shardcast contract): 1 -> 256, 300 -> 512 */
	cr_assert_eq(arena_alloc(&a, &p, 1, "a", &e), 0);
	cr_assert_eq(arena_alloc(&a, &q, 300, "b", &e), 0);
	cr_expect_eq(a.live, 768);
	arena_free(&a, p);
	cr_expect_eq(a.live, 512);
	cr_expect_eq(a.peak, 768);
	/* 4096 - 512 = 3584 left: 3585 bytes round to 3840 and must fail cleanly */
	cr_expect_eq(arena_alloc(&a, &r, 3585, "c", &e), RT_EOOM);
	cr_expect_null(r);
	cr_expect(strstr(e.msg, "out of memory") != NULL, "%s", e.msg);
	cr_expect_eq(a.live, 512, "a refused allocation changes nothing");
	err_clear(&e);
	cr_expect_eq(arena_alloc(&a, &r, 3584, "c", &e), 0, "exactly the capacity fits");
	cr_expect_eq(a.peak, 4096);
	arena_release_all(&a);
	cr_expect_eq(a.live, 0);
	cr_expect_eq(arena_alloc(&a, &p, 0, "zero", &e), 0);
	cr_expect_null(p);
	arena_destroy(&a);
}

/* Loss of the model at the strategy's current parameters (forward only). */
static double loss_at(struct strat *s, const int32_t *ids, int B)
{
	struct err e = {0};
	s->m.ar = &s->ar[0];
	cr_assert_eq(rtm_forward_only(&s->m, B, ids, &e), 0, "%s", e.msg);
	return s->m.loss_sum * s->m.loss_scale;
}

static void gradcheck(const char *name, double dropout)
{
	struct model m = load_model(name);
	struct strat_opts o = opts("single", 2);
	struct strat s;
	struct err e = {0};
	int32_t ids[2 * 2 * 16];
	int B = 2, T = 16, p, checked = 0;
	double worst = 0;

	cr_assert_eq(strat_init(&s, &o, &m, T, dropout, be, &world, &e), 0, "%s", e.msg);
	for (int j = 0; j < B; j++)
		rtm_sample(&s.m, 7, (uint64_t)j, ids + j * 2 * T);
	s.m.loss_scale = 1.0f / (float)(B * T);
	s.m.ar = &s.ar[0];
	s.m.rng_step = 3;
	cr_assert_eq(rtm_micro_step(&s.m, B, ids, &e), 0, "%s", e.msg);
	/* every parameter tensor: its 3 largest gradients and 2 pseudo-random ones,
	 * against central differences of the fp32 loss with step 1e-2 */
	for (p = 0; p < s.m.np; p++) {
		const struct rt_param *q = &s.m.p[p];
		float *w = s.m.h.param(s.m.h.ctx, p), *g = s.m.h.grad(s.m.h.ctx, p);
		size_t pick[5] = {0, 0, 0, (size_t)(q->n * 0.37), (size_t)(q->n * 0.81)}, i;
		for (i = 0; i < q->n; i++) {
			if (fabsf(g[i]) > fabsf(g[pick[0]])) { pick[2] = pick[1]; pick[1] = pick[0]; pick[0] = i; }
			else if (fabsf(g[i]) > fabsf(g[pick[1]])) { pick[2] = pick[1]; pick[1] = i; }
			else if (fabsf(g[i]) > fabsf(g[pick[2]])) pick[2] = i;
		}
		for (int k = 0; k < 5; k++) {
			float keep = w[pick[k]], h = 1e-2f;
			double lp, lm, fd, err;
			w[pick[k]] = keep + h;
			lp = loss_at(&s, ids, B);
			w[pick[k]] = keep - h;
			lm = loss_at(&s, ids, B);
			w[pick[k]] = keep;
			fd = (lp - lm) / (2 * h);
			/* fp32 loss ~5.5 has ~5e-7 rounding: 1e-4 absolute floor */
			err = fabs(fd - g[pick[k]]) / (fabs(fd) + 1e-2);
			if (err > worst)
				worst = err;
			cr_expect_leq(fabs(fd - g[pick[k]]), 1e-4 + 2e-2 * fabs(fd),
				      "%s[%zu]: backward %.6g, finite difference %.6g", q->name, pick[k],
				      g[pick[k]], fd);
			checked++;
		}
	}
	cr_log_info("gradcheck %s (dropout %.1f): %d elements, worst |fd-g|/(|fd|+1e-2) = %.2e\n",
		    name, dropout, checked, worst);
	strat_free(&s);
}

Test(runtime, backward_matches_finite_differences, .init = setup)
{
	gradcheck("gpt-tiny", 0.0);
}

Test(runtime, llama_backward_matches_finite_differences, .init = setup)
{
	/* RMSNorm, rotary positions, SwiGLU, grouped-query attention, untied head */
	gradcheck("llama-tiny", 0.0);
}

Test(runtime, backward_with_dropout_matches_finite_differences, .init = setup)
{
	gradcheck("gpt-tiny", 0.1);
}

/* Losses of n steps of spec at micro-batch B, optionally with checkpointing. */
static void run_losses(const char *spec, int B, int accum, int recompute, double dropout,
		       int n, double *loss, float *params_out)
{
	struct model m = tiny();
	struct strat_opts o = opts(spec, B);
	struct strat s;
	struct err e = {0};

	o.grad_accum = accum;
	o.recompute = recompute;
	cr_assert_eq(strat_init(&s, &o, &m, 32, dropout, be, &world, &e), 0, "%s", e.msg);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		loss[i] = s.loss;
	}
	if (params_out)
		cr_assert_eq(strat_gather_params(&s, params_out, &e), 0, "%s", e.msg);
	strat_free(&s);
}

Test(runtime, full_recompute_gives_identical_losses, .init = setup)
{
	/* recomputation reruns the same kernels on the same inputs and draws the
	 * same dropout masks: the losses are bit-identical */
	double a[4], b[4];
	run_losses("single", 4, 1, RECOMPUTE_NONE, 0.1, 4, a, NULL);
	run_losses("single", 4, 1, RECOMPUTE_FULL, 0.1, 4, b, NULL);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(a[i], b[i], "step %d: %.9g vs %.9g", i, a[i], b[i]);
	cr_expect_lt(a[3], a[0], "the loss goes down");
}

/* Round to nearest, ties to even (IEEE 754-2008 roundTiesToEven): bfloat16
 * keeps fp32's 8-bit exponent and 7 fraction bits (quantum 2^-7 at 1), fp16
 * 5 exponent and 10 fraction bits (quantum 2^-10 at 1, max 65504, subnormal
 * quantum 2^-24). */
Test(runtime, rounding_to_16_bit_types)
{
	cr_expect_eq(rt_round_bf16(1.0f + 0x1p-8f), 1.0f, "halfway: the even neighbour");
	cr_expect_eq(rt_round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f, "halfway: the even neighbour (up)");
	cr_expect_eq(rt_round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f, "above halfway rounds up");
	cr_expect_eq(rt_round_bf16(3.14159265f), 3.140625f);
	cr_expect_eq(rt_round_bf16(-3.14159265f), -3.140625f);
	cr_expect(isnan(rt_round_bf16(NAN)));
	cr_expect_eq(rt_round_f16(1.0f + 0x1p-11f), 1.0f);
	cr_expect_eq(rt_round_f16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
	cr_expect_eq(rt_round_f16(0.1f), 0.0999755859375f, "fp16's nearest to 0.1 (0x2E66)");
	cr_expect_eq(rt_round_f16(65504.0f), 65504.0f, "the largest fp16");
	cr_expect_eq(rt_round_f16(65519.0f), 65504.0f);
	cr_expect(isinf(rt_round_f16(65520.0f)) && rt_round_f16(-65520.0f) < 0, "halfway past 65504 overflows");
	cr_expect_eq(rt_round_f16(0x1p-24f), 0x1p-24f, "the smallest subnormal");
	cr_expect_eq(rt_round_f16(0x1p-25f), 0.0f, "halfway to the smallest subnormal: to even (zero)");
	cr_expect_eq(rt_round_f16(3 * 0x1p-25f), 0x1p-23f);
}

/* Losses of n steps of spec at precision prec (PREC_*), micro-batch 4; the
 * final parameters into params. */
static void run_prec(const char *spec, int prec, int n, double *loss, float *params)
{
	struct model m = tiny();
	struct strat_opts o = opts(spec, 4);
	struct strat s;
	struct err e = {0};

	cr_assert_eq(plan_from_spec(&o.plan, spec, prec), 0);
	cr_assert_eq(strat_init(&s, &o, &m, 32, 0.0, be, &world, &e), 0, "%s", e.msg);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		loss[i] = s.loss;
	}
	cr_assert_eq(strat_gather_params(&s, params, &e), 0, "%s", e.msg);
	strat_free(&s);
}

/* bf16 and fp16 mixed precision through the same interpreter and strategy:
 * the loss follows fp32's within 0.1% over 8 AdamW steps of gpt-tiny (16-bit
 * storage moves each stored value by at most 2^-9 (bf16) or 2^-12 (fp16)
 * relative, the fp32 master keeps the updates; measured: 1e-4 and 2e-5 at
 * most), it goes down, and the working parameters are values of the 16-bit
 * type. fp16 runs at GradScaler's 2^16 without an overflow here. */
Test(runtime, mixed_precision_tracks_fp32, .init = setup)
{
	struct model m = tiny();
	size_t np = (size_t)graph_param_count(&m);
	float *p32 = malloc(np * sizeof *p32), *p16 = malloc(np * sizeof *p16);
	double f32[8], b16[8], f16[8];
	size_t i, off = 0;

	run_prec("ddp", PREC_FP32, 8, f32, p32);
	run_prec("ddp", PREC_BF16, 8, b16, p16);
	for (i = 0; i < np; i++)
		off += rt_round_bf16(p16[i]) != p16[i];
	cr_expect_eq(off, 0, "%zu parameters are not bf16 values", off);
	run_prec("zero2", PREC_FP16, 8, f16, p16);  /* zero2: the master is a shard */
	for (i = 0, off = 0; i < np; i++)
		off += rt_round_f16(p16[i]) != p16[i];
	cr_expect_eq(off, 0, "%zu parameters are not fp16 values", off);
	for (i = 0; i < 8; i++) {
		cr_expect_leq(fabs(b16[i] - f32[i]), 1e-3 * f32[i], "bf16 step %zu: %.6f vs fp32 %.6f", i, b16[i], f32[i]);
		cr_expect_leq(fabs(f16[i] - f32[i]), 1e-3 * f32[i], "fp16 step %zu: %.6f vs fp32 %.6f", i, f16[i], f32[i]);
	}
	cr_expect_lt(b16[7], b16[0]);
	cr_expect_lt(f16[7], f16[0]);
	free(p32);
	free(p16);
}

/* fp16's loss scaling (GradScaler): gradients that overflow skip the update
 * and halve the scale; the next step updates. */
Test(runtime, fp16_overflow_skips_the_step, .init = setup)
{
	struct model m = tiny();
	struct strat_opts o = opts("single", 4);
	struct strat s;
	struct err e = {0};
	size_t np = (size_t)graph_param_count(&m);
	float *a = malloc(np * sizeof *a), *b = malloc(np * sizeof *b);

	cr_assert_eq(plan_from_spec(&o.plan, "single", PREC_FP16), 0);
	cr_assert_eq(strat_init(&s, &o, &m, 32, 0.0, be, &world, &e), 0, "%s", e.msg);
	cr_expect_eq(s.lscale, 65536.0, "GradScaler's init_scale 2^16");
	s.lscale = 1e30;  /* the loss's gradient alone overflows fp16 */
	cr_assert_eq(strat_gather_params(&s, a, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_gather_params(&s, b, &e), 0, "%s", e.msg);
	cr_expect(memcmp(a, b, np * sizeof *a) == 0, "an overflowed step leaves the parameters");
	cr_expect_eq(s.lscale, 5e29, "and halves the scale");
	cr_expect_eq(s.opt_steps, 0);
	s.lscale = 65536.0;
	cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_gather_params(&s, b, &e), 0, "%s", e.msg);
	cr_expect(memcmp(a, b, np * sizeof *a) != 0, "a clean step updates");
	cr_expect_eq(s.opt_steps, 1);
	strat_free(&s);
	free(a);
	free(b);
}

Test(runtime, dp_devices_match_single_on_the_global_batch, .init = setup)
{
	/* nn.DataParallel over 4 devices x 2 samples = one device x 8 samples;
	 * only the summation order of the gradients differs (fp32) */
	double a[6], b[6];
	run_losses("single", 8, 1, RECOMPUTE_NONE, 0, 6, a, NULL);
	run_losses("dp:4", 2, 1, RECOMPUTE_NONE, 0, 6, b, NULL);
	for (int i = 0; i < 6; i++)
		cr_expect_leq(fabs(a[i] - b[i]), 1e-5 * fabs(a[i]), "step %d: %.9g vs %.9g", i, a[i], b[i]);
}

Test(runtime, grad_accumulation_matches_the_larger_batch, .init = setup)
{
	double a[5], b[5];
	run_losses("single", 8, 1, RECOMPUTE_NONE, 0, 5, a, NULL);
	run_losses("single", 2, 4, RECOMPUTE_NONE, 0, 5, b, NULL);
	for (int i = 0; i < 5; i++)
		cr_expect_leq(fabs(a[i] - b[i]), 1e-5 * fabs(a[i]), "step %d: %.9g vs %.9g", i, a[i], b[i]);
}

Test(runtime, checkpoint_resume_is_bit_exact, .init = setup)
{
	struct model m = tiny();
	struct strat_opts o = opts("single", 4);
	struct strat s;
	struct rtckpt c = {0};
	struct err e = {0};
	double ref[8], got[8];
	char dir[] = "/tmp/sc-ckpt-XXXXXX";
	int async;

	cr_assert_not_null(mkdtemp(dir));
	run_losses("single", 4, 1, RECOMPUTE_NONE, 0, 8, ref, NULL);
	for (async = 0; async <= 1; async++) {
		cr_assert_eq(strat_init(&s, &o, &m, 32, 0, be, &world, &e), 0, "%s", e.msg);
		for (int i = 0; i < 4; i++)
			cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		cr_assert_eq(rtckpt_save(&c, &s, dir, async, &e), 0, "%s", e.msg);
		/* training goes on while an async writer runs */
		cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		cr_assert_eq(rtckpt_wait(&c, &s, &e), 0, "%s", e.msg);
		strat_free(&s);
		cr_assert_eq(strat_init(&s, &o, &m, 32, 0, be, &world, &e), 0, "%s", e.msg);
		cr_assert_eq(rtckpt_load(&s, dir, &e), 0, "%s", e.msg);
		cr_expect_eq(s.step, 4);
		for (int i = 4; i < 8; i++) {
			cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
			got[i] = s.loss;
			cr_expect_eq(got[i], ref[i], "async %d step %d: %.17g vs %.17g", async, i, got[i], ref[i]);
		}
		strat_free(&s);
	}
}

Test(runtime, oom_unwinds_and_the_next_trial_starts_clean, .init = setup)
{
	struct model m = tiny();
	struct strat_opts o = opts("single", 64);
	struct strat s;
	struct err e = {0};
	int rc;

	o.capacity = 4 << 20;  /* 4 MiB: states (~1.9 MB) fit, 64 samples of activations do not */
	rc = strat_init(&s, &o, &m, 32, 0, be, &world, &e);
	cr_assert_eq(rc, 0, "%s", e.msg);
	rc = strat_step(&s, &e);
	cr_expect_eq(rc, RT_EOOM, "rc %d: %s", rc, e.msg);
	cr_expect_leq(s.ar[0].peak, o.capacity);
	strat_free(&s);
	err_clear(&e);
	o.micro_batch = 1;
	cr_assert_eq(strat_init(&s, &o, &m, 32, 0, be, &world, &e), 0, "%s", e.msg);
	cr_expect_eq(strat_step(&s, &e), 0, "%s", e.msg);
	strat_free(&s);
}

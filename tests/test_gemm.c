/*
 * test_gemm.c — the column-major product descriptors the CUDA kernels hand to
 * cuBLASLt (cuda/gemm.h), run by a plain host product and checked against
 * the cpu backend's reference of every op that uses them: the transposes,
 * leading dimensions, offsets and per-head batch strides are verified here,
 * without a GPU. Sizes are small, odd and all different (N 7, C 5, OC 3;
 * T 5, hs 4, 3 heads, or 6 query heads over 2 key/value heads) so that a
 * swapped dimension cannot pass.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gemm.h"

static uint64_t rng = 12345;

static float unif(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(rng >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static float *rnd(size_t n)
{
	float *x = malloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = unif();
	return x;
}

static float *dup(const float *x, size_t n)
{
	float *y = malloc(n * sizeof *y);
	memcpy(y, x, n * sizeof *y);
	return y;
}

/* fp32 reference (float sums) against double host products: 1e-5 relative to the
 * tensor's largest magnitude; -inf must match exactly */
static void same(const char *what, const float *got, const float *ref, size_t n)
{
	double mx = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(ref[i]))
			mx = fmax(mx, fabs(ref[i]));
	for (size_t i = 0; i < n; i++) {
		if (isinf(ref[i])) {
			cr_expect(got[i] == ref[i], "%s[%zu]: %g, expected %g", what, i, got[i], ref[i]);
			continue;
		}
		cr_expect_leq(fabs(got[i] - ref[i]), 1e-5 * mx, "%s[%zu]: %.8g, expected %.8g", what, i, got[i], ref[i]);
	}
}

static void run(const struct gemm_desc *d, int n, float *const *ops)
{
	for (int i = 0; i < n; i++)
		gemm_host(&d[i], ops);
}

enum { N = 7, C = 5, OC = 3 };

Test(gemm, matmul_forward_and_backward_match_the_reference)
{
	struct gemm_desc d[GEMM_MAX];
	float *x = rnd(N * C), *w = rnd(OC * C), *b = rnd(OC), *out = rnd(N * OC), *ref = rnd(N * OC);
	float *dout = rnd(N * OC), *dx = rnd(N * C), *dw = rnd(OC * C), *rdx = dup(dx, N * C), *rdw = dup(dw, OC * C);

	backend_cpu.matmul_fwd(&backend_cpu, ref, x, w, b, N, C, OC);
	run(d, gemm_matmul_fwd(d, N, C, OC), (float *const[]){out, x, w});
	for (int n = 0; n < N; n++)  /* the bias epilogue: per row of D = per output channel */
		for (int o = 0; o < OC; o++)
			out[n * OC + o] += b[o];
	same("out", out, ref, N * OC);

	backend_cpu.matmul_bwd(&backend_cpu, rdx, rdw, NULL, dout, x, w, N, C, OC);
	cr_assert_eq(gemm_matmul_bwd(d, N, C, OC, 1), 2);
	cr_expect_eq(d[1].grad_out, 1, "dw is a parameter gradient");
	run(d, 2, (float *const[]){dx, dw, dout, x, w});
	same("dx", dx, rdx, N * C);
	same("dw", dw, rdw, OC * C);
	cr_expect_eq(gemm_matmul_bwd(d, N, C, OC, 0), 1, "no dx: only dw");
	free(x), free(w), free(b), free(out), free(ref), free(dout), free(dx), free(dw), free(rdx), free(rdw);
}

enum { B = 2, T = 5, HS = 4 };

static void causal(float *s, int NH)  /* what causal_mask_kernel does after the product */
{
	for (int i = 0; i < B * NH * T * T; i++)
		if (i % T > (i / T) % T)
			s[i] = -INFINITY;
}

static void zero_upper(float *s, int NH)  /* softmax_bwd's output: 0 above the diagonal */
{
	for (int i = 0; i < B * NH * T * T; i++)
		if (i % T > (i / T) % T)
			s[i] = 0;
}

/* every head of every sample: b, then the query head within each group */
static void each(int (*f)(struct gemm_desc *, int, int, int, int, int, int), int NH, int NKV, float *const *ops)
{
	struct gemm_desc d[GEMM_MAX];

	for (int b = 0; b < B; b++)
		for (int i = 0; i < NH / NKV; i++)
			run(d, f(d, b, i, T, NH, NKV, HS), ops);
}

static void attention(int NH, int NKV)
{
	size_t row = (size_t)(NH + 2 * NKV) * HS, W = (size_t)NH * HS;
	size_t nq = B * T * row, ns = (size_t)B * NH * T * T, nc = B * T * W;
	float *qkv = rnd(nq), *sc = rnd(ns), *ref = malloc(ns * 4), *att = malloc(ns * 4);
	float *ctx = rnd(nc), *rctx = malloc(nc * 4), *ds = rnd(ns), *dqkv = rnd(nq), *rdqkv;
	float *dctx = rnd(nc), *datt = rnd(ns), *rdatt;

	backend_cpu.attn_score_fwd(&backend_cpu, ref, qkv, B, T, NH, NKV, HS);
	each(gemm_attn_score_fwd, NH, NKV, (float *const[]){sc, qkv});
	causal(sc, NH);
	same("scores", sc, ref, ns);

	backend_cpu.softmax_fwd(&backend_cpu, att, ref, B * NH * T, T);
	backend_cpu.attn_ctx_fwd(&backend_cpu, rctx, att, qkv, B, T, NH, NKV, HS);
	each(gemm_attn_ctx_fwd, NH, NKV, (float *const[]){ctx, att, qkv});
	same("ctx", ctx, rctx, nc);

	zero_upper(ds, NH);
	rdqkv = dup(dqkv, nq);
	backend_cpu.attn_score_bwd(&backend_cpu, rdqkv, ds, qkv, B, T, NH, NKV, HS);
	each(gemm_attn_score_bwd, NH, NKV, (float *const[]){dqkv, ds, qkv});
	same("dq, dk (+=)", dqkv, rdqkv, nq);

	rdatt = dup(datt, ns);
	backend_cpu.attn_ctx_bwd(&backend_cpu, rdatt, rdqkv, dctx, att, qkv, B, T, NH, NKV, HS);
	each(gemm_attn_ctx_bwd, NH, NKV, (float *const[]){datt, dqkv, dctx, att, qkv});
	same("dv (+=)", dqkv, rdqkv, nq);
	for (size_t i = 0; i < ns; i++)  /* above the diagonal: unspecified (kernels.h) */
		if (i % T > (i / T) % T)
			datt[i] = rdatt[i];
	same("datt (+=, causal part)", datt, rdatt, ns);
	free(qkv), free(sc), free(ref), free(att), free(ctx), free(rctx), free(ds), free(dqkv), free(rdqkv);
	free(dctx), free(datt), free(rdatt);
}

Test(gemm, multi_head_attention_products_match_the_reference)
{
	attention(3, 3);
}

Test(gemm, grouped_query_attention_products_match_the_reference)
{
	attention(6, 2);  /* 3 query heads per key/value head */
}

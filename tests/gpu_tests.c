/*
 * gpu_tests.c — every CUDA kernel against the cpu backend's reference on fresh
 * random inputs, then the training step on the cuda backend against the cpu
 * backend. Without a CUDA device it prints "SKIP: no CUDA device (...)" and
 * exits 0, so CI proves the CUDA code compiles and links on machines without
 * a GPU; with one, `make gpu-test` runs it.
 *
 * Inputs are drawn fresh each run (the seed is printed; SHARDCAST_SEED=n
 * repeats a run). Gradient buffers start at random values, not zero, so the
 * accumulating (+=) contract of backward kernels is checked too.
 *
 * Tolerance: element i passes when |gpu_i - ref_i| <= tol * (|ref_i| + rms(ref)),
 * i.e. relative to the element, floored at the tensor's scale where the
 * reference itself is a cancellation near 0. Stated per test:
 *   fp32 elementwise (same formula, FMA contraction differs)      1e-5
 *   fp32 reductions over <= 1k terms (norms, softmax, attention)  1e-5 .. 1e-4
 *   fp32 products and reductions over thousands of terms          1e-4
 *   bf16 activations: inputs rounded to bf16 on the host, the reference
 *   computed in fp32 on the same rounded inputs, so the differences are
 *   the bf16 rounding of the outputs (2^-9 relative) and fp32 order:  1e-2
 *   (2e-2 for fused attention's backward, whose dq/dk/dv pass through
 *   bf16 loads of q, k, v, dO and O each)
 * Masks of dropout must be identical (same counter-based generator).
 * Prints one line per check and "gpu: N passed, M failed"; exit 1 on a failure.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cstep.h"
#include "kernels.h"
#include "model.h"
#include "strategy.h"

static struct cuk *K;
static uint64_t rng;
static int pass, fail;

/* ---- host helpers ------------------------------------------------------------- */

static uint64_t next(void)
{
	uint64_t x = (rng += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static float unif(float a)  /* U[-a, a) */
{
	return (float)(((double)(next() >> 11) * 0x1p-53 * 2.0 - 1.0) * a);
}

static float *hrand(size_t n, float a)
{
	float *x = malloc(n * sizeof *x + 1);
	for (size_t i = 0; i < n; i++)
		x[i] = unif(a);
	return x;
}

static float *hcopy(const float *x, size_t n)
{
	float *y = malloc(n * sizeof *y + 1);
	memcpy(y, x, n * sizeof *y);
	return y;
}

static uint16_t f2bf(float f)  /* round to nearest even */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return 0x7fc0;
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* rounds x to what dt can hold (the bf16 tests' reference sees the same inputs) */
static void quant(float *x, size_t n, int dt)
{
	if (dt != CUK_F32)
		for (size_t i = 0; i < n; i++)
			x[i] = bf2f(f2bf(x[i]));
}

static void ck(cudaError_t rc, const char *what)
{
	if (rc != cudaSuccess) {
		fprintf(stderr, "gpu_tests: %s: %s\n", what, cudaGetErrorString(rc));
		exit(1);
	}
}

/* device copy of host fp32 data as dt */
static void *up(const float *x, size_t n, int dt)
{
	void *d;
	ck(cudaMalloc(&d, n * cuk_dsize(dt) + 16), "cudaMalloc");
	if (dt != CUK_F32) {
		uint16_t *h = malloc(n * 2 + 2);
		for (size_t i = 0; i < n; i++)
			h[i] = f2bf(x[i]);
		ck(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice), "upload");
		free(h);
	} else {
		ck(cudaMemcpy(d, x, n * 4, cudaMemcpyHostToDevice), "upload");
	}
	return d;
}

static void *upbytes(const void *x, size_t bytes)
{
	void *d;
	ck(cudaMalloc(&d, bytes + 16), "cudaMalloc");
	ck(cudaMemcpy(d, x, bytes, cudaMemcpyHostToDevice), "upload");
	return d;
}

/* host fp32 copy of device data of type dt (waits for the device) */
static float *down(const void *d, size_t n, int dt)
{
	float *x = malloc(n * sizeof *x + 1);
	ck(cudaDeviceSynchronize(), "kernel");
	if (dt != CUK_F32) {
		uint16_t *h = malloc(n * 2 + 2);
		ck(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost), "download");
		for (size_t i = 0; i < n; i++)
			x[i] = bf2f(h[i]);
		free(h);
	} else {
		ck(cudaMemcpy(x, d, n * 4, cudaMemcpyDeviceToHost), "download");
	}
	return x;
}

static const char *dtn(int dt)
{
	return dt == CUK_BF16W ? "bf16w" : dt == CUK_BF16 ? "bf16" : "f32";
}

/* the type of the parameters the kernels read and of parameter gradients */
static int ptype(int dt)
{
	return dt == CUK_BF16W ? CUK_BF16 : CUK_F32;
}

/* compares n values; prints one line; frees got */
static void check(const char *name, int dt, float *got, const float *ref, size_t n, double tol)
{
	double ss = 0, worst = 0, rms;
	size_t i, bad = (size_t)-1;

	for (i = 0; i < n; i++)
		if (isfinite(ref[i]))
			ss += (double)ref[i] * ref[i];
	rms = sqrt(ss / (double)(n ? n : 1));
	for (i = 0; i < n; i++) {
		double r = ref[i], g = got[i], err;
		if (isinf(r) && g == r)
			continue;
		err = fabs(g - r) / (fabs(r) + rms + 1e-30);
		if (!(err <= worst))  /* NaN too */
			worst = isnan(err) ? INFINITY : err, bad = i;
	}
	if (worst <= tol) {
		pass++;
		printf("ok   %-26s %-5s n=%-9zu max err %.2e (tol %.0e)\n", name, dtn(dt), n, worst, tol);
	} else {
		fail++;
		printf("FAIL %-26s %-5s n=%-9zu max err %.2e (tol %.0e) at [%zu]: gpu %.8g ref %.8g\n", name, dtn(dt), n,
		       worst, tol, bad, got[bad], ref[bad]);
	}
	free(got);
}

static void expect(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void expect(int ok, const char *fmt, ...)
{
	va_list ap;
	printf("%s ", ok ? "ok  " : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (ok)
		pass++;
	else
		fail++;
}

static int32_t *ids_for(int B, int T, int V)
{
	int32_t *ids = malloc((size_t)B * 2 * T * sizeof *ids);
	for (size_t i = 0; i < (size_t)B * 2 * T; i++)
		ids[i] = (int32_t)(next() % (uint64_t)V);
	return ids;
}

/* ---- kernels -------------------------------------------------------------------- */

static void t_embed(int dt)
{
	int B = 4, T = 64, C = 768, V = 1000;
	size_t n = (size_t)B * T * C;
	int32_t *ids = ids_for(B, T, V);
	float *wte = hrand((size_t)V * C, 0.1f), *wpe = hrand((size_t)T * C, 0.1f);
	float *out = hrand(n, 1), *g = hrand(n, 1), *dwte = hrand((size_t)V * C, 1), *dx = hrand(n, 1);
	float *dwpe = hrand((size_t)T * C, 1), *x = hrand(n, 1);
	int32_t *dids = upbytes(ids, (size_t)B * 2 * T * 4);
	void *dout, *dg, *ddx, *dxx, *ddwte, *dwtep, *dwpep, *ddwpe;
	int pt = ptype(dt);
	double gtol = pt == CUK_F32 ? 1e-5 : 1e-2;

	quant(g, n, dt), quant(dx, n, dt), quant(x, n, dt);
	quant(wte, (size_t)V * C, pt), quant(wpe, (size_t)T * C, pt);
	quant(dwte, (size_t)V * C, pt), quant(dwpe, (size_t)T * C, pt);
	dout = up(out, n, dt), dg = up(g, n, dt), ddx = up(dx, n, dt), dxx = up(x, n, dt);
	dwtep = up(wte, (size_t)V * C, pt), dwpep = up(wpe, (size_t)T * C, pt);
	ddwte = up(dwte, (size_t)V * C, pt), ddwpe = up(dwpe, (size_t)T * C, pt);

	backend_cpu.embed_fwd(&backend_cpu, out, ids, wte, B, T, C);
	quant(out, n, dt);
	cuk_embed_fwd(K, dt, dout, dids, dwtep, B, T, C);
	check("embed_fwd", dt, down(dout, n, dt), out, n, dt ? 1e-2 : 0);
	backend_cpu.embed_bwd(&backend_cpu, dwte, g, ids, B, T, C);
	cuk_embed_bwd(K, dt, ddwte, dg, dids, B, T, C);
	check("embed_bwd (+=)", dt, down(ddwte, (size_t)V * C, pt), dwte, (size_t)V * C, gtol);
	backend_cpu.pos_fwd(&backend_cpu, out, x, wpe, B, T, C);
	cuk_pos_fwd(K, dt, dout, dxx, dwpep, B, T, C);
	check("pos_fwd", dt, down(dout, n, dt), out, n, dt ? 1e-2 : 1e-6);
	backend_cpu.pos_bwd(&backend_cpu, dx, dwpe, g, B, T, C);
	cuk_pos_bwd(K, dt, ddx, ddwpe, dg, B, T, C);
	check("pos_bwd dx (+=)", dt, down(ddx, n, dt), dx, n, dt ? 1e-2 : 1e-6);
	check("pos_bwd dwpe (+=)", dt, down(ddwpe, (size_t)T * C, pt), dwpe, (size_t)T * C, gtol);
	quant(dwpe, (size_t)T * C, pt);  /* the next check starts from what the gpu stored */
	backend_cpu.pos_bwd(&backend_cpu, NULL, dwpe, g, B, T, C);  /* dx NULL: the gradient passes through */
	cuk_pos_bwd(K, dt, NULL, ddwpe, dg, B, T, C);
	check("pos_bwd dwpe (dx NULL)", dt, down(ddwpe, (size_t)T * C, pt), dwpe, (size_t)T * C, pt ? 2e-2 : 1e-5);
	cudaFree(dids), cudaFree(dout), cudaFree(dg), cudaFree(ddx), cudaFree(dxx);
	cudaFree(dwtep), cudaFree(dwpep), cudaFree(ddwte), cudaFree(ddwpe);
	free(ids), free(wte), free(wpe), free(out), free(g), free(dwte), free(dx), free(dwpe), free(x);
}

static void t_layernorm(int dt, int N, int C)
{
	size_t n = (size_t)N * C;
	float *x = hrand(n, 2), *w = hrand((size_t)C, 1), *b = hrand((size_t)C, 0.5f), *out = hrand(n, 1);
	float *stats = hrand((size_t)N * 2, 1), *g = hrand(n, 1), *dx = hrand(n, 1);
	float *dw = hrand((size_t)C, 1), *db = hrand((size_t)C, 1);
	void *dxx, *dout, *dg, *ddx, *dwp, *dbp, *ddw, *ddb;
	float *dstats;
	char name[64];
	int pt = ptype(dt);

	quant(x, n, dt), quant(g, n, dt), quant(dx, n, dt);
	quant(w, (size_t)C, pt), quant(b, (size_t)C, pt), quant(dw, (size_t)C, pt), quant(db, (size_t)C, pt);
	dxx = up(x, n, dt), dout = up(out, n, dt), dg = up(g, n, dt), ddx = up(dx, n, dt);
	dwp = up(w, (size_t)C, pt), dbp = up(b, (size_t)C, pt), dstats = up(stats, (size_t)N * 2, CUK_F32);
	ddw = up(dw, (size_t)C, pt), ddb = up(db, (size_t)C, pt);
	backend_cpu.layernorm_fwd(&backend_cpu, out, stats, x, w, b, N, C);
	cuk_layernorm_fwd(K, dt, dout, dstats, dxx, dwp, dbp, N, C);
	snprintf(name, sizeof name, "layernorm_fwd C=%d", C);
	check(name, dt, down(dout, n, dt), out, n, dt ? 1e-2 : 1e-5);
	check("layernorm_fwd stats", dt, down(dstats, (size_t)N * 2, CUK_F32), stats, (size_t)N * 2, 1e-5);
	backend_cpu.layernorm_bwd(&backend_cpu, dx, dw, db, g, x, stats, w, N, C);
	cuk_layernorm_bwd(K, dt, ddx, ddw, ddb, dg, dxx, dstats, dwp, N, C);
	check("layernorm_bwd dx (+=)", dt, down(ddx, n, dt), dx, n, dt ? 1e-2 : 1e-4);
	check("layernorm_bwd dw (+=)", dt, down(ddw, (size_t)C, pt), dw, (size_t)C, pt ? 1e-2 : 1e-4);
	check("layernorm_bwd db (+=)", dt, down(ddb, (size_t)C, pt), db, (size_t)C, pt ? 1e-2 : 1e-4);
	cudaFree(dxx), cudaFree(dout), cudaFree(dg), cudaFree(ddx), cudaFree(dwp), cudaFree(dbp);
	cudaFree(dstats), cudaFree(ddw), cudaFree(ddb);
	free(x), free(w), free(b), free(out), free(stats), free(g), free(dx), free(dw), free(db);
}

static void t_matmul(int dt, int N, int C, int OC, int bias)
{
	size_t nx = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
	float *x = hrand(nx, 1), *w = hrand(nw, 0.05f), *b = hrand((size_t)OC, 0.1f), *out = hrand(no, 1);
	float *g = hrand(no, 1), *dx = hrand(nx, 1), *dw = hrand(nw, 1), *db = hrand((size_t)OC, 1);
	void *dxx, *dww, *dbb, *dout, *dg, *ddx, *ddw, *ddb;
	char name[64];
	double tol = dt ? 1e-2 : 1e-4;
	int pt = ptype(dt);

	quant(x, nx, dt), quant(w, nw, dt), quant(b, (size_t)OC, dt), quant(g, no, dt), quant(dx, nx, dt);
	quant(dw, nw, pt), quant(db, (size_t)OC, pt);
	dxx = up(x, nx, dt), dww = up(w, nw, dt), dbb = up(b, (size_t)OC, dt), dout = up(out, no, dt);
	dg = up(g, no, dt), ddx = up(dx, nx, dt), ddw = up(dw, nw, pt), ddb = up(db, (size_t)OC, pt);
	backend_cpu.matmul_fwd(&backend_cpu, out, x, w, bias ? b : NULL, N, C, OC);
	cuk_matmul_fwd(K, dt, dout, dxx, dww, bias ? dbb : NULL, N, C, OC);
	snprintf(name, sizeof name, "matmul_fwd %dx%dx%d%s", N, C, OC, bias ? "+b" : "");
	check(name, dt, down(dout, no, dt), out, no, tol);
	backend_cpu.matmul_bwd(&backend_cpu, dx, dw, bias ? db : NULL, g, x, w, N, C, OC);
	cuk_matmul_bwd(K, dt, ddx, ddw, bias ? ddb : NULL, dg, dxx, dww, N, C, OC);
	check("matmul_bwd dx (+=)", dt, down(ddx, nx, dt), dx, nx, tol);
	check("matmul_bwd dw (+=)", dt, down(ddw, nw, pt), dw, nw, pt ? 1e-2 : 1e-4);
	if (bias)
		check("matmul_bwd dbias (+=)", dt, down(ddb, (size_t)OC, pt), db, (size_t)OC, pt ? 1e-2 : 1e-4);
	cudaFree(dxx), cudaFree(dww), cudaFree(dbb), cudaFree(dout), cudaFree(dg), cudaFree(ddx);
	cudaFree(ddw), cudaFree(ddb);
	free(x), free(w), free(b), free(out), free(g), free(dx), free(dw), free(db);
}

/* the unfused chain: scores, softmax, ctx and their backwards */
static void t_attention(int dt, int B, int T, int NH, int NKV, int hs)
{
	size_t nq = (size_t)B * T * (NH + 2 * NKV) * hs, ns = (size_t)B * NH * T * T, nc = (size_t)B * T * NH * hs;
	int rows = B * NH * T;
	float *qkv = hrand(nq, 1), *sc = malloc(ns * 4), *att = malloc(ns * 4), *ctx = malloc(nc * 4);
	float *dctx = hrand(nc, 1), *datt = hrand(ns, 0.1f), *dsc = hrand(ns, 0.1f), *dqkv = hrand(nq, 1);
	void *dq, *dsco, *datto, *dctxo, *ddctx, *ddatt, *ddsc, *ddqkv;
	float *got;
	char name[64];
	double tol = dt ? 1e-2 : 1e-4;

	for (size_t i = 0; i < ns; i++)  /* softmax_bwd leaves 0 above the diagonal (kernels.h) */
		if ((int)(i % T) > (int)((i / T) % T))
			dsc[i] = 0;
	quant(qkv, nq, dt), quant(dctx, nc, dt), quant(dqkv, nq, dt), quant(dsc, ns, dt);
	dq = up(qkv, nq, dt), ddctx = up(dctx, nc, dt), ddqkv = up(dqkv, nq, dt), ddsc = up(dsc, ns, dt);
	backend_cpu.attn_score_fwd(&backend_cpu, sc, qkv, B, T, NH, NKV, hs);
	quant(sc, ns, dt);  /* the next kernels read what this one stored */
	dsco = up(sc, ns, dt);
	{
		void *tmp = up(sc, ns, dt);
		cuk_attn_score_fwd(K, dt, tmp, dq, B, T, NH, NKV, hs);
		snprintf(name, sizeof name, "attn_score_fwd T=%d %d/%dh hs=%d", T, NH, NKV, hs);
		check(name, dt, down(tmp, ns, dt), sc, ns, tol);
		cudaFree(tmp);
	}
	backend_cpu.softmax_fwd(&backend_cpu, att, sc, rows, T);
	quant(att, ns, dt);
	datto = up(att, ns, dt);
	{
		void *tmp = up(att, ns, dt);
		cuk_softmax_fwd(K, dt, tmp, dsco, rows, T);
		check("softmax_fwd (causal)", dt, down(tmp, ns, dt), att, ns, dt ? 1e-2 : 1e-5);
		cudaFree(tmp);
	}
	backend_cpu.attn_ctx_fwd(&backend_cpu, ctx, att, qkv, B, T, NH, NKV, hs);
	dctxo = up(ctx, nc, dt);
	cuk_attn_ctx_fwd(K, dt, dctxo, datto, dq, B, T, NH, NKV, hs);
	check("attn_ctx_fwd", dt, down(dctxo, nc, dt), ctx, nc, tol);

	quant(datt, ns, dt);
	ddatt = up(datt, ns, dt);
	backend_cpu.attn_ctx_bwd(&backend_cpu, datt, dqkv, dctx, att, qkv, B, T, NH, NKV, hs);
	cuk_attn_ctx_bwd(K, dt, ddatt, ddqkv, ddctx, datto, dq, B, T, NH, NKV, hs);
	got = down(ddatt, ns, dt);
	for (size_t i = 0; i < ns; i++)  /* above the diagonal: unspecified (kernels.h) */
		if ((int)(i % T) > (int)((i / T) % T))
			got[i] = datt[i];
	check("attn_ctx_bwd datt (+=)", dt, got, datt, ns, tol);
	check("attn_ctx_bwd dv (+=)", dt, down(ddqkv, nq, dt), dqkv, nq, tol);
	quant(datt, ns, dt);  /* softmax_bwd's reference reads what the gpu will */

	{
		float *dsm = hrand(ns, 0.1f);
		void *ddsm;
		quant(dsm, ns, dt);
		ddsm = up(dsm, ns, dt);
		backend_cpu.softmax_bwd(&backend_cpu, dsm, datt, att, rows, T);
		/* the gpu gets the reference's datt so only softmax_bwd is measured */
		{
			void *din = up(datt, ns, dt);
			float *r2 = hcopy(dsm, ns);
			cuk_softmax_bwd(K, dt, ddsm, din, datto, rows, T);
			check("softmax_bwd (+=)", dt, down(ddsm, ns, dt), r2, ns, dt ? 1e-2 : 1e-4);
			cudaFree(din);
			free(r2);
		}
		cudaFree(ddsm);
		free(dsm);
	}
	backend_cpu.attn_score_bwd(&backend_cpu, dqkv, dsc, qkv, B, T, NH, NKV, hs);
	cuk_attn_score_bwd(K, dt, ddqkv, ddsc, dq, B, T, NH, NKV, hs);
	check("attn_score_bwd dq,dk (+=)", dt, down(ddqkv, nq, dt), dqkv, nq, tol);
	cudaFree(dq), cudaFree(dsco), cudaFree(datto), cudaFree(dctxo), cudaFree(ddctx), cudaFree(ddatt);
	cudaFree(ddsc), cudaFree(ddqkv);
	free(qkv), free(sc), free(att), free(ctx), free(dctx), free(datt), free(dsc), free(dqkv);
}

/* fused attention against the unfused reference chain */
static void t_flash(int dt, int B, int T, int NH, int NKV, int hs)
{
	size_t nq = (size_t)B * T * (NH + 2 * NKV) * hs, ns = (size_t)B * NH * T * T, nc = (size_t)B * T * NH * hs;
	int rows = B * NH * T;
	float *qkv = hrand(nq, 1), *sc = malloc(ns * 4), *att = malloc(ns * 4), *ctx = malloc(nc * 4);
	float *lse = malloc((size_t)rows * 4), *dctx = hrand(nc, 1), *dqkv = hrand(nq, 1);
	float *datt = calloc(ns, 4), *dsc = calloc(ns, 4);
	void *dq, *dctxo, *ddctx, *ddqkv;
	float *dlse;
	char name[80];
	struct err e = {0};

	quant(qkv, nq, dt), quant(dctx, nc, dt), quant(dqkv, nq, dt);
	backend_cpu.attn_score_fwd(&backend_cpu, sc, qkv, B, T, NH, NKV, hs);
	for (int r = 0; r < rows; r++) {  /* log-sum-exp of each row of scaled scores */
		double m = -INFINITY, s = 0;
		for (int u = 0; u < T; u++)
			m = sc[(size_t)r * T + u] > m ? sc[(size_t)r * T + u] : m;
		for (int u = 0; u < T; u++)
			s += exp(sc[(size_t)r * T + u] - m);
		lse[r] = (float)(m + log(s));
	}
	backend_cpu.softmax_fwd(&backend_cpu, att, sc, rows, T);
	backend_cpu.attn_ctx_fwd(&backend_cpu, ctx, att, qkv, B, T, NH, NKV, hs);
	dq = up(qkv, nq, dt), ddctx = up(dctx, nc, dt), ddqkv = up(dqkv, nq, dt);
	dctxo = up(ctx, nc, dt), dlse = up(lse, (size_t)rows, CUK_F32);
	if (cuk_flash_fwd(K, dt, dctxo, dlse, dq, B, T, NH, NKV, hs, &e)) {
		expect(0, "flash_fwd: %s", e.msg);
		return;
	}
	snprintf(name, sizeof name, "flash_fwd T=%d %d/%dh hs=%d", T, NH, NKV, hs);
	check(name, dt, down(dctxo, nc, dt), ctx, nc, dt ? 1e-2 : 1e-4);
	check("flash_fwd lse", dt, down(dlse, (size_t)rows, CUK_F32), lse, (size_t)rows, 1e-5);
	/* reference backward through the chain; the gpu reads the same ctx */
	quant(ctx, nc, dt);
	cudaFree(dctxo);
	dctxo = up(ctx, nc, dt);
	backend_cpu.attn_ctx_bwd(&backend_cpu, datt, dqkv, dctx, att, qkv, B, T, NH, NKV, hs);
	backend_cpu.softmax_bwd(&backend_cpu, dsc, datt, att, rows, T);
	backend_cpu.attn_score_bwd(&backend_cpu, dqkv, dsc, qkv, B, T, NH, NKV, hs);
	if (cuk_flash_bwd(K, dt, ddqkv, ddctx, dq, dctxo, dlse, B, T, NH, NKV, hs, &e)) {
		expect(0, "flash_bwd: %s", e.msg);
		return;
	}
	check("flash_bwd dqkv (+=)", dt, down(ddqkv, nq, dt), dqkv, nq, dt ? 2e-2 : 1e-4);
	cudaFree(dq), cudaFree(dctxo), cudaFree(ddctx), cudaFree(ddqkv), cudaFree(dlse);
	free(qkv), free(sc), free(att), free(ctx), free(lse), free(dctx), free(dqkv), free(datt), free(dsc);
}

/* Llama's ops: rotary positions (there and back), RMSNorm, SiLU, the product */
static void t_llama(int dt, int B, int T, int NH, int NKV, int hs)
{
	size_t nq = (size_t)B * T * (NH + 2 * NKV) * hs, N = (size_t)B * T, C = (size_t)NH * hs, n = N * 3 * C;
	float *qkv = hrand(nq, 1), *x = hrand(N * C, 2), *w = hrand(C, 1), *out = hrand(N * C, 1);
	float *rstd = hrand(N, 1), *g = hrand(N * C, 1), *dx = hrand(N * C, 1), *dw = hrand(C, 1);
	float *a = hrand(n, 3), *b = hrand(n, 1), *y = hrand(n, 1), *da = hrand(n, 1), *db = hrand(n, 1), *gy = hrand(n, 1);
	void *dq, *dxx, *dout, *dg, *ddx, *dwp, *ddw, *dA, *dB, *dY, *dDA, *dDB, *dGY;
	float *drstd;
	int pt = ptype(dt);
	double tol = dt ? 1e-2 : 1e-5;

	quant(qkv, nq, dt), quant(x, N * C, dt), quant(g, N * C, dt), quant(dx, N * C, dt);
	quant(w, C, pt), quant(dw, C, pt);
	quant(a, n, dt), quant(b, n, dt), quant(da, n, dt), quant(db, n, dt), quant(gy, n, dt);
	dq = up(qkv, nq, dt);
	backend_cpu.rope(&backend_cpu, qkv, B, T, NH, NKV, hs, 10000.0f, 1);
	cuk_rope(K, dt, dq, B, T, NH, NKV, hs, 10000.0f, 1);
	check("rope", dt, down(dq, nq, dt), qkv, nq, dt ? 1e-2 : 1e-5);
	quant(qkv, nq, dt);
	cudaFree(dq);
	dq = up(qkv, nq, dt);
	backend_cpu.rope(&backend_cpu, qkv, B, T, NH, NKV, hs, 10000.0f, -1);
	cuk_rope(K, dt, dq, B, T, NH, NKV, hs, 10000.0f, -1);
	check("rope back (dir -1)", dt, down(dq, nq, dt), qkv, nq, dt ? 1e-2 : 1e-5);

	dxx = up(x, N * C, dt), dout = up(out, N * C, dt), dg = up(g, N * C, dt), ddx = up(dx, N * C, dt);
	dwp = up(w, C, pt), ddw = up(dw, C, pt), drstd = up(rstd, N, CUK_F32);
	backend_cpu.rmsnorm_fwd(&backend_cpu, out, rstd, x, w, (int)N, (int)C);
	cuk_rmsnorm_fwd(K, dt, dout, drstd, dxx, dwp, (int)N, (int)C);
	check("rmsnorm_fwd", dt, down(dout, N * C, dt), out, N * C, dt ? 1e-2 : 1e-5);
	check("rmsnorm_fwd rstd", dt, down(drstd, N, CUK_F32), rstd, N, 1e-5);
	backend_cpu.rmsnorm_bwd(&backend_cpu, dx, dw, g, x, rstd, w, (int)N, (int)C);
	cuk_rmsnorm_bwd(K, dt, ddx, ddw, dg, dxx, drstd, dwp, (int)N, (int)C);
	check("rmsnorm_bwd dx (+=)", dt, down(ddx, N * C, dt), dx, N * C, dt ? 1e-2 : 1e-4);
	check("rmsnorm_bwd dw (+=)", dt, down(ddw, C, pt), dw, C, pt ? 1e-2 : 1e-4);

	dA = up(a, n, dt), dB = up(b, n, dt), dY = up(y, n, dt), dDA = up(da, n, dt), dDB = up(db, n, dt);
	dGY = up(gy, n, dt);
	backend_cpu.silu_fwd(&backend_cpu, y, a, n);
	cuk_silu_fwd(K, dt, dY, dA, n);
	check("silu_fwd", dt, down(dY, n, dt), y, n, tol);
	backend_cpu.silu_bwd(&backend_cpu, da, gy, a, n);
	cuk_silu_bwd(K, dt, dDA, dGY, dA, n);
	check("silu_bwd (+=)", dt, down(dDA, n, dt), da, n, tol);
	backend_cpu.mul_fwd(&backend_cpu, y, a, b, n);
	cuk_mul_fwd(K, dt, dY, dA, dB, n);
	check("mul_fwd", dt, down(dY, n, dt), y, n, dt ? 1e-2 : 1e-6);
	quant(da, n, dt);  /* from what the gpu stored */
	cudaFree(dDA);
	dDA = up(da, n, dt);
	backend_cpu.mul_bwd(&backend_cpu, da, db, gy, a, b, n);
	cuk_mul_bwd(K, dt, dDA, dDB, dGY, dA, dB, n);
	check("mul_bwd da (+=)", dt, down(dDA, n, dt), da, n, dt ? 1e-2 : 1e-6);
	check("mul_bwd db (+=)", dt, down(dDB, n, dt), db, n, dt ? 1e-2 : 1e-6);
	cudaFree(dq), cudaFree(dxx), cudaFree(dout), cudaFree(dg), cudaFree(ddx), cudaFree(dwp), cudaFree(ddw);
	cudaFree(drstd), cudaFree(dA), cudaFree(dB), cudaFree(dY), cudaFree(dDA), cudaFree(dDB), cudaFree(dGY);
	free(qkv), free(x), free(w), free(out), free(rstd), free(g), free(dx), free(dw);
	free(a), free(b), free(y), free(da), free(db), free(gy);
}

static void t_elementwise(int dt)
{
	size_t n = 1000003;  /* not a multiple of any block size */
	float *x = hrand(n, 3), *y = hrand(n, 1), *out = hrand(n, 1), *g = hrand(n, 1);
	float *da = hrand(n, 1), *db = hrand(n, 1);
	uint8_t *mask = malloc(n), *gmask = malloc(n);
	void *dx, *dy, *dout, *dg, *dda, *ddb;
	uint8_t *dmask;
	size_t same = 0;

	quant(x, n, dt), quant(y, n, dt), quant(g, n, dt), quant(da, n, dt), quant(db, n, dt);
	dx = up(x, n, dt), dy = up(y, n, dt), dout = up(out, n, dt), dg = up(g, n, dt);
	dda = up(da, n, dt), ddb = up(db, n, dt);
	ck(cudaMalloc((void **)&dmask, n), "cudaMalloc");
	backend_cpu.gelu_fwd(&backend_cpu, out, x, n);
	cuk_gelu_fwd(K, dt, dout, dx, n);
	check("gelu_fwd", dt, down(dout, n, dt), out, n, dt ? 1e-2 : 1e-5);
	backend_cpu.gelu_bwd(&backend_cpu, da, g, x, n);
	cuk_gelu_bwd(K, dt, dda, dg, dx, n);
	check("gelu_bwd (+=)", dt, down(dda, n, dt), da, n, dt ? 1e-2 : 1e-5);
	backend_cpu.add_fwd(&backend_cpu, out, x, y, n);
	cuk_add_fwd(K, dt, dout, dx, dy, n);
	check("add_fwd", dt, down(dout, n, dt), out, n, dt ? 1e-2 : 1e-6);
	backend_cpu.add_bwd(&backend_cpu, da, db, g, n);
	cuk_add_bwd(K, dt, dda, ddb, dg, n);
	check("add_bwd da (+=)", dt, down(dda, n, dt), da, n, dt ? 1e-2 : 1e-6);
	check("add_bwd db (+=)", dt, down(ddb, n, dt), db, n, dt ? 1e-2 : 1e-6);
	backend_cpu.dropout_fwd(&backend_cpu, out, mask, x, n, 0.1f, 1234, 77ull << 40);
	cuk_dropout_fwd(K, dt, dout, dmask, dx, n, 0.1f, 1234, 77ull << 40);
	check("dropout_fwd", dt, down(dout, n, dt), out, n, dt ? 1e-2 : 1e-6);
	ck(cudaMemcpy(gmask, dmask, n, cudaMemcpyDeviceToHost), "download");
	for (size_t i = 0; i < n; i++)
		same += gmask[i] == mask[i];
	expect(same == n, "dropout mask %s identical to the cpu's: %zu of %zu", dtn(dt), same, n);
	backend_cpu.dropout_bwd(&backend_cpu, da, g, mask, n, 0.1f);
	cuk_dropout_bwd(K, dt, dda, dg, dmask, n, 0.1f);
	check("dropout_bwd (+=)", dt, down(dda, n, dt), da, n, dt ? 1e-2 : 1e-6);
	cudaFree(dx), cudaFree(dy), cudaFree(dout), cudaFree(dg), cudaFree(dda), cudaFree(ddb), cudaFree(dmask);
	free(x), free(y), free(out), free(g), free(da), free(db), free(mask), free(gmask);
}

static void t_xent(int dt, int B, int T, int V)
{
	size_t n = (size_t)B * T * V;
	int32_t *ids = ids_for(B, T, V), *dids = upbytes(ids, (size_t)B * 2 * T * 4);
	float *logits = hrand(n, 4), *logp = malloc(n * 4), *dl = hrand(n, 1e-3f);
	void *dlog, *dlogp, *ddl;
	double ref = 0, got = 0;
	char name[64];

	quant(logits, n, dt), quant(dl, n, dt);
	dlog = up(logits, n, dt), ddl = up(dl, n, dt);
	ck(cudaMalloc(&dlogp, n * cuk_dsize(dt)), "cudaMalloc");
	backend_cpu.xent_fwd(&backend_cpu, logp, &ref, logits, ids, B, T, V);
	cuk_xent_fwd(K, dt, dlogp, &got, dlog, dids, B, T, V);
	snprintf(name, sizeof name, "xent_fwd V=%d", V);
	check(name, dt, down(dlogp, n, dt), logp, n, dt ? 1e-2 : 1e-5);
	expect(fabs(got - ref) <= 1e-5 * fabs(ref), "xent_fwd loss %s: gpu %.9g cpu %.9g (tol 1e-5)", dtn(dt), got, ref);
	/* the backward reads logp as the forward stored it */
	quant(logp, n, dt);
	backend_cpu.xent_bwd(&backend_cpu, dl, logp, ids, B, T, V, 1.0f / (B * T));
	cuk_xent_bwd(K, dt, ddl, dlogp, dids, B, T, V, 1.0f / (B * T));
	check("xent_bwd (+=)", dt, down(ddl, n, dt), dl, n, dt ? 1e-2 : 1e-5);
	cudaFree(dids), cudaFree(dlog), cudaFree(dlogp), cudaFree(ddl);
	free(ids), free(logits), free(logp), free(dl);
}

static void t_optim(void)
{
	size_t n = 100003;
	float *p = hrand(n, 1), *g = hrand(n, 0.1f), *m = hrand(n, 0.01f), *v = hrand(n, 0.01f), *y = hrand(n, 1);
	float *dp, *dg, *dm, *dv, *dy;
	double ss = 0, got;
	uint16_t *hb = malloc(n * 2);
	void *db;

	for (size_t i = 0; i < n; i++)
		v[i] = fabsf(v[i]);
	dp = up(p, n, 0), dg = up(g, n, 0), dm = up(m, n, 0), dv = up(v, n, 0), dy = up(y, n, 0);
	for (int t = 1; t <= 3; t++) {
		backend_cpu.adamw(&backend_cpu, p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
		cuk_adamw(K, dp, dg, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
	}
	check("adamw x3 params", 0, down(dp, n, 0), p, n, 1e-5);
	check("adamw x3 m", 0, down(dm, n, 0), m, n, 1e-5);
	check("adamw x3 v", 0, down(dv, n, 0), v, n, 1e-5);
	backend_cpu.sgd(&backend_cpu, p, g, m, n, 1e-2f, 0.9f);
	cuk_sgd(K, dp, dg, dm, n, 1e-2f, 0.9f);
	check("sgd momentum", 0, down(dp, n, 0), p, n, 1e-5);
	backend_cpu.axpy(&backend_cpu, y, g, 0.5f, n);
	cuk_axpy(K, dy, dg, 0.5f, n);
	check("axpy", 0, down(dy, n, 0), y, n, 1e-6);
	backend_cpu.scale(&backend_cpu, y, 0.25f, n);
	cuk_scale(K, dy, 0.25f, n);
	check("scale", 0, down(dy, n, 0), y, n, 1e-6);
	for (size_t i = 0; i < n; i++)
		ss += (double)g[i] * g[i];
	got = cuk_sumsq(K, dg, n);
	expect(fabs(got - ss) <= 1e-12 * ss, "sumsq (gradient norm^2): gpu %.15g cpu %.15g (tol 1e-12)", got, ss);
	expect(cuk_sumsq(K, dg, n) == got, "sumsq is deterministic (fixed-order reduction)");
	ck(cudaMalloc(&db, n * 2), "cudaMalloc");
	cuk_cast(K, CUK_BF16, db, CUK_F32, dg, n);
	ck(cudaDeviceSynchronize(), "cast");
	ck(cudaMemcpy(hb, db, n * 2, cudaMemcpyDeviceToHost), "download");
	{
		size_t same = 0;
		for (size_t i = 0; i < n; i++)
			same += hb[i] == f2bf(g[i]);
		expect(same == n, "cast f32->bf16 rounds to nearest even: %zu of %zu identical", same, n);
	}
	{
		/* ZeRO-style mixed precision: bf16 gradients into the fp32 master, the bf16
		 * working copy written back (the reference: fp32 AdamW on rounded grads) */
		float *gq = hcopy(g, n), *w16;
		void *dgq, *dwork;
		quant(gq, n, CUK_BF16);
		dgq = up(gq, n, CUK_BF16);
		ck(cudaMalloc(&dwork, n * 2), "cudaMalloc");
		backend_cpu.adamw(&backend_cpu, p, gq, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 4);
		cuk_adamw_mp(K, CUK_BF16, dwork, dp, dgq, dm, dv, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 4);
		check("adamw_mp master (bf16 g)", CUK_BF16W, down(dp, n, 0), p, n, 1e-5);
		w16 = hcopy(p, n);
		quant(w16, n, CUK_BF16);
		check("adamw_mp working copy", CUK_BF16W, down(dwork, n, CUK_BF16), w16, n, 1e-2);
		expect(fabs(cuk_sumsq_dt(K, CUK_BF16, dgq, n) - cuk_sumsq(K, (float *)dg, n)) <= 1e-2 * ss,
		       "sumsq of bf16 gradients within 1e-2 of the fp32 ones");
		cudaFree(dgq), cudaFree(dwork);
		free(gq), free(w16);
	}
	cudaFree(dp), cudaFree(dg), cudaFree(dm), cudaFree(dv), cudaFree(dy), cudaFree(db);
	free(p), free(g), free(m), free(v), free(y), free(hb);
}

/* ---- the training step: cuda backend against cpu backend ------------------------ */

static int train(struct backend *be, struct rt_comm *world, const char *model, const char *spec,
		 int B, int T, int recompute, double dropout, int steps, double *loss, size_t *peak,
		 struct err *e)
{
	struct model m;
	struct strat_opts o;
	struct strat s;
	int rc, i;

	memset(&o, 0, sizeof o);
	if ((rc = model_load(model, &m, NULL, 0, e)))
		return rc;
	if (strat_parse(spec, &o))
		return err_set(e, ERR_INPUT, NULL, 0, "bad strategy %s", spec);
	o.optimizer = OPT_ADAMW, o.micro_batch = B, o.grad_accum = 1, o.bucket_mb = 25;
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01, o.momentum = 0.9;
	o.seed = 1234, o.group = world->size, o.devices = 1, o.recompute = recompute;
	plan_set_prefetch(&o.plan, 0, PREFETCH_BACKWARD_PRE);
	if ((rc = strat_init(&s, &o, &m, T, dropout, be, world, e)))
		return rc;
	for (i = 0; i < steps && !rc; i++) {
		rc = strat_step(&s, e);
		loss[i] = s.loss;
	}
	*peak = strat_peak(&s, NULL);
	strat_free(&s);
	return rc;
}

/* cstep's losses over n steps */
static int csteps(const char *model, int B, int T, int dt, double dropout, int flash, int n, double *loss,
		  struct err *e)
{
	struct model m;
	struct cstep c;
	int rc = model_load(model, &m, NULL, 0, e);

	if (!rc)
		rc = cstep_init(&c, K, &m, B, T, dt, dropout, 1234, flash, e);
	for (int i = 0; i < n && !rc; i++) {
		rc = cstep_step(&c, e);
		loss[i] = c.loss;
	}
	if (!rc)
		cstep_free(&c);
	return rc;
}

static double max_rel(const double *a, const double *b, int n)
{
	double w = 0;
	for (int i = 0; i < n; i++)
		w = fmax(w, fabs(a[i] - b[i]) / fabs(a[i]));
	return w;
}

/* Mixed precision: the bf16 step's first losses against the cpu backend's fp32
 * run of the same model, init, samples and AdamW. bf16 keeps 8 significant
 * bits (relative rounding 2^-9 = 0.2%) on every activation; over a dozen ops
 * per block the loss moves by well under 2% — the stated tolerance. The fp32
 * step must match to 1e-4 (summation order only), and fused attention must
 * give the unfused losses. */
static void t_mixed(struct backend *cpu, struct rt_comm *world)
{
	struct err e = {0};
	double ref[8], f32[8], b16[8], fl[8];
	size_t peak;

	if (train(cpu, world, "gpt-tiny", "single", 4, 64, 0, 0.1, 8, ref, &peak, &e) ||
	    csteps("gpt-tiny", 4, 64, CUK_F32, 0.1, 0, 8, f32, &e) ||
	    csteps("gpt-tiny", 4, 64, CUK_BF16, 0.1, 0, 8, b16, &e)) {
		expect(0, "mixed precision on gpt-tiny: %s", e.msg);
		return;
	}
	expect(max_rel(ref, f32, 8) <= 1e-4, "gpt-tiny fp32 step (cstep) vs cpu, 8 steps: %.6f..%.6f vs "
	       "%.6f..%.6f, max rel diff %.1e (tol 1e-4)", f32[0], f32[7], ref[0], ref[7], max_rel(ref, f32, 8));
	expect(max_rel(ref, b16, 8) <= 2e-2, "gpt-tiny bf16 step vs cpu fp32, 8 steps: %.6f..%.6f vs "
	       "%.6f..%.6f, max rel diff %.1e (tol 2e-2)", b16[0], b16[7], ref[0], ref[7], max_rel(ref, b16, 8));
	if (csteps("gpt-tiny", 4, 64, CUK_BF16W, 0.1, 0, 8, b16, &e))
		expect(0, "bf16w on gpt-tiny: %s", e.msg);
	else
		expect(max_rel(ref, b16, 8) <= 2e-2, "gpt-tiny bf16w step (bf16 params and grads) vs cpu fp32, 8 "
		       "steps: %.6f..%.6f vs %.6f..%.6f, max rel diff %.1e (tol 2e-2)", b16[0], b16[7], ref[0],
		       ref[7], max_rel(ref, b16, 8));
	if (train(cpu, world, "llama-tiny", "single", 4, 64, 0, 0, 8, ref, &peak, &e) ||
	    csteps("llama-tiny", 4, 64, CUK_BF16, 0, 0, 8, b16, &e))
		expect(0, "mixed precision on llama-tiny: %s", e.msg);
	else
		expect(max_rel(ref, b16, 8) <= 2e-2, "llama-tiny bf16 step vs cpu fp32, 8 steps: %.6f..%.6f vs "
		       "%.6f..%.6f, max rel diff %.1e (tol 2e-2)", b16[0], b16[7], ref[0], ref[7], max_rel(ref, b16, 8));
	/* GPT-2 124M at 32 tokens: the cpu reference takes a few seconds a step */
	if (train(cpu, world, "gpt2", "single", 1, 32, 0, 0, 3, ref, &peak, &e) ||
	    csteps("gpt2", 1, 32, CUK_BF16, 0, 0, 3, b16, &e)) {
		expect(0, "mixed precision on gpt2: %s", e.msg);
		return;
	}
	expect(max_rel(ref, b16, 3) <= 2e-2, "gpt2 bf16 step vs cpu fp32, 3 steps: %.5f %.5f %.5f vs "
	       "%.5f %.5f %.5f, max rel diff %.1e (tol 2e-2)", b16[0], b16[1], b16[2], ref[0], ref[1], ref[2],
	       max_rel(ref, b16, 3));
	if (csteps("gpt2", 2, 256, CUK_F32, 0, 0, 3, f32, &e) || csteps("gpt2", 2, 256, CUK_F32, 0, 1, 3, fl, &e)) {
		expect(0, "fused attention on gpt2: %s", e.msg);
		return;
	}
	expect(max_rel(f32, fl, 3) <= 1e-4, "gpt2 T=256 fp32: fused attention losses %.6f..%.6f vs unfused "
	       "%.6f..%.6f, max rel diff %.1e (tol 1e-4)", fl[0], fl[2], f32[0], f32[2], max_rel(f32, fl, 3));
}

static void t_training(struct backend *cuda, struct rt_comm *cworld)
{
	struct backend *cpu;
	struct rt_comm world;
	struct err e = {0};
	double a[5], b[5];
	size_t pa, pb;
	const char *specs[] = {"single", "ddp", "zero3"};

	if (backend_open("cpu", &cpu, &world, &e)) {
		expect(0, "cpu backend: %s", e.msg);
		return;
	}
	/* fp32 on both: kernels differ in summation order only; over 5 AdamW
	 * steps the losses agree to 1e-4 relative; the arenas see the same schedule */
	for (int r = 0; r <= 2; r++) {
		const char *model = r < 2 ? "gpt-tiny" : "llama-tiny";
		double drop = r < 2 ? 0.1 : 0;
		int ok = !train(cpu, &world, model, "single", 4, 64, r == 1, drop, 5, a, &pa, &e) &&
			 !train(cuda, cworld, model, "single", 4, 64, r == 1, drop, 5, b, &pb, &e);
		double worst = 0;
		if (!ok) {
			expect(0, "training on %s: %s", model, e.msg);
			continue;
		}
		for (int i = 0; i < 5; i++)
			worst = fmax(worst, fabs(a[i] - b[i]) / fabs(a[i]));
		expect(worst <= 1e-4, "%s single%s, 5 steps: losses cpu %.6f..%.6f cuda %.6f..%.6f, "
		       "max rel diff %.1e (tol 1e-4)", model, r == 1 ? " + full recompute" : "", a[0], a[4], b[0], b[4],
		       worst);
		expect(pa == pb, "%s single%s: arena peak cuda %zu = cpu %zu bytes (same schedule)", model,
		       r == 1 ? " + full recompute" : "", pb, pa);
	}
	t_mixed(cpu, &world);
	/* rank 0 of 4 emulated (--emulate-world 4): same losses and peaks on both backends */
	for (size_t k = 1; k < sizeof specs / sizeof specs[0]; k++) {
		struct rt_comm ew1, ew2;
		int ok;
		backend_emulated_world(&ew1, 4);
		backend_emulated_world(&ew2, 4);
		ok = !train(cpu, &ew1, "gpt-tiny", specs[k], 2, 64, 0, 0, 3, a, &pa, &e) &&
		     !train(cuda, &ew2, "gpt-tiny", specs[k], 2, 64, 0, 0, 3, b, &pb, &e);
		if (!ok) {
			expect(0, "emulated %s: %s", specs[k], e.msg);
			continue;
		}
		expect(fabs(a[2] - b[2]) <= 1e-4 * fabs(a[2]) && pa == pb,
		       "--emulate-world 4 %s: loss cpu %.6f cuda %.6f, peak cpu %zu cuda %zu", specs[k], a[2], b[2],
		       pa, pb);
	}
	/* the fixed overhead the runtime measures: what the device holds beyond
	 * the arenas after a gpt2 step (context, cuBLASLt workspace, scratch) */
	if (cuda->device_used) {
		size_t used0 = cuda->device_used(cuda);
		int ok = !train(cuda, cworld, "gpt2", "single", 2, 1024, 0, 0, 1, a, &pb, &e);
		size_t used1 = cuda->device_used(cuda);
		expect(ok && used1 >= used0, "gpt2 B=2 T=1024 step on %s: loss %.4f (ln 50257 = 10.825), peak %.1f MiB, "
		       "fixed overhead %.1f MiB (device in use with no arena block live)", cuda->device,
		       ok ? a[0] : NAN, pb / 1048576.0, used1 / 1048576.0);
		if (!ok)
			printf("     %s\n", e.msg);
	}
	backend_close(cpu);
}

int main(void)
{
	struct backend *cuda;
	struct rt_comm world;
	struct err e = {0};
	int n = 0;
	cudaError_t rc = cudaGetDeviceCount(&n);
	const char *seed = getenv("SHARDCAST_SEED");

	if (rc != cudaSuccess || n == 0) {
		printf("SKIP: no CUDA device (cudaGetDeviceCount: %s)\n",
		       rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
		return 0;
	}
	rng = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
	printf("gpu_tests: seed %llu (SHARDCAST_SEED=%llu repeats this run)\n", (unsigned long long)rng,
	       (unsigned long long)rng);
	if (backend_open("cuda", &cuda, &world, &e)) {
		printf("FAIL cuda backend: %s\n", e.msg);
		return 1;
	}
	printf("device: %s\n", cuda->device);
	K = backend_cuda_kernels(cuda);
	for (int dt = CUK_F32; dt <= CUK_BF16W; dt++) {
		t_embed(dt);
		t_layernorm(dt, 256, 768);
		t_layernorm(dt, 64, 1600);
		t_matmul(dt, 256, 768, 2304, 1);
		t_matmul(dt, 256, 3072, 768, 1);
		t_matmul(dt, 130, 768, 1000, 0);   /* odd sizes, no bias */
		t_attention(dt, 2, 128, 12, 12, 64);
		t_attention(dt, 1, 100, 2, 2, 128);  /* hs 128, T not a multiple of 32 */
		t_attention(dt, 2, 96, 8, 2, 64);    /* grouped-query: 4 query heads per k/v head */
		t_flash(dt, 2, 128, 12, 12, 64);
		t_flash(dt, 1, 200, 2, 2, 128);
		t_flash(dt, 2, 70, 4, 4, 32);        /* hs 32 */
		t_flash(dt, 1, 130, 8, 2, 64);       /* grouped-query */
		t_llama(dt, 2, 48, 4, 2, 32);
		t_elementwise(dt);
		t_xent(dt, 2, 64, 50257);
	}
	t_optim();
	t_training(cuda, &world);
	printf("gpu: %d passed, %d failed\n", pass, fail);
	cuda->comm_free(cuda, &world);
	backend_close(cuda);
	return fail ? 1 : 0;
}

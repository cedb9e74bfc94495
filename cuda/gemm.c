/*
 * gemm.c — the decoder's products as column-major descriptors (see gemm.h).
 */
#include "gemm.h"

#include <math.h>
#include <string.h>

static struct gemm_desc G(int ta, int tb, int m, int n, int k, int a, long long ao, long long lda,
			  int b, long long bo, long long ldb, int d, long long doff, long long ldd,
			  float alpha, float beta)
{
	struct gemm_desc g;

	memset(&g, 0, sizeof g);
	g.ta = ta, g.tb = tb, g.m = m, g.n = n, g.k = k, g.batch = 1;
	g.a = a, g.ao = ao, g.lda = lda;
	g.b = b, g.bo = bo, g.ldb = ldb;
	g.d = d, g.doff = doff, g.ldd = ldd;
	g.alpha = alpha, g.beta = beta;
	return g;
}

int gemm_matmul_fwd(struct gemm_desc *g, int N, int C, int OC)
{
	/* out (OC, N)cm = W^T: W stored (C, OC)cm, transposed; X (C, N)cm */
	g[0] = G(1, 0, OC, N, C, 2, 0, C, 1, 0, C, 0, 0, OC, 1.0f, 0.0f);
	return 1;
}

int gemm_matmul_bwd(struct gemm_desc *g, int N, int C, int OC, int want_dx)
{
	int n = 0;

	/* dx (C, N)cm += W (C, OC)cm . dout (OC, N)cm */
	if (want_dx)
		g[n++] = G(0, 0, C, N, OC, 4, 0, C, 2, 0, OC, 0, 0, C, 1.0f, 1.0f);
	/* dw (C, OC)cm += X (C, N)cm . dout^T: dout stored (OC, N)cm, transposed */
	g[n] = G(0, 1, C, OC, N, 3, 0, C, 2, 0, OC, 1, 0, C, 1.0f, 1.0f);
	g[n++].grad_out = 1;
	return n;
}

/* The heads of one product: query head h = j g + i for j < NKV (g = NH / NKV).
 * In sample b, rows of qkv are `row` = (NH + 2 NKV) hs wide: q of head h at
 * h hs, k and v of group j at (NH + j) hs and (NH + NKV + j) hs; each head's
 * slice is (hs, T)cm with ld row. A head's (T, T) matrix S[t][u] is
 * (T_u, T_t)cm with ld T, head h of sample b at (b NH + h) T T. ctx rows are
 * NH hs wide. Strides over j: q, ctx g hs; k, v hs; scores g T T. */
struct heads {
	long long row, q, k, v, s, c;  /* element offsets of head j = 0 */
	long long sq, skv, ss, sc;     /* strides over j */
	int hs, NKV;
};

static struct heads layout(int b, int i, int T, int NH, int NKV, int hs)
{
	struct heads h;
	long long g = NH / NKV, base;

	h.row = (long long)(NH + 2 * NKV) * hs;
	base = (long long)b * T * h.row;
	h.q = base + (long long)i * hs;
	h.k = base + (long long)NH * hs;
	h.v = base + (long long)(NH + NKV) * hs;
	h.s = ((long long)b * NH + i) * T * T;
	h.c = (long long)b * T * NH * hs + (long long)i * hs;
	h.sq = g * hs, h.skv = hs, h.ss = g * T * T, h.sc = g * hs;
	h.hs = hs, h.NKV = NKV;
	return h;
}

static struct gemm_desc batched(struct gemm_desc g, int n, long long sa, long long sb, long long sd)
{
	g.batch = n, g.sa = sa, g.sb = sb, g.sd = sd;
	return g;
}

int gemm_attn_score_fwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs)
{
	struct heads h = layout(b, i, T, NH, NKV, hs);

	/* S (T_u, T_t)cm = K^T Q: K (hs, T)cm transposed, Q (hs, T)cm */
	g[0] = batched(G(1, 0, T, T, hs, 1, h.k, h.row, 1, h.q, h.row, 0, h.s, T, 1.0f / sqrtf((float)hs), 0.0f),
		       NKV, h.skv, h.sq, h.ss);
	return 1;
}

int gemm_attn_score_bwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs)
{
	struct heads h = layout(b, i, T, NH, NKV, hs);
	float sc = 1.0f / sqrtf((float)hs);

	/* dQ (hs, T_t) += K (hs, T_u) . dS (T_u, T_t) */
	g[0] = batched(G(0, 0, hs, T, T, 2, h.k, h.row, 1, h.s, T, 0, h.q, h.row, sc, 1.0f), NKV, h.skv, h.ss, h.sq);
	/* dK (hs, T_u) += Q (hs, T_t) . dS^T (T_t, T_u); the group's heads add up in turn */
	g[1] = batched(G(0, 1, hs, T, T, 2, h.q, h.row, 1, h.s, T, 0, h.k, h.row, sc, 1.0f), NKV, h.sq, h.ss, h.skv);
	return 2;
}

int gemm_attn_ctx_fwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs)
{
	struct heads h = layout(b, i, T, NH, NKV, hs);

	/* ctx (hs, T_t), ld NH hs = V (hs, T_u) . att (T_u, T_t) */
	g[0] = batched(G(0, 0, hs, T, T, 2, h.v, h.row, 1, h.s, T, 0, h.c, (long long)NH * hs, 1.0f, 0.0f),
		       NKV, h.skv, h.ss, h.sc);
	return 1;
}

int gemm_attn_ctx_bwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs)
{
	struct heads h = layout(b, i, T, NH, NKV, hs);
	long long C = (long long)NH * hs;

	/* datt (T_u, T_t) += V^T (T_u, hs) . dctx (hs, T_t) */
	g[0] = batched(G(1, 0, T, T, hs, 4, h.v, h.row, 2, h.c, C, 0, h.s, T, 1.0f, 1.0f), NKV, h.skv, h.sc, h.ss);
	/* dV (hs, T_u) += dctx (hs, T_t) . att^T (T_t, T_u) */
	g[1] = batched(G(0, 1, hs, T, T, 2, h.c, C, 3, h.s, T, 1, h.v, h.row, 1.0f, 1.0f), NKV, h.sc, h.ss, h.skv);
	return 2;
}

void gemm_host(const struct gemm_desc *g, float *const *ops)
{
	for (int bt = 0; bt < g->batch; bt++) {
		const float *A = ops[g->a] + g->ao + bt * g->sa, *B = ops[g->b] + g->bo + bt * g->sb;
		float *D = ops[g->d] + g->doff + bt * g->sd;
		for (int j = 0; j < g->n; j++)
			for (int i = 0; i < g->m; i++) {
				double s = 0;
				for (int l = 0; l < g->k; l++) {
					float a = g->ta ? A[l + i * g->lda] : A[i + l * g->lda];
					float b = g->tb ? B[j + l * g->ldb] : B[l + j * g->ldb];
					s += (double)a * b;
				}
				D[i + j * g->ldd] = (float)(g->alpha * s + (g->beta != 0 ? g->beta * D[i + j * g->ldd] : 0));
			}
	}
}

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

/* batched over the NH heads of one sample */
static struct gemm_desc heads(struct gemm_desc g, int NH, long long sa, long long sb, long long sd)
{
	g.batch = NH, g.sa = sa, g.sb = sb, g.sd = sd;
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

/* q, k, v of head h of sample b start at qkv + b T 3C + {0, C, 2C} + h hs and are
 * (hs, T)cm with ld 3C; a head's (T, T) matrix S[t][u] is (T_u, T_t)cm, ld T */
int gemm_attn_score_fwd(struct gemm_desc *g, int b, int T, int C, int NH)
{
	long long hs = C / NH, q = (long long)b * T * 3 * C, tt = (long long)T * T;

	/* S (T_u, T_t)cm = K^T Q: K (hs, T)cm transposed, Q (hs, T)cm */
	g[0] = heads(G(1, 0, T, T, (int)hs, 1, q + C, 3LL * C, 1, q, 3LL * C, 0, b * NH * tt, T,
		       1.0f / sqrtf((float)hs), 0.0f), NH, hs, hs, tt);
	return 1;
}

int gemm_attn_score_bwd(struct gemm_desc *g, int b, int T, int C, int NH)
{
	long long hs = C / NH, q = (long long)b * T * 3 * C, tt = (long long)T * T, s = b * NH * tt;
	float sc = 1.0f / sqrtf((float)hs);

	/* dQ (hs, T_t) += K (hs, T_u) . dS (T_u, T_t) */
	g[0] = heads(G(0, 0, (int)hs, T, T, 2, q + C, 3LL * C, 1, s, T, 0, q, 3LL * C, sc, 1.0f), NH, hs, tt, hs);
	/* dK (hs, T_u) += Q (hs, T_t) . dS^T (T_t, T_u) */
	g[1] = heads(G(0, 1, (int)hs, T, T, 2, q, 3LL * C, 1, s, T, 0, q + C, 3LL * C, sc, 1.0f), NH, hs, tt, hs);
	return 2;
}

int gemm_attn_ctx_fwd(struct gemm_desc *g, int b, int T, int C, int NH)
{
	long long hs = C / NH, q = (long long)b * T * 3 * C, tt = (long long)T * T;

	/* ctx (hs, T_t), ld C = V (hs, T_u) . att (T_u, T_t) */
	g[0] = heads(G(0, 0, (int)hs, T, T, 2, q + 2LL * C, 3LL * C, 1, b * NH * tt, T, 0, (long long)b * T * C, C,
		       1.0f, 0.0f), NH, hs, tt, hs);
	return 1;
}

int gemm_attn_ctx_bwd(struct gemm_desc *g, int b, int T, int C, int NH)
{
	long long hs = C / NH, q = (long long)b * T * 3 * C, tt = (long long)T * T, c = (long long)b * T * C;

	/* datt (T_u, T_t) += V^T (T_u, hs) . dctx (hs, T_t) */
	g[0] = heads(G(1, 0, T, T, (int)hs, 4, q + 2LL * C, 3LL * C, 2, c, C, 0, b * NH * tt, T, 1.0f, 1.0f),
		     NH, hs, hs, tt);
	/* dV (hs, T_u) += dctx (hs, T_t) . att^T (T_t, T_u) */
	g[1] = heads(G(0, 1, (int)hs, T, T, 2, c, C, 3, b * NH * tt, T, 1, q + 2LL * C, 3LL * C, 1.0f, 1.0f),
		     NH, hs, tt, hs);
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

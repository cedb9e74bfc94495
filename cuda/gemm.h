/*
 * gemm.h — the matrix products of the decoder's ops as column-major BLAS
 * descriptors: which operand, at which offset, transposed or not, with which
 * leading dimensions and batch strides. kernels.cu hands them to cuBLASLt;
 * tests/test_gemm.c runs them through a plain column-major product on the host
 * and checks every op against the cpu backend's reference, so the layouts are
 * verified on machines without a GPU.
 *
 * Row-major (R, C) with leading dimension L is column-major (C, R) with the
 * same L: the products below are written on those column-major views
 * (backend.h's shapes: x (N, C), w (OC, C), qkv (B, T, (NH + 2 NKV) hs),
 * scores/att (B, NH, T, T), ctx (B, T, NH hs)).
 */
#ifndef SHARDCAST_CUDA_GEMM_H
#define SHARDCAST_CUDA_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

enum { GEMM_MAX = 3 };

/* D (m x n, ld ldd) = alpha op(A) op(B) + beta D, `batch` times with element
 * strides sa, sb, sd; A, B, D are operands a, b, d of the op (indices into
 * its argument list, see each function) plus element offsets. */
struct gemm_desc {
	int ta, tb;                /* 1: op(X) = X^T */
	int m, n, k, batch;
	int a, b, d;               /* operand indices */
	long long ao, bo, doff;    /* element offsets */
	long long lda, ldb, ldd;
	long long sa, sb, sd;      /* batch strides (elements) */
	float alpha, beta;
	int grad_out;              /* D is a parameter gradient (its type, kernels.h) */
};

/* out (N, OC) = x (N, C) . w^T; operands {0 out, 1 x, 2 w}; bias is added per
 * row of D (an epilogue). Returns the number of descriptors. */
int gemm_matmul_fwd(struct gemm_desc *g, int N, int C, int OC);
/* dx += dout . w (when want_dx), dw += dout^T . x; operands {0 dx, 1 dw, 2 dout, 3 x, 4 w} */
int gemm_matmul_bwd(struct gemm_desc *g, int N, int C, int OC, int want_dx);
/* Attention, per sample b and per query head of each group i in [0, NH/NKV):
 * one product batched over the NKV key/value heads j, for query head
 * h = j (NH/NKV) + i (grouped-query attention: head h reads k/v head h / (NH/NKV);
 * NKV = NH is multi-head attention, i = 0 only). qkv rows are
 * [q (NH x hs) | k (NKV x hs) | v (NKV x hs)]; ctx rows are NH x hs. */
/* scores = q k^T / sqrt(hs) (the causal mask is a separate pass); operands {0 scores, 1 qkv} */
int gemm_attn_score_fwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs);
/* dq += dS k / sqrt(hs), dk += dS^T q / sqrt(hs); operands {0 dqkv, 1 dscores, 2 qkv} */
int gemm_attn_score_bwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs);
/* ctx = att v; operands {0 ctx, 1 att, 2 qkv} */
int gemm_attn_ctx_fwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs);
/* datt += dctx v^T, dv += att^T dctx; operands {0 datt, 1 dqkv, 2 dctx, 3 att, 4 qkv} */
int gemm_attn_ctx_bwd(struct gemm_desc *g, int b, int i, int T, int NH, int NKV, int hs);

/* The host reference of a descriptor, fp32, for tests: ops[i] are the op's
 * operands as float arrays. */
void gemm_host(const struct gemm_desc *g, float *const *ops);

#ifdef __cplusplus
}
#endif

#endif

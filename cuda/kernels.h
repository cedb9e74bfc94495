/*
 * kernels.h — the CUDA kernels of a decoder training step, C-callable.
 *
 * Every kernel has the semantics of the cpu backend's reference of the same
 * name (runtime/backend_cpu.c), which tests/gpu_tests.c checks it against:
 * row-major buffers, token ids (B, 2, T) int32 (inputs then targets), fused
 * qkv rows [q | k | v] (grouped-query: NKV key/value heads), matrices (OC, C)
 * as nn.Linear stores them, LayerNorm statistics (N, 2) fp32 = (mean, rstd),
 * and every backward kernel ACCUMULATES (+=) into its gradient outputs.
 *
 * Precision. `dt` is one of three modes; computation and reductions are
 * fp32 in all of them, LayerNorm statistics and the loss are always fp32:
 *
 *   mode         activations   parameters the   parameter   matrices and
 *                and their     kernels read     gradients   biases of
 *                gradients     (norms, wte,wpe) (dw, db..)  products
 *   CUK_F32      fp32          fp32             fp32        fp32
 *   CUK_BF16     bf16          fp32             fp32        bf16 copy
 *   CUK_BF16W    bf16          bf16             bf16        bf16
 *
 * CUK_BF16 is torch.autocast over fp32 weights: products read a bf16 copy of
 * their weight and bias (cuk_cast) and gradients accumulate into fp32.
 * CUK_BF16W is the shardcast memory contract's mixed precision (sim/models/memory.h
 * S2, ZeRO's 2 + 2 + K bytes): bf16 working parameters and gradients, an fp32
 * master copy that only the optimizer touches (cuk_adamw_mp writes the
 * working copy back). Pointers typed float are fp32 in every mode; `void *`
 * parameters and gradients follow the table.
 *
 * Matrix products and attention's batched products go through cuBLASLt
 * (compute type fp32; fp32 inputs use plain fp32 unless tf32 is set).
 * Everything runs on k->stream, asynchronously; kernels return nothing and
 * stop the process with file:line and a hint on a CUDA/cuBLAS error
 * (cuda/check.h). Functions that return an int return 0 or fill e.
 */
#ifndef SHARDCAST_CUDA_KERNELS_H
#define SHARDCAST_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "err.h"  /* C declarations */

enum cuk_dtype { CUK_F32 = 0, CUK_BF16 = 1, CUK_BF16W = 2 };

enum { CUK_PARTIALS = 1024 };      /* blocks of the deterministic reductions */

struct cuk_plan;

/* The kernels' context: one per device/stream. */
struct cuk {
	void *stream;              /* cudaStream_t the kernels run on */
	void *lt;                  /* cublasLtHandle_t */
	void *ws;                  /* cuBLASLt workspace (device) */
	size_t ws_bytes;
	int tf32;                  /* fp32 products on tensor cores (precision = tf32) */
	double *partial;           /* device (CUK_PARTIALS + 1): reduction scratch */
	double *host_result;       /* pinned host double the reductions land in */
	struct cuk_plan *plans;    /* cached cuBLASLt descriptors and algorithms */
	int nplans, capplans;
};

/* Creates the cuBLASLt handle and the reduction scratch on the current device;
 * ws (ws_bytes, device memory the caller owns) becomes cuBLASLt's workspace.
 * Returns 0 or fills e. */
int cuk_init(struct cuk *k, void *stream, void *ws, size_t ws_bytes, struct err *e);
void cuk_free(struct cuk *k);

/* cuBLASLt's recommended workspace for the current device: 32 MiB on Hopper
 * (sm_90) and later, 4 MiB before (cuBLAS documentation, "cublasSetWorkspace"). */
size_t cuk_workspace_bytes(void);

/* ---- embeddings ---------------------------------------------------------- */
void cuk_embed_fwd(struct cuk *k, int dt, void *out, const int32_t *ids, const void *wte,
		   int B, int T, int C);                          /* out (B,T,C) */
void cuk_embed_bwd(struct cuk *k, int dt, void *dwte, const void *dout, const int32_t *ids,
		   int B, int T, int C);                          /* dwte (V,C) += */
void cuk_pos_fwd(struct cuk *k, int dt, void *out, const void *x, const void *wpe,
		 int B, int T, int C);
/* dx may be NULL (its gradient is dout itself: nothing to add) */
void cuk_pos_bwd(struct cuk *k, int dt, void *dx, void *dwpe, const void *dout,
		 int B, int T, int C);

/* ---- LayerNorm (eps 1e-5), stats (N, 2) fp32 ------------------------------ */
void cuk_layernorm_fwd(struct cuk *k, int dt, void *out, float *stats, const void *x,
		       const void *w, const void *b, int N, int C);
void cuk_layernorm_bwd(struct cuk *k, int dt, void *dx, void *dw, void *db, const void *dout,
		       const void *x, const float *stats, const void *w, int N, int C);

/* ---- matrix products: out (N, OC) = x (N, C) . w (OC, C)^T + bias ---------- */
/* w and bias are of the activations' type (bias may be NULL). Backward:
 * dx (N, C) += dout . w (dx may be NULL); dw (OC, C) and dbias (OC) are of the
 * gradients' type and accumulate (dbias may be NULL). */
void cuk_matmul_fwd(struct cuk *k, int dt, void *out, const void *x, const void *w,
		    const void *bias, int N, int C, int OC);
void cuk_matmul_bwd(struct cuk *k, int dt, void *dx, void *dw, void *dbias, const void *dout,
		    const void *x, const void *w, int N, int C, int OC);

/* ---- attention, unfused (the shardcast graph keeps the softmax output) ----- */
/* qkv rows (B, T, (NH + 2 NKV) hs) = [q (NH x hs) | k (NKV x hs) | v (NKV x hs)];
 * query head h reads key/value head h / (NH / NKV) (grouped-query attention;
 * NKV = NH: multi-head). ctx (B, T, NH hs). */
/* scores (B, NH, T, T) = q k^T / sqrt(hs), -inf above the diagonal.
 * The products run over full T x T blocks, so where the reference skips the
 * entries above the diagonal these kernels need them to be 0 there: dscores
 * of attn_score_bwd and att of attn_ctx_fwd/bwd — which softmax_fwd (exp(-inf)
 * = 0), dropout and softmax_bwd (y = 0 gives 0) guarantee in a step. */
void cuk_attn_score_fwd(struct cuk *k, int dt, void *scores, const void *qkv,
			int B, int T, int NH, int NKV, int hs);
void cuk_attn_score_bwd(struct cuk *k, int dt, void *dqkv, const void *dscores, const void *qkv,
			int B, int T, int NH, int NKV, int hs);
void cuk_softmax_fwd(struct cuk *k, int dt, void *out, const void *in, int rows, int T);
void cuk_softmax_bwd(struct cuk *k, int dt, void *din, const void *dout, const void *out,
		     int rows, int T);
/* ctx = att (B, NH, T, T) . v. Backward: datt's causal triangle (u <= t) gets
 * exactly the reference's values; entries above the diagonal, which the
 * reference leaves alone, receive dctx . v too (one full product is cheaper
 * than a masked one). They meet att = 0 there, so softmax_bwd gives identical
 * input gradients. */
void cuk_attn_ctx_fwd(struct cuk *k, int dt, void *ctx, const void *att, const void *qkv,
		      int B, int T, int NH, int NKV, int hs);
void cuk_attn_ctx_bwd(struct cuk *k, int dt, void *datt, void *dqkv, const void *dctx,
		      const void *att, const void *qkv, int B, int T, int NH, int NKV, int hs);

/* ---- attention, fused (flash-style: online softmax, no T x T buffer) ------- */
/* ctx (B, T, NH hs) and lse (B, NH, T) fp32 = the log-sum-exp of each query's
 * scaled scores, all the backward needs besides qkv and ctx. Memory: O(B T C).
 * Head sizes 32, 64, 128; returns 0, or ERR_INPUT for another size. */
int cuk_flash_fwd(struct cuk *k, int dt, void *ctx, float *lse, const void *qkv,
		  int B, int T, int NH, int NKV, int hs, struct err *e);
/* dqkv += the gradient of ctx = causal_attention(qkv). */
int cuk_flash_bwd(struct cuk *k, int dt, void *dqkv, const void *dctx, const void *qkv,
		  const void *ctx, const float *lse, int B, int T, int NH, int NKV, int hs, struct err *e);

/* ---- Llama's ops ----------------------------------------------------------------- */
/* rotary positions (Su et al. 2021; rotate_half pairs i, i + hs/2, frequency
 * theta^(-2i/hs)) in place on the q and k heads of qkv; dir -1 rotates back
 * (the backward of a rotation, applied to the gradient) */
void cuk_rope(struct cuk *k, int dt, void *qkv, int B, int T, int NH, int NKV, int hs, float theta,
	      int dir);
/* RMSNorm: out = x / rms(x) * w, eps 1e-5; rstd (N) fp32 saved */
void cuk_rmsnorm_fwd(struct cuk *k, int dt, void *out, float *rstd, const void *x, const void *w,
		     int N, int C);
void cuk_rmsnorm_bwd(struct cuk *k, int dt, void *dx, void *dw, const void *dout, const void *x,
		     const float *rstd, const void *w, int N, int C);
/* SwiGLU = silu(gate) * up: the activation and the product */
void cuk_silu_fwd(struct cuk *k, int dt, void *out, const void *x, size_t n);
void cuk_silu_bwd(struct cuk *k, int dt, void *dx, const void *dout, const void *x, size_t n);
void cuk_mul_fwd(struct cuk *k, int dt, void *out, const void *a, const void *b, size_t n);
void cuk_mul_bwd(struct cuk *k, int dt, void *da, void *db, const void *dout, const void *a,
		 const void *b, size_t n);

/* ---- elementwise ----------------------------------------------------------- */
void cuk_gelu_fwd(struct cuk *k, int dt, void *out, const void *x, size_t n);
void cuk_gelu_bwd(struct cuk *k, int dt, void *dx, const void *dout, const void *x, size_t n);
void cuk_add_fwd(struct cuk *k, int dt, void *out, const void *a, const void *b, size_t n);
void cuk_add_bwd(struct cuk *k, int dt, void *da, void *db, const void *dout, size_t n);
void cuk_dropout_fwd(struct cuk *k, int dt, void *out, uint8_t *mask, const void *x, size_t n,
		     float p, uint64_t seed, uint64_t offset);
void cuk_dropout_bwd(struct cuk *k, int dt, void *dx, const void *dout, const uint8_t *mask,
		     size_t n, float p);

/* ---- loss: log-softmax fused with the cross-entropy ------------------------- */
/* logp (B, T, V) = log_softmax(logits); *loss_sum += sum of -logp[target]
 * (summed in double in a fixed order: deterministic; waits for the stream). */
void cuk_xent_fwd(struct cuk *k, int dt, void *logp, double *loss_sum, const void *logits,
		  const int32_t *ids, int B, int T, int V);
/* dlogits += (softmax - onehot(target)) * scale */
void cuk_xent_bwd(struct cuk *k, int dt, void *dlogits, const void *logp, const int32_t *ids,
		  int B, int T, int V, float scale);

/* ---- vectors, optimizers ---------------------------------------------------- */
/* `sdt` below is a storage type: CUK_F32 or CUK_BF16 */
void cuk_axpy_dt(struct cuk *k, int sdt, void *y, const void *x, float a, size_t n);  /* y += a x */
void cuk_scale_dt(struct cuk *k, int sdt, void *y, float a, size_t n);
void cuk_axpy(struct cuk *k, float *y, const float *x, float a, size_t n);
void cuk_scale(struct cuk *k, float *y, float a, size_t n);
/* torch.optim.AdamW on fp32 master weights p from gradients g of type gdt;
 * work (bf16, n) = the updated p rounded, when not NULL; t counts from 1 */
void cuk_adamw_mp(struct cuk *k, int gdt, void *work, float *p, const void *g, float *m, float *v,
		  size_t n, float lr, float b1, float b2, float eps, float wd, int t);
void cuk_adamw(struct cuk *k, float *p, const float *g, float *m, float *v, size_t n, float lr,
	       float b1, float b2, float eps, float wd, int t);
/* torch.optim.SGD (mom NULL: no momentum), same arrangement */
void cuk_sgd_mp(struct cuk *k, int gdt, void *work, float *p, const void *g, float *mom, size_t n,
		float lr, float mu);
void cuk_sgd(struct cuk *k, float *p, const float *g, float *mom, size_t n, float lr, float mu);
/* sum of x[i]^2 in double, fixed order (gradient norm = sqrt); waits */
double cuk_sumsq_dt(struct cuk *k, int sdt, const void *x, size_t n);
double cuk_sumsq(struct cuk *k, const float *x, size_t n);
/* dst (n, type dst_dt) = src (n, type src_dt): fp32 <-> bf16 (round to nearest even) */
void cuk_cast(struct cuk *k, int dst_dt, void *dst, int src_dt, const void *src, size_t n);

/* The kernel context of an open cuda backend be (runtime/backend_cuda.c), NULL
 * for another backend: tests and tools call these kernels on its stream. */
struct backend;
struct cuk *backend_cuda_kernels(struct backend *be);

/* Bytes of one activation element under dt. */
static inline size_t cuk_dsize(int dt)
{
	return dt == CUK_F32 ? 4 : 2;
}

#ifdef __cplusplus
}
#endif

#endif

/*
 * backend.h — what the runtime needs from a device: memory (through the
 * arena), copies, the kernels of a transformer training step and the
 * collectives of the strategies. One strategy implementation runs over any
 * backend: `cpu` (plain C fp32 kernels, MPI collectives; backend_cpu.c) and
 * `cuda` (CUDA kernels, cuBLAS, NCCL; the next step of the runtime).
 *
 * Conventions: fp32 row-major buffers in device memory; shapes in comments
 * use B (micro-batch), T (tokens), C (width), NH (heads), hs = C/NH, V
 * (vocabulary), OC (output channels), N = B*T rows. Every backward kernel
 * ACCUMULATES into its gradient outputs (+=), so a tensor read by several ops
 * collects all its gradients; buffers start zeroed.
 * Token ids are a (B, 2, T) int32 buffer: the inputs, then the targets.
 * Mixed precision (bf16, fp16) keeps 16-bit tensors in fp32 buffers whose
 * values are rounded to the 16-bit type after each write (round; the cpu
 * backend's emulation of 16-bit storage, counted by the arena at 2 bytes per
 * element: arena_alloc_as).
 */
#ifndef SHARDCAST_BACKEND_H
#define SHARDCAST_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "err.h"

/* A parameter a backend function may not use (the cpu backend's context). */
#define RT_UNUSED __attribute__((unused))

/* A group of ranks that run collectives together. */
struct rt_comm {
	int rank, size;
	void *impl;                /* backend's handle (MPI_Comm on cpu) */
	int emulated;              /* rank 0 of `size` alone: collectives are local
				      copies of the same sizes (--emulate-world) */
};

/* A collective in flight. */
struct rt_req {
	void *impl;
	int active;
};

enum copy_kind { COPY_H2D, COPY_D2H, COPY_D2D };

/* Storage types of the runtime's tensors: fp32, or a 16-bit type of mixed
 * precision (sim/models/memory.h S2; plan.h's widths). */
enum rt_dtype { RT_F32, RT_BF16, RT_F16 };

/* A device's backend. Every function takes the backend it was reached
 * through first: its state (streams, handles, the device) is the caller's,
 * opened by backend_open and freed by backend_close, never file-scope. */
struct backend {
	const char *name;          /* "cpu" | "cuda" */
	char device[128];          /* what it runs on, for reports and the store */
	struct arena_dev dev;      /* device allocator under the arenas */
	int overlap;               /* collectives progress while kernels run */

	/* memory */
	void (*copy)(struct backend *be, void *dst, const void *src, size_t bytes, int kind);
	void (*zero)(struct backend *be, void *p, size_t bytes);
	void (*sync)(struct backend *be);

	/* kernels: see backend_cpu.c for the reference definitions */
	void (*embed_fwd)(struct backend *be, float *out, const int32_t *ids, const float *wte, int B, int T, int C);
	void (*embed_bwd)(struct backend *be, float *dwte, const float *dout, const int32_t *ids, int B, int T, int C);
	void (*pos_fwd)(struct backend *be, float *out, const float *x, const float *wpe, int B, int T, int C);
	void (*pos_bwd)(struct backend *be, float *dx, float *dwpe, const float *dout, int B, int T, int C);
	void (*layernorm_fwd)(struct backend *be, float *out, float *stats, const float *x, const float *w,
			      const float *b, int N, int C);
	void (*layernorm_bwd)(struct backend *be, float *dx, float *dw, float *db, const float *dout, const float *x,
			      const float *stats, const float *w, int N, int C);
	void (*matmul_fwd)(struct backend *be, float *out, const float *x, const float *w, const float *bias,
			   int N, int C, int OC);
	void (*matmul_bwd)(struct backend *be, float *dx, float *dw, float *dbias, const float *dout, const float *x,
			   const float *w, int N, int C, int OC);
	/* qkv rows are [q (NH x hs) | k (NKV x hs) | v (NKV x hs)]; query head h
	 * reads key/value head h / (NH / NKV) (grouped-query attention) */
	void (*attn_score_fwd)(struct backend *be, float *scores, const float *qkv, int B, int T, int NH, int NKV, int hs);
	void (*attn_score_bwd)(struct backend *be, float *dqkv, const float *dscores, const float *qkv, int B, int T,
			       int NH, int NKV, int hs);
	void (*softmax_fwd)(struct backend *be, float *out, const float *in, int rows, int T);
	void (*softmax_bwd)(struct backend *be, float *din, const float *dout, const float *out, int rows, int T);
	void (*attn_ctx_fwd)(struct backend *be, float *ctx, const float *att, const float *qkv, int B, int T, int NH,
			     int NKV, int hs);
	void (*attn_ctx_bwd)(struct backend *be, float *datt, float *dqkv, const float *dctx, const float *att,
			     const float *qkv, int B, int T, int NH, int NKV, int hs);
	/* rotary positions (Su et al. 2021, Llama's rotate_half pairing i, i + hs/2,
	 * frequency theta^(-2i/hs)) applied in place to the q and k of qkv rows;
	 * backward rotates the gradients back (dir -1) */
	void (*rope)(struct backend *be, float *qkv, int B, int T, int NH, int NKV, int hs, float theta, int dir);
	/* RMSNorm (Zhang & Sennrich 2019): y = x / rms(x) * w, eps 1e-5, fp32 rstd saved */
	void (*rmsnorm_fwd)(struct backend *be, float *out, float *rstd, const float *x, const float *w, int N, int C);
	void (*rmsnorm_bwd)(struct backend *be, float *dx, float *dw, const float *dout, const float *x, const float *rstd,
			    const float *w, int N, int C);
	void (*silu_fwd)(struct backend *be, float *out, const float *x, size_t n);
	void (*silu_bwd)(struct backend *be, float *dx, const float *dout, const float *x, size_t n);
	void (*mul_fwd)(struct backend *be, float *out, const float *a, const float *b, size_t n);
	void (*mul_bwd)(struct backend *be, float *da, float *db, const float *dout, const float *a, const float *b, size_t n);
	void (*gelu_fwd)(struct backend *be, float *out, const float *x, size_t n);
	void (*gelu_bwd)(struct backend *be, float *dx, const float *dout, const float *x, size_t n);
	void (*add_fwd)(struct backend *be, float *out, const float *a, const float *b, size_t n);
	void (*add_bwd)(struct backend *be, float *da, float *db, const float *dout, size_t n);
	void (*dropout_fwd)(struct backend *be, float *out, uint8_t *mask, const float *x, size_t n, float p,
			    uint64_t seed, uint64_t offset);
	void (*dropout_bwd)(struct backend *be, float *dx, const float *dout, const uint8_t *mask, size_t n, float p);
	/* logp = log_softmax(logits); *loss_sum += sum of -logp[target] (host) */
	void (*xent_fwd)(struct backend *be, float *logp, double *loss_sum, const float *logits, const int32_t *ids,
			 int B, int T, int V);
	/* dlogits += (softmax - onehot(target)) * scale */
	void (*xent_bwd)(struct backend *be, float *dlogits, const float *logp, const int32_t *ids, int B, int T, int V,
			 float scale);
	/* 16-bit storage emulated in fp32 buffers: x rounded in place to the
	 * nearest value of dtype (enum rt_dtype; RT_F32 leaves it), ties to even,
	 * fp16 overflowing to infinity; NULL where the backend has no 16-bit path */
	void (*round)(struct backend *be, float *x, size_t n, int dtype);
	/* how many values of x are infinite or NaN (fp16 loss scaling's check) */
	size_t (*nonfinite)(struct backend *be, const float *x, size_t n);
	void (*axpy)(struct backend *be, float *y, const float *x, float a, size_t n);   /* y += a x */
	void (*scale)(struct backend *be, float *y, float a, size_t n);
	/* optimizers, elementwise over a (shard of a) flat buffer; t counts from 1 */
	void (*adamw)(struct backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
		      float b2, float eps, float wd, int t);
	void (*sgd)(struct backend *be, float *p, const float *g, float *mom, size_t n, float lr, float mu);

	/* collectives over c (sum of fp32); in place as NCCL defines it:
	 * reduce_scatter's recv may be send + rank*count, allgather's send may be
	 * recv + rank*count */
	int (*allreduce)(struct backend *be, struct rt_comm *c, float *buf, size_t n, struct err *e);
	int (*allreduce_start)(struct backend *be, struct rt_comm *c, float *buf, size_t n, struct rt_req *r,
			       struct err *e);
	int (*wait)(struct backend *be, struct rt_req *r, struct err *e);
	int (*reduce_scatter)(struct backend *be, struct rt_comm *c, float *send, float *recv, size_t count,
			      struct err *e);
	int (*allgather)(struct backend *be, struct rt_comm *c, float *send, float *recv, size_t count, struct err *e);
	/* a flat buffer of n elements in shards of sh (the last ones shorter or
	 * empty): rank r's shard [r sh, min(n, (r+1) sh)) to every rank, in place;
	 * and the sum over ranks, rank r's shard of it left at buf[0 ..) */
	int (*allgather_flat)(struct backend *be, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e);
	int (*reduce_scatter_flat)(struct backend *be, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e);
	int (*broadcast)(struct backend *be, struct rt_comm *c, float *buf, size_t n, int root, struct err *e);
	int (*barrier)(struct backend *be, struct rt_comm *c, struct err *e);
	/* host values, for agreement between ranks (trial outcomes, losses) */
	int (*allreduce_host)(struct backend *be, struct rt_comm *c, double *v, int n, int op_max, struct err *e);
	int (*comm_split)(struct backend *be, struct rt_comm *c, int color, int key, struct rt_comm *out, struct err *e);
	void (*comm_free)(struct backend *be, struct rt_comm *c);

	/* bytes of device memory this process holds (cudaMemGetInfo's total -
	 * free, after waiting for the device and returning cached blocks); minus
	 * the arenas' live bytes it is the fixed overhead. NULL on cpu. */
	size_t (*device_used)(struct backend *be);
};

/* The process's backends. Returns 0 or fills e (cuda: a clear error until the
 * CUDA backend is built). world gets all ranks (MPI_COMM_WORLD, or a world of
 * one without mpirun). */
int backend_open(const char *name, struct backend **be, struct rt_comm *world, struct err *e);
void backend_close(struct backend *be);

/* A world of one on the cpu backend (tests that run a single rank inside an
 * MPI job use it as the reference). */
int backend_cpu_self(struct rt_comm *self);

/* An emulated world of `size` ranks of which this process is rank 0: every
 * collective keeps its buffers' sizes and touches only local memory, so one
 * process measures the memory of a rank of an N-rank job (the numbers it
 * computes are not the N-rank job's). */
void backend_emulated_world(struct rt_comm *c, int size);

extern struct backend backend_cpu;

/* x rounded to bfloat16 (8-bit mantissa) / IEEE fp16 (10-bit mantissa, max
 * 65504, subnormals from 2^-24), to nearest, ties to even: the cpu backend's
 * emulation of 16-bit storage. */
float rt_round_bf16(float x);
float rt_round_f16(float x);

/* The cuda backend (backend_cuda.c; backend_cuda_none.c in a build without
 * nvcc): one GPU per rank chosen by local rank, NCCL collectives. Fails with
 * a clear message (ERR_SYSTEM) when no GPU or driver is present. */
int backend_cuda_open(struct backend **be, struct rt_comm *world, struct err *e);
void backend_cuda_close(struct backend *be);

#endif

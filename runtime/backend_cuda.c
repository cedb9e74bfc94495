/*
 * backend_cuda.c — the cuda backend: the kernels of cuda/kernels.cu on one
 * GPU per rank, collectives over NCCL, ranks started by mpirun or srun.
 *
 * Device: the rank's local rank (OMPI_COMM_WORLD_LOCAL_RANK, LOCAL_RANK,
 * SLURM_LOCALID, else MPI's shared-memory split) picks the GPU; one GPU per
 * rank. Streams: kernels and copies run on a compute stream; NCCL runs on a
 * communication stream. A blocking collective (allreduce, reduce_scatter,
 * allgather, broadcast) is ordered after the compute stream's work and the
 * compute stream after it (events), so it returns at once to the host and
 * everything later sees its result. allreduce_start/wait let DDP's bucket
 * all-reduces run on the communication stream while backward kernels run.
 *
 * Memory: the arenas take device memory with cudaMalloc. Blocks the arena
 * frees are kept for reuse by an allocation of the same size (the step
 * repeats its sizes), because cudaFree synchronises the whole device and
 * would serialise the two streams; on a failed cudaMalloc every kept block is
 * returned and the allocation retried, and device_used() returns them too, so
 * the cache never changes what fits. SHARDCAST_CUDA_CACHE=0 turns it off.
 * Reuse is safe in stream order: blocks are freed and reused by host calls
 * that enqueue on the compute stream, and every collective is joined into it.
 *
 * Emulated worlds (--emulate-world, rt_comm.emulated) keep every collective
 * on the device with the cpu backend's local semantics: nothing moves but a
 * gather's own shard; the other ranks' shards read as zeros.
 *
 * The fixed overhead (CUDA context, cuBLASLt workspace, NCCL buffers, the
 * reduction scratch) is what device_used() reports beyond the arenas' live
 * bytes; validate reads it after the timed steps, when every arena is empty.
 *
 * The state of the device is a struct cuda_backend the caller owns (from
 * backend_cuda_open to backend_cuda_close); every function reaches it through
 * the struct backend it is called with.
 */
#include "backend.h"
#include "launch.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

struct ccomm {                 /* an rt_comm's impl */
	MPI_Comm mc;
	ncclComm_t nc;
};

struct cblock {
	void *p;
	size_t bytes;
	int used;
};

/* One GPU's backend: struct backend first (what the caller holds and passes
 * to every function), then the device's state. backend_cuda_open allocates
 * it, backend_cuda_close frees it: nothing of it lives at file scope. */
struct cuda_backend {
	struct backend be;
	int dev, mpi_inited, cache, kernels;
	cudaStream_t compute, comm;
	cudaEvent_t ev_compute, ev_comm;
	void *ws;                  /* cuBLASLt workspace */
	struct cuk k;
	struct ccomm *world;       /* the world's handle, until comm_free or close */
	struct cblock *blk;        /* every block obtained from cudaMalloc */
	size_t nblk, capblk;
};

static struct cuda_backend *CB(struct backend *be)
{
	return (struct cuda_backend *)be;
}

/* ---- memory --------------------------------------------------------------- */

static void trim(struct cuda_backend *g)
{
	size_t i, j = 0;

	for (i = 0; i < g->nblk; i++) {
		if (g->blk[i].used)
			g->blk[j++] = g->blk[i];
		else
			CUDA_CHECK(cudaFree(g->blk[i].p));
	}
	g->nblk = j;
}

static int dev_alloc(void *ctx, void **p, size_t bytes)
{
	struct cuda_backend *g = ctx;
	cudaError_t rc;
	size_t i;

	for (i = 0; i < g->nblk; i++)
		if (!g->blk[i].used && g->blk[i].bytes == bytes) {
			g->blk[i].used = 1;
			*p = g->blk[i].p;
			return 0;
		}
	if (g->nblk == g->capblk) {
		size_t n = g->capblk ? 2 * g->capblk : 256;
		struct cblock *nb = realloc(g->blk, n * sizeof *nb);
		if (!nb)
			return -1;
		g->blk = nb;
		g->capblk = n;
	}
	rc = cudaMalloc(p, bytes);
	if (rc == cudaErrorMemoryAllocation) {
		cudaGetLastError();  /* not sticky: clear it so later checks don't report it */
		trim(g);
		rc = cudaMalloc(p, bytes);
	}
	if (rc != cudaSuccess) {
		cudaGetLastError();
		*p = NULL;
		return rc == cudaErrorMemoryAllocation ? 1 : -1;  /* 1: the device is full */
	}
	g->blk[g->nblk++] = (struct cblock){*p, bytes, 1};
	return 0;
}

static void dev_free(void *ctx, void *p)
{
	struct cuda_backend *g = ctx;
	size_t i;

	for (i = g->nblk; i-- > 0;)
		if (g->blk[i].p == p) {
			if (g->cache) {
				g->blk[i].used = 0;
			} else {
				CUDA_CHECK(cudaFree(p));
				g->blk[i] = g->blk[--g->nblk];
			}
			return;
		}
	abort();  /* not ours: a bug in the caller */
}

static size_t device_used(struct backend *be)
{
	struct cuda_backend *g = CB(be);
	size_t fr = 0, total = 0;

	CUDA_CHECK(cudaStreamSynchronize(g->compute));
	CUDA_CHECK(cudaStreamSynchronize(g->comm));
	trim(g);
	CUDA_CHECK(cudaMemGetInfo(&fr, &total));
	return total - fr;
}

static void c_copy(struct backend *be, void *dst, const void *src, size_t bytes, int kind)
{
	struct cuda_backend *g = CB(be);
	if (!bytes)
		return;
	/* cudaMemcpyDefault: unified addressing tells host from device */
	CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g->compute));
	if (kind == COPY_D2H)
		CUDA_CHECK(cudaStreamSynchronize(g->compute));
}

static void c_zero(struct backend *be, void *p, size_t bytes)
{
	struct cuda_backend *g = CB(be);
	if (bytes)
		CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, g->compute));
}

static void c_sync(struct backend *be)
{
	struct cuda_backend *g = CB(be);
	CUDA_CHECK(cudaStreamSynchronize(g->compute));
	CUDA_CHECK(cudaStreamSynchronize(g->comm));
}

/* ---- kernels (fp32): the cuk_* kernels on the compute stream --------------- */

static void embed_fwd(struct backend *be, float *out, const int32_t *ids, const float *wte, int B, int T, int C)
{
	cuk_embed_fwd(&CB(be)->k, CUK_F32, out, ids, wte, B, T, C);
}

static void embed_bwd(struct backend *be, float *dwte, const float *dout, const int32_t *ids, int B, int T, int C)
{
	cuk_embed_bwd(&CB(be)->k, CUK_F32, dwte, dout, ids, B, T, C);
}

static void pos_fwd(struct backend *be, float *out, const float *x, const float *wpe, int B, int T, int C)
{
	cuk_pos_fwd(&CB(be)->k, CUK_F32, out, x, wpe, B, T, C);
}

static void pos_bwd(struct backend *be, float *dx, float *dwpe, const float *dout, int B, int T, int C)
{
	cuk_pos_bwd(&CB(be)->k, CUK_F32, dx, dwpe, dout, B, T, C);
}

static void layernorm_fwd(struct backend *be, float *out, float *stats, const float *x, const float *w, const float *b,
			  int N, int C)
{
	cuk_layernorm_fwd(&CB(be)->k, CUK_F32, out, stats, x, w, b, N, C);
}

static void layernorm_bwd(struct backend *be, float *dx, float *dw, float *db, const float *dout, const float *x,
			  const float *stats, const float *w, int N, int C)
{
	cuk_layernorm_bwd(&CB(be)->k, CUK_F32, dx, dw, db, dout, x, stats, w, N, C);
}

static void matmul_fwd(struct backend *be, float *out, const float *x, const float *w, const float *bias, int N, int C, int OC)
{
	cuk_matmul_fwd(&CB(be)->k, CUK_F32, out, x, w, bias, N, C, OC);
}

static void matmul_bwd(struct backend *be, float *dx, float *dw, float *dbias, const float *dout, const float *x,
		       const float *w, int N, int C, int OC)
{
	cuk_matmul_bwd(&CB(be)->k, CUK_F32, dx, dw, dbias, dout, x, w, N, C, OC);
}

static void attn_score_fwd(struct backend *be, float *scores, const float *qkv, int B, int T, int NH, int NKV, int hs)
{
	cuk_attn_score_fwd(&CB(be)->k, CUK_F32, scores, qkv, B, T, NH, NKV, hs);
}

static void attn_score_bwd(struct backend *be, float *dqkv, const float *dscores, const float *qkv, int B, int T, int NH, int NKV,
			   int hs)
{
	cuk_attn_score_bwd(&CB(be)->k, CUK_F32, dqkv, dscores, qkv, B, T, NH, NKV, hs);
}

static void softmax_fwd(struct backend *be, float *out, const float *in, int rows, int T)
{
	cuk_softmax_fwd(&CB(be)->k, CUK_F32, out, in, rows, T);
}

static void softmax_bwd(struct backend *be, float *din, const float *dout, const float *out, int rows, int T)
{
	cuk_softmax_bwd(&CB(be)->k, CUK_F32, din, dout, out, rows, T);
}

static void attn_ctx_fwd(struct backend *be, float *ctx, const float *att, const float *qkv, int B, int T, int NH, int NKV, int hs)
{
	cuk_attn_ctx_fwd(&CB(be)->k, CUK_F32, ctx, att, qkv, B, T, NH, NKV, hs);
}

static void attn_ctx_bwd(struct backend *be, float *datt, float *dqkv, const float *dctx, const float *att, const float *qkv,
			 int B, int T, int NH, int NKV, int hs)
{
	cuk_attn_ctx_bwd(&CB(be)->k, CUK_F32, datt, dqkv, dctx, att, qkv, B, T, NH, NKV, hs);
}

static void rope(struct backend *be, float *qkv, int B, int T, int NH, int NKV, int hs, float theta, int dir)
{
	cuk_rope(&CB(be)->k, CUK_F32, qkv, B, T, NH, NKV, hs, theta, dir);
}

static void rmsnorm_fwd(struct backend *be, float *out, float *rstd, const float *x, const float *w, int N, int C)
{
	cuk_rmsnorm_fwd(&CB(be)->k, CUK_F32, out, rstd, x, w, N, C);
}

static void rmsnorm_bwd(struct backend *be, float *dx, float *dw, const float *dout, const float *x, const float *rstd,
			const float *w, int N, int C)
{
	cuk_rmsnorm_bwd(&CB(be)->k, CUK_F32, dx, dw, dout, x, rstd, w, N, C);
}

static void silu_fwd(struct backend *be, float *out, const float *x, size_t n)
{
	cuk_silu_fwd(&CB(be)->k, CUK_F32, out, x, n);
}

static void silu_bwd(struct backend *be, float *dx, const float *dout, const float *x, size_t n)
{
	cuk_silu_bwd(&CB(be)->k, CUK_F32, dx, dout, x, n);
}

static void mul_fwd(struct backend *be, float *out, const float *a, const float *b, size_t n)
{
	cuk_mul_fwd(&CB(be)->k, CUK_F32, out, a, b, n);
}

static void mul_bwd(struct backend *be, float *da, float *db, const float *dout, const float *a, const float *b, size_t n)
{
	cuk_mul_bwd(&CB(be)->k, CUK_F32, da, db, dout, a, b, n);
}

static void gelu_fwd(struct backend *be, float *out, const float *x, size_t n)
{
	cuk_gelu_fwd(&CB(be)->k, CUK_F32, out, x, n);
}

static void gelu_bwd(struct backend *be, float *dx, const float *dout, const float *x, size_t n)
{
	cuk_gelu_bwd(&CB(be)->k, CUK_F32, dx, dout, x, n);
}

static void add_fwd(struct backend *be, float *out, const float *a, const float *b, size_t n)
{
	cuk_add_fwd(&CB(be)->k, CUK_F32, out, a, b, n);
}

static void add_bwd(struct backend *be, float *da, float *db, const float *dout, size_t n)
{
	cuk_add_bwd(&CB(be)->k, CUK_F32, da, db, dout, n);
}

static void dropout_fwd(struct backend *be, float *out, uint8_t *mask, const float *x, size_t n, float p, uint64_t seed,
			uint64_t offset)
{
	cuk_dropout_fwd(&CB(be)->k, CUK_F32, out, mask, x, n, p, seed, offset);
}

static void dropout_bwd(struct backend *be, float *dx, const float *dout, const uint8_t *mask, size_t n, float p)
{
	cuk_dropout_bwd(&CB(be)->k, CUK_F32, dx, dout, mask, n, p);
}

static void xent_fwd(struct backend *be, float *logp, double *loss_sum, const float *logits, const int32_t *ids, int B, int T,
		     int V)
{
	cuk_xent_fwd(&CB(be)->k, CUK_F32, logp, loss_sum, logits, ids, B, T, V);
}

static void xent_bwd(struct backend *be, float *dlogits, const float *logp, const int32_t *ids, int B, int T, int V, float scale)
{
	cuk_xent_bwd(&CB(be)->k, CUK_F32, dlogits, logp, ids, B, T, V, scale);
}

static void axpy(struct backend *be, float *y, const float *x, float a, size_t n)
{
	cuk_axpy(&CB(be)->k, y, x, a, n);
}

static void scale(struct backend *be, float *y, float a, size_t n)
{
	cuk_scale(&CB(be)->k, y, a, n);
}

static void adamw(struct backend *be, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
		  float eps, float wd, int t)
{
	cuk_adamw(&CB(be)->k, p, g, m, v, n, lr, b1, b2, eps, wd, t);
}

static void sgd(struct backend *be, float *p, const float *g, float *mom, size_t n, float lr, float mu)
{
	cuk_sgd(&CB(be)->k, p, g, mom, n, lr, mu);
}

/* ---- collectives over NCCL -------------------------------------------------- */

static struct ccomm *cc(struct rt_comm *c)
{
	return (struct ccomm *)c->impl;
}

/* a world of one, or an emulated world (--emulate-world, backend.h):
 * collectives stay on this device, with the cpu backend's local semantics */
#define LOCAL(c) ((c)->size == 1 || (c)->emulated)

/* the communication stream waits for the compute stream's work so far */
static int comm_after_compute(struct cuda_backend *g, struct err *e)
{
	CUDA_TRY(cudaEventRecord(g->ev_compute, g->compute), e);
	CUDA_TRY(cudaStreamWaitEvent(g->comm, g->ev_compute, 0), e);
	return 0;
}

/* the compute stream's later work waits for the communication so far */
static int compute_after_comm(struct cuda_backend *g, struct err *e)
{
	CUDA_TRY(cudaEventRecord(g->ev_comm, g->comm), e);
	CUDA_TRY(cudaStreamWaitEvent(g->compute, g->ev_comm, 0), e);
	return 0;
}

static int c_allreduce(struct backend *be, struct rt_comm *c, float *buf, size_t n, struct err *e)
{
	struct cuda_backend *g = CB(be);
	int rc;

	if (LOCAL(c) || !n)
		return 0;
	if ((rc = comm_after_compute(g, e)))
		return rc;
	NCCL_TRY(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, cc(c)->nc, g->comm), e);
	return compute_after_comm(g, e);
}

static int c_allreduce_start(struct backend *be, struct rt_comm *c, float *buf, size_t n, struct rt_req *r, struct err *e)
{
	struct cuda_backend *g = CB(be);
	cudaEvent_t ev;
	int rc;

	r->active = 0;
	if (LOCAL(c) || !n)
		return 0;
	if ((rc = comm_after_compute(g, e)))
		return rc;
	NCCL_TRY(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, cc(c)->nc, g->comm), e);
	CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), e);
	CUDA_TRY(cudaEventRecord(ev, g->comm), e);
	r->impl = ev;
	r->active = 1;
	return 0;
}

static int c_wait(struct backend *be, struct rt_req *r, struct err *e)
{
	struct cuda_backend *g = CB(be);
	cudaEvent_t ev = (cudaEvent_t)r->impl;

	if (!r->active)
		return 0;
	r->active = 0;
	r->impl = NULL;
	CUDA_TRY(cudaStreamWaitEvent(g->compute, ev, 0), e);
	CUDA_TRY(cudaEventDestroy(ev), e);
	return 0;
}

static int c_reduce_scatter(struct backend *be, struct rt_comm *c, float *send, float *recv, size_t count, struct err *e)
{
	struct cuda_backend *g = CB(be);
	int rc;

	if (LOCAL(c)) {
		if (recv != send)
			c_copy(be, recv, send, count * sizeof *send, COPY_D2D);
		return 0;
	}
	if ((rc = comm_after_compute(g, e)))
		return rc;
	/* in place when recv = send + rank * count, as NCCL defines it */
	NCCL_TRY(ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, cc(c)->nc, g->comm), e);
	return compute_after_comm(g, e);
}

static int c_allgather(struct backend *be, struct rt_comm *c, float *send, float *recv, size_t count, struct err *e)
{
	struct cuda_backend *g = CB(be);
	int rc;

	if (LOCAL(c)) {  /* this rank's shard in place, the others' zeros */
		for (int r = 0; r < c->size; r++) {
			float *dst = recv + (size_t)r * count;
			if (r != c->rank)
				c_zero(be, dst, count * sizeof *dst);
			else if (dst != send)
				c_copy(be, dst, send, count * sizeof *send, COPY_D2D);
		}
		return 0;
	}
	if ((rc = comm_after_compute(g, e)))
		return rc;
	NCCL_TRY(ncclAllGather(send, recv, count, ncclFloat, cc(c)->nc, g->comm), e);
	return compute_after_comm(g, e);
}

/* part r of a flat buffer of n elements in shards of sh: [lo, lo + len) */
static size_t part(size_t n, size_t sh, int r, size_t *lo)
{
	*lo = (size_t)r * sh < n ? (size_t)r * sh : n;
	return n - *lo < sh ? n - *lo : sh;
}

/* Uneven shards (the last shorter or empty) are one broadcast per rank in a
 * NCCL group; even ones a plain in-place all-gather. */
static int c_allgather_flat(struct backend *be, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	struct cuda_backend *g = CB(be);
	size_t lo, len;
	int r, rc;

	if (LOCAL(c) || !n)
		return 0;
	if ((rc = comm_after_compute(g, e)))
		return rc;
	if (n == sh * (size_t)c->size) {
		NCCL_TRY(ncclAllGather(buf + (size_t)c->rank * sh, buf, sh, ncclFloat, cc(c)->nc, g->comm), e);
	} else {
		NCCL_TRY(ncclGroupStart(), e);
		for (r = 0; r < c->size; r++)
			if ((len = part(n, sh, r, &lo)))
				NCCL_TRY(ncclBroadcast(buf + lo, buf + lo, len, ncclFloat, r, cc(c)->nc, g->comm), e);
		NCCL_TRY(ncclGroupEnd(), e);
	}
	return compute_after_comm(g, e);
}

/* The sum over ranks; this rank's shard of it moved to buf[0 ..). */
static int c_reduce_scatter_flat(struct backend *be, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	struct cuda_backend *g = CB(be);
	size_t lo, len, mlo, mlen = part(n, sh, c->rank, &mlo);
	int r, rc;

	if (LOCAL(c) || !n)
		return 0;
	if ((rc = comm_after_compute(g, e)))
		return rc;
	if (n == sh * (size_t)c->size) {
		NCCL_TRY(ncclReduceScatter(buf, buf + mlo, sh, ncclFloat, ncclSum, cc(c)->nc, g->comm), e);
	} else {
		NCCL_TRY(ncclGroupStart(), e);
		for (r = 0; r < c->size; r++)
			if ((len = part(n, sh, r, &lo)))
				NCCL_TRY(ncclReduce(buf + lo, buf + lo, len, ncclFloat, ncclSum, r, cc(c)->nc, g->comm), e);
		NCCL_TRY(ncclGroupEnd(), e);
	}
	/* rank >= 1: [mlo, mlo + mlen) and [0, mlen) do not overlap (mlen <= sh <= mlo) */
	if (mlo && mlen)
		CUDA_TRY(cudaMemcpyAsync(buf, buf + mlo, mlen * sizeof *buf, cudaMemcpyDeviceToDevice, g->comm), e);
	return compute_after_comm(g, e);
}

static int c_broadcast(struct backend *be, struct rt_comm *c, float *buf, size_t n, int root, struct err *e)
{
	struct cuda_backend *g = CB(be);
	int rc;

	if (LOCAL(c) || !n)
		return 0;
	if ((rc = comm_after_compute(g, e)))
		return rc;
	NCCL_TRY(ncclBroadcast(buf, buf, n, ncclFloat, root, cc(c)->nc, g->comm), e);
	return compute_after_comm(g, e);
}

static int mpi_fail(int rc, const char *what, struct err *e)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(rc, msg, &len);
	return err_set(e, ERR_SYSTEM, NULL, 0, "MPI %s failed: %s (is mpirun's environment intact?)", what, msg);
}

#define MPI_TRY(call, what) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, what, e); } while (0)

static int c_barrier(struct backend *be, struct rt_comm *c, struct err *e)
{
	c_sync(be);
	if (!LOCAL(c))
		MPI_TRY(MPI_Barrier(cc(c)->mc), "barrier");
	return 0;
}

static int c_allreduce_host(struct backend *be RT_UNUSED, struct rt_comm *c, double *v, int n, int op_max, struct err *e)
{
	if (!LOCAL(c))
		MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op_max ? MPI_MAX : MPI_SUM, cc(c)->mc),
			"all-reduce (host)");
	return 0;
}

static int c_comm_split(struct backend *be RT_UNUSED, struct rt_comm *c, int color, int key, struct rt_comm *out, struct err *e)
{
	struct ccomm *n;

	if (LOCAL(c)) {  /* emulated worlds make their groups themselves (strategy.c) */
		*out = (struct rt_comm){0, 1, NULL, 0};
		return 0;
	}
	n = calloc(1, sizeof *n);
	if (!n)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	MPI_TRY(MPI_Comm_split(cc(c)->mc, color, key, &n->mc), "comm split");
	NCCL_TRY(ncclCommSplit(cc(c)->nc, color, key, &n->nc, NULL), e);
	out->impl = n;
	MPI_Comm_rank(n->mc, &out->rank);
	MPI_Comm_size(n->mc, &out->size);
	return 0;
}

static void c_comm_free(struct backend *be, struct rt_comm *c)
{
	struct cuda_backend *g = CB(be);
	struct ccomm *n = cc(c);

	if (!n)
		return;
	if (n->nc)
		ncclCommDestroy(n->nc);
	if (n->mc != MPI_COMM_WORLD)
		MPI_Comm_free(&n->mc);
	if (n == g->world)
		g->world = NULL;
	free(n);
	c->impl = NULL;
}

static const struct backend cuda_template = {
	.name = "cuda",
	.overlap = 1,
	.copy = c_copy, .zero = c_zero, .sync = c_sync,
	.embed_fwd = embed_fwd, .embed_bwd = embed_bwd, .pos_fwd = pos_fwd, .pos_bwd = pos_bwd,
	.layernorm_fwd = layernorm_fwd, .layernorm_bwd = layernorm_bwd,
	.matmul_fwd = matmul_fwd, .matmul_bwd = matmul_bwd,
	.attn_score_fwd = attn_score_fwd, .attn_score_bwd = attn_score_bwd,
	.softmax_fwd = softmax_fwd, .softmax_bwd = softmax_bwd,
	.attn_ctx_fwd = attn_ctx_fwd, .attn_ctx_bwd = attn_ctx_bwd,
	.rope = rope, .rmsnorm_fwd = rmsnorm_fwd, .rmsnorm_bwd = rmsnorm_bwd,
	.silu_fwd = silu_fwd, .silu_bwd = silu_bwd, .mul_fwd = mul_fwd, .mul_bwd = mul_bwd,
	.gelu_fwd = gelu_fwd, .gelu_bwd = gelu_bwd, .add_fwd = add_fwd, .add_bwd = add_bwd,
	.dropout_fwd = dropout_fwd, .dropout_bwd = dropout_bwd,
	.xent_fwd = xent_fwd, .xent_bwd = xent_bwd, .axpy = axpy, .scale = scale,
	.adamw = adamw, .sgd = sgd,
	.allreduce = c_allreduce, .allreduce_start = c_allreduce_start, .wait = c_wait,
	.reduce_scatter = c_reduce_scatter, .allgather = c_allgather,
	.allgather_flat = c_allgather_flat, .reduce_scatter_flat = c_reduce_scatter_flat,
	.broadcast = c_broadcast, .barrier = c_barrier, .allreduce_host = c_allreduce_host,
	.comm_split = c_comm_split, .comm_free = c_comm_free,
	.device_used = device_used,
};

/* ---- opening ------------------------------------------------------------------ */

/* this rank's index among the ranks of its node */
static int local_rank(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID",
				     "MPI_LOCALRANKID"};
	MPI_Comm node;
	size_t i;
	int r = 0;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++)
		if (getenv(vars[i]))
			return atoi(getenv(vars[i]));
	if (!launch_mpi())
		return 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &r);
	MPI_Comm_free(&node);
	return r;
}

static int pick_device(struct cuda_backend *g, int rank, struct err *e)
{
	struct cudaDeviceProp prop;
	cudaError_t rc;
	int n = 0, lr;

	rc = cudaGetDeviceCount(&n);
	if (rc != cudaSuccess || n == 0) {
		cudaGetLastError();
		return err_set(e, ERR_SYSTEM, NULL, 0,
			       "--backend cuda: no CUDA device (cudaGetDeviceCount: %s; %s); use --backend cpu",
			       rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices",
			       cuda_hint(rc != cudaSuccess ? rc : cudaErrorNoDevice));
	}
	/* one visible GPU: the launcher bound one to each rank (srun --gpus-per-task) */
	lr = n == 1 ? 0 : local_rank();
	if (lr >= n)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "--backend cuda: rank %d is local rank %d of its node but only %d GPU%s visible; "
			       "start at most %d rank%s per node (one GPU per rank)", rank, lr, n, n == 1 ? " is" : "s are",
			       n, n == 1 ? "" : "s");
	g->dev = lr;
	CUDA_TRY(cudaSetDevice(g->dev), e);
	CUDA_TRY(cudaGetDeviceProperties(&prop, g->dev), e);
	snprintf(g->be.device, sizeof g->be.device, "%.127s", prop.name);
	return 0;
}

static int open_world(struct cuda_backend *g, struct rt_comm *world, struct err *e)
{
	struct ccomm *w;
	ncclUniqueId id;

	if (!launch_mpi()) {
		*world = (struct rt_comm){0, 1, NULL, 0};
		return launch_alone(e);
	}
	w = calloc(1, sizeof *w);
	if (!w)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	w->mc = MPI_COMM_WORLD;
	world->impl = w;
	g->world = w;
	MPI_Comm_rank(MPI_COMM_WORLD, &world->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world->size);
	if (world->size == 1)
		return 0;
	if (world->rank == 0)
		NCCL_TRY(ncclGetUniqueId(&id), e);
	MPI_TRY(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "broadcast of the NCCL id");
	NCCL_TRY(ncclCommInitRank(&w->nc, world->size, id, world->rank), e);
	return 0;
}

/* The device, its streams, events, workspace and kernels, then the world. */
static int open_device(struct cuda_backend *g, struct rt_comm *world, struct err *e)
{
	int rank = 0, rc;

	if (launch_mpi()) {
		int up = 0;
		MPI_Initialized(&up);
		if (!up) {
			MPI_TRY(MPI_Init(NULL, NULL), "init");
			g->mpi_inited = 1;
		}
		MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	}
	rc = pick_device(g, rank, e);
	if (rc)
		return rc;
	CUDA_TRY(cudaStreamCreateWithFlags(&g->compute, cudaStreamNonBlocking), e);
	CUDA_TRY(cudaStreamCreateWithFlags(&g->comm, cudaStreamNonBlocking), e);
	CUDA_TRY(cudaEventCreateWithFlags(&g->ev_compute, cudaEventDisableTiming), e);
	CUDA_TRY(cudaEventCreateWithFlags(&g->ev_comm, cudaEventDisableTiming), e);
	CUDA_TRY(cudaMalloc(&g->ws, cuk_workspace_bytes()), e);
	rc = cuk_init(&g->k, g->compute, g->ws, cuk_workspace_bytes(), e);
	if (rc)
		return rc;
	g->kernels = 1;
	return open_world(g, world, e);
}

int backend_cuda_open(struct backend **be, struct rt_comm *world, struct err *e)
{
	const char *cache = getenv("SHARDCAST_CUDA_CACHE");
	struct cuda_backend *g = calloc(1, sizeof *g);
	int rc;

	*be = NULL;
	if (!g)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	g->be = cuda_template;
	g->be.dev = (struct arena_dev){dev_alloc, dev_free, g};
	g->cache = !(cache && strcmp(cache, "0") == 0);
	rc = open_device(g, world, e);
	if (rc) {
		g->mpi_inited = 0;  /* MPI stays up for the cpu backend the caller may open next */
		backend_cuda_close(&g->be);
		return rc;
	}
	*be = &g->be;
	return 0;
}

void backend_cuda_close(struct backend *be)
{
	struct cuda_backend *g = be ? CB(be) : NULL;

	if (!g)
		return;
	cudaDeviceSynchronize();
	if (g->world) {  /* the caller did not free the world */
		if (g->world->nc)
			ncclCommDestroy(g->world->nc);
		free(g->world);
		g->world = NULL;
	}
	if (g->kernels)
		cuk_free(&g->k);
	trim(g);
	free(g->blk);
	cudaFree(g->ws);
	if (g->ev_compute)
		cudaEventDestroy(g->ev_compute);
	if (g->ev_comm)
		cudaEventDestroy(g->ev_comm);
	if (g->compute)
		cudaStreamDestroy(g->compute);
	if (g->comm)
		cudaStreamDestroy(g->comm);
	if (g->mpi_inited) {
		int down = 0;
		MPI_Finalized(&down);
		if (!down)
			MPI_Finalize();
	}
	free(g);
}

struct cuk *backend_cuda_kernels(struct backend *be)
{
	return be && strcmp(be->name, "cuda") == 0 ? &CB(be)->k : NULL;
}

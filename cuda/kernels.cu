/*
 * kernels.cu — CUDA kernels of the decoder step (see kernels.h for the
 * contract; runtime/backend_cpu.c holds the reference each one matches).
 *
 * Shapes as in backend.h: B batch, T tokens, C width, NH heads, hs = C/NH,
 * V vocabulary, OC output channels, N = B*T rows. Activations are `T_`
 * (float or bf16, chosen per call by `dt`); arithmetic is fp32.
 *
 * Layout of the work:
 *  - elementwise kernels: one thread per element, grid-stride loops;
 *  - row kernels (LayerNorm, softmax): one warp per row;
 *  - column sums (norm and bias gradients, position gradient): one thread per
 *    column over a chunk of rows, then one atomicAdd per chunk;
 *  - the loss and the gradient norm: CUK_PARTIALS blocks each summing a fixed
 *    stride of rows/elements in double, then one thread adds the partials in
 *    order — the same result on every run;
 *  - products: cuBLASLt, descriptors and the heuristic's algorithm cached per
 *    shape, type and pointer alignment;
 *  - fused attention (FlashAttention-2's schedule, Dao 2023, on CUDA cores):
 *    a group of hs/32 threads owns one query (forward, dq) or one key (dk,
 *    dv), each thread 32 of its dimensions interleaved (dim = d*S + g) so that
 *    the group's reads of a shared row hit distinct banks; keys/queries stream
 *    through shared memory in tiles; the softmax is online (running max m and
 *    sum l), and the backward recomputes probabilities from the saved
 *    log-sum-exp, with D_t = dO_t . O_t.
 */
#include "kernels.h"

#include <cuda_bf16.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "gemm.h"

typedef __nv_bfloat16 bf16;

#define FULL_MASK 0xffffffffu
#define GELU_K 0.7978845608028654f  /* sqrt(2/pi) */

/* ---- helpers --------------------------------------------------------------- */

__device__ __forceinline__ float ldf(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ldf(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void stf(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void stf(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16(v); }

/* dispatch on the precision: the body sees A (activations), P (norm and
 * embedding parameters) and G (parameter gradients) as float or bf16 */
#define DISPATCH(dt, ...) do { \
	if ((dt) == CUK_BF16W) { typedef bf16 A; typedef bf16 P; typedef bf16 G; \
		(void)sizeof(A), (void)sizeof(P), (void)sizeof(G); __VA_ARGS__; } \
	else if ((dt) == CUK_BF16) { typedef bf16 A; typedef float P; typedef float G; \
		(void)sizeof(A), (void)sizeof(P), (void)sizeof(G); __VA_ARGS__; } \
	else { typedef float A; typedef float P; typedef float G; \
		(void)sizeof(A), (void)sizeof(P), (void)sizeof(G); __VA_ARGS__; } } while (0)

/* the storage type of activations (both bf16 modes store bf16) */
static int storage(int dt)
{
	return dt == CUK_F32 ? CUK_F32 : CUK_BF16;
}

__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(bf16 *p, float v) { atomicAdd(p, __float2bfloat16(v)); }

enum { TPB = 256 };  /* threads per block of the elementwise kernels */

static cudaStream_t S_(const struct cuk *k)
{
	return (cudaStream_t)k->stream;
}

/* blocks for n elements at TPB threads each, capped (kernels loop) */
static unsigned grid_for(size_t n)
{
	size_t b = (n + TPB - 1) / TPB;
	return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

#define GRID_STRIDE(i, n) \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
	     i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

/* sum over the block (blockDim.x a multiple of 32, <= 1024); all threads get it */
__device__ double block_sum_d(double v)
{
	__shared__ double sh[32];
	int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;

	v = warp_sum_d(v);
	__syncthreads();
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	v = lane < nw ? sh[lane] : 0.0;
	v = warp_sum_d(v);
	return v;
}

/* online softmax state (max, sum of exp(x - max)) combination */
__device__ __forceinline__ void ms_merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	if (mm == -INFINITY)
		return;
	s = s * expf(m - mm) + s2 * expf(m2 - mm);
	m = mm;
}

__device__ __forceinline__ void ms_add(float &m, float &s, float x)
{
	if (x > m) {
		s = s * expf(m - x) + 1.0f;
		m = x;
	} else if (x != -INFINITY) {  /* -inf - -inf would be NaN */
		s += expf(x - m);
	}
}

/* ---- context ---------------------------------------------------------------- */

struct lt_key {
	int ta, tb, m, n, k, batch, in_dt, out_dt, epi, compute;
	int align[4];
	long long lda, ldb, ldd, sa, sb, sd;
};

struct cuk_plan {
	struct lt_key key;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, d;
	cublasLtMatmulAlgo_t algo;
	int ok;                    /* the heuristic found an algorithm */
};

size_t cuk_workspace_bytes(void)
{
	int dev = 0, major = 0;

	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
		return 4u << 20;
	return major >= 9 ? 32u << 20 : 4u << 20;
}

int cuk_init(struct cuk *k, void *stream, void *ws, size_t ws_bytes, struct err *e)
{
	cublasLtHandle_t lt;

	memset(k, 0, sizeof *k);
	k->stream = stream;
	k->ws = ws;
	k->ws_bytes = ws_bytes;
	CUBLAS_TRY(cublasLtCreate(&lt), e);
	k->lt = lt;
	CUDA_TRY(cudaMalloc((void **)&k->partial, (CUK_PARTIALS + 1) * sizeof(double)), e);
	CUDA_TRY(cudaMallocHost((void **)&k->host_result, sizeof(double)), e);
	return 0;
}

void cuk_free(struct cuk *k)
{
	for (int i = 0; i < k->nplans; i++) {
		struct cuk_plan *p = &k->plans[i];
		cublasLtMatrixLayoutDestroy(p->a);
		cublasLtMatrixLayoutDestroy(p->b);
		cublasLtMatrixLayoutDestroy(p->d);
		cublasLtMatmulDescDestroy(p->op);
	}
	free(k->plans);
	if (k->partial)
		cudaFree(k->partial);
	if (k->host_result)
		cudaFreeHost(k->host_result);
	if (k->lt)
		cublasLtDestroy((cublasLtHandle_t)k->lt);
	memset(k, 0, sizeof *k);
}

/* ---- cuBLASLt products -------------------------------------------------------- */

static cudaDataType_t lt_type(int dt)
{
	return dt == CUK_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* largest power of two (<= 256) dividing the address and the batch stride */
static int align_of(const void *p, long long stride_bytes, int batch)
{
	uintptr_t a = (uintptr_t)p;
	int al = 256;

	while (al > 1 && (a % al || (batch > 1 && stride_bytes % al)))
		al /= 2;
	return al;
}

static void layout(cublasLtMatrixLayout_t *l, int dt, int rows, int cols, long long ld, int batch,
		   long long stride)
{
	CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, lt_type(dt), (uint64_t)rows, (uint64_t)cols, ld));
	if (batch > 1) {
		int32_t bc = batch;
		int64_t st = stride;
		CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
		CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
							      &st, sizeof st));
	}
}

static struct cuk_plan *plan_for(struct cuk *k, const struct lt_key *key)
{
	struct cuk_plan *p;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res;
	cublasOperation_t ta = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	int nres = 0;

	for (int i = 0; i < k->nplans; i++)
		if (memcmp(&k->plans[i].key, key, sizeof *key) == 0)
			return &k->plans[i];
	if (k->nplans == k->capplans) {
		int n = k->capplans ? 2 * k->capplans : 64;
		struct cuk_plan *np = (struct cuk_plan *)realloc(k->plans, (size_t)n * sizeof *np);
		if (!np) {
			fprintf(stderr, "%s:%d: out of host memory caching matmul plans\n", __FILE__, __LINE__);
			exit(1);
		}
		k->plans = np;
		k->capplans = n;
	}
	p = &k->plans[k->nplans];
	memset(p, 0, sizeof *p);
	p->key = *key;
	CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, (cublasComputeType_t)key->compute, CUDA_R_32F));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	if (key->epi) {
		cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
		CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
	}
	layout(&p->a, key->in_dt, key->ta ? key->k : key->m, key->ta ? key->m : key->k, key->lda,
	       key->batch, key->sa);
	layout(&p->b, key->in_dt, key->tb ? key->n : key->k, key->tb ? key->k : key->n, key->ldb,
	       key->batch, key->sb);
	layout(&p->d, key->out_dt, key->m, key->n, key->ldd, key->batch, key->sd);
	CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
	{
		uint64_t ws = k->ws_bytes;
		uint32_t al[4] = {(uint32_t)key->align[0], (uint32_t)key->align[1], (uint32_t)key->align[2],
				  (uint32_t)key->align[3]};
		CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
								  &ws, sizeof ws));
		CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
								  &al[0], sizeof al[0]));
		CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
								  &al[1], sizeof al[1]));
		CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
								  &al[2], sizeof al[2]));
		CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
								  &al[3], sizeof al[3]));
	}
	if (cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)k->lt, p->op, p->a, p->b, p->d, p->d, pref, 1,
					   &res, &nres) == CUBLAS_STATUS_SUCCESS && nres > 0) {
		p->algo = res.algo;
		p->ok = 1;
	}
	cublasLtMatmulPreferenceDestroy(pref);
	k->nplans++;
	return p;
}

/* D (m x n, column-major, ld ldd) = alpha op(A) op(B) + beta D (+ bias per row
 * of D, i.e. per output channel), batched with strides in elements. */
struct gemm {
	int ta, tb, m, n, k;
	const void *A; long long lda, sa;
	const void *B; long long ldb, sb;
	void *D; long long ldd, sd;
	int batch, in_dt, out_dt;
	float alpha, beta;
	const void *bias;          /* out_dt, m elements, or NULL */
};

static int gemm_try(struct cuk *k, const struct gemm *g, int use_epi)
{
	struct lt_key key;
	struct cuk_plan *p;
	size_t ie = cuk_dsize(g->in_dt), oe = cuk_dsize(g->out_dt);

	memset(&key, 0, sizeof key);
	key.ta = g->ta, key.tb = g->tb, key.m = g->m, key.n = g->n, key.k = g->k;
	key.batch = g->batch, key.in_dt = storage(g->in_dt), key.out_dt = storage(g->out_dt), key.epi = use_epi;
	key.compute = g->in_dt == CUK_F32 && k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	key.lda = g->lda, key.ldb = g->ldb, key.ldd = g->ldd;
	key.sa = g->batch > 1 ? g->sa : 0, key.sb = g->batch > 1 ? g->sb : 0, key.sd = g->batch > 1 ? g->sd : 0;
	key.align[0] = align_of(g->A, g->sa * (long long)ie, g->batch);
	key.align[1] = align_of(g->B, g->sb * (long long)ie, g->batch);
	key.align[2] = key.align[3] = align_of(g->D, g->sd * (long long)oe, g->batch);
	p = plan_for(k, &key);
	if (!p->ok)
		return -1;
	if (use_epi)
		CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
							    sizeof g->bias));
	CUBLAS_CHECK(cublasLtMatmul((cublasLtHandle_t)k->lt, p->op, &g->alpha, g->A, p->a, g->B, p->b, &g->beta,
				    g->D, p->d, g->D, p->d, &p->algo, k->ws, k->ws_bytes, S_(k)));
	return 0;
}

template <typename T_>
__global__ void add_bias_kernel(T_ *out, const T_ *bias, size_t rows, int OC)
{
	GRID_STRIDE(i, rows * OC)
		stf(out, i, ldf(out, i) + ldf(bias, i % OC));
}

static void run_gemm(struct cuk *k, const struct gemm *g)
{
	/* the bias epilogue when the bias is 16-byte aligned and an algorithm
	 * supports it; else the product, then a bias kernel */
	int epi = g->bias && (uintptr_t)g->bias % 16 == 0 && g->batch == 1;

	if (epi && gemm_try(k, g, 1) == 0)
		return;
	if (gemm_try(k, g, 0)) {
		fprintf(stderr, "%s:%d: cuBLASLt has no algorithm for a %s%s %dx%dx%d product (batch %d, "
			"lda %lld ldb %lld ldd %lld) (hint: an unsupported type or alignment on this GPU)\n",
			__FILE__, __LINE__, g->ta ? "T" : "N", g->tb ? "T" : "N", g->m, g->n, g->k, g->batch,
			g->lda, g->ldb, g->ldd);
		exit(1);
	}
	if (g->bias) {
		size_t rows = (size_t)g->n;
		DISPATCH(g->out_dt, add_bias_kernel<A><<<grid_for(rows * g->m), TPB, 0, S_(k)>>>(
			(A *)g->D, (const A *)g->bias, rows, g->m));
		CUDA_LAUNCHED();
	}
}

/* ---- embeddings --------------------------------------------------------------- */

template <typename T_, typename P_>
__global__ void embed_fwd_kernel(T_ *out, const int32_t *ids, const P_ *wte, int T, int C, size_t n)
{
	GRID_STRIDE(i, n) {
		size_t row = i / C;
		int c = (int)(i % C), b = (int)(row / T), t = (int)(row % T);
		stf(out, i, ldf(wte, (size_t)ids[(size_t)b * 2 * T + t] * C + c));
	}
}

template <typename T_, typename G_>
__global__ void embed_bwd_kernel(G_ *dwte, const T_ *dout, const int32_t *ids, int T, int C, size_t n)
{
	GRID_STRIDE(i, n) {
		size_t row = i / C;
		int c = (int)(i % C), b = (int)(row / T), t = (int)(row % T);
		atomic_add(dwte + (size_t)ids[(size_t)b * 2 * T + t] * C + c, ldf(dout, i));
	}
}

template <typename T_, typename P_>
__global__ void pos_fwd_kernel(T_ *out, const T_ *x, const P_ *wpe, int T, int C, size_t n)
{
	GRID_STRIDE(i, n) {
		int c = (int)(i % C), t = (int)((i / C) % T);
		stf(out, i, ldf(x, i) + ldf(wpe, (size_t)t * C + c));
	}
}

/* one thread per (t, c): dx += dout over the batch (dx NULL: none), dwpe += its sum */
template <typename T_, typename G_>
__global__ void pos_bwd_kernel(T_ *dx, G_ *dwpe, const T_ *dout, int B, int T, int C)
{
	GRID_STRIDE(i, (size_t)T * C) {
		float s = 0;
		for (int b = 0; b < B; b++) {
			size_t j = (size_t)b * T * C + i;
			float g = ldf(dout, j);
			if (dx)
				stf(dx, j, ldf(dx, j) + g);
			s += g;
		}
		stf(dwpe, i, ldf(dwpe, i) + s);
	}
}

extern "C" void cuk_embed_fwd(struct cuk *k, int dt, void *out, const int32_t *ids, const void *wte,
			      int B, int T, int C)
{
	size_t n = (size_t)B * T * C;
	DISPATCH(dt, embed_fwd_kernel<A, P><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, ids, (const P *)wte, T, C, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_embed_bwd(struct cuk *k, int dt, void *dwte, const void *dout, const int32_t *ids,
			      int B, int T, int C)
{
	size_t n = (size_t)B * T * C;
	DISPATCH(dt, embed_bwd_kernel<A, G><<<grid_for(n), TPB, 0, S_(k)>>>((G *)dwte, (const A *)dout, ids, T, C, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_pos_fwd(struct cuk *k, int dt, void *out, const void *x, const void *wpe,
			    int B, int T, int C)
{
	size_t n = (size_t)B * T * C;
	DISPATCH(dt, pos_fwd_kernel<A, P><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, (const A *)x, (const P *)wpe,
									   T, C, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_pos_bwd(struct cuk *k, int dt, void *dx, void *dwpe, const void *dout,
			    int B, int T, int C)
{
	DISPATCH(dt, pos_bwd_kernel<A, G><<<grid_for((size_t)T * C), TPB, 0, S_(k)>>>(
		(A *)dx, (G *)dwpe, (const A *)dout, B, T, C));
	CUDA_LAUNCHED();
}

/* ---- LayerNorm ---------------------------------------------------------------- */

template <typename T_, typename P_>
__global__ void ln_fwd_kernel(T_ *out, float *stats, const T_ *x, const P_ *w, const P_ *b,
			      int N, int C)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	const T_ *xr;
	float mean = 0, var = 0, rstd;

	if (row >= N)
		return;
	xr = x + (size_t)row * C;
	for (int i = lane; i < C; i += 32)
		mean += ldf(xr, i);
	mean = warp_sum(mean) / C;
	for (int i = lane; i < C; i += 32) {
		float d = ldf(xr, i) - mean;
		var += d * d;
	}
	var = warp_sum(var) / C;
	rstd = 1.0f / sqrtf(var + 1e-5f);
	for (int i = lane; i < C; i += 32)
		stf(out, (size_t)row * C + i, (ldf(xr, i) - mean) * rstd * ldf(w, i) + ldf(b, i));
	if (lane == 0) {
		stats[2 * row] = mean;
		stats[2 * row + 1] = rstd;
	}
}

/* dx for one row per warp */
template <typename T_, typename P_>
__global__ void ln_bwd_dx_kernel(T_ *dx, const T_ *dout, const T_ *x, const float *stats,
				 const P_ *w, int N, int C)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	float mean, rstd, dmean = 0, dnmean = 0;
	size_t r;

	if (row >= N)
		return;
	r = (size_t)row * C;
	mean = stats[2 * row];
	rstd = stats[2 * row + 1];
	for (int i = lane; i < C; i += 32) {
		float norm = (ldf(x, r + i) - mean) * rstd, dn = ldf(w, i) * ldf(dout, r + i);
		dmean += dn;
		dnmean += dn * norm;
	}
	dmean = warp_sum(dmean) / C;
	dnmean = warp_sum(dnmean) / C;
	for (int i = lane; i < C; i += 32) {
		float norm = (ldf(x, r + i) - mean) * rstd, dn = ldf(w, i) * ldf(dout, r + i);
		stf(dx, r + i, ldf(dx, r + i) + (dn - dmean - norm * dnmean) * rstd);
	}
}

enum { COL_CHUNK = 128 };  /* rows per block of the column sums */

/* dw[c] += sum_n norm[n,c] * dout[n,c], db[c] += sum_n dout[n,c] over a chunk */
template <typename T_, typename G_>
__global__ void ln_bwd_dw_kernel(G_ *dw, G_ *db, const T_ *dout, const T_ *x, const float *stats,
				 int N, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, n0 = blockIdx.y * COL_CHUNK;
	int n1 = n0 + COL_CHUNK < N ? n0 + COL_CHUNK : N;
	float sw = 0, sb = 0;

	if (c >= C)
		return;
	for (int n = n0; n < n1; n++) {
		size_t j = (size_t)n * C + c;
		float g = ldf(dout, j);
		sw += (ldf(x, j) - stats[2 * n]) * stats[2 * n + 1] * g;
		sb += g;
	}
	atomic_add(dw + c, sw);
	atomic_add(db + c, sb);
}

extern "C" void cuk_layernorm_fwd(struct cuk *k, int dt, void *out, float *stats, const void *x,
				  const void *w, const void *b, int N, int C)
{
	unsigned blocks = (unsigned)(((size_t)N * 32 + TPB - 1) / TPB);
	DISPATCH(dt, ln_fwd_kernel<A, P><<<blocks, TPB, 0, S_(k)>>>((A *)out, stats, (const A *)x, (const P *)w,
								       (const P *)b, N, C));
	CUDA_LAUNCHED();
}

extern "C" void cuk_layernorm_bwd(struct cuk *k, int dt, void *dx, void *dw, void *db, const void *dout,
				  const void *x, const float *stats, const void *w, int N, int C)
{
	unsigned blocks = (unsigned)(((size_t)N * 32 + TPB - 1) / TPB);
	dim3 g2((unsigned)((C + TPB - 1) / TPB), (unsigned)((N + COL_CHUNK - 1) / COL_CHUNK));

	DISPATCH(dt, ln_bwd_dx_kernel<A, P><<<blocks, TPB, 0, S_(k)>>>((A *)dx, (const A *)dout, (const A *)x,
									stats, (const P *)w, N, C));
	CUDA_LAUNCHED();
	DISPATCH(dt, ln_bwd_dw_kernel<A, G><<<g2, TPB, 0, S_(k)>>>((G *)dw, (G *)db, (const A *)dout, (const A *)x,
								    stats, N, C));
	CUDA_LAUNCHED();
}

/* ---- matrix products ------------------------------------------------------------ */

/* dbias[o] += sum over a chunk of rows of dout[n, o] */
template <typename T_, typename G_>
__global__ void colsum_kernel(G_ *dbias, const T_ *dout, int N, int OC)
{
	int o = blockIdx.x * blockDim.x + threadIdx.x, n0 = blockIdx.y * COL_CHUNK;
	int n1 = n0 + COL_CHUNK < N ? n0 + COL_CHUNK : N;
	float s = 0;

	if (o >= OC)
		return;
	for (int n = n0; n < n1; n++)
		s += ldf(dout, (size_t)n * OC + o);
	atomic_add(dbias + o, s);
}

/* Runs an op's products (gemm.h) over its operands: A and B in the
 * activations' storage type, D too, or the gradients' type when grad_out. */
static void run_descs(struct cuk *k, int dt, const struct gemm_desc *d, int n, void *const *ops,
		      const void *bias)
{
	int st = storage(dt), gt = dt == CUK_BF16W ? CUK_BF16 : CUK_F32;
	size_t se = cuk_dsize(st);

	for (int i = 0; i < n; i++) {
		const struct gemm_desc *x = &d[i];
		int ot = x->grad_out ? gt : st;
		struct gemm g = {x->ta, x->tb, x->m, x->n, x->k,
				 (const char *)ops[x->a] + x->ao * se, x->lda, x->sa,
				 (const char *)ops[x->b] + x->bo * se, x->ldb, x->sb,
				 (char *)ops[x->d] + x->doff * cuk_dsize(ot), x->ldd, x->sd,
				 x->batch, st, ot, x->alpha, x->beta, i == 0 ? bias : NULL};
		run_gemm(k, &g);
	}
}

extern "C" void cuk_matmul_fwd(struct cuk *k, int dt, void *out, const void *x, const void *w,
			       const void *bias, int N, int C, int OC)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {out, (void *)x, (void *)w};

	run_descs(k, dt, d, gemm_matmul_fwd(d, N, C, OC), ops, bias);
}

extern "C" void cuk_matmul_bwd(struct cuk *k, int dt, void *dx, void *dw, void *dbias, const void *dout,
			       const void *x, const void *w, int N, int C, int OC)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {dx, dw, (void *)dout, (void *)x, (void *)w};

	run_descs(k, dt, d, gemm_matmul_bwd(d, N, C, OC, dx != NULL), ops, NULL);
	if (dbias) {
		dim3 g2((unsigned)((OC + TPB - 1) / TPB), (unsigned)((N + COL_CHUNK - 1) / COL_CHUNK));
		DISPATCH(dt, colsum_kernel<A, G><<<g2, TPB, 0, S_(k)>>>((G *)dbias, (const A *)dout, N, OC));
		CUDA_LAUNCHED();
	}
}

/* ---- attention, unfused ------------------------------------------------------------ */

/* Per sample b, strided-batched over the heads (gemm.h has the layouts). */

template <typename T_>
__global__ void causal_mask_kernel(T_ *s, int T, size_t n)
{
	GRID_STRIDE(i, n) {
		int u = (int)(i % T), t = (int)((i / T) % T);
		if (u > t)
			stf(s, i, -INFINITY);
	}
}

extern "C" void cuk_attn_score_fwd(struct cuk *k, int dt, void *scores, const void *qkv, int B, int T,
				   int NH, int NKV, int hs)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {scores, (void *)qkv};
	size_t n = (size_t)B * NH * T * T;

	for (int b = 0; b < B; b++)
		for (int i = 0; i < NH / NKV; i++)
			run_descs(k, dt, d, gemm_attn_score_fwd(d, b, i, T, NH, NKV, hs), ops, NULL);
	DISPATCH(dt, causal_mask_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)scores, T, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_attn_score_bwd(struct cuk *k, int dt, void *dqkv, const void *dscores, const void *qkv,
				   int B, int T, int NH, int NKV, int hs)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {dqkv, (void *)dscores, (void *)qkv};

	for (int b = 0; b < B; b++)
		for (int i = 0; i < NH / NKV; i++)
			run_descs(k, dt, d, gemm_attn_score_bwd(d, b, i, T, NH, NKV, hs), ops, NULL);
}

extern "C" void cuk_attn_ctx_fwd(struct cuk *k, int dt, void *ctx, const void *att, const void *qkv,
				 int B, int T, int NH, int NKV, int hs)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {ctx, (void *)att, (void *)qkv};

	for (int b = 0; b < B; b++)
		for (int i = 0; i < NH / NKV; i++)
			run_descs(k, dt, d, gemm_attn_ctx_fwd(d, b, i, T, NH, NKV, hs), ops, NULL);
}

extern "C" void cuk_attn_ctx_bwd(struct cuk *k, int dt, void *datt, void *dqkv, const void *dctx,
				 const void *att, const void *qkv, int B, int T, int NH, int NKV, int hs)
{
	struct gemm_desc d[GEMM_MAX];
	void *ops[] = {datt, dqkv, (void *)dctx, (void *)att, (void *)qkv};

	for (int b = 0; b < B; b++)
		for (int i = 0; i < NH / NKV; i++)
			run_descs(k, dt, d, gemm_attn_ctx_bwd(d, b, i, T, NH, NKV, hs), ops, NULL);
}

/* one warp per row, online max and sum */
template <typename T_>
__global__ void softmax_fwd_kernel(T_ *out, const T_ *in, int rows, int T)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	float m = -INFINITY, s = 0;
	size_t r;

	if (row >= rows)
		return;
	r = (size_t)row * T;
	for (int i = lane; i < T; i += 32)
		ms_add(m, s, ldf(in, r + i));
	for (int o = 16; o > 0; o /= 2) {
		float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
		ms_merge(m, s, m2, s2);
	}
	for (int i = lane; i < T; i += 32)
		stf(out, r + i, expf(ldf(in, r + i) - m) / s);
}

template <typename T_>
__global__ void softmax_bwd_kernel(T_ *din, const T_ *dout, const T_ *out, int rows, int T)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	float s = 0;
	size_t r;

	if (row >= rows)
		return;
	r = (size_t)row * T;
	for (int i = lane; i < T; i += 32)
		s += ldf(dout, r + i) * ldf(out, r + i);
	s = warp_sum(s);
	for (int i = lane; i < T; i += 32) {
		float y = ldf(out, r + i);
		stf(din, r + i, ldf(din, r + i) + y * (ldf(dout, r + i) - s));
	}
}

extern "C" void cuk_softmax_fwd(struct cuk *k, int dt, void *out, const void *in, int rows, int T)
{
	unsigned blocks = (unsigned)(((size_t)rows * 32 + TPB - 1) / TPB);
	DISPATCH(dt, softmax_fwd_kernel<A><<<blocks, TPB, 0, S_(k)>>>((A *)out, (const A *)in, rows, T));
	CUDA_LAUNCHED();
}

extern "C" void cuk_softmax_bwd(struct cuk *k, int dt, void *din, const void *dout, const void *out,
				int rows, int T)
{
	unsigned blocks = (unsigned)(((size_t)rows * 32 + TPB - 1) / TPB);
	DISPATCH(dt, softmax_bwd_kernel<A><<<blocks, TPB, 0, S_(k)>>>((A *)din, (const A *)dout,
									(const A *)out, rows, T));
	CUDA_LAUNCHED();
}

/* ---- attention, fused ------------------------------------------------------------------ */

/* sum over the S consecutive lanes of a group (S a power of two <= 32) */
template <int S>
__device__ __forceinline__ float group_sum(float v, unsigned mask)
{
	for (int o = S / 2; o > 0; o /= 2)
		v += __shfl_xor_sync(mask, v, o);
	return v;
}

template <int S>
__device__ __forceinline__ unsigned group_mask(void)
{
	unsigned lane = threadIdx.x % 32;
	return S == 32 ? FULL_MASK : (((1u << S) - 1u) << (lane & ~(unsigned)(S - 1)));
}

enum { FA_ROWS = 64 };  /* queries (forward, dq) or keys (dk, dv) per block */

template <int HS> struct fa_tile { enum { N = HS <= 64 ? 64 : 32 }; };  /* rows per shared tile */

template <typename T_, int HS>
__global__ void flash_fwd_kernel(T_ *ctx, float *lse, const T_ *qkv, int T, int NH, int NKV)
{
	constexpr int S = HS / 32, BC = fa_tile<HS>::N;
	__shared__ float Ks[BC][HS], Vs[BC][HS];
	int bh = blockIdx.y, b = bh / NH, h = bh % NH, j = h / (NH / NKV);
	int grp = threadIdx.x / S, g = threadIdx.x % S, t = blockIdx.x * FA_ROWS + grp;
	int tmax = min((int)(blockIdx.x + 1) * FA_ROWS, T) - 1;
	size_t row = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS;
	bool valid = t < T;
	const T_ *qb = qkv + (size_t)b * T * row + (size_t)h * HS;
	const T_ *kb = qkv + (size_t)b * T * row + (size_t)(NH + j) * HS, *vb = kb + (size_t)NKV * HS;
	unsigned mask = group_mask<S>();
	float sc = 1.0f / sqrtf((float)HS), q[32], acc[32], m = -INFINITY, l = 0;

#pragma unroll
	for (int d = 0; d < 32; d++) {
		q[d] = valid ? ldf(qb + (size_t)t * row, d * S + g) : 0.0f;
		acc[d] = 0;
	}
	for (int u0 = 0; u0 <= tmax; u0 += BC) {
		int jn = min(BC, T - u0);
		__syncthreads();
		for (int i = threadIdx.x; i < BC * HS; i += blockDim.x) {
			int r = i / HS, c = i % HS, u = u0 + r;
			Ks[r][c] = u < T ? ldf(kb + (size_t)u * row, c) : 0.0f;
			Vs[r][c] = u < T ? ldf(vb + (size_t)u * row, c) : 0.0f;
		}
		__syncthreads();
		for (int r = 0; r < jn; r++) {
			float s = 0;
#pragma unroll
			for (int d = 0; d < 32; d++)
				s += q[d] * Ks[r][d * S + g];
			s = group_sum<S>(s, mask) * sc;
			if (valid && u0 + r <= t) {
				float p;
				if (s > m) {
					float f = expf(m - s);
					l *= f;
#pragma unroll
					for (int d = 0; d < 32; d++)
						acc[d] *= f;
					m = s;
				}
				p = expf(s - m);
				l += p;
#pragma unroll
				for (int d = 0; d < 32; d++)
					acc[d] += p * Vs[r][d * S + g];
			}
		}
	}
	if (!valid)
		return;
#pragma unroll
	for (int d = 0; d < 32; d++)
		stf(ctx + ((size_t)b * T + t) * C + (size_t)h * HS, d * S + g, acc[d] / l);
	if (g == 0)
		lse[(size_t)bh * T + t] = m + logf(l);
}

/* dq for one query per group: dq += sc * sum_u p (dp - D) k_u */
template <typename T_, int HS>
__global__ void flash_bwd_dq_kernel(T_ *dqkv, const T_ *dctx, const T_ *qkv, const T_ *ctx,
				    const float *lse, int T, int NH, int NKV)
{
	constexpr int S = HS / 32, BC = fa_tile<HS>::N;
	__shared__ float Ks[BC][HS], Vs[BC][HS];
	int bh = blockIdx.y, b = bh / NH, h = bh % NH, j = h / (NH / NKV);
	int grp = threadIdx.x / S, g = threadIdx.x % S, t = blockIdx.x * FA_ROWS + grp;
	int tmax = min((int)(blockIdx.x + 1) * FA_ROWS, T) - 1;
	size_t row = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS;
	bool valid = t < T;
	const T_ *qb = qkv + (size_t)b * T * row + (size_t)h * HS;
	const T_ *kb = qkv + (size_t)b * T * row + (size_t)(NH + j) * HS, *vb = kb + (size_t)NKV * HS;
	size_t crow = ((size_t)b * T + (valid ? t : 0)) * C + (size_t)h * HS;
	unsigned mask = group_mask<S>();
	float sc = 1.0f / sqrtf((float)HS), q[32], dO[32], dq[32], D = 0, L;

#pragma unroll
	for (int d = 0; d < 32; d++) {
		q[d] = valid ? ldf(qb + (size_t)t * row, d * S + g) : 0.0f;
		dO[d] = valid ? ldf(dctx + crow, d * S + g) : 0.0f;
		D += valid ? dO[d] * ldf(ctx + crow, d * S + g) : 0.0f;
		dq[d] = 0;
	}
	D = group_sum<S>(D, mask);
	L = valid ? lse[(size_t)bh * T + t] : 0.0f;
	for (int u0 = 0; u0 <= tmax; u0 += BC) {
		int jn = min(BC, T - u0);
		__syncthreads();
		for (int i = threadIdx.x; i < BC * HS; i += blockDim.x) {
			int r = i / HS, c = i % HS, u = u0 + r;
			Ks[r][c] = u < T ? ldf(kb + (size_t)u * row, c) : 0.0f;
			Vs[r][c] = u < T ? ldf(vb + (size_t)u * row, c) : 0.0f;
		}
		__syncthreads();
		for (int r = 0; r < jn; r++) {
			float s = 0, dp = 0;
#pragma unroll
			for (int d = 0; d < 32; d++) {
				s += q[d] * Ks[r][d * S + g];
				dp += dO[d] * Vs[r][d * S + g];
			}
			s = group_sum<S>(s, mask) * sc;
			dp = group_sum<S>(dp, mask);
			if (valid && u0 + r <= t) {
				float ds = expf(s - L) * (dp - D) * sc;
#pragma unroll
				for (int d = 0; d < 32; d++)
					dq[d] += ds * Ks[r][d * S + g];
			}
		}
	}
	if (!valid)
		return;
	{
		T_ *o = dqkv + ((size_t)b * T + t) * row + (size_t)h * HS;
#pragma unroll
		for (int d = 0; d < 32; d++)
			stf(o, d * S + g, ldf(o, d * S + g) + dq[d]);
	}
}

/* dk, dv for one key per group over the queries t >= u of every query head
 * that reads this key/value head (grouped-query attention) */
template <typename T_, int HS>
__global__ void flash_bwd_dkv_kernel(T_ *dqkv, const T_ *dctx, const T_ *qkv, const T_ *ctx,
				     const float *lse, int T, int NH, int NKV)
{
	constexpr int S = HS / 32, TQ = fa_tile<HS>::N, NG = FA_ROWS;
	__shared__ float Qs[TQ][HS], dOs[TQ][HS], Ls[TQ], Ds[TQ];
	int bj = blockIdx.y, b = bj / NKV, j = bj % NKV, gq = NH / NKV;
	int grp = threadIdx.x / S, g = threadIdx.x % S, u = blockIdx.x * FA_ROWS + grp;
	size_t row = (size_t)(NH + 2 * NKV) * HS, C = (size_t)NH * HS;
	bool valid = u < T;
	const T_ *kb = qkv + (size_t)b * T * row + (size_t)(NH + j) * HS, *vb = kb + (size_t)NKV * HS;
	unsigned mask = group_mask<S>();
	float sc = 1.0f / sqrtf((float)HS), kk[32], vv[32], dk[32], dv[32];

#pragma unroll
	for (int d = 0; d < 32; d++) {
		kk[d] = valid ? ldf(kb + (size_t)u * row, d * S + g) : 0.0f;
		vv[d] = valid ? ldf(vb + (size_t)u * row, d * S + g) : 0.0f;
		dk[d] = dv[d] = 0;
	}
	for (int h = j * gq; h < (j + 1) * gq; h++) {
		const T_ *qb = qkv + (size_t)b * T * row + (size_t)h * HS;
		for (int t0 = blockIdx.x * FA_ROWS; t0 < T; t0 += TQ) {
			int rn = min(TQ, T - t0);
			__syncthreads();
			for (int i = threadIdx.x; i < TQ * HS; i += blockDim.x) {
				int r = i / HS, c = i % HS, t = t0 + r;
				size_t crow = ((size_t)b * T + t) * C + (size_t)h * HS;
				Qs[r][c] = t < T ? ldf(qb + (size_t)t * row, c) : 0.0f;
				dOs[r][c] = t < T ? ldf(dctx + crow, c) : 0.0f;
			}
			/* D_t = dO_t . O_t, one group per query row of the tile */
			for (int r = grp; r < TQ; r += NG) {
				int t = t0 + r;
				size_t crow = ((size_t)b * T + (t < T ? t : 0)) * C + (size_t)h * HS;
				float D = 0;
#pragma unroll
				for (int d = 0; d < 32; d++)
					D += t < T ? ldf(dctx + crow, d * S + g) * ldf(ctx + crow, d * S + g) : 0.0f;
				D = group_sum<S>(D, mask);
				if (g == 0) {
					Ds[r] = D;
					Ls[r] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
				}
			}
			__syncthreads();
			for (int r = 0; r < rn; r++) {
				float s = 0, dp = 0;
#pragma unroll
				for (int d = 0; d < 32; d++) {
					s += Qs[r][d * S + g] * kk[d];
					dp += dOs[r][d * S + g] * vv[d];
				}
				s = group_sum<S>(s, mask) * sc;
				dp = group_sum<S>(dp, mask);
				if (valid && t0 + r >= u) {
					float p = expf(s - Ls[r]), ds = p * (dp - Ds[r]) * sc;
#pragma unroll
					for (int d = 0; d < 32; d++) {
						dv[d] += p * dOs[r][d * S + g];
						dk[d] += ds * Qs[r][d * S + g];
					}
				}
			}
		}
	}
	if (!valid)
		return;
	{
		T_ *ok = dqkv + ((size_t)b * T + u) * row + (size_t)(NH + j) * HS, *ov = ok + (size_t)NKV * HS;
#pragma unroll
		for (int d = 0; d < 32; d++) {
			stf(ok, d * S + g, ldf(ok, d * S + g) + dk[d]);
			stf(ov, d * S + g, ldf(ov, d * S + g) + dv[d]);
		}
	}
}

static int flash_hs_ok(int NH, int NKV, int hs, struct err *e)
{
	if ((hs != 32 && hs != 64 && hs != 128) || NKV < 1 || NH % NKV)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "fused attention: head size %d (%d heads over %d key/value heads) is not one of "
			       "32, 64, 128; use the unfused kernels", hs, NH, NKV);
	return 0;
}

#define FLASH_SWITCH(hs, KERNEL, ...) do { \
	switch (hs) { \
	case 32: KERNEL<A, 32><<<grid, FA_ROWS * 1, 0, S_(k)>>>(__VA_ARGS__); break; \
	case 64: KERNEL<A, 64><<<grid, FA_ROWS * 2, 0, S_(k)>>>(__VA_ARGS__); break; \
	default: KERNEL<A, 128><<<grid, FA_ROWS * 4, 0, S_(k)>>>(__VA_ARGS__); break; \
	} } while (0)

extern "C" int cuk_flash_fwd(struct cuk *k, int dt, void *ctx, float *lse, const void *qkv, int B, int T,
			     int NH, int NKV, int hs, struct err *e)
{
	int rc = flash_hs_ok(NH, NKV, hs, e);
	dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH));

	if (rc)
		return rc;
	DISPATCH(dt, FLASH_SWITCH(hs, flash_fwd_kernel, (A *)ctx, lse, (const A *)qkv, T, NH, NKV));
	CUDA_LAUNCHED();
	return 0;
}

extern "C" int cuk_flash_bwd(struct cuk *k, int dt, void *dqkv, const void *dctx, const void *qkv,
			     const void *ctx, const float *lse, int B, int T, int NH, int NKV, int hs, struct err *e)
{
	int rc = flash_hs_ok(NH, NKV, hs, e);
	dim3 grid((unsigned)((T + FA_ROWS - 1) / FA_ROWS), (unsigned)(B * NH));

	if (rc)
		return rc;
	DISPATCH(dt, FLASH_SWITCH(hs, flash_bwd_dq_kernel, (A *)dqkv, (const A *)dctx, (const A *)qkv,
				  (const A *)ctx, lse, T, NH, NKV));
	CUDA_LAUNCHED();
	grid.y = (unsigned)(B * NKV);
	DISPATCH(dt, FLASH_SWITCH(hs, flash_bwd_dkv_kernel, (A *)dqkv, (const A *)dctx, (const A *)qkv,
				  (const A *)ctx, lse, T, NH, NKV));
	CUDA_LAUNCHED();
	return 0;
}

/* ---- Llama: rotary positions, RMSNorm, SwiGLU's parts ---------------------------------- */

/* one thread per rotated pair (b, t, head of q or k, i < hs/2) */
template <typename T_>
__global__ void rope_kernel(T_ *qkv, int T, int NH, int NKV, int hs, float theta, int dir, size_t n)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs;
	int half = hs / 2;

	GRID_STRIDE(idx, n) {
		int i = (int)(idx % half);
		size_t rest = idx / half;
		int hh = (int)(rest % (size_t)(NH + NKV));
		size_t bt = rest / (size_t)(NH + NKV);
		int t = (int)(bt % T);
		T_ *x = qkv + bt * row + (size_t)hh * hs;
		/* as the reference: the angle in double, its cosine and sine rounded to float */
		double ang = (double)t * pow((double)theta, -2.0 * i / hs);
		float c = (float)cos(ang), sn = (float)(dir * sin(ang));
		float x0 = ldf(x, i), x1 = ldf(x, i + half);
		stf(x, i, x0 * c - x1 * sn);
		stf(x, i + half, x1 * c + x0 * sn);
	}
}

template <typename T_, typename P_>
__global__ void rms_fwd_kernel(T_ *out, float *rstd, const T_ *x, const P_ *w, int N, int C)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	float ss = 0, r;
	size_t o;

	if (row >= N)
		return;
	o = (size_t)row * C;
	for (int i = lane; i < C; i += 32) {
		float v = ldf(x, o + i);
		ss += v * v;
	}
	ss = warp_sum(ss);
	r = 1.0f / sqrtf(ss / C + 1e-5f);
	for (int i = lane; i < C; i += 32)
		stf(out, o + i, ldf(x, o + i) * r * ldf(w, i));
	if (lane == 0)
		rstd[row] = r;
}

template <typename T_, typename P_>
__global__ void rms_bwd_dx_kernel(T_ *dx, const T_ *dout, const T_ *x, const float *rstd, const P_ *w,
				  int N, int C)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
	float r, dot = 0;
	size_t o;

	if (row >= N)
		return;
	o = (size_t)row * C;
	r = rstd[row];
	for (int i = lane; i < C; i += 32)
		dot += ldf(dout, o + i) * ldf(w, i) * ldf(x, o + i);
	dot = warp_sum(dot);
	for (int i = lane; i < C; i += 32)
		stf(dx, o + i, ldf(dx, o + i) + r * (ldf(dout, o + i) * ldf(w, i) - ldf(x, o + i) * r * r * dot / C));
}

/* dw[c] += sum over a chunk of rows of dout[n,c] x[n,c] rstd[n] */
template <typename T_, typename G_>
__global__ void rms_bwd_dw_kernel(G_ *dw, const T_ *dout, const T_ *x, const float *rstd, int N, int C)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, n0 = blockIdx.y * COL_CHUNK;
	int n1 = n0 + COL_CHUNK < N ? n0 + COL_CHUNK : N;
	float s = 0;

	if (c >= C)
		return;
	for (int n = n0; n < n1; n++) {
		size_t j = (size_t)n * C + c;
		s += ldf(dout, j) * ldf(x, j) * rstd[n];
	}
	atomic_add(dw + c, s);
}

template <typename T_>
__global__ void silu_fwd_kernel(T_ *out, const T_ *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = ldf(x, i);
		stf(out, i, v / (1.0f + expf(-v)));
	}
}

template <typename T_>
__global__ void silu_bwd_kernel(T_ *dx, const T_ *dout, const T_ *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = ldf(x, i), sg = 1.0f / (1.0f + expf(-v));
		stf(dx, i, ldf(dx, i) + ldf(dout, i) * sg * (1.0f + v * (1.0f - sg)));
	}
}

template <typename T_>
__global__ void mul_fwd_kernel(T_ *out, const T_ *a, const T_ *b, size_t n)
{
	GRID_STRIDE(i, n)
		stf(out, i, ldf(a, i) * ldf(b, i));
}

template <typename T_>
__global__ void mul_bwd_kernel(T_ *da, T_ *db, const T_ *dout, const T_ *a, const T_ *b, size_t n)
{
	GRID_STRIDE(i, n) {
		float g = ldf(dout, i), av = ldf(a, i), bv = ldf(b, i);
		stf(da, i, ldf(da, i) + g * bv);
		stf(db, i, ldf(db, i) + g * av);
	}
}

extern "C" void cuk_rope(struct cuk *k, int dt, void *qkv, int B, int T, int NH, int NKV, int hs, float theta,
			 int dir)
{
	size_t n = (size_t)B * T * (NH + NKV) * (hs / 2);
	DISPATCH(dt, rope_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)qkv, T, NH, NKV, hs, theta, dir, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_rmsnorm_fwd(struct cuk *k, int dt, void *out, float *rstd, const void *x, const void *w,
				int N, int C)
{
	unsigned blocks = (unsigned)(((size_t)N * 32 + TPB - 1) / TPB);
	DISPATCH(dt, rms_fwd_kernel<A, P><<<blocks, TPB, 0, S_(k)>>>((A *)out, rstd, (const A *)x, (const P *)w, N, C));
	CUDA_LAUNCHED();
}

extern "C" void cuk_rmsnorm_bwd(struct cuk *k, int dt, void *dx, void *dw, const void *dout, const void *x,
				const float *rstd, const void *w, int N, int C)
{
	unsigned blocks = (unsigned)(((size_t)N * 32 + TPB - 1) / TPB);
	dim3 g2((unsigned)((C + TPB - 1) / TPB), (unsigned)((N + COL_CHUNK - 1) / COL_CHUNK));

	DISPATCH(dt, rms_bwd_dx_kernel<A, P><<<blocks, TPB, 0, S_(k)>>>((A *)dx, (const A *)dout, (const A *)x,
									  rstd, (const P *)w, N, C));
	CUDA_LAUNCHED();
	DISPATCH(dt, rms_bwd_dw_kernel<A, G><<<g2, TPB, 0, S_(k)>>>((G *)dw, (const A *)dout, (const A *)x, rstd,
								     N, C));
	CUDA_LAUNCHED();
}

extern "C" void cuk_silu_fwd(struct cuk *k, int dt, void *out, const void *x, size_t n)
{
	DISPATCH(dt, silu_fwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, (const A *)x, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_silu_bwd(struct cuk *k, int dt, void *dx, const void *dout, const void *x, size_t n)
{
	DISPATCH(dt, silu_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)dx, (const A *)dout, (const A *)x, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_mul_fwd(struct cuk *k, int dt, void *out, const void *a, const void *b, size_t n)
{
	DISPATCH(dt, mul_fwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, (const A *)a, (const A *)b, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_mul_bwd(struct cuk *k, int dt, void *da, void *db, const void *dout, const void *a,
			    const void *b, size_t n)
{
	DISPATCH(dt, mul_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)da, (A *)db, (const A *)dout,
									 (const A *)a, (const A *)b, n));
	CUDA_LAUNCHED();
}

/* ---- elementwise ------------------------------------------------------------------------ */

template <typename T_>
__global__ void gelu_fwd_kernel(T_ *out, const T_ *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = ldf(x, i);
		stf(out, i, 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v))));
	}
}

template <typename T_>
__global__ void gelu_bwd_kernel(T_ *dx, const T_ *dout, const T_ *x, size_t n)
{
	GRID_STRIDE(i, n) {
		float v = ldf(x, i), u = GELU_K * (v + 0.044715f * v * v * v), th = tanhf(u);
		float sech2 = 1.0f - th * th;
		float d = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3 * 0.044715f * v * v);
		stf(dx, i, ldf(dx, i) + d * ldf(dout, i));
	}
}

template <typename T_>
__global__ void add_fwd_kernel(T_ *out, const T_ *a, const T_ *b, size_t n)
{
	GRID_STRIDE(i, n)
		stf(out, i, ldf(a, i) + ldf(b, i));
}

template <typename T_>
__global__ void add_bwd_kernel(T_ *da, T_ *db, const T_ *dout, size_t n)
{
	GRID_STRIDE(i, n) {
		float g = ldf(dout, i);
		stf(da, i, ldf(da, i) + g);
		stf(db, i, ldf(db, i) + g);
	}
}

/* the cpu backend's counter-based generator, bit for bit */
__device__ __forceinline__ uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

template <typename T_>
__global__ void dropout_fwd_kernel(T_ *out, uint8_t *mask, const T_ *x, size_t n, float p, uint64_t seed,
				   uint64_t offset)
{
	float keep = 1.0f / (1.0f - p);
	GRID_STRIDE(i, n) {
		double u = (double)(splitmix64(seed ^ (offset + i) * 0xd1342543de82ef95ull) >> 11) * 0x1p-53;
		uint8_t k = u >= p;
		mask[i] = k;
		stf(out, i, k ? ldf(x, i) * keep : 0.0f);
	}
}

template <typename T_>
__global__ void dropout_bwd_kernel(T_ *dx, const T_ *dout, const uint8_t *mask, size_t n, float p)
{
	float keep = 1.0f / (1.0f - p);
	GRID_STRIDE(i, n)
		stf(dx, i, ldf(dx, i) + (mask[i] ? ldf(dout, i) * keep : 0.0f));
}

extern "C" void cuk_gelu_fwd(struct cuk *k, int dt, void *out, const void *x, size_t n)
{
	DISPATCH(dt, gelu_fwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, (const A *)x, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_gelu_bwd(struct cuk *k, int dt, void *dx, const void *dout, const void *x, size_t n)
{
	DISPATCH(dt, gelu_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)dx, (const A *)dout, (const A *)x, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_add_fwd(struct cuk *k, int dt, void *out, const void *a, const void *b, size_t n)
{
	DISPATCH(dt, add_fwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, (const A *)a, (const A *)b, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_add_bwd(struct cuk *k, int dt, void *da, void *db, const void *dout, size_t n)
{
	DISPATCH(dt, add_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)da, (A *)db, (const A *)dout, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_dropout_fwd(struct cuk *k, int dt, void *out, uint8_t *mask, const void *x, size_t n,
				float p, uint64_t seed, uint64_t offset)
{
	DISPATCH(dt, dropout_fwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)out, mask, (const A *)x, n, p,
									   seed, offset));
	CUDA_LAUNCHED();
}

extern "C" void cuk_dropout_bwd(struct cuk *k, int dt, void *dx, const void *dout, const uint8_t *mask,
				size_t n, float p)
{
	DISPATCH(dt, dropout_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)dx, (const A *)dout, mask, n, p));
	CUDA_LAUNCHED();
}

/* ---- loss ------------------------------------------------------------------------------ */

enum { XENT_TPB = 512 };

/* block per row (grid-stride over rows, a fixed grid): log-softmax, and the
 * block's loss sum in double into partial[blockIdx.x] */
template <typename T_>
__global__ void xent_fwd_kernel(T_ *logp, double *partial, const T_ *logits, const int32_t *ids,
				int N, int T, int V)
{
	__shared__ float shm[32], shs[32];
	__shared__ float lse_sh;
	int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
	double loss = 0;

	for (int row = blockIdx.x; row < N; row += gridDim.x) {
		const T_ *x = logits + (size_t)row * V;
		float m = -INFINITY, s = 0;
		for (int i = threadIdx.x; i < V; i += blockDim.x)
			ms_add(m, s, ldf(x, i));
		for (int o = 16; o > 0; o /= 2) {
			float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
			ms_merge(m, s, m2, s2);
		}
		if (lane == 0) {
			shm[w] = m;
			shs[w] = s;
		}
		__syncthreads();
		if (w == 0) {
			m = lane < nw ? shm[lane] : -INFINITY;
			s = lane < nw ? shs[lane] : 0.0f;
			for (int o = 16; o > 0; o /= 2) {
				float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
				ms_merge(m, s, m2, s2);
			}
			if (lane == 0)
				lse_sh = m + logf(s);
		}
		__syncthreads();
		{
			float lse = lse_sh;
			int b = row / T, t = row % T, tgt = ids[(size_t)b * 2 * T + T + t];
			for (int i = threadIdx.x; i < V; i += blockDim.x)
				stf(logp, (size_t)row * V + i, ldf(x, i) - lse);
			if (threadIdx.x == 0)
				loss -= (double)(ldf(x, tgt) - lse);
		}
		__syncthreads();  /* shm and lse_sh are rewritten by the next row */
	}
	if (threadIdx.x == 0)
		partial[blockIdx.x] = loss;
}

/* one thread: partial[CUK_PARTIALS] = sum of partial[0..n) in order */
__global__ void sum_partials_kernel(double *partial, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += partial[i];
	partial[CUK_PARTIALS] = s;
}

static double fetch_partials(struct cuk *k, int n)
{
	sum_partials_kernel<<<1, 1, 0, S_(k)>>>(k->partial, n);
	CUDA_LAUNCHED();
	CUDA_CHECK(cudaMemcpyAsync(k->host_result, k->partial + CUK_PARTIALS, sizeof(double),
				   cudaMemcpyDeviceToHost, S_(k)));
	CUDA_CHECK(cudaStreamSynchronize(S_(k)));
	return *k->host_result;
}

template <typename T_>
__global__ void xent_bwd_kernel(T_ *dlogits, const T_ *logp, const int32_t *ids, int T, int V, float scale,
				size_t n)
{
	GRID_STRIDE(i, n) {
		size_t row = i / V;
		int c = (int)(i % V), b = (int)(row / T), t = (int)(row % T);
		int tgt = ids[(size_t)b * 2 * T + T + t];
		stf(dlogits, i, ldf(dlogits, i) + (expf(ldf(logp, i)) - (c == tgt ? 1.0f : 0.0f)) * scale);
	}
}

extern "C" void cuk_xent_fwd(struct cuk *k, int dt, void *logp, double *loss_sum, const void *logits,
			     const int32_t *ids, int B, int T, int V)
{
	int N = B * T, grid = N < CUK_PARTIALS ? N : CUK_PARTIALS;

	DISPATCH(dt, xent_fwd_kernel<A><<<grid, XENT_TPB, 0, S_(k)>>>((A *)logp, k->partial, (const A *)logits,
									ids, N, T, V));
	CUDA_LAUNCHED();
	*loss_sum += fetch_partials(k, grid);
}

extern "C" void cuk_xent_bwd(struct cuk *k, int dt, void *dlogits, const void *logp, const int32_t *ids,
			     int B, int T, int V, float scale)
{
	size_t n = (size_t)B * T * V;
	DISPATCH(dt, xent_bwd_kernel<A><<<grid_for(n), TPB, 0, S_(k)>>>((A *)dlogits, (const A *)logp, ids, T, V,
									scale, n));
	CUDA_LAUNCHED();
}

/* ---- fp32 vectors and optimizers ------------------------------------------------------------ */

template <typename T_>
__global__ void axpy_kernel(T_ *y, const T_ *x, float a, size_t n)
{
	GRID_STRIDE(i, n)
		stf(y, i, ldf(y, i) + a * ldf(x, i));
}

template <typename T_>
__global__ void scale_kernel(T_ *y, float a, size_t n)
{
	GRID_STRIDE(i, n)
		stf(y, i, ldf(y, i) * a);
}

/* the master p (fp32) updated from gradients g (G_); work = bf16(p) if given */
template <typename G_>
__global__ void adamw_kernel(bf16 *work, float *p, const G_ *g, float *m, float *v, size_t n, float lr,
			     float b1, float b2, float eps, float wd, float bc1, float bc2)
{
	GRID_STRIDE(i, n) {
		float pi = p[i] * (1.0f - lr * wd), gi = ldf(g, i);
		float mi = b1 * m[i] + (1.0f - b1) * gi, vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] = pi - lr / bc1 * mi / (sqrtf(vi) / bc2 + eps);
		if (work)
			work[i] = __float2bfloat16(p[i]);
	}
}

template <typename G_>
__global__ void sgd_kernel(bf16 *work, float *p, const G_ *g, float *mom, size_t n, float lr, float mu)
{
	GRID_STRIDE(i, n) {
		float d = ldf(g, i);
		if (mom) {
			mom[i] = mu * mom[i] + d;
			d = mom[i];
		}
		p[i] -= lr * d;
		if (work)
			work[i] = __float2bfloat16(p[i]);
	}
}

template <typename T_>
__global__ void sumsq_kernel(double *partial, const T_ *x, size_t n)
{
	double s = 0;
	GRID_STRIDE(i, n) {
		double v = ldf(x, i);
		s += v * v;
	}
	s = block_sum_d(s);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = s;
}

template <typename D_, typename S2>
__global__ void cast_kernel(D_ *dst, const S2 *src, size_t n)
{
	GRID_STRIDE(i, n)
		stf(dst, i, ldf(src, i));
}

/* dispatch on a storage type: T is float or bf16 */
#define DISPATCH_T(dt, ...) do { \
	if ((dt) == CUK_F32) { typedef float T; __VA_ARGS__; } \
	else { typedef bf16 T; __VA_ARGS__; } } while (0)

extern "C" void cuk_axpy_dt(struct cuk *k, int dt, void *y, const void *x, float a, size_t n)
{
	DISPATCH_T(dt, axpy_kernel<T><<<grid_for(n), TPB, 0, S_(k)>>>((T *)y, (const T *)x, a, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_scale_dt(struct cuk *k, int dt, void *y, float a, size_t n)
{
	DISPATCH_T(dt, scale_kernel<T><<<grid_for(n), TPB, 0, S_(k)>>>((T *)y, a, n));
	CUDA_LAUNCHED();
}

extern "C" void cuk_axpy(struct cuk *k, float *y, const float *x, float a, size_t n)
{
	cuk_axpy_dt(k, CUK_F32, y, x, a, n);
}

extern "C" void cuk_scale(struct cuk *k, float *y, float a, size_t n)
{
	cuk_scale_dt(k, CUK_F32, y, a, n);
}

extern "C" void cuk_adamw_mp(struct cuk *k, int gdt, void *work, float *p, const void *g, float *m, float *v,
			     size_t n, float lr, float b1, float b2, float eps, float wd, int t)
{
	/* bias corrections on the host, exactly as the reference computes them */
	float bc1 = 1.0f - powf(b1, (float)t), bc2 = sqrtf(1.0f - powf(b2, (float)t));
	DISPATCH_T(gdt, adamw_kernel<T><<<grid_for(n), TPB, 0, S_(k)>>>((bf16 *)work, p, (const T *)g, m, v, n, lr,
									 b1, b2, eps, wd, bc1, bc2));
	CUDA_LAUNCHED();
}

extern "C" void cuk_sgd_mp(struct cuk *k, int gdt, void *work, float *p, const void *g, float *mom, size_t n,
			   float lr, float mu)
{
	DISPATCH_T(gdt, sgd_kernel<T><<<grid_for(n), TPB, 0, S_(k)>>>((bf16 *)work, p, (const T *)g, mom, n, lr, mu));
	CUDA_LAUNCHED();
}

extern "C" void cuk_adamw(struct cuk *k, float *p, const float *g, float *m, float *v, size_t n, float lr,
			  float b1, float b2, float eps, float wd, int t)
{
	cuk_adamw_mp(k, CUK_F32, NULL, p, g, m, v, n, lr, b1, b2, eps, wd, t);
}

extern "C" void cuk_sgd(struct cuk *k, float *p, const float *g, float *mom, size_t n, float lr, float mu)
{
	cuk_sgd_mp(k, CUK_F32, NULL, p, g, mom, n, lr, mu);
}

extern "C" double cuk_sumsq_dt(struct cuk *k, int dt, const void *x, size_t n)
{
	DISPATCH_T(dt, sumsq_kernel<T><<<CUK_PARTIALS, TPB, 0, S_(k)>>>(k->partial, (const T *)x, n));
	CUDA_LAUNCHED();
	return fetch_partials(k, CUK_PARTIALS);
}

extern "C" double cuk_sumsq(struct cuk *k, const float *x, size_t n)
{
	return cuk_sumsq_dt(k, CUK_F32, x, n);
}

extern "C" void cuk_cast(struct cuk *k, int dst_dt, void *dst, int src_dt, const void *src, size_t n)
{
	unsigned g = grid_for(n);

	dst_dt = storage(dst_dt), src_dt = storage(src_dt);
	if (dst_dt == CUK_BF16 && src_dt == CUK_F32)
		cast_kernel<bf16, float><<<g, TPB, 0, S_(k)>>>((bf16 *)dst, (const float *)src, n);
	else if (dst_dt == CUK_F32 && src_dt == CUK_BF16)
		cast_kernel<float, bf16><<<g, TPB, 0, S_(k)>>>((float *)dst, (const bf16 *)src, n);
	else if (n)
		CUDA_CHECK(cudaMemcpyAsync(dst, src, n * cuk_dsize(dst_dt), cudaMemcpyDeviceToDevice, S_(k)));
	CUDA_LAUNCHED();
}

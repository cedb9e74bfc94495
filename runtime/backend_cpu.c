/*
 * backend_cpu.c — the cpu backend: plain C fp32 kernels (the reference every
 * other backend is tested against) and collectives over MPI.
 *
 * Kernels follow the definitions of GPT-2 (Radford et al. 2019) as llm.c
 * writes them: LayerNorm with eps 1e-5 and fp32 (mean, rstd) saved per row;
 * GELU's tanh approximation (gelu_new); causal softmax attention with scores
 * scaled by 1/sqrt(hs); the fused qkv layout (B, T, 3C) = [q | k | v], head h
 * at columns h*hs..(h+1)*hs-1 of each. Matrices are nn.Linear's (OC, C).
 * Dropout draws a counter-based random number per element (splitmix64 of
 * seed + offset + i), so a recomputed forward draws the same mask.
 */
#include "backend.h"
#include "launch.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory ------------------------------------------------------------- */

static void cpu_copy(struct backend *be RT_UNUSED, void *dst, const void *src, size_t bytes, int kind)
{
	(void)kind;
	if (bytes)
		memmove(dst, src, bytes);
}

static void cpu_zero(struct backend *be RT_UNUSED, void *p, size_t bytes)
{
	if (bytes)
		memset(p, 0, bytes);
}

static void cpu_sync(struct backend *be RT_UNUSED)
{
}

/* ---- kernels ------------------------------------------------------------ */

static void embed_fwd(struct backend *be RT_UNUSED, float *out, const int32_t *ids, const float *wte, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			memcpy(out + ((size_t)b * T + t) * C, wte + (size_t)ids[(size_t)b * 2 * T + t] * C,
			       (size_t)C * sizeof *out);
}

static void embed_bwd(struct backend *be RT_UNUSED, float *dwte, const float *dout, const int32_t *ids, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			float *d = dwte + (size_t)ids[(size_t)b * 2 * T + t] * C;
			const float *g = dout + ((size_t)b * T + t) * C;
			for (int i = 0; i < C; i++)
				d[i] += g[i];
		}
}

static void pos_fwd(struct backend *be RT_UNUSED, float *out, const float *x, const float *wpe, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			size_t r = ((size_t)b * T + t) * C;
			for (int i = 0; i < C; i++)
				out[r + i] = x[r + i] + wpe[(size_t)t * C + i];
		}
}

static void pos_bwd(struct backend *be RT_UNUSED, float *dx, float *dwpe, const float *dout, int B, int T, int C)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			size_t r = ((size_t)b * T + t) * C;
			for (int i = 0; i < C; i++) {
				if (dx)
					dx[r + i] += dout[r + i];
				dwpe[(size_t)t * C + i] += dout[r + i];
			}
		}
}

static void layernorm_fwd(struct backend *be RT_UNUSED, float *out, float *stats, const float *x, const float *w,
			  const float *b, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * C;
		float *o = out + (size_t)n * C;
		float mean = 0, var = 0, rstd;
		for (int i = 0; i < C; i++)
			mean += xr[i];
		mean /= C;
		for (int i = 0; i < C; i++)
			var += (xr[i] - mean) * (xr[i] - mean);
		var /= C;
		rstd = 1.0f / sqrtf(var + 1e-5f);
		for (int i = 0; i < C; i++)
			o[i] = (xr[i] - mean) * rstd * w[i] + b[i];
		stats[2 * n] = mean;
		stats[2 * n + 1] = rstd;
	}
}

static void layernorm_bwd(struct backend *be RT_UNUSED, float *dx, float *dw, float *db, const float *dout, const float *x,
			  const float *stats, const float *w, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const float *g = dout + (size_t)n * C, *xr = x + (size_t)n * C;
		float *d = dx + (size_t)n * C;
		float mean = stats[2 * n], rstd = stats[2 * n + 1], dmean = 0, dnmean = 0;
		for (int i = 0; i < C; i++) {
			float norm = (xr[i] - mean) * rstd, dn = w[i] * g[i];
			dmean += dn;
			dnmean += dn * norm;
		}
		dmean /= C;
		dnmean /= C;
		for (int i = 0; i < C; i++) {
			float norm = (xr[i] - mean) * rstd, dn = w[i] * g[i];
			db[i] += g[i];
			dw[i] += norm * g[i];
			d[i] += (dn - dmean - norm * dnmean) * rstd;
		}
	}
}

/* dot product with 8 independent lanes (vectorizes without reassociation) */
static float dot(const float *a, const float *b, int n)
{
	float acc[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			acc[k] += a[i + k] * b[i + k];
	for (; i < n; i++)
		acc[0] += a[i] * b[i];
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

enum { TILE = 32 };  /* rows of x and W kept in cache together */

/* out (N, OC) = x (N, C) . w (OC, C)^T + bias (OC) */
static void matmul_fwd(struct backend *be RT_UNUSED, float *out, const float *x, const float *w, const float *bias,
		       int N, int C, int OC)
{
	for (int n0 = 0; n0 < N; n0 += TILE)
		for (int o0 = 0; o0 < OC; o0 += TILE)
			for (int n = n0; n < n0 + TILE && n < N; n++)
				for (int o = o0; o < o0 + TILE && o < OC; o++)
					out[(size_t)n * OC + o] = (bias ? bias[o] : 0) +
						dot(x + (size_t)n * C, w + (size_t)o * C, C);
}

static void matmul_bwd(struct backend *be RT_UNUSED, float *dx, float *dw, float *dbias, const float *dout, const float *x,
		       const float *w, int N, int C, int OC)
{
	/* dx (N, C) += dout (N, OC) . w (OC, C) */
	if (dx)
		for (int n = 0; n < N; n++) {
			float *d = dx + (size_t)n * C;
			for (int o = 0; o < OC; o++) {
				float g = dout[(size_t)n * OC + o];
				const float *wr = w + (size_t)o * C;
				for (int i = 0; i < C; i++)
					d[i] += g * wr[i];
			}
		}
	/* dw (OC, C) += dout^T (OC, N) . x (N, C); dbias += column sums */
	for (int o0 = 0; o0 < OC; o0 += TILE)
		for (int n0 = 0; n0 < N; n0 += TILE)
			for (int o = o0; o < o0 + TILE && o < OC; o++) {
				float *d = dw + (size_t)o * C;
				for (int n = n0; n < n0 + TILE && n < N; n++) {
					float g = dout[(size_t)n * OC + o];
					const float *xr = x + (size_t)n * C;
					for (int i = 0; i < C; i++)
						d[i] += g * xr[i];
				}
			}
	if (dbias)
		for (int n = 0; n < N; n++)
			for (int o = 0; o < OC; o++)
				dbias[o] += dout[(size_t)n * OC + o];
}

/* scores (B, NH, T, T) = q k^T / sqrt(hs), -inf above the diagonal (causal) */
static void attn_score_fwd(struct backend *be RT_UNUSED, float *scores, const float *qkv, int B, int T, int NH, int NKV, int hs)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs;
	float sc = 1.0f / sqrtf((float)hs);

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const float *q = qkv + ((size_t)b * T + t) * row + (size_t)h * hs;
				const float *k0 = qkv + (size_t)b * T * row + (size_t)(NH + h / (NH / NKV)) * hs;
				float *s = scores + (((size_t)b * NH + h) * T + t) * T;
				for (int u = 0; u < T; u++)
					s[u] = u > t ? -INFINITY : dot(q, k0 + (size_t)u * row, hs) * sc;
			}
}

static void attn_score_bwd(struct backend *be RT_UNUSED, float *dqkv, const float *dscores, const float *qkv, int B, int T,
			   int NH, int NKV, int hs)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs;
	float sc = 1.0f / sqrtf((float)hs);

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				size_t qo = ((size_t)b * T + t) * row + (size_t)h * hs;
				size_t ko = (size_t)b * T * row + (size_t)(NH + h / (NH / NKV)) * hs;
				const float *ds = dscores + (((size_t)b * NH + h) * T + t) * T;
				for (int u = 0; u <= t; u++) {
					const float *k = qkv + ko + (size_t)u * row;
					float *dk = dqkv + ko + (size_t)u * row, g = ds[u] * sc;
					for (int i = 0; i < hs; i++) {
						dqkv[qo + i] += g * k[i];
						dk[i] += g * qkv[qo + i];
					}
				}
			}
}

static void softmax_fwd(struct backend *be RT_UNUSED, float *out, const float *in, int rows, int T)
{
	for (int r = 0; r < rows; r++) {
		const float *x = in + (size_t)r * T;
		float *y = out + (size_t)r * T, mx = -INFINITY, sum = 0;
		for (int i = 0; i < T; i++)
			mx = x[i] > mx ? x[i] : mx;
		for (int i = 0; i < T; i++) {
			y[i] = expf(x[i] - mx);
			sum += y[i];
		}
		for (int i = 0; i < T; i++)
			y[i] /= sum;
	}
}

static void softmax_bwd(struct backend *be RT_UNUSED, float *din, const float *dout, const float *out, int rows, int T)
{
	for (int r = 0; r < rows; r++) {
		const float *g = dout + (size_t)r * T, *y = out + (size_t)r * T;
		float *d = din + (size_t)r * T, s = 0;
		for (int i = 0; i < T; i++)
			s += g[i] * y[i];
		for (int i = 0; i < T; i++)
			d[i] += y[i] * (g[i] - s);
	}
}

/* ctx (B, T, NH x hs) = att (B, NH, T, T) . v */
static void attn_ctx_fwd(struct backend *be RT_UNUSED, float *ctx, const float *att, const float *qkv, int B, int T, int NH,
			 int NKV, int hs)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				float *o = ctx + ((size_t)b * T + t) * C + (size_t)h * hs;
				const float *a = att + (((size_t)b * NH + h) * T + t) * T;
				const float *v0 = qkv + (size_t)b * T * row + (size_t)(NH + NKV + h / (NH / NKV)) * hs;
				memset(o, 0, (size_t)hs * sizeof *o);
				for (int u = 0; u <= t; u++) {
					const float *v = v0 + (size_t)u * row;
					for (int i = 0; i < hs; i++)
						o[i] += a[u] * v[i];
				}
			}
}

static void attn_ctx_bwd(struct backend *be RT_UNUSED, float *datt, float *dqkv, const float *dctx, const float *att,
			 const float *qkv, int B, int T, int NH, int NKV, int hs)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;

	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++)
			for (int t = 0; t < T; t++) {
				const float *g = dctx + ((size_t)b * T + t) * C + (size_t)h * hs;
				const float *a = att + (((size_t)b * NH + h) * T + t) * T;
				size_t vo = (size_t)b * T * row + (size_t)(NH + NKV + h / (NH / NKV)) * hs;
				float *da = datt + (((size_t)b * NH + h) * T + t) * T;
				for (int u = 0; u <= t; u++) {
					const float *v = qkv + vo + (size_t)u * row;
					float *dv = dqkv + vo + (size_t)u * row;
					da[u] += dot(g, v, hs);
					for (int i = 0; i < hs; i++)
						dv[i] += a[u] * g[i];
				}
			}
}

static void rope(struct backend *be RT_UNUSED, float *qkv, int B, int T, int NH, int NKV, int hs, float theta, int dir)
{
	size_t row = (size_t)(NH + 2 * NKV) * hs;
	int half = hs / 2;

	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int h = 0; h < NH + NKV; h++) {  /* the q heads, then the k heads */
				float *x = qkv + ((size_t)b * T + t) * row + (size_t)h * hs;
				for (int i = 0; i < half; i++) {
					double ang = (double)t * pow((double)theta, -2.0 * i / hs);
					float c = (float)cos(ang), sn = (float)(dir * sin(ang));
					float x0 = x[i], x1 = x[i + half];
					x[i] = x0 * c - x1 * sn;
					x[i + half] = x1 * c + x0 * sn;
				}
			}
}

static void rmsnorm_fwd(struct backend *be RT_UNUSED, float *out, float *rstd, const float *x, const float *w, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * C;
		float ss = 0, r;
		for (int i = 0; i < C; i++)
			ss += xr[i] * xr[i];
		r = 1.0f / sqrtf(ss / C + 1e-5f);
		for (int i = 0; i < C; i++)
			out[(size_t)n * C + i] = xr[i] * r * w[i];
		rstd[n] = r;
	}
}

static void rmsnorm_bwd(struct backend *be RT_UNUSED, float *dx, float *dw, const float *dout, const float *x, const float *rstd,
			const float *w, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const float *g = dout + (size_t)n * C, *xr = x + (size_t)n * C;
		float r = rstd[n], dot_ = 0;
		for (int i = 0; i < C; i++)
			dot_ += g[i] * w[i] * xr[i];
		for (int i = 0; i < C; i++) {
			dw[i] += g[i] * xr[i] * r;
			dx[(size_t)n * C + i] += r * (g[i] * w[i] - xr[i] * r * r * dot_ / C);
		}
	}
}

static void silu_fwd(struct backend *be RT_UNUSED, float *out, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = x[i] / (1.0f + expf(-x[i]));
}

static void silu_bwd(struct backend *be RT_UNUSED, float *dx, const float *dout, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float sg = 1.0f / (1.0f + expf(-x[i]));
		dx[i] += dout[i] * sg * (1.0f + x[i] * (1.0f - sg));
	}
}

static void mul_fwd(struct backend *be RT_UNUSED, float *out, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] * b[i];
}

static void mul_bwd(struct backend *be RT_UNUSED, float *da, float *db, const float *dout, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		da[i] += dout[i] * b[i];
		db[i] += dout[i] * a[i];
	}
}

#define GELU_K 0.7978845608028654f  /* sqrt(2/pi) */

static void gelu_fwd(struct backend *be RT_UNUSED, float *out, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float v = x[i];
		out[i] = 0.5f * v * (1.0f + tanhf(GELU_K * (v + 0.044715f * v * v * v)));
	}
}

static void gelu_bwd(struct backend *be RT_UNUSED, float *dx, const float *dout, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float v = x[i], u = GELU_K * (v + 0.044715f * v * v * v), th = tanhf(u);
		float sech2 = 1.0f - th * th;
		float d = 0.5f * (1.0f + th) + 0.5f * v * sech2 * GELU_K * (1.0f + 3 * 0.044715f * v * v);
		dx[i] += d * dout[i];
	}
}

static void add_fwd(struct backend *be RT_UNUSED, float *out, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = a[i] + b[i];
}

static void add_bwd(struct backend *be RT_UNUSED, float *da, float *db, const float *dout, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		da[i] += dout[i];
		db[i] += dout[i];
	}
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void dropout_fwd(struct backend *be RT_UNUSED, float *out, uint8_t *mask, const float *x, size_t n, float p,
			uint64_t seed, uint64_t offset)
{
	float keep = 1.0f / (1.0f - p);
	for (size_t i = 0; i < n; i++) {
		double u = (double)(splitmix64(seed ^ (offset + i) * 0xd1342543de82ef95ull) >> 11) * 0x1p-53;
		mask[i] = u >= p;
		out[i] = mask[i] ? x[i] * keep : 0.0f;
	}
}

static void dropout_bwd(struct backend *be RT_UNUSED, float *dx, const float *dout, const uint8_t *mask, size_t n, float p)
{
	float keep = 1.0f / (1.0f - p);
	for (size_t i = 0; i < n; i++)
		dx[i] += mask[i] ? dout[i] * keep : 0.0f;
}

static void xent_fwd(struct backend *be RT_UNUSED, float *logp, double *loss_sum, const float *logits, const int32_t *ids,
		     int B, int T, int V)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *x = logits + ((size_t)b * T + t) * V;
			float *y = logp + ((size_t)b * T + t) * V, mx = -INFINITY, sum = 0, lse;
			for (int i = 0; i < V; i++)
				mx = x[i] > mx ? x[i] : mx;
			for (int i = 0; i < V; i++)
				sum += expf(x[i] - mx);
			lse = mx + logf(sum);
			for (int i = 0; i < V; i++)
				y[i] = x[i] - lse;
			*loss_sum -= y[ids[(size_t)b * 2 * T + T + t]];
		}
}

static void xent_bwd(struct backend *be RT_UNUSED, float *dlogits, const float *logp, const int32_t *ids, int B, int T, int V,
		     float scale)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *y = logp + ((size_t)b * T + t) * V;
			float *d = dlogits + ((size_t)b * T + t) * V;
			int tgt = ids[(size_t)b * 2 * T + T + t];
			for (int i = 0; i < V; i++)
				d[i] += (expf(y[i]) - (i == tgt)) * scale;
		}
}

static void axpy(struct backend *be RT_UNUSED, float *y, const float *x, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void scale(struct backend *be RT_UNUSED, float *y, float a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] *= a;
}

/* bfloat16 is the top half of an fp32: add half of the dropped half's unit
 * (and the kept last bit, for ties to even) and truncate. NaN stays NaN. */
float rt_round_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return x;
	u += 0x7fffu + ((u >> 16) & 1u);
	u &= 0xffff0000u;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* fp16: 11 significant bits for normals (2^-14 .. 65504), a fixed quantum of
 * 2^-24 below; rintf rounds to nearest even (the default mode). Scaling by
 * powers of two is exact in fp32. */
float rt_round_f16(float x)
{
	float a = fabsf(x), q;
	int ex;

	if (!isfinite(x) || a == 0)
		return x;
	if (a >= 65520.0f)  /* halfway above 65504 rounds to infinity */
		return copysignf(INFINITY, x);
	if (a < 0x1p-14f) {
		q = 0x1p-24f;
	} else {
		frexpf(a, &ex);  /* a = m 2^ex, m in [0.5, 1) */
		q = ldexpf(1.0f, ex - 11);
	}
	return copysignf(rintf(a / q) * q, x);
}

static void round16(struct backend *be RT_UNUSED, float *x, size_t n, int dtype)
{
	size_t i;

	if (dtype == RT_BF16)
		for (i = 0; i < n; i++)
			x[i] = rt_round_bf16(x[i]);
	else if (dtype == RT_F16)
		for (i = 0; i < n; i++)
			x[i] = rt_round_f16(x[i]);
}

static size_t nonfinite(struct backend *be RT_UNUSED, const float *x, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += !isfinite(x[i]);
	return k;
}

/* torch.optim.AdamW (decoupled weight decay, bias-corrected moments) */
static void adamw(struct backend *be RT_UNUSED, float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
		  float b2, float eps, float wd, int t)
{
	float bc1 = 1.0f - powf(b1, (float)t), bc2 = sqrtf(1.0f - powf(b2, (float)t));
	for (size_t i = 0; i < n; i++) {
		p[i] *= 1.0f - lr * wd;
		m[i] = b1 * m[i] + (1.0f - b1) * g[i];
		v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
		p[i] -= lr / bc1 * m[i] / (sqrtf(v[i]) / bc2 + eps);
	}
}

/* torch.optim.SGD: mom = mu mom + g (mom NULL: plain SGD); p -= lr mom */
static void sgd(struct backend *be RT_UNUSED, float *p, const float *g, float *mom, size_t n, float lr, float mu)
{
	for (size_t i = 0; i < n; i++) {
		float d = g[i];
		if (mom) {
			mom[i] = mu * mom[i] + g[i];
			d = mom[i];
		}
		p[i] -= lr * d;
	}
}

/* ---- collectives over MPI ---------------------------------------------- */

/* a world of one, or an emulated world: collectives stay in this process */
#define LOCAL(c) ((c)->size == 1 || (c)->emulated)

static MPI_Comm comm_of(struct rt_comm *c)
{
	return *(MPI_Comm *)c->impl;
}

static int mpi_fail(int rc, const char *what, struct err *e)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(rc, msg, &len);
	return err_set(e, ERR_SYSTEM, NULL, 0, "MPI %s failed: %s (is mpirun's environment intact?)",
		       what, msg);
}

#define MPI_CHECK(call, what) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, what, e); } while (0)

enum { CHUNK = 1 << 28 };  /* elements per MPI call (counts are int) */

static int mpi_allreduce(struct backend *be RT_UNUSED, struct rt_comm *c, float *buf, size_t n, struct err *e)
{
	if (LOCAL(c))
		return 0;
	for (size_t i = 0; i < n; i += CHUNK) {
		int k = (int)(n - i < CHUNK ? n - i : CHUNK);
		MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + i, k, MPI_FLOAT, MPI_SUM, comm_of(c)), "all-reduce");
	}
	return 0;
}

static int mpi_allreduce_start(struct backend *be, struct rt_comm *c, float *buf, size_t n, struct rt_req *r,
			       struct err *e)
{
	MPI_Request *q;

	if (LOCAL(c) || n > CHUNK)
		return mpi_allreduce(be, c, buf, n, e);
	q = malloc(sizeof *q);
	if (!q)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm_of(c), q), "all-reduce");
	r->impl = q;
	r->active = 1;
	return 0;
}

static int mpi_wait(struct backend *be RT_UNUSED, struct rt_req *r, struct err *e)
{
	MPI_Request *q = r->impl;

	if (!r->active)
		return 0;
	r->active = 0;
	r->impl = NULL;
	{
		int rc = MPI_Wait(q, MPI_STATUS_IGNORE);
		free(q);
		if (rc != MPI_SUCCESS)
			return mpi_fail(rc, "wait", e);
	}
	return 0;
}

static int mpi_reduce_scatter(struct backend *be RT_UNUSED, struct rt_comm *c, float *send, float *recv, size_t count,
			      struct err *e)
{
	if (LOCAL(c)) {
		memmove(recv, send, count * sizeof *send);
		return 0;
	}
	if (count > CHUNK)
		return err_set(e, ERR_SYSTEM, NULL, 0, "reduce-scatter of %zu elements per rank: too large", count);
	if (recv == send + (size_t)c->rank * count) {
		MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, send, (int)count, MPI_FLOAT, MPI_SUM,
						   comm_of(c)), "reduce-scatter");
		memmove(recv, send, count * sizeof *send);
	} else {
		MPI_CHECK(MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, comm_of(c)),
			  "reduce-scatter");
	}
	return 0;
}

static int mpi_allgather(struct backend *be RT_UNUSED, struct rt_comm *c, float *send, float *recv, size_t count, struct err *e)
{
	if (LOCAL(c)) {
		memmove(recv + (size_t)c->rank * count, send, count * sizeof *send);
		for (int r = 0; r < c->size; r++)  /* the other ranks' shards: zeros */
			if (r != c->rank)
				memset(recv + (size_t)r * count, 0, count * sizeof *recv);
		return 0;
	}
	if (count > CHUNK)
		return err_set(e, ERR_SYSTEM, NULL, 0, "all-gather of %zu elements per rank: too large", count);
	if (send == recv + (size_t)c->rank * count)
		MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, (int)count, MPI_FLOAT,
					comm_of(c)), "all-gather");
	else
		MPI_CHECK(MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT,
					comm_of(c)), "all-gather");
	return 0;
}

/* counts and displacements of a flat buffer of n elements in shards of sh */
static int flat_layout(struct rt_comm *c, size_t n, size_t sh, int **cnt, int **dsp, struct err *e)
{
	*cnt = malloc((size_t)c->size * sizeof **cnt);
	*dsp = malloc((size_t)c->size * sizeof **dsp);
	if (!*cnt || !*dsp || n > CHUNK) {
		free(*cnt);
		free(*dsp);
		return err_set(e, ERR_SYSTEM, NULL, 0, "flat collective of %zu elements: %s", n,
			       n > CHUNK ? "too large" : "out of host memory");
	}
	for (int r = 0; r < c->size; r++) {
		size_t lo = (size_t)r * sh < n ? (size_t)r * sh : n, hi = lo + sh < n ? lo + sh : n;
		(*dsp)[r] = (int)lo;
		(*cnt)[r] = (int)(hi - lo);
	}
	return 0;
}

static int mpi_allgather_flat(struct backend *be RT_UNUSED, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	int *cnt, *dsp, rc;

	if (LOCAL(c))
		return 0;
	if (flat_layout(c, n, sh, &cnt, &dsp, e))
		return e->code;
	rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_FLOAT, comm_of(c));
	free(cnt);
	free(dsp);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "all-gather", e);
}

static int mpi_reduce_scatter_flat(struct backend *be RT_UNUSED, struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	int *cnt, *dsp, rc;

	if (LOCAL(c))
		return 0;
	if (flat_layout(c, n, sh, &cnt, &dsp, e))
		return e->code;
	rc = MPI_Reduce_scatter(MPI_IN_PLACE, buf, cnt, MPI_FLOAT, MPI_SUM, comm_of(c));
	free(cnt);
	free(dsp);
	return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, "reduce-scatter", e);
}

static int mpi_broadcast(struct backend *be RT_UNUSED, struct rt_comm *c, float *buf, size_t n, int root, struct err *e)
{
	if (LOCAL(c))
		return 0;
	for (size_t i = 0; i < n; i += CHUNK) {
		int k = (int)(n - i < CHUNK ? n - i : CHUNK);
		MPI_CHECK(MPI_Bcast(buf + i, k, MPI_FLOAT, root, comm_of(c)), "broadcast");
	}
	return 0;
}

static int mpi_barrier(struct backend *be RT_UNUSED, struct rt_comm *c, struct err *e)
{
	if (LOCAL(c))
		return 0;
	MPI_CHECK(MPI_Barrier(comm_of(c)), "barrier");
	return 0;
}

static int mpi_allreduce_host(struct backend *be RT_UNUSED, struct rt_comm *c, double *v, int n, int op_max, struct err *e)
{
	if (LOCAL(c))
		return 0;
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op_max ? MPI_MAX : MPI_SUM, comm_of(c)),
		  "all-reduce (host)");
	return 0;
}

static int wrap(MPI_Comm mc, struct rt_comm *out, struct err *e)
{
	MPI_Comm *p = malloc(sizeof *p);

	if (!p)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	*p = mc;
	out->impl = p;
	MPI_Comm_rank(mc, &out->rank);
	MPI_Comm_size(mc, &out->size);
	return 0;
}

static int mpi_comm_split(struct backend *be RT_UNUSED, struct rt_comm *c, int color, int key, struct rt_comm *out, struct err *e)
{
	MPI_Comm nc;

	if (LOCAL(c)) {  /* emulated worlds make their groups themselves (strategy.c) */
		*out = (struct rt_comm){0, 1, NULL, 0};
		return 0;
	}
	MPI_CHECK(MPI_Comm_split(comm_of(c), color, key, &nc), "comm split");
	return wrap(nc, out, e);
}

static void mpi_comm_free(struct backend *be RT_UNUSED, struct rt_comm *c)
{
	MPI_Comm *p = c->impl;

	if (!p)
		return;
	if (*p != MPI_COMM_WORLD && *p != MPI_COMM_SELF)
		MPI_Comm_free(p);
	free(p);
	c->impl = NULL;
}

struct backend backend_cpu = {
	.name = "cpu",
	.device = "cpu",
	.overlap = 0,
	.copy = cpu_copy, .zero = cpu_zero, .sync = cpu_sync,
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
	.round = round16, .nonfinite = nonfinite, .adamw = adamw, .sgd = sgd,
	.allreduce = mpi_allreduce, .allreduce_start = mpi_allreduce_start, .wait = mpi_wait,
	.reduce_scatter = mpi_reduce_scatter, .allgather = mpi_allgather,
	.allgather_flat = mpi_allgather_flat, .reduce_scatter_flat = mpi_reduce_scatter_flat,
	.broadcast = mpi_broadcast, .barrier = mpi_barrier, .allreduce_host = mpi_allreduce_host,
	.comm_split = mpi_comm_split, .comm_free = mpi_comm_free,
};

static int we_initialized;

static int mpi_up(struct err *e)
{
	int up = 0;

	MPI_Initialized(&up);
	if (!up) {
		MPI_CHECK(MPI_Init(NULL, NULL), "init");
		we_initialized = 1;
	}
	return 0;
}

void backend_emulated_world(struct rt_comm *c, int size)
{
	*c = (struct rt_comm){0, size, NULL, size > 1};
}

int backend_cpu_self(struct rt_comm *self)
{
	*self = (struct rt_comm){0, 1, NULL, 0};
	return 0;
}

int backend_open(const char *name, struct backend **be, struct rt_comm *world, struct err *e)
{
	int rc;

	if (strcmp(name, "cuda") == 0)
		return backend_cuda_open(be, world, e);
	if (strcmp(name, "cpu") != 0)
		return err_set(e, ERR_INPUT, NULL, 0, "--backend %s: unknown backend; expected cpu or cuda", name);
	backend_cpu.dev = arena_host_dev;
	*be = &backend_cpu;
	if (!launch_mpi()) {  /* a single process needs no MPI */
		*world = (struct rt_comm){0, 1, NULL, 0};
		return launch_alone(e);
	}
	rc = mpi_up(e);
	if (rc)
		return rc;
	return wrap(MPI_COMM_WORLD, world, e);
}

void backend_close(struct backend *be)
{
	if (be && strcmp(be->name, "cuda") == 0)
		backend_cuda_close(be);
	if (we_initialized) {
		int down = 0;
		MPI_Finalized(&down);
		if (!down)
			MPI_Finalize();
		we_initialized = 0;
	}
}

/*
 * compute.h — the time of one kernel on a GPU, and the device's achievable
 * efficiencies (models/hw/efficiency.ini).
 *
 * Roofline per kernel (Williams, Waterman & Patterson 2009):
 *   time = max(flops / (peak[precision] × eff(m, n, k)),
 *              bytes / (memory_bandwidth × memory_efficiency)) + kernel_gap
 * with the matrix-shape efficiency
 *   eff(m, n, k) = gemm_efficiency × m/(m + h) × n/(n + h) × k/(k + h),
 * h = gemm_half_dim: large products approach gemm_efficiency (what a large
 * product with random inputs sustains on the device), small dimensions lose to
 * tile quantisation (a k of 64, attention's head size, runs at half of it).
 * fp32 products without tensor cores (SIMT) and TF32 ones reach other
 * fractions of their own peaks (gemm_efficiency_fp32, _tf32; 0 = the same).
 * A tensor-core product whose n or k (the contiguous dimensions of its row-
 * major operands and output: a linear layer's features, a vocabulary, a head
 * size) is not a multiple of 16 bytes cannot use the 128-bit loads of cuBLAS's
 * fast kernels and runs an align1 kernel at gemm_unaligned of the rate (NVIDIA,
 * Matrix Multiplication Background User's Guide, §2.2 "Tensor Core
 * Requirements"; measured: pytorch/pytorch issue #181718). Ops
 * without a matrix product are memory-bound: their flops use no shape factor.
 * The parameters are data, fitted by `validate --calibrate`.
 */
#ifndef SHARDCAST_COMPUTE_H
#define SHARDCAST_COMPUTE_H

#include "err.h"
#include "graph.h"
#include "hw.h"

struct compute_eff {
	char entry[CFG_STR_MAX];       /* the efficiency.ini section used */
	double gemm_efficiency;        /* fraction of peak, large products */
	double gemm_efficiency_fp32;   /* the same for fp32 products (0: gemm_efficiency) */
	double gemm_efficiency_tf32;   /* the same for TF32 products (0: gemm_efficiency) */
	double gemm_half_dim;          /* elements */
	double gemm_unaligned;         /* factor on a tensor-core product whose n or k is not a
					  multiple of 16 bytes */
	double memory_efficiency;      /* fraction of memory_bandwidth */
	double kernel_gap;             /* s per kernel on the GPU */
	double overlap_slowdown;       /* fraction by which a compute kernel slows while a
					  collective of its GPU moves data (des.h) */
	double gpu_variation;          /* spread of the speed of same-model GPUs, fraction of
					  the median (max - min) */
	double dispatch_eager;         /* s of host time per forward op (eager PyTorch) */
	double dispatch_autograd;      /* s of host time per backward op */
	double dispatch_native;        /* s of host time per kernel (C runtime) */
	double dispatch_collective;    /* s of host time per collective call */
	double dispatch_op;            /* s of host time per aten op called from Python
					  (torch.optim's per-tensor ops, a foreach call) */
	double dispatch_unit_fwd;      /* s of host time per FSDP unit in forward (its hooks,
					  unshard, all-gather copy-in/out, reshard) */
	double dispatch_unit_bwd;      /* the same in backward (unshard, reduce-scatter
					  copy-in, gradient views) */
	/* fused attention kernels (graph.h AK_*): fraction of the precision's peak
	 * that long sequences reach, forward and backward */
	double attn_eff[AK_COUNT][2];  /* [kernel][0 fwd, 1 bwd]; AK_EAGER unused */
	double attn_seq_half[2];       /* tokens: eff x S/(S + this), fwd and bwd */
	double attn_exp_ratio;         /* FLOP: tensor-core FLOPs the device does in the time of
					  one exp (peak / the SFUs' exp rate) */
	char host_link_name[CFG_STR_MAX];
	double host_memory_bandwidth;  /* bytes/s per node */
	double host_memory_efficiency; /* fraction */
	char source[CFG_STR_MAX];
	struct link host_link;         /* resolved host_link_name */
};

/* Loads the entry of device gpu_name from models/hw/efficiency.ini: [default]
 * first, then the device's own section (when the file has one) over it, and
 * the link its host_link names. */
int compute_load(const char *gpu_name, struct compute_eff *ce, struct err *e);

/* compute_load but for the host link: ce->host_link_name is set and
 * ce->host_link left for the caller, who may read it from links.ini with its
 * other links (hw_links_load; scenario.c); path (of n bytes) gets
 * efficiency.ini's path, where an error in the host link is reported. */
int compute_load_table(const char *gpu_name, struct compute_eff *ce, char *path, size_t n, struct err *e);

/* The asymptote products of precision prec (enum precision) use: the
 * precision's own (gemm_efficiency_fp32, _tf32) where the device has one, else
 * gemm_efficiency (a calibration scales all three alike: calib.c). */
double compute_gemm_asymptote(const struct compute_eff *ce, int prec);

/* The efficiency of an (m x k)·(k x n) product in precision prec (enum
 * precision): the precision's asymptote times the shape factor. */
double compute_gemm_eff(const struct compute_eff *ce, int prec, double m, double n, double k);

/* Roofline time of one kernel: flops at peak (FLOP/s) times the shape efficiency
 * of a product in precision prec (m = 0: no product, full peak), bytes at the
 * memory bandwidth (bytes/s). No gap. */
double compute_roofline(const struct compute_eff *ce, int prec, double peak, double mem_bw, double flops,
			double m, double n, double k, double bytes);

/* Time of a fused attention op (OP_ATTN) of flops FLOPs over sequences of
 * seq keys and heads of hd, forward (dir = 0) or backward (dir = 1), at peak
 * FLOP/s. The kernel's efficiency (attn_*, measured with heads of 128) times
 * seq/(seq + attn_seq_half) and times the share of matrix products in its
 * time, r(hd)/r(128): every score takes one exp (recomputed in backward) beside
 * 4·hd product FLOPs forward and 10·hd backward, and the exp rate of the
 * special-function units is far below the tensor cores' (Shah et al. 2024,
 * FlashAttention-3, arXiv 2407.08608 §3: an H100 SXM5 does 989 TFLOP/s of
 * FP16 products and 3.9 T exp/s), so r(hd) = c·hd/(c·hd + attn_exp_ratio). */
double compute_attention(const struct compute_eff *ce, int kernel, int dir, double peak,
			 double flops, double seq, double hd);

/* How much slower than a median GPU the slowest of n GPUs is, as a factor: a
 * synchronous step (every collective waits for every rank) runs at the pace of
 * its slowest GPU. Per-GPU speeds spread uniformly over gpu_variation around
 * the median give an expected maximum of 1 + gpu_variation/2 x (n-1)/(n+1)
 * (the largest of n uniform draws); one GPU is a median one (1). */
double compute_straggle(const struct compute_eff *ce, double n);

const struct cfg_table *compute_keys(void);

#endif

/*
 * compute.h — the time of one kernel on a GPU, and the device's achievable
 * efficiencies (models/hw/efficiency.ini).
 *
 * Roofline per kernel (Williams, Waterman & Patterson 2009):
 *   time = max(flops / (peak[precision] × eff(m, n, k)),
 *              bytes / (memory_bandwidth × memory_efficiency)) + kernel_gap
 * with the matrix-shape efficiency
 *   eff(m, n, k) = gemm_efficiency × m/(m + h) × n/(n + h) × k/(k + h),
 * h = gemm_half_dim: large products approach gemm_efficiency (the Maximum
 * Achievable Matmul FLOPS of the device), small dimensions lose to tile
 * quantisation (a k of 64, attention's head size, runs at half of it). Ops
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
	double gemm_half_dim;          /* elements */
	double memory_efficiency;      /* fraction of memory_bandwidth */
	double kernel_gap;             /* s per kernel on the GPU */
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
	char host_link_name[CFG_STR_MAX];
	double host_memory_bandwidth;  /* bytes/s per node */
	double host_memory_efficiency; /* fraction */
	char source[CFG_STR_MAX];
	struct link host_link;         /* resolved host_link_name */
};

/* Loads the entry of device gpu_name from models/hw/efficiency.ini: [default]
 * first, then the device's own section (when the file has one) over it. */
int compute_load(const char *gpu_name, struct compute_eff *ce, struct err *e);

/* The shape factor's efficiency of an (m x k)·(k x n) product. */
double compute_gemm_eff(const struct compute_eff *ce, double m, double n, double k);

/* Roofline time of one kernel: flops at peak (FLOP/s) times the shape efficiency
 * (m = 0: no product, full peak), bytes at the memory bandwidth (bytes/s). No gap. */
double compute_roofline(const struct compute_eff *ce, double peak, double mem_bw, double flops,
			double m, double n, double k, double bytes);

/* Time of a fused attention op (OP_ATTN) of flops FLOPs over sequences of
 * seq keys, forward (dir = 0) or backward (dir = 1), at peak FLOP/s. */
double compute_attention(const struct compute_eff *ce, int kernel, int dir, double peak,
			 double flops, double seq);

const struct cfg_table *compute_keys(void);

#endif

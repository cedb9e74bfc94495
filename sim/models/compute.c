/*
 * compute.c — kernel roofline and the efficiency catalogue (see compute.h).
 */
#include "compute.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

/* No defaults in the table: [default] gives every value, a device's section
 * overrides some of them (cfg_parse_entry leaves keys without defaults alone). */
#define E(x) offsetof(struct compute_eff, x)
static const struct cfg_key keys[] = {
	{NULL, "gemm_efficiency", CFG_NUM, 0, 0, 0.01, 1, NULL, E(gemm_efficiency), NULL, "fraction of peak of large products"},
	{NULL, "gemm_efficiency_fp32", CFG_NUM, 0, 0, 0, 1, NULL, E(gemm_efficiency_fp32), NULL, "the same for fp32 (SIMT) products, 0 = gemm_efficiency"},
	{NULL, "gemm_efficiency_tf32", CFG_NUM, 0, 0, 0, 1, NULL, E(gemm_efficiency_tf32), NULL, "the same for TF32 products, 0 = gemm_efficiency"},
	{NULL, "gemm_half_dim", CFG_NUM, 0, 0, 0, 1e6, NULL, E(gemm_half_dim), NULL, "dimension of half shape efficiency"},
	{NULL, "gemm_unaligned", CFG_NUM, 0, 0, 0.01, 1, NULL, E(gemm_unaligned), NULL, "factor on tensor-core products with n or k not a multiple of 16 bytes"},
	{NULL, "memory_efficiency", CFG_NUM, 0, 0, 0.01, 1, NULL, E(memory_efficiency), NULL, "fraction of memory bandwidth"},
	{NULL, "kernel_gap", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(kernel_gap), NULL, "GPU time between kernels"},
	{NULL, "gpu_variation", CFG_NUM, 0, 0, 0, 1, NULL, E(gpu_variation), NULL, "speed spread of same-model GPUs (max - min over the median)"},
	{NULL, "overlap_slowdown", CFG_NUM, 0, 0, 0, 1, NULL, E(overlap_slowdown), NULL, "compute slowdown while a collective runs"},
	{NULL, "dispatch_eager", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_eager), NULL, "host time per forward op"},
	{NULL, "dispatch_autograd", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_autograd), NULL, "host time per backward op"},
	{NULL, "dispatch_native", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_native), NULL, "host time per kernel, C runtime"},
	{NULL, "dispatch_collective", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_collective), NULL, "host time per collective call"},
	{NULL, "dispatch_op", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_op), NULL, "host time per aten op called from Python"},
	{NULL, "dispatch_unit_fwd", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_unit_fwd), NULL, "host time per FSDP unit in forward"},
	{NULL, "dispatch_unit_bwd", CFG_NUM, UNIT_TIME, 0, 0, 1, NULL, E(dispatch_unit_bwd), NULL, "host time per FSDP unit in backward"},
	{NULL, "attn_flash2_fwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_FLASH2][0]), NULL, "FlashAttention-2 forward, fraction of peak"},
	{NULL, "attn_flash2_bwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_FLASH2][1]), NULL, "FlashAttention-2 backward, fraction of peak"},
	{NULL, "attn_mem_efficient_fwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_MEM_EFFICIENT][0]), NULL, "memory-efficient kernel forward"},
	{NULL, "attn_mem_efficient_bwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_MEM_EFFICIENT][1]), NULL, "memory-efficient kernel backward"},
	{NULL, "attn_flash3_fwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_FLASH3][0]), NULL, "FlashAttention-3 forward"},
	{NULL, "attn_flash3_bwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_FLASH3][1]), NULL, "FlashAttention-3 backward"},
	{NULL, "attn_cudnn_fwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_CUDNN][0]), NULL, "cuDNN fused attention forward"},
	{NULL, "attn_cudnn_bwd", CFG_NUM, 0, 0, 0.01, 1, NULL, E(attn_eff[AK_CUDNN][1]), NULL, "cuDNN fused attention backward"},
	{NULL, "attn_seq_half_fwd", CFG_NUM, 0, 0, 0, 1e6, NULL, E(attn_seq_half[0]), NULL, "sequence length of half the forward efficiency"},
	{NULL, "attn_exp_ratio", CFG_NUM, 0, 0, 0, 1e5, NULL, E(attn_exp_ratio), NULL, "product FLOPs per exp the device does in the same time"},
	{NULL, "attn_seq_half_bwd", CFG_NUM, 0, 0, 0, 1e6, NULL, E(attn_seq_half[1]), NULL, "sequence length of half the backward efficiency"},
	{NULL, "host_link", CFG_STR, 0, 0, 0, 0, NULL, E(host_link_name), NULL, "links.ini entry between host and GPU"},
	{NULL, "host_memory_bandwidth", CFG_NUM, UNIT_BW, 0, 1e6, 1e14, NULL, E(host_memory_bandwidth), NULL, "host DRAM bandwidth per node"},
	{NULL, "host_memory_efficiency", CFG_NUM, 0, 0, 0.01, 1, NULL, E(host_memory_efficiency), NULL, "fraction of host bandwidth"},
	{NULL, "source", CFG_STR, 0, 0, 0, 0, NULL, E(source), NULL, "where the figures come from"},
};
#undef E

static const struct cfg_table table = {keys, sizeof keys / sizeof keys[0]};

const struct cfg_table *compute_keys(void)
{
	return &table;
}

/* Every numeric key must have come from [default] or the device's section. */
static int complete(const struct compute_eff *ce, const char *path, struct err *e)
{
	size_t i;

	for (i = 0; i < table.n; i++) {
		const struct cfg_key *k = &keys[i];
		if (k->type == CFG_NUM && *(const double *)((const char *)ce + k->off) < 0)
			return err_set(e, ERR_INPUT, path, 0, "[default] lacks key '%s'", k->name);
	}
	if (!ce->host_link_name[0])
		return err_set(e, ERR_INPUT, path, 0, "[default] lacks key 'host_link'");
	return 0;
}

/* The numeric keys unset (-1: below every key's range) and the eager
 * kernel's efficiencies zero (no key: eager attention is ops). */
static void unset(struct compute_eff *ce)
{
	size_t i;

	memset(ce, 0, sizeof *ce);
	for (i = 0; i < table.n; i++)
		if (keys[i].type == CFG_NUM)
			*(double *)((char *)ce + keys[i].off) = -1;
	ce->attn_eff[AK_EAGER][0] = ce->attn_eff[AK_EAGER][1] = 0;
}

/* The keys the device's section set (numbers not -1, texts not empty: an
 * empty value is an error) over those of [default]. */
static void overlay(struct compute_eff *ce, const struct compute_eff *dev)
{
	size_t i;

	for (i = 0; i < table.n; i++) {
		const char *from = (const char *)dev + keys[i].off;
		char *to = (char *)ce + keys[i].off;
		if (keys[i].type == CFG_NUM && *(const double *)from != -1)
			*(double *)to = *(const double *)from;
		else if (keys[i].type == CFG_STR && from[0])
			memcpy(to, from, CFG_STR_MAX);
	}
}

int compute_load_table(const char *gpu_name, struct compute_eff *ce, char *path, size_t n, struct err *e)
{
	char dir[PATH_MAX], *text = NULL;
	struct compute_eff *dev = malloc(sizeof *dev);
	/* [default], then the device's own section over it, in one pass */
	struct cfg_entry ents[2] = {{"default", ce, 0, 0}, {gpu_name, dev, 1, 0}};
	size_t len;
	int rc;

	unset(ce);
	if (!dev)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	unset(dev);
	snprintf(path, n, "%s/hw/efficiency.ini", catalog_dir(dir, sizeof dir));
	rc = cfg_read_file(path, &text, &len, e);
	if (!rc)
		rc = cfg_parse_entries(&table, ents, catalog_is_path(gpu_name) ? 1 : 2, sizeof *ce,
				       path, text, len, e);
	free(text);
	if (!rc && ents[1].found)
		overlay(ce, dev);
	free(dev);
	snprintf(ce->entry, sizeof ce->entry, "%s", !rc && ents[1].found ? gpu_name : "default");
	if (!rc)
		rc = complete(ce, path, e);
	return rc;
}

int compute_load(const char *gpu_name, struct compute_eff *ce, struct err *e)
{
	char path[PATH_MAX + 64];
	int rc = compute_load_table(gpu_name, ce, path, sizeof path, e);

	if (!rc)
		rc = hw_link_load(ce->host_link_name, &ce->host_link, path, 0, "host_link", e);
	return rc;
}

double compute_gemm_asymptote(const struct compute_eff *ce, int prec)
{
	if (prec == PREC_FP32 && ce->gemm_efficiency_fp32 > 0)
		return ce->gemm_efficiency_fp32;
	if (prec == PREC_TF32 && ce->gemm_efficiency_tf32 > 0)
		return ce->gemm_efficiency_tf32;
	return ce->gemm_efficiency;
}

/* 1 when a tensor-core product's n and k are multiples of 16 bytes of its
 * operands' type (8 fp16/bf16 elements, 4 fp32 ones read as TF32); m, the
 * rows of a row-major operand, is never a leading dimension. fp32 SIMT
 * products are not affected (compute.h). */
static int gemm_aligned(int prec, double n, double k)
{
	int64_t mask = prec == PREC_TF32 ? 3 : 7, in = (int64_t)n, ik = (int64_t)k;

	return prec == PREC_FP32 || (!(in & mask) && !(ik & mask) && in == n && ik == k);
}

double compute_gemm_eff(const struct compute_eff *ce, int prec, double m, double n, double k)
{
	double h = ce->gemm_half_dim, g = compute_gemm_asymptote(ce, prec);

	if (!gemm_aligned(prec, n, k))
		g *= ce->gemm_unaligned;
	return g * (m / (m + h)) * (n / (n + h)) * (k / (k + h));
}

double compute_roofline(const struct compute_eff *ce, int prec, double peak, double mem_bw, double flops,
			double m, double n, double k, double bytes)
{
	double eff = m > 0 && n > 0 && k > 0 ? compute_gemm_eff(ce, prec, m, n, k) : 1.0;
	double tf = flops > 0 ? flops / (peak * eff) : 0;
	double tm = bytes > 0 ? bytes / (mem_bw * ce->memory_efficiency) : 0;

	return fmax(tf, tm);
}

double compute_straggle(const struct compute_eff *ce, double n)
{
	return n > 1 ? 1 + ce->gpu_variation / 2 * (n - 1) / (n + 1) : 1;
}

double compute_attention(const struct compute_eff *ce, int kernel, int dir, double peak,
			 double flops, double seq, double hd)
{
	double half = ce->attn_seq_half[dir], c = dir ? 10 : 4, x = ce->attn_exp_ratio;
	double eff = ce->attn_eff[kernel][dir] * seq / (seq + half) *
		(c * hd / (c * hd + x)) / (c * 128 / (c * 128 + x));

	return flops > 0 && eff > 0 ? flops / (peak * eff) : 0;
}

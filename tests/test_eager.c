/*
 * test_eager.c — the extra kernels of eager formulas (sim/models/eager.c) and the
 * device efficiencies that are functions (sim/models/compute.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "compute.h"
#include "eager.h"
#include "graph.h"

static void build(struct graph *g, struct model *m, const char *name, struct graph_opts o)
{
	struct err e = {0};

	cr_assert_eq(model_load(name, m, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_build(g, m, &o, &e), 0, "%s", e.msg);
}

static int find(const struct graph *g, const char *name, int kind)
{
	char buf[GRAPH_NAME];
	int i;

	for (i = 0; i < g->nops; i++)
		if (strcmp(graph_op_name(g, i, buf), name) == 0 && g->ops[i].kind == kind)
			return i;
	cr_assert_fail("no op %s", name);
	return -1;
}

/* GPT-2's gelu_new in fp32 (no autocast): pow, mul, add, mul, tanh, add, mul,
 * mul read and write 5 + 13 fp32 words per element (eager.h), of which the
 * op's own read and write (2 words) are counted already; 8 kernels, one its
 * own; backward twice the traffic in 1.5 x the kernels. E = 1024 x 3072. */
Test(eager, gelu_new_formula)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	double E = 1024.0 * 3072;

	build(&g, &m, "gpt2", (struct graph_opts){1024, 1024, 0, 1, GRAPH_EAGER, 4, 0, AK_EAGER, FWV_CURRENT, 0});
	eager_extra(&g, &m, find(&g, "L0.gelu", OP_ACT), &x);
	cr_expect_float_eq(x.bytes_fwd, E * (18 * 4 - 2 * 4), 1);
	cr_expect_float_eq(x.kernels_fwd, 7, 1e-12);
	cr_expect_float_eq(x.bytes_bwd, 2 * x.bytes_fwd, 1);
	cr_expect_float_eq(x.kernels_bwd, 11, 1e-12);
	graph_free(&g);

	/* under autocast the input is 16-bit and pow's fp32 output makes the rest
	 * fp32: 5 x 2 + 13 x 4 bytes, the op's own 2 + 4 */
	build(&g, &m, "gpt2", (struct graph_opts){1024, 1024, 0, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	eager_extra(&g, &m, find(&g, "L0.gelu", OP_ACT), &x);
	cr_expect_float_eq(x.bytes_fwd, E * (5 * 2 + 13 * 4 - 6), 1);
	graph_free(&g);
}

/* A fused GELU (MPT's nn.GELU) is one kernel and saves only its input; the
 * same op in the runtime's flavour has no extras either. */
Test(eager, fused_gelu_and_native_graphs_have_none)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	char buf[GRAPH_NAME];
	int i;

	build(&g, &m, "mpt-125m-2k", (struct graph_opts){2048, 2048, 0, 1, GRAPH_EAGER, 2, 1, AK_FLASH2, FWV_CURRENT, 0});
	i = find(&g, "L0.gelu", OP_ACT);
	eager_extra(&g, &m, i, &x);
	cr_expect_float_eq(x.bytes_fwd + x.kernels_fwd + x.kernels_bwd, 0, 1e-12);
	cr_expect_eq(g.ops[i].nsaved, 1, "F.gelu saves its input only");
	graph_free(&g);

	build(&g, &m, "gpt2", (struct graph_opts){1024, 1024, 0, 1, GRAPH_SHARDCAST, 2, 0, AK_EAGER, FWV_CURRENT, 0});
	for (i = 0; i < g.nops; i++) {
		eager_extra(&g, &m, i, &x);
		cr_expect_float_eq(x.bytes_fwd + x.bytes_bwd + x.kernels_fwd + x.kernels_bwd, 0, 1e-12,
				   "%s", graph_op_name(&g, i, buf));
		cr_expect_eq(eager_internal(&g, i), 0, "%s", graph_op_name(&g, i, buf));
	}
	graph_free(&g);
}

/* The book's LayerNorm class (mean, var, sub, add eps, sqrt, div, scale,
 * shift): 8 kernels moving 10 words per element (2 reductions reading x, 4
 * maps reading and writing it); nn.LayerNorm is one (E = 1024 x 768). */
Test(eager, python_layernorm)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	double E = 1024.0 * 768;

	build(&g, &m, "gpt-124m-llmfs", (struct graph_opts){1024, 1024, 0, 1, GRAPH_EAGER, 4, 0, AK_EAGER, FWV_CURRENT, 0});
	eager_extra(&g, &m, find(&g, "L0.norm1", OP_NORM), &x);
	cr_expect_float_eq(x.bytes_fwd, E * (10 * 4 - 2 * 4), 1);
	cr_expect_float_eq(x.kernels_fwd, 7, 1e-12);
	graph_free(&g);
	build(&g, &m, "gpt-124m-llmfs-torch", (struct graph_opts){1024, 1024, 0, 1, GRAPH_EAGER, 4, 0, AK_EAGER, FWV_CURRENT, 0});
	eager_extra(&g, &m, find(&g, "L0.norm1", OP_NORM), &x);
	cr_expect_float_eq(x.bytes_fwd + x.kernels_fwd, 0, 1e-12);
	graph_free(&g);
}

/* Llama under autocast: RMSNorm's middle step (pow, mean, add, rsqrt, mul over
 * fp32: 8 + 4 + 8 bytes per element against the op's own 4 + 4), rotary
 * embeddings on q and k (5 kernels, 10 passes of the 16-bit tensor), none on v;
 * the scores' scaling and mask in the eager core (two read-and-write passes);
 * S = 512, hidden 4096, 32 heads. */
Test(eager, llama_norm_rope_and_mask)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	double S = 512, h = 4096;

	build(&g, &m, "llama-2-7b", (struct graph_opts){512, 512, 0, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	eager_extra(&g, &m, find(&g, "L0.norm1", OP_NORM), &x);
	cr_expect_float_eq(x.bytes_fwd, S * h * (20 - 8), 1);
	cr_expect_float_eq(x.kernels_fwd, 4, 1e-12);
	eager_extra(&g, &m, find(&g, "L0.q", OP_MATMUL), &x);
	cr_expect_float_eq(x.bytes_fwd, 10 * S * h * 2, 1);
	cr_expect_float_eq(x.kernels_fwd, 5, 1e-12);
	eager_extra(&g, &m, find(&g, "L0.v", OP_MATMUL), &x);
	cr_expect_float_eq(x.bytes_fwd + x.bytes_bwd, 0, 1e-12, "no rotary on v, no bias");
	eager_extra(&g, &m, find(&g, "L0.scores", OP_ATTN_SCORE), &x);
	cr_expect_float_eq(x.bytes_fwd, 4 * 32 * S * S * 2, 1);
	cr_expect_float_eq(x.kernels_fwd, 2, 1e-12);
	graph_free(&g);
}

/* A biased linear layer's backward reduces its output gradient for the bias
 * (grad.sum(0)): one kernel reading E elements; autocast's input cast and the
 * bmm copies are internal, issued as one aten op each, the heads' merge
 * (.contiguous() in the module) is the module's own call. */
Test(eager, bias_gradient_and_internal_copies)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	int i, cast = -1;

	build(&g, &m, "gpt2", (struct graph_opts){1024, 1024, 0, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	i = find(&g, "L0.c_attn", OP_MATMUL);
	eager_extra(&g, &m, i, &x);
	cr_expect_float_eq(x.kernels_bwd, 1, 1e-12);
	cr_expect_float_eq(x.bytes_bwd, 1024.0 * 2304 * 2, 1);
	cast = find(&g, "L0.c_attn", OP_COPY);
	cr_expect_eq(cast, i - 1);
	cr_expect_eq(eager_internal(&g, cast), 1, "autocast's cast of c_attn's input");
	cr_expect_eq(eager_internal(&g, find(&g, "L0.q_bmm", OP_COPY)), 1);
	cr_expect_eq(eager_internal(&g, find(&g, "L0.merge_heads", OP_COPY)), 0);
	graph_free(&g);
}

/* flash-attn's varlen path (bert_padding.py, as llm-foundry's MPT calls it):
 * MPT-125m's fused qkv (S x 3h, 16-bit) gathered whole (a read and a write),
 * the output padded back (zeros, index_put: three passes of S x h); backward
 * three scatters into zeros (three passes of qkv), one gather of the output's
 * gradient (two), SplitBackward's cat of dq, dk, dv (two of qkv); per
 * unpad_input six kernels and seven aten calls, pad_input two; one drain of
 * the GPU (nonzero, .item()). S = 2048, h = 768. Llama's separate q, k, v: the
 * same per tensor, no cat. */
Test(eager, flash_varlen_unpad)
{
	struct graph g;
	struct model m;
	struct eager_extra x;
	double S = 2048, h = 768, qkv = S * 3 * h * 2, out = S * h * 2;

	build(&g, &m, "mpt-125m-2k", (struct graph_opts){2048, 2048, 0, 1, GRAPH_EAGER, 2, 0, AK_FLASH2, FWV_CURRENT, 0});
	memset(&x, 0, sizeof x);
	eager_varlen(&g, find(&g, "L0.attn", OP_ATTN), &x);
	cr_expect_float_eq(x.bytes_fwd, 2 * qkv + 3 * out, 1);
	cr_expect_float_eq(x.bytes_bwd, 3 * qkv + 2 * out + 2 * qkv, 1);
	cr_expect_float_eq(x.kernels_fwd, 20, 1e-12);
	cr_expect_float_eq(x.calls_fwd, 23, 1e-12);
	cr_expect_float_eq(x.kernels_bwd, 8, 1e-12);
	cr_expect_eq(x.sync_fwd, 1);
	memset(&x, 0, sizeof x);
	eager_varlen(&g, find(&g, "L0.gelu", OP_ACT), &x);
	cr_expect_float_eq(x.bytes_fwd + x.calls_fwd + x.sync_fwd, 0, 1e-12, "fused attention only");
	graph_free(&g);

	S = 512, h = 4096;
	build(&g, &m, "llama-2-7b", (struct graph_opts){512, 512, 0, 1, GRAPH_EAGER, 2, 0, AK_FLASH2, FWV_CURRENT, 0});
	memset(&x, 0, sizeof x);
	eager_varlen(&g, find(&g, "L0.attn", OP_ATTN), &x);
	cr_expect_float_eq(x.bytes_fwd, 2 * 3 * S * h * 2 + 3 * S * h * 2, 1);
	cr_expect_float_eq(x.bytes_bwd, 3 * 3 * S * h * 2 + 2 * S * h * 2, 1);
	cr_expect_float_eq(x.kernels_bwd, 7, 1e-12);
	graph_free(&g);
}

/* compute.h: the slowest of n GPUs whose speeds spread uniformly over a
 * relative width w is 1 + w/2 (n-1)/(n+1) times a median one's (the expected
 * largest of n uniform draws); gpu_variation 0.08 (Sinha et al. 2022). */
Test(compute, straggler_factor)
{
	struct compute_eff ce;
	struct err e = {0};

	cr_assert_eq(compute_load("a100-sxm4-80gb", &ce, &e), 0, "%s", e.msg);
	cr_expect_float_eq(ce.gpu_variation, 0.08, 1e-12);
	cr_expect_float_eq(compute_straggle(&ce, 1), 1, 1e-12, "one GPU is a median one");
	cr_expect_float_eq(compute_straggle(&ce, 8), 1 + 0.04 * 7 / 9, 1e-12);
	cr_expect_float_eq(compute_straggle(&ce, 1e6), 1.04, 1e-6);
}

/* Per-precision asymptotes (efficiency.ini, the torch.mm sweep): fp32 products
 * on an A100 SXM run at 0.984 of the fp32 peak, bf16 ones at 0.869 of theirs,
 * each times the same shape factor; a device without a figure uses
 * gemm_efficiency for every precision. */
Test(compute, gemm_efficiency_per_precision)
{
	struct compute_eff ce;
	struct err e = {0};
	double shape = (8192.0 / (8192 + 64)) * (8192.0 / (8192 + 64)) * (8192.0 / (8192 + 64));

	cr_assert_eq(compute_load("a100-sxm4-80gb", &ce, &e), 0, "%s", e.msg);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_FP32, 8192, 8192, 8192), 0.984 * shape, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8192, 8192, 8192), 0.869 * shape, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_TF32, 8192, 8192, 8192), 0.804 * shape, 1e-12);
	cr_assert_eq(compute_load("l40s", &ce, &e), 0, "%s", e.msg);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_FP32, 8192, 8192, 8192),
			   compute_gemm_eff(&ce, PREC_BF16, 8192, 8192, 8192), 1e-12);
}

/* Tensor-core products need n and k (the contiguous dimensions of row-major
 * operands) in multiples of 16 bytes for cuBLAS's fast kernels; otherwise an
 * align1 kernel runs at gemm_unaligned = 0.71 of the rate (efficiency.ini:
 * pytorch/pytorch issue #181718, 111.3 / 155.9 TFLOP/s). GPT-2's head over a
 * 50,257-token vocabulary is such a product in bf16 and TF32, not once padded
 * to 50,304 (llm.c); m (the tokens) is never a leading dimension; fp32 SIMT
 * products are not affected. TF32 reads 4-byte elements: 4 of them align. */
Test(compute, unaligned_tensor_core_products)
{
	struct compute_eff ce;
	struct err e = {0};
	double h = 64, shape = (8192 / (8192 + h)) * (50257 / (50257 + h)) * (768 / (768 + h));
	double padded = (8192 / (8192 + h)) * (50304 / (50304 + h)) * (768 / (768 + h));

	cr_assert_eq(compute_load("a100-sxm4-80gb", &ce, &e), 0, "%s", e.msg);
	cr_expect_float_eq(ce.gemm_unaligned, 0.71, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8192, 50257, 768), 0.869 * 0.71 * shape, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8192, 768, 50257),
			   compute_gemm_eff(&ce, PREC_BF16, 8192, 50257, 768), 1e-12, "k as n");
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8192, 50304, 768), 0.869 * padded, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8191, 50304, 768),
			   0.869 * (8191 / (8191 + h)) * (50304 / (50304 + h)) * (768 / (768 + h)), 1e-12,
			   "an odd m is aligned");
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_TF32, 8192, 50257, 768), 0.804 * 0.71 * shape, 1e-12);
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_TF32, 8192, 1028, 768),
			   0.804 * (8192 / (8192 + h)) * (1028 / (1028 + h)) * (768 / (768 + h)), 1e-12,
			   "1028 fp32 elements are 16-byte rows");
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_BF16, 8192, 1028, 768),
			   0.869 * 0.71 * (8192 / (8192 + h)) * (1028 / (1028 + h)) * (768 / (768 + h)), 1e-12,
			   "1028 bf16 elements are not");
	cr_expect_float_eq(compute_gemm_eff(&ce, PREC_FP32, 8192, 50257, 768), 0.984 * shape, 1e-12);
}

/* Fused attention's exp share (compute.h): on an A100 (attn_exp_ratio 128) a
 * head of 64 does 4 x 64 = 256 product FLOPs per exp forward against 512 at
 * 128, so the same FLOPs take (1 + 128/256) / (1 + 128/512) = 1.2 x as long;
 * backward, 640 against 1280: (1 + 128/640) / (1 + 128/1280) = 1.0909. */
Test(compute, attention_head_dim_and_exp_rate)
{
	struct compute_eff ce;
	struct err e = {0};
	double f64, f128, b64, b128;

	cr_assert_eq(compute_load("a100-sxm4-80gb", &ce, &e), 0, "%s", e.msg);
	cr_expect_float_eq(ce.attn_exp_ratio, 128, 1e-12);
	f64 = compute_attention(&ce, AK_FLASH2, 0, 312e12, 1e12, 2048, 64);
	f128 = compute_attention(&ce, AK_FLASH2, 0, 312e12, 1e12, 2048, 128);
	b64 = compute_attention(&ce, AK_FLASH2, 1, 312e12, 1e12, 2048, 64);
	b128 = compute_attention(&ce, AK_FLASH2, 1, 312e12, 1e12, 2048, 128);
	cr_expect_float_eq(f64 / f128, 1.5 / 1.25, 1e-12);
	cr_expect_float_eq(b64 / b128, 1.2 / 1.1, 1e-12);
	/* at 128 the catalogue's efficiency, times the sequence factor, as measured */
	cr_expect_float_eq(f128, 1e12 / (312e12 * 0.73 * 2048 / (2048 + 138)), 1e-15);
}

/*
 * test_graph.c — structure of the model graph.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "period.h"

static void build(struct graph *g, const char *name, struct graph_opts o)
{
	struct model m;
	struct err e = {0};
	cr_assert_eq(model_load(name, &m, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_build(g, &m, &o, &e), 0, "%s", e.msg);
}

Test(graph, blocks_and_lifetimes)
{
	struct graph g;
	char buf[GRAPH_NAME];
	int i;

	build(&g, "gpt2", (struct graph_opts){256, 256, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	cr_expect_eq(g.nblocks, 12);
	for (i = 0; i < g.nt; i++) {
		/* a tensor is read no earlier than it is produced, saved no earlier either */
		cr_expect_geq(g.t[i].last_fwd_use, g.t[i].producer, "%s", graph_tensor_name(&g, i, buf));
		if (g.t[i].first_saver >= 0)
			cr_expect_geq(g.t[i].first_saver, g.t[i].producer, "%s", graph_tensor_name(&g, i, buf));
	}
	graph_free(&g);
}

Test(graph, tensor_parallel_divides_per_rank_params)
{
	/* Megatron split: every matmul and the vocabulary are divided by t; norms
	 * and row-parallel biases stay whole */
	struct graph g1, g4;

	build(&g1, "llama-2-7b", (struct graph_opts){512, 512, 0, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	build(&g4, "llama-2-7b", (struct graph_opts){512, 512, 0, 4, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	/* Llama has no biases: per-rank = (params - norms)/4 + norms */
	{
		double norms = 4096.0 * (2 * 32 + 1);
		cr_expect_float_eq(g4.params_rank, (g1.params_rank - norms) / 4 + norms, 1);
	}
	cr_expect_float_eq(g4.flops_fwd * 4, g1.flops_fwd, g1.flops_fwd * 0.01);
	graph_free(&g1);
	graph_free(&g4);
}

Test(graph, encoder_decoder_has_both_stacks)
{
	struct graph g;
	build(&g, "t5-small", (struct graph_opts){512, 128, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	cr_expect_eq(g.nblocks, 12, "6 encoder + 6 decoder blocks");
	cr_expect_eq(g.tokens, 640);
	graph_free(&g);
}

/* The fused attention op of one GPT-2 block at S = 1024 (12 heads of 64):
 *  - FLOPs (Dao 2023, arXiv 2307.08691 §3): forward 4·a·S²·d, backward 2.5x
 *    that (5 products against 2), both times the causal share (n + 1)/(2n) of
 *    n = 8 tiles of 128 rows; the MFU term stays 2·a·S²·d (Kaplan et al.);
 *  - saved: the c_attn output (q, k, v are its views: 3 x 768 x 1024 x 2 bytes),
 *    the output (768 x 1024 x 2) and the fp32 log-sum-exp (12 x 1024 x 4);
 *  - backward workspace (flash_api.cpp mha_bwd): dq_accum 1024 x 12 x 64 x 4,
 *    softmax_d 12 x 1024 x 4, and dq/dk/dv before SplitBackward's concatenation
 *    (the c_attn output's size). */
Test(graph, fused_attention_op)
{
	struct graph g, ge;
	struct graph_opts o = {1024, 1024, 0.1, 1, GRAPH_EAGER, 2, 1, AK_FLASH2, FWV_CURRENT, 0};
	double a = 12, d = 64, S = 1024, frac = 9.0 / 16, saved = 0;
	char buf[GRAPH_NAME];
	int i, k, n = 0;

	build(&g, "gpt2", o);
	o.attn = AK_EAGER;
	build(&ge, "gpt2", o);
	for (i = 0; i < g.nops; i++) {
		const struct gop *p = &g.ops[i];
		if (p->layer >= 0 && (p->kind == OP_ATTN_SCORE || p->kind == OP_SOFTMAX))
			cr_expect(0, "%s: a fused graph has no scores or softmax in its blocks", graph_op_name(&g, i, buf));
		if (p->kind != OP_ATTN)
			continue;
		if (n++ == 0)
			for (k = 0; k < p->nsaved; k++)
				saved += graph_tensor_bytes(&g, p->saved[k]);
		cr_expect_float_eq(p->flops_fwd, 4 * a * S * S * d * frac, 1);
		cr_expect_float_eq(p->flops_bwd, 2.5 * p->flops_fwd, 1);
		cr_expect_float_eq(p->flops_model, 2 * a * S * S * d, 1);
		cr_expect_float_eq(p->bwd_ws, 1024 * 12 * 64 * 4 + 12 * 1024 * 4 + 3 * 768 * 1024 * 2, 1);
	}
	cr_expect_eq(n, 12, "one fused op per block");
	cr_expect_float_eq(saved, 3 * 768 * 1024 * 2 + 768 * 1024 * 2 + 12 * 1024 * 4, 1);
	cr_expect_float_eq(graph_model_flops_per_sample(&g, NULL), graph_model_flops_per_sample(&ge, NULL), 1,
			   "the MFU convention does not depend on the kernel");
	graph_free(&g);
	graph_free(&ge);
}

/* Names are built on demand from each op's block and base (graph_op_name,
 * graph_tensor_name). Expected: the names the graph builder wrote into every
 * op and tensor before names were made lazy ("L<block>." or "enc<block>."
 * before an op's base, ".what" after its op for a tensor it saves, an input
 * by its own name), compared for all 121,795 ops and tensors of the shipped
 * models when the change was made; here the rule itself, spelled with
 * snprintf, on GPT-2 and T5, and a few names written out. */
Test(graph, names_are_built_from_block_and_base)
{
	static const char *models[] = {"gpt2", "t5-small"};
	char buf[GRAPH_NAME], want[64], op[64];
	struct graph g;
	int k, i, p, adjacent = 0;

	for (k = 0; k < 2; k++) {
		build(&g, models[k], (struct graph_opts){256, 256, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
		for (i = 0; i < g.nops; i++) {
			const struct gop *o = &g.ops[i];
			if (o->layer >= 0)
				snprintf(want, sizeof want, "%s%d.%s", o->stack ? "enc" : "L", o->layer, o->base);
			else
				snprintf(want, sizeof want, "%s", o->base);
			cr_expect_str_eq(graph_op_name(&g, i, buf), want);
			cr_expect_lt(strlen(want), GRAPH_NAME - 1, "%s: no name of a shipped model is cut", want);
			if (i + 1 < g.nops) {  /* graph_same_name: the names compared */
				char other[GRAPH_NAME];
				int same = strcmp(want, graph_op_name(&g, i + 1, other)) == 0;
				cr_expect_eq(graph_same_name(&g, i, i + 1), same, "%s, %s", want, other);
				adjacent += same;
			}
		}
		for (i = 0; i < g.nt; i++) {
			p = g.t[i].producer;
			if (p < 0)
				snprintf(want, sizeof want, "%s", g.t[i].what);
			else if (g.t[i].what)
				snprintf(want, sizeof want, "%s.%s", graph_op_name(&g, p, op), g.t[i].what);
			else
				snprintf(want, sizeof want, "%s", graph_op_name(&g, p, op));
			cr_expect_str_eq(graph_tensor_name(&g, i, buf), want);
		}
		if (k == 0) {
			cr_expect_str_eq(graph_op_name(&g, 4, buf), "L0.norm1");
			cr_expect_str_eq(graph_op_name(&g, 5, buf), "L0.c_attn");  /* the cast copy */
			cr_expect_str_eq(graph_op_name(&g, 6, buf), "L0.c_attn");  /* the linear */
			cr_expect_str_eq(graph_op_name(&g, 29, buf), "L1.c_attn");
			cr_expect_str_eq(graph_tensor_name(&g, 0, buf), "ids");
			cr_expect_str_eq(graph_tensor_name(&g, 4, buf), "embed_drop.mask");
			cr_expect_str_eq(graph_tensor_name(&g, 7, buf), "L0.norm1.stats");
		} else {
			cr_expect_str_eq(graph_op_name(&g, 0, buf), "enc.embed");
			cr_expect_str_eq(graph_op_name(&g, 2, buf), "enc0.norm1");
		}
		graph_free(&g);
	}
	/* the eager graph's casts are named as the linear layer that reads them
	 * (eager.c eager_internal): pairs of equal names exist to compare */
	cr_expect_gt(adjacent, 0);
}

/* The parameter tensor table (graph_op_params) against the tensors PyTorch
 * lists, len(list(model.parameters())) of the transformers classes (they are
 * counted from the modules' definitions):
 *  - GPT2LMHeadModel, 12 layers: wte, wpe, per block ln_1 (w, b), c_attn (w,
 *    b), attn c_proj (w, b), ln_2 (w, b), c_fc (w, b), mlp c_proj (w, b): 12,
 *    ln_f (w, b); the head is tied to wte: 2 + 12 x 12 + 2 = 148;
 *  - LlamaForCausalLM (Llama 2 7B, 32 layers, no biases): embed_tokens, per
 *    block q, k, v, o, gate, up, down and two RMSNorm weights: 9, the final
 *    norm and the untied lm_head: 1 + 32 x 9 + 2 = 291.
 * A LayerNorm is two tensors of h elements, an RMSNorm's weight one; c_attn's weight is
 * h x 3h and its bias 3h; tensor parallelism divides a product's weight and
 * bias but not a norm's. */
Test(graph, parameter_tensors_as_pytorch_lists_them)
{
	struct graph g, l, l2;
	int64_t el[2];
	int i, seen_ln = 0, seen_qkv = 0, seen_rms = 0;

	build(&g, "gpt2", (struct graph_opts){256, 256, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	build(&l, "llama-2-7b", (struct graph_opts){512, 512, 0, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	build(&l2, "llama-2-7b", (struct graph_opts){512, 512, 0, 2, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0});
	cr_expect_eq(graph_param_tensors(&g), 148);
	cr_expect_eq(graph_param_tensors(&l), 291);
	cr_expect_eq(graph_param_tensors(&l2), 291, "tensor parallelism splits tensors, it does not add any");
	for (i = 0; i < g.nops; i++) {
		if (g.ops[i].kind == OP_NORM && graph_op_params(&g, i, el) == 2) {
			cr_expect_eq(el[0], 768);
			cr_expect_eq(el[1], 768);
			seen_ln++;
		}
		if (g.ops[i].kind == OP_MATMUL && g.ops[i].n == 3 * 768 && graph_op_params(&g, i, el) == 2) {
			cr_expect_eq(el[0], 768 * 3 * 768);
			cr_expect_eq(el[1], 3 * 768);
			seen_qkv++;
		}
	}
	cr_expect_eq(seen_ln, 2 * 12 + 1);
	cr_expect_eq(seen_qkv, 12);
	for (i = 0; i < l2.nops; i++)  /* the eager RMSNorm's weight is its own product (norm_w) */
		if (l2.ops[i].params > 0 && l2.ops[i].kind != OP_MATMUL && l2.ops[i].kind != OP_EMBED) {
			cr_expect_eq(graph_op_params(&l2, i, el), 1);
			cr_expect_eq(el[0], 4096, "a norm is not split");
			seen_rms++;
		}
	cr_expect_eq(seen_rms, 2 * 32 + 1);
	graph_free(&g);
	graph_free(&l);
	graph_free(&l2);
}

/* Graphs g and h alike in every op, tensor and block, each number's bits. */
static void same_graph(const struct graph *g, const struct graph *h, const char *what)
{
	int i;

	cr_assert_eq(g->nops, h->nops, "%s", what);
	cr_assert_eq(g->nt, h->nt, "%s", what);
	cr_assert_eq(g->nblocks, h->nblocks, "%s", what);
	for (i = 0; i < g->nops; i++)
		cr_assert_eq(memcmp(&g->ops[i], &h->ops[i], sizeof g->ops[i]), 0, "%s: op %d", what, i);
	for (i = 0; i < g->nt; i++)
		cr_assert_eq(memcmp(&g->t[i], &h->t[i], sizeof g->t[i]), 0, "%s: tensor %d", what, i);
	cr_assert_eq(memcmp(g->block_first, h->block_first, (size_t)g->nblocks * sizeof *g->block_first), 0, "%s", what);
	cr_assert_eq(memcmp(g->block_in, h->block_in, (size_t)g->nblocks * sizeof *g->block_in), 0, "%s", what);
	cr_assert_eq(memcmp(g->same, h->same, (size_t)g->nops * sizeof *g->same), 0, "%s", what);
	cr_assert_eq(memcmp(g->pt, h->pt, (size_t)g->nops * sizeof *g->pt), 0, "%s", what);
	cr_assert(!memcmp(&g->params, &h->params, sizeof g->params) &&
		  !memcmp(&g->params_rank, &h->params_rank, sizeof g->params_rank) &&
		  !memcmp(&g->flops_fwd, &h->flops_fwd, sizeof g->flops_fwd) &&
		  !memcmp(&g->flops_bwd, &h->flops_bwd, sizeof g->flops_bwd) &&
		  !memcmp(&g->buffer_bytes, &h->buffer_bytes, sizeof g->buffer_bytes) && g->input == h->input,
		  "%s", what);
}

/* Every block of each of g's alike ranges (graph.alike) alike op for op with
 * the range's first (period.h), which period_find takes without comparing. */
static void alike_blocks_alike(const struct graph *g, const char *what)
{
	int k, b, i;

	for (k = 0; k < g->nalike; k++) {
		const int lo = g->alike[k][0], hi = g->alike[k][1];
		cr_assert(lo >= 1 && hi <= g->nblocks && hi - lo >= 2, "%s", what);
		for (b = lo + 1; b < hi; b++) {
			int d = g->block_first[b] - g->block_first[lo];
			cr_assert_eq(d, (b - lo) * (g->block_first[lo + 1] - g->block_first[lo]), "%s block %d", what, b);
			for (i = g->block_first[lo]; i < g->block_first[lo + 1]; i++)
				cr_assert(period_ops_alike(g, i, i + d), "%s: op %d and %d", what, i, i + d);
		}
	}
}

/* graph_build copies each stack's blocks from the fourth on (the third moved
 * one block on) where graph_build_whole builds each op by op: the same graph,
 * every bit, for every model of the catalog under every flavour, PyTorch
 * version, autocast, attention kernel, dropout, KV cache, tensor-parallel
 * degree and sequence length the builder branches on. A copy that moved a
 * reference it should have kept (T5's position bias, made in the first
 * block; the stack's causal mask; the encoder's output), or kept the next
 * block's reads and saves of a block's output from it, breaks it. */
Test(graph, copied_blocks_are_the_blocks_built, .timeout = 120)
{
	static const struct {
		int flavor, fwv, autocast, act, attn, kv;
		double dropout;
	} v[] = {
		{GRAPH_EAGER, FWV_CURRENT, 1, 2, AK_EAGER, 0, 0.1},
		{GRAPH_EAGER, FWV_CURRENT, 0, 2, AK_FLASH2, 1, 0},
		{GRAPH_EAGER, FWV_CURRENT, 1, 2, AK_MEM_EFFICIENT, 1, 0.1},
		{GRAPH_EAGER, FWV_1_13, 1, 2, AK_EAGER, 1, 0.1},
		{GRAPH_EAGER, FWV_CURRENT, 0, 4, AK_EAGER, 0, 0},
		{GRAPH_SHARDCAST, FWV_CURRENT, 0, 2, AK_FLASH2, 0, 0},
		{GRAPH_SHARDCAST, FWV_CURRENT, 1, 2, AK_EAGER, 0, 0.1},
	};
	struct dirent *d;
	DIR *dir = opendir("models/nn");
	int models = 0, copied = 0, built = 0;

	cr_assert(dir, "models/nn: run from the repository's root");
	while ((d = readdir(dir))) {
		struct model m;
		struct err e = {0};
		char name[256], what[512];
		size_t n = strlen(d->d_name);
		int j, tp;

		if (n < 5 || strcmp(d->d_name + n - 4, ".ini"))
			continue;
		snprintf(name, sizeof name, "%.*s", (int)(n - 4), d->d_name);
		cr_assert_eq(model_load(name, &m, NULL, 0, &e), 0, "%s: %s", name, e.msg);
		models++;
		for (j = 0; j < (int)(sizeof v / sizeof v[0]); j++)
			for (tp = 1; tp <= 2; tp++) {
				struct graph g, h;
				struct graph_opts o = {j % 2 ? 512 : 1024, 128, v[j].dropout, tp, v[j].flavor, v[j].act,
						       v[j].autocast, v[j].attn, v[j].fwv, v[j].kv};
				if (m.heads % tp || m.kv_heads % tp || m.ffn % tp || m.vocab % tp)
					continue;
				snprintf(what, sizeof what, "%s variant %d tp %d", name, j, tp);
				cr_assert_eq(graph_build(&g, &m, &o, &e), 0, "%s: %s", what, e.msg);
				cr_assert_eq(graph_build_whole(&h, &m, &o, &e), 0, "%s: %s", what, e.msg);
				same_graph(&g, &h, what);
				cr_expect_eq(h.copied, 0);
				cr_expect_eq(h.nalike, 0);
				alike_blocks_alike(&g, what);
				copied += g.copied;
				built++;
				graph_free(&g);
				graph_free(&h);
			}
	}
	closedir(dir);
	cr_expect_geq(models, 30, "%d models", models);  /* 34 in models/nn today */
	/* every stack of four or more blocks copies all but three: measured 13,335
	 * blocks copied in 427 graphs (31 a graph); 10 a graph tells the copies
	 * were made, none would be without them */
	cr_expect_gt(copied, 10 * built, "%d blocks copied in %d graphs", copied, built);
}

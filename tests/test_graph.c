/*
 * test_graph.c — structure of the model graph.
 */
#include <criterion/criterion.h>

#include "graph.h"

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
	int i;

	build(&g, "gpt2", (struct graph_opts){256, 256, 0.1, 1, GRAPH_EAGER, 2, 1});
	cr_expect_eq(g.nblocks, 12);
	for (i = 0; i < g.nt; i++) {
		/* a tensor is read no earlier than it is produced, saved no earlier either */
		cr_expect_geq(g.t[i].last_fwd_use, g.t[i].producer, "%s", g.t[i].name);
		if (g.t[i].first_saver >= 0)
			cr_expect_geq(g.t[i].first_saver, g.t[i].producer, "%s", g.t[i].name);
	}
	graph_free(&g);
}

Test(graph, tensor_parallel_divides_per_rank_params)
{
	/* Megatron split: every matmul and the vocabulary are divided by t; norms
	 * and row-parallel biases stay whole */
	struct graph g1, g4;

	build(&g1, "llama-2-7b", (struct graph_opts){512, 512, 0, 1, GRAPH_EAGER, 2, 1});
	build(&g4, "llama-2-7b", (struct graph_opts){512, 512, 0, 4, GRAPH_EAGER, 2, 1});
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
	build(&g, "t5-small", (struct graph_opts){512, 128, 0.1, 1, GRAPH_EAGER, 2, 1});
	cr_expect_eq(g.nblocks, 12, "6 encoder + 6 decoder blocks");
	cr_expect_eq(g.tokens, 640);
	graph_free(&g);
}

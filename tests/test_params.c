/*
 * test_params.c — every catalog model's parameter count against its published
 * value, and the FLOPs-per-token convention.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "graph.h"
#include "model.h"

struct published {
	const char *name;
	double params;
	const char *source;
};

/* Published counts: num_parameters() of the Hugging Face reference models
 * (GPT2Model, BertModel with pooler, T5ForConditionalGeneration with the tied
 * LM head, LlamaForCausalLM), as listed on the model cards / in the configs'
 * papers: GPT-2 (Radford et al. 2019), BERT (Devlin et al. 2019), T5 (Raffel et
 * al. 2020), Llama 2 (Touvron et al. 2023), Llama 3 (Grattafiori et al. 2024). */
static const struct published table[] = {
	{"gpt2", 124439808, "HF GPT2Model openai-community/gpt2"},
	{"gpt2-medium", 354823168, "HF GPT2Model gpt2-medium"},
	{"gpt2-large", 774030080, "HF GPT2Model gpt2-large"},
	{"gpt2-xl", 1557611200, "HF GPT2Model gpt2-xl"},
	{"bert-base", 109482240, "HF BertModel bert-base-uncased"},
	{"bert-large", 335141888, "HF BertModel bert-large-uncased"},
	/* BertForSequenceClassification: BertModel's count + a 1024 x 2 classifier and its bias */
	{"bert-large-cls", 335141888 + 1024 * 2 + 2, "HF BertModel bert-large-uncased + classifier"},
	{"t5-small", 60506624, "HF T5ForConditionalGeneration t5-small"},
	{"t5-base", 222903552, "HF t5-base"},
	{"t5-large", 737668096, "HF t5-large"},
	{"t5-3b", 2851598336, "HF t5-3b"},
	{"t5-11b", 11307321344, "HF t5-11b"},
	{"llama-2-7b", 6738415616, "HF meta-llama/Llama-2-7b-hf"},
	{"llama-2-13b", 13015864320, "HF meta-llama/Llama-2-13b-hf"},
	{"llama-2-70b", 68976648192, "HF meta-llama/Llama-2-70b-hf"},
	{"llama-3-8b", 8030261248, "HF meta-llama/Meta-Llama-3-8B"},
	{"llama-3-70b", 70553706496, "HF meta-llama/Meta-Llama-3-70B"},
	{"llama-3.1-405b", 405853388800, "HF meta-llama/Llama-3.1-405B"},
	/* the MPT models of llm-foundry's throughput benchmark at SeqLen 2048: the
	 * NumParams column of scripts/train/benchmarking/README.md (learned positions,
	 * biases, vocabulary 50368) */
	{"mpt-125m-2k", 125311488, "llm-foundry benchmarking README, NumParams"},
	{"mpt-350m-2k", 355985408, "llm-foundry benchmarking README, NumParams"},
	{"mpt-760m-2k", 760470528, "llm-foundry benchmarking README, NumParams"},
	{"mpt-1b-2k", 1315950592, "llm-foundry benchmarking README, NumParams"},
	{"mpt-3b-2k", 2651837440, "llm-foundry benchmarking README, NumParams"},
	{"mpt-7b-2k", 6658859008, "llm-foundry benchmarking README, NumParams"},
	{"mpt-13b-2k", 12853954560, "llm-foundry benchmarking README, NumParams"},
	{"mpt-30b-2k", 29975214080, "llm-foundry benchmarking README, NumParams"},
	/* Raschka, Build a Large Language Model (From Scratch), ch. 4 */
	{"gpt-124m-llmfs", 163009536, "LLMs-from-scratch GPT_CONFIG_124M, untied head"},
	{"gpt-124m-llmfs-torch", 163009536, "the same with nn.LayerNorm and nn.GELU"},
};

Test(params, every_catalog_model_matches_its_published_count)
{
	size_t i;

	for (i = 0; i < sizeof table / sizeof table[0]; i++) {
		struct model m;
		struct err e = {0};
		int rc = model_load(table[i].name, &m, NULL, 0, &e);
		cr_assert_eq(rc, 0, "%s: %s", table[i].name, e.msg);
		cr_expect_eq(graph_param_count(&m), table[i].params, "%s: %.0f, published %.0f (%s)",
			     table[i].name, graph_param_count(&m), table[i].params, table[i].source);
		/* the file's own record of the published count agrees */
		cr_expect_eq((double)m.param_count, table[i].params, "%s: param_count in the file", table[i].name);
	}
}

Test(params, gpt3_175b_is_175_billion_within_a_quarter_percent)
{
	/* Brown et al. 2020 Table 2.1: 175.0B; the architecture gives 174.6B (the
	 * paper rounds; no exact integer is published) */
	struct model m;
	struct err e = {0};

	cr_assert_eq(model_load("gpt3-175b", &m, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect(fabs(graph_param_count(&m) / 175e9 - 1) < 0.0025, "%.0f", graph_param_count(&m));
}

Test(params, megatron_baselines_match_their_rounded_sizes)
{
	/* no exact counts are published: Shoeybi et al. 2019 Table 1 says 1.2B for
	 * hidden 1536 x 40 layers, Narayanan et al. 2021 Table 1 says 1.7B for hidden
	 * 2304 x 24 layers; the architectures must round to those figures */
	const char *names[] = {"megatron-gpt-1.2b", "megatron-gpt-1.7b"};
	const double billions[] = {1.2, 1.7};
	size_t i;

	for (i = 0; i < 2; i++) {
		struct model m;
		struct err e = {0};

		cr_assert_eq(model_load(names[i], &m, NULL, 0, &e), 0, "%s", e.msg);
		cr_expect(fabs(graph_param_count(&m) / 1e9 - billions[i]) < 0.05, "%s: %.0f", names[i],
			  graph_param_count(&m));
	}
}

Test(params, graph_ops_hold_every_parameter)
{
	/* the per-op parameters of a tp = 1 graph sum to the formula (one place
	 * cannot drift from the other); BERT adds its pre-training heads */
	const char *names[] = {"gpt2", "bert-base", "t5-small", "llama-3-8b", "gpt-tiny"};
	size_t i;

	for (i = 0; i < 5; i++) {
		struct model m;
		struct graph g;
		struct err e = {0};
		struct graph_opts o = {128, 128, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0};

		cr_assert_eq(model_load(names[i], &m, NULL, 0, &e), 0, "%s", e.msg);
		cr_assert_eq(graph_build(&g, &m, &o, &e), 0, "%s", e.msg);
		cr_expect_eq(g.params_rank, g.params, "%s: ops %.0f, model %.0f", names[i], g.params_rank, g.params);
		graph_free(&g);
	}
}

Test(params, flops_per_token_is_6n_plus_attention)
{
	/* gpt2 at S = 1024: matmul weights N = 12 layers x 12h^2 + V h (LM head)
	 * = 84,934,656 + 38,597,376; 6N + 6 L s h (Kaplan et al. 2020 Table 1) */
	struct model m;
	struct graph g;
	struct err e = {0};
	struct graph_opts o = {1024, 1024, 0.1, 1, GRAPH_EAGER, 2, 1, AK_EAGER, FWV_CURRENT, 0};
	double h = 768, N = 12 * 12 * h * h + 50257 * h, expect = 6 * N + 6 * 12 * 1024 * h;

	cr_assert_eq(model_load("gpt2", &m, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(graph_build(&g, &m, &o, &e), 0, "%s", e.msg);
	cr_expect_float_eq(graph_model_flops_per_sample(&g, &m) / 1024, expect, 1e-9 * expect);
	graph_free(&g);
}

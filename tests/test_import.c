/*
 * test_import.c — Hugging Face, Accelerate and DeepSpeed configs in: what each
 * field becomes, where the report says it came from, precedence (imports <
 * scenario file < --set), and located errors for malformed files. The
 * command-line side (exit 2, messages, equal --json output) is tests/golden.sh.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph.h"
#include "import.h"
#include "scenario.h"

static char dir[64];

static void put(const char *name, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(dir, sizeof dir, "/tmp/shardcast-imp-%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Removes what put() wrote (Criterion runs each test in its own process). */
static void cleanup(void)
{
	static const char *const names[] = {"scn.ini", "a.yaml", "ds.json", "bad.json", "arch.json",
					    "t5v11.json", NULL};
	char path[128];
	int i;

	if (!dir[0])
		return;
	for (i = 0; names[i]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

TestSuite(hf, .fini = cleanup);
TestSuite(accelerate, .fini = cleanup);
TestSuite(deepspeed, .fini = cleanup);

/* Loads dir/scn.ini (text) with its imports written beside it. */
static int load(struct scenario *s, const char *text, const char *const *sets, int n,
		struct err *e)
{
	char path[128];

	put("scn.ini", text);
	snprintf(path, sizeof path, "%s/scn.ini", dir);
	return scenario_load(s, path, sets, n, e);
}

static int origin(const struct scenario *s, const char *sec, const char *key)
{
	return s->line[cfg_index(scenario_keys(), sec, key)];
}

static const struct imp_setting *setting(const struct scenario *s, const char *key)
{
	int i;

	for (i = 0; s->imp && i < s->imp->nset; i++)
		if (!strcmp(s->imp->set[i].key, key) && s->imp->set[i].state != IMP_SUPERSEDED)
			return &s->imp->set[i];
	return NULL;
}

/* ---- Hugging Face config.json ------------------------------------------------ */

struct hf_case {
	const char *dir, *catalog;
	double published;
	const char *source;
};

Test(hf, configs_give_the_catalog_models_and_their_published_counts)
{
	/* the configs in tests/data/hf/ are the published config.json files (model
	 * cards on huggingface.co); the counts are num_parameters() of
	 * GPT2Model, LlamaForCausalLM, T5ForConditionalGeneration, BertModel and
	 * MistralForCausalLM — the same ones tests/test_params.c checks the catalog
	 * against. Mistral 7B is not in the catalog: 7,241,732,096 is its
	 * published count (mistralai/Mistral-7B-v0.1). */
	static const struct hf_case cases[] = {
		{"gpt2", "gpt2", 124439808, "GPT2Model openai-community/gpt2"},
		{"llama-3-8b", "llama-3-8b", 8030261248, "LlamaForCausalLM meta-llama/Meta-Llama-3-8B"},
		{"t5-large", "t5-large", 737668096, "T5ForConditionalGeneration t5-large"},
		{"bert-base", "bert-base", 109482240, "BertModel bert-base-uncased"},
		{"mistral-7b", NULL, 7241732096, "MistralForCausalLM mistralai/Mistral-7B-v0.1"},
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct model hf, cat;
		struct err e = {0};
		char path[128];

		snprintf(path, sizeof path, "tests/data/hf/%s/config.json", cases[i].dir);
		cr_assert_eq(imp_hf_model(path, &hf, &e), 0, "%s: %s", path, e.msg);
		cr_expect_eq(graph_param_count(&hf), cases[i].published, "%s: %.0f, published %.0f (%s)",
			     cases[i].dir, graph_param_count(&hf), cases[i].published, cases[i].source);
		if (!cases[i].catalog)
			continue;
		cr_assert_eq(model_load(cases[i].catalog, &cat, NULL, 0, &e), 0, "%s", e.msg);
		cr_expect_eq(graph_param_count(&hf), graph_param_count(&cat), "%s", cases[i].dir);
		/* field by field, the architecture the catalog file describes */
		cr_expect_eq(hf.family, cat.family, "%s family", cases[i].dir);
		cr_expect_eq(hf.vocab, cat.vocab, "%s", cases[i].dir);
		cr_expect_eq(hf.hidden, cat.hidden, "%s", cases[i].dir);
		cr_expect_eq(hf.layers, cat.layers, "%s", cases[i].dir);
		cr_expect_eq(hf.encoder_layers, cat.encoder_layers, "%s", cases[i].dir);
		cr_expect_eq(hf.heads, cat.heads, "%s", cases[i].dir);
		cr_expect_eq(hf.kv_heads, cat.kv_heads, "%s", cases[i].dir);
		cr_expect_eq(hf.head_dim, cat.head_dim, "%s", cases[i].dir);
		cr_expect_eq(hf.ffn, cat.ffn, "%s", cases[i].dir);
		cr_expect_eq(hf.activation, cat.activation, "%s activation", cases[i].dir);
		cr_expect_eq(hf.norm, cat.norm, "%s norm", cases[i].dir);
		cr_expect_eq(hf.positions, cat.positions, "%s positions", cases[i].dir);
		cr_expect_eq(hf.max_positions, cat.max_positions, "%s", cases[i].dir);
		cr_expect_eq(hf.relative_buckets, cat.relative_buckets, "%s", cases[i].dir);
		cr_expect_eq(hf.qkv_bias, cat.qkv_bias, "%s", cases[i].dir);
		cr_expect_eq(hf.out_bias, cat.out_bias, "%s", cases[i].dir);
		cr_expect_eq(hf.mlp_bias, cat.mlp_bias, "%s", cases[i].dir);
		cr_expect_eq(hf.tied_embeddings, cat.tied_embeddings, "%s", cases[i].dir);
		cr_expect_eq(hf.type_vocab, cat.type_vocab, "%s", cases[i].dir);
		cr_expect_eq(hf.embed_norm, cat.embed_norm, "%s", cases[i].dir);
		cr_expect_eq(hf.pooler, cat.pooler, "%s", cases[i].dir);
		cr_expect_eq(hf.final_norm, cat.final_norm, "%s", cases[i].dir);
		cr_expect_float_eq(hf.dropout, cat.dropout, 1e-12, "%s dropout", cases[i].dir);
	}
}

Test(hf, a_folder_and_architectures_without_model_type)
{
	/* a model folder holds config.json; without model_type, architectures[0]
	 * tells the family (GPT2LMHeadModel -> gpt2) */
	struct model m;
	struct err e = {0};

	cr_assert_eq(imp_hf_model("tests/data/hf/gpt2", &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.hidden, 768);
	put("arch.json", "{\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 50257, \"n_embd\": 768,"
	    " \"n_layer\": 12, \"n_head\": 12, \"n_positions\": 1024}");
	cr_expect_eq(imp_hf_model("tests/data/hf", &m, &e), ERR_INPUT, "a folder without config.json");
	cr_expect(strstr(e.msg, "tests/data/hf/config.json: cannot open"), "%s", e.msg);
	err_clear(&e);
	{
		char p[128];
		snprintf(p, sizeof p, "%s/arch.json", dir);
		cr_assert_eq(imp_hf_model(p, &m, &e), 0, "%s", e.msg);
		cr_expect_eq(graph_param_count(&m), 124439808, "same as gpt2");
	}
}

Test(hf, t5_v1_1_is_gated_gelu_and_untied)
{
	/* google/t5-v1_1-base: feed_forward_proj gated-gelu, tie_word_embeddings
	 * false, d_ff 2048, 12 + 12 layers; num_parameters() = 247,577,856 */
	struct model m;
	struct err e = {0};
	char p[128];

	put("t5v11.json", "{\"model_type\": \"t5\", \"d_ff\": 2048, \"d_kv\": 64, \"d_model\": 768,"
	    " \"num_heads\": 12, \"num_layers\": 12, \"num_decoder_layers\": 12,"
	    " \"feed_forward_proj\": \"gated-gelu\", \"tie_word_embeddings\": false,"
	    " \"relative_attention_num_buckets\": 32, \"vocab_size\": 32128, \"dropout_rate\": 0.1}");
	snprintf(p, sizeof p, "%s/t5v11.json", dir);
	cr_assert_eq(imp_hf_model(p, &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.activation, ACT_GATED_GELU);
	cr_expect_eq(m.tied_embeddings, 0);
	cr_expect_eq(graph_param_count(&m), 247577856, "%.0f", graph_param_count(&m));
}

struct bad_case {
	const char *json, *expect;
	int line;
};

Test(hf, malformed_configs_are_located_errors)
{
	static const struct bad_case cases[] = {
		{"{\"model_type\": \"falcon\", \"hidden_size\": 4544}",
		 "model_type = \"falcon\": unknown architecture", 1},
		{"{\"architectures\": [\"FalconForCausalLM\"]}",
		 "architectures[0] = \"FalconForCausalLM\": unknown architecture", 1},
		{"{\"hidden_size\": 10}", "missing field 'model_type'", 0},
		{"{\n\"model_type\": \"llama\",\n\"hidden_size\": 4096\n}",
		 "missing field 'vocab_size'", 0},
		{"{\n\"model_type\": \"gpt2\",\n\"vocab_size\": 50257,\n\"n_embd\": \"768\"\n}",
		 "n_embd is a string; expected an integer", 4},
		{"{\"model_type\": \"gpt2\", \"vocab_size\": 50257.5}", "not a whole number", 1},
		{"{\"model_type\": \"gpt2\", \"vocab_size\": -3}", "out of range", 1},
		{"{\"model_type\": \"bert\", \"vocab_size\": 1, \"hidden_size\": 770, \"num_hidden_layers\": 1,"
		 " \"num_attention_heads\": 12, \"intermediate_size\": 4, \"max_position_embeddings\": 8}",
		 "num_attention_heads = 12 must divide hidden_size = 770", 1},
		{"{\"model_type\": \"llama\", \"vocab_size\": 1, \"hidden_size\": 64, \"intermediate_size\": 4,"
		 " \"num_hidden_layers\": 1, \"num_attention_heads\": 8, \"num_key_value_heads\": 3,"
		 " \"max_position_embeddings\": 8}", "num_key_value_heads = 3 must divide", 1},
		{"{\"model_type\": \"llama\", \"hidden_act\": \"gelu\", \"vocab_size\": 1, \"hidden_size\": 64,"
		 " \"intermediate_size\": 4, \"num_hidden_layers\": 1, \"num_attention_heads\": 8,"
		 " \"max_position_embeddings\": 8}", "hidden_act = \"gelu\": not supported", 1},
		{"{\"model_type\": \"t5\", \"feed_forward_proj\": \"gated-relu\", \"vocab_size\": 1, \"d_model\": 8,"
		 " \"d_kv\": 2, \"d_ff\": 4, \"num_layers\": 1, \"num_heads\": 4}", "feed_forward_proj", 1},
		{"{\"model_type\": \"gpt2\",\n \"vocab_size\": 50257,\n \"vocab_size\": 50000}",
		 "duplicate field 'vocab_size'", 2},
		{"{\"model_type\": \"gpt2\",\n \"n_embd\": 768,,\n}", "not valid JSON", 2},
		{"[1, 2]", "expected a JSON object", 1},
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct model m;
		struct err e = {0};
		char p[128], loc[160];

		put("bad.json", cases[i].json);
		snprintf(p, sizeof p, "%s/bad.json", dir);
		cr_expect_eq(imp_hf_model(p, &m, &e), ERR_INPUT, "case %zu", i);
		cr_expect(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg,
			  cases[i].expect);
		if (cases[i].line)
			snprintf(loc, sizeof loc, "%s:%d: ", p, cases[i].line);
		else
			snprintf(loc, sizeof loc, "%s", p);
		cr_expect(strncmp(e.msg, loc, strlen(loc)) == 0, "case %zu: '%s' not at %s", i, e.msg, loc);
	}
}

Test(hf, a_scenario_takes_hf_config_instead_of_name)
{
	struct scenario s;
	struct err e = {0};
	char cfg[PATH_MAX], text[PATH_MAX + 128];

	/* the scenario lives in a temporary folder, so it names the checkout's
	 * copy of the config by its absolute path, found from the test's cwd */
	cr_assert(realpath("tests/data/hf/llama-3-8b", cfg), "run the tests from the repository root");
	snprintf(text, sizeof text, "[model]\nhf_config = %s\nseq_len = 2048\n[cluster]\n"
		 "gpu = h100-sxm5-80gb\n", cfg);
	cr_assert_eq(load(&s, text, NULL, 0, &e), ERR_OK, "%s", e.msg);
	cr_expect_eq(s.model.kv_heads, 8);
	cr_expect_eq(graph_param_count(&s.model), 8030261248);
	scenario_free(&s);

	cr_expect_eq(load(&s, "[model]\nname = gpt2\nhf_config = x.json\n[cluster]\ngpu = cpu\n", NULL, 0, &e),
		     ERR_INPUT);
	cr_expect(strstr(e.msg, "both name and hf_config"), "%s", e.msg);
	scenario_free(&s);
	err_clear(&e);
	cr_expect_eq(load(&s, "[model]\nhf_config = nope/config.json\n[cluster]\ngpu = cpu\n", NULL, 0, &e),
		     ERR_INPUT);
	cr_expect(strstr(e.msg, "scn.ini:2: [model] hf_config: ") && strstr(e.msg, "no such file"), "%s", e.msg);
	scenario_free(&s);
}

/* ---- Accelerate ------------------------------------------------------------------ */

Test(accelerate, the_shipped_llama_fsdp_config)
{
	struct scenario s;
	struct err e = {0};
	const struct scn_training *t = &s.s.training;
	const struct imp_setting *x;

	cr_assert_eq(scenario_load(&s, "scenarios/llama-3-8b-accelerate.ini", NULL, 0, &e), 0, "%s", e.msg);
	/* scenarios/imports/llama-fsdp.yaml, field by field */
	cr_expect_eq(t->strategy, STRAT_FSDP, "distributed_type: FSDP");
	cr_expect_eq(t->framework, FW_PYTORCH);
	cr_expect_eq(t->fsdp_sharding, SHARD_FULL, "FULL_SHARD");
	cr_expect_eq(t->fsdp_wrap, WRAP_TRANSFORMER, "TRANSFORMER_BASED_WRAP");
	cr_expect_eq(t->fsdp_backward_prefetch, PREFETCH_BACKWARD_PRE);
	cr_expect_eq(t->fsdp_forward_prefetch, 0);
	cr_expect_eq(t->offload, OFFLOAD_NONE, "fsdp_offload_params: false");
	cr_expect_eq(t->recompute, RECOMPUTE_FULL, "fsdp_activation_checkpointing: true");
	cr_expect_eq(t->precision, PREC_BF16);
	cr_expect_eq(s.s.checkpoint.state_dict, CKPT_SHARDED, "SHARDED_STATE_DICT");
	/* Accelerator.accumulate wraps every micro-step but the last in FSDP1's
	 * no_sync() (GradientAccumulationPlugin sync_each_batch defaults to False) */
	cr_expect_eq(t->no_sync, NOSYNC_TRUE);
	cr_expect(s.plan.no_sync, "FSDP1 under Accelerate keeps its unsharded gradients");
	cr_expect_eq(s.s.cluster.nodes, 2, "num_machines");
	cr_expect_eq(s.s.cluster.gpus_per_node, 8, "num_processes 16 / num_machines 2");
	cr_expect_eq(s.world, 16);
	/* origins: imported keys are marked, the scenario's own keep their lines */
	cr_expect_eq(origin(&s, "training", "strategy"), SCN_IMPORTED);
	cr_expect_eq(origin(&s, "cluster", "gpus_per_node"), SCN_IMPORTED);
	cr_expect_gt(origin(&s, "training", "optimizer"), 0);
	cr_expect_gt(origin(&s, "cluster", "gpu"), 0);
	x = setting(&s, "fsdp_sharding_strategy");
	cr_assert(x);
	cr_expect_str_eq(imp_file(s.imp, x), "scenarios/imports/llama-fsdp.yaml");
	cr_expect_eq(x->line, 16);
	cr_expect_str_eq(x->field, "fsdp_config.fsdp_sharding_strategy");
	cr_expect_eq(x->state, IMP_APPLIED);
	scenario_free(&s);
}

Test(accelerate, the_scenario_and_set_override_the_import)
{
	struct scenario s;
	struct err e = {0};
	const char *sets[] = {"training.fsdp_sharding_strategy=shard_grad_op"};
	const struct imp_setting *x;

	put("a.yaml", "distributed_type: FSDP\nnum_machines: 1\nnum_processes: 8\nmixed_precision: fp16\n"
	    "fsdp_config:\n  fsdp_sharding_strategy: 1\n");
	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
			  "accelerate_config = a.yaml\nprecision = bf16\n", sets, 1, &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.precision, PREC_BF16, "the scenario's line 7 wins over mixed_precision");
	cr_expect_eq(origin(&s, "training", "precision"), 7);
	cr_expect_eq(s.s.training.fsdp_sharding, SHARD_GRAD_OP, "--set wins over the import");
	cr_expect_eq(origin(&s, "training", "fsdp_sharding_strategy"), -1);
	x = setting(&s, "precision");
	cr_assert(x);
	cr_expect_eq(x->state, IMP_OVERRIDDEN);
	cr_expect_str_eq(x->value, "fp16");
	cr_expect_eq(s.s.cluster.gpus_per_node, 8);
	scenario_free(&s);
}

Test(accelerate, scenario_set_re_resolves_the_imports)
{
	/* an override after loading (what a sweep does) keeps the other imported
	 * values and marks the replaced one */
	struct scenario s;
	struct err e = {0};

	cr_assert_eq(scenario_load(&s, "scenarios/llama-3-8b-accelerate.ini", NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(scenario_set(&s, "training.precision=fp16", &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.precision, PREC_FP16);
	cr_expect_eq(setting(&s, "precision")->state, IMP_OVERRIDDEN);
	cr_expect_eq(s.s.training.strategy, STRAT_FSDP);
	cr_expect_eq(s.s.training.recompute, RECOMPUTE_FULL);
	cr_expect_eq(origin(&s, "training", "strategy"), SCN_IMPORTED);
	cr_expect_eq(s.world, 16);
	/* and a --set that names another import file, relative to the working
	 * directory (the tests run in the repository) */
	cr_assert_eq(scenario_set(&s, "training.accelerate_config=tests/bad/data/fsdp-plain.yaml", &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.recompute, RECOMPUTE_NONE, "back to the default: fsdp-plain.yaml says nothing");
	cr_expect_eq(s.s.training.fsdp_wrap, WRAP_NONE, "Accelerate's default");
	cr_expect_eq(s.world, 8, "1 node x 8 processes");
	scenario_free(&s);
}

struct sharding_case {
	const char *yaml_value;
	int expect;
};

Test(accelerate, sharding_strategy_numbers_and_names)
{
	/* torch.distributed.fsdp.ShardingStrategy: FULL_SHARD = 1, SHARD_GRAD_OP,
	 * NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2 = 5 (enum auto() order) */
	static const struct sharding_case cases[] = {
		{"1", SHARD_FULL}, {"2", SHARD_GRAD_OP}, {"3", SHARD_NONE}, {"4", SHARD_HYBRID},
		{"5", SHARD_HYBRID_ZERO2}, {"'2'", SHARD_GRAD_OP}, {"FULL_SHARD", SHARD_FULL},
		{"NO_SHARD", SHARD_NONE}, {"HYBRID_SHARD_ZERO2", SHARD_HYBRID_ZERO2},
		{"_HYBRID_SHARD_ZERO2", SHARD_HYBRID_ZERO2},
	};
	size_t i;
	char yaml[256];

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct scenario s;
		struct err e = {0};

		snprintf(yaml, sizeof yaml, "distributed_type: FSDP\nnum_machines: 2\nnum_processes: 16\n"
			 "fsdp_config:\n  fsdp_sharding_strategy: %s\n", cases[i].yaml_value);
		put("a.yaml", yaml);
		cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
				  "accelerate_config = a.yaml\n", NULL, 0, &e), 0, "%s: %s",
			     cases[i].yaml_value, e.msg);
		cr_expect_eq(s.s.training.fsdp_sharding, cases[i].expect, "%s", cases[i].yaml_value);
		scenario_free(&s);
	}
}

Test(accelerate, absent_fields_take_accelerates_defaults)
{
	/* FullyShardedDataParallelPlugin.__post_init__ (accelerate/utils/
	 * dataclasses.py): FULL_SHARD, no CPU offload, NO_PREFETCH, FULL_STATE_DICT,
	 * NO_WRAP; mixed_precision defaults to "no" */
	struct scenario s;
	struct err e = {0};
	const struct scn_training *t = &s.s.training;

	put("a.yaml", "distributed_type: FSDP\nnum_processes: 4\n");
	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
			  "accelerate_config = a.yaml\n", NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->fsdp_sharding, SHARD_FULL);
	cr_expect_eq(t->fsdp_backward_prefetch, PREFETCH_NONE, "not shardcast's default backward_pre");
	cr_expect_eq(t->fsdp_wrap, WRAP_NONE, "not shardcast's default transformer_based_wrap");
	cr_expect_eq(t->offload, OFFLOAD_NONE);
	cr_expect_eq(t->precision, PREC_FP32);
	cr_expect_eq(s.s.checkpoint.state_dict, CKPT_FULL);
	cr_expect_eq(s.s.cluster.nodes, 1);
	cr_expect_eq(s.s.cluster.gpus_per_node, 4);
	scenario_free(&s);
}

Test(accelerate, other_forms)
{
	struct scenario s;
	struct err e = {0};
	const struct scn_training *t = &s.s.training;
	const char *scn = "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\naccelerate_config = a.yaml\n";

	/* size-based wrapping; the old key fsdp_backward_prefetch_policy; an
	 * unquoted `no` (a YAML bool) */
	put("a.yaml", "distributed_type: FSDP\nmixed_precision: no\nnum_processes: 2\nfsdp_config:\n"
	    "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n"
	    "  fsdp_min_num_params: 1e7\n  fsdp_backward_prefetch_policy: BACKWARD_POST\n"
	    "  fsdp_offload_params: true\n  some_future_key: 3\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->fsdp_version, 1);
	cr_expect_eq(t->fsdp_sharding, SHARD_GRAD_OP);
	cr_expect_eq(t->fsdp_wrap, WRAP_SIZE);
	cr_expect_eq(t->fsdp_min_num_params, 1e7);
	cr_expect_eq(t->fsdp_backward_prefetch, PREFETCH_BACKWARD_POST);
	cr_expect_eq(t->offload, OFFLOAD_OPTIMIZER_AND_PARAMS);
	cr_expect_eq(t->precision, PREC_FP32);
	cr_expect_eq(s.imp->nnotes, 1, "the ignored unknown key");
	scenario_free(&s);

	/* FSDP2 (utils/fsdp_utils.py fsdp2_prepare_model): fully_shard with the
	 * plugin's reshard_after_forward on every module; FSDP1's prefetch
	 * fields do not apply (the backward one is noted) */
	put("a.yaml", "distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: 8\nfsdp_config:\n"
	    "  fsdp_version: 2\n  fsdp_reshard_after_forward: false\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
	    "  fsdp_backward_prefetch: BACKWARD_POST\n  fsdp_forward_prefetch: true\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->fsdp_version, 2);
	cr_expect_eq(t->fsdp_reshard_after_forward, 0, "false");
	cr_expect_eq(t->fsdp_sharding, SHARD_FULL);
	cr_expect_eq(t->fsdp_wrap, WRAP_TRANSFORMER);
	cr_expect_eq(t->fsdp_backward_prefetch, PREFETCH_BACKWARD_PRE, "FSDP2's implicit prefetch, not the field");
	cr_expect_eq(t->fsdp_forward_prefetch, 0);
	cr_expect_eq(s.plan.layout, LAYOUT_PER_PARAM);
	cr_expect_eq(s.plan.reshard_root, 0);
	cr_expect_eq(t->no_sync, NOSYNC_DEFAULT, "fully_shard has no no_sync()");
	cr_expect_eq(s.imp->nnotes, 1, "fsdp_backward_prefetch ignored");
	scenario_free(&s);
	/* absent: the plugin's True, the root included; an FSDP1 strategy converted */
	put("a.yaml", "distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: 8\nfsdp_config:\n"
	    "  fsdp_version: 2\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->fsdp_reshard_after_forward, -2, "true");
	cr_expect_eq(s.plan.reshard_root, 1);
	scenario_free(&s);
	put("a.yaml", "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
	    "  fsdp_sharding_strategy: SHARD_GRAD_OP\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->fsdp_reshard_after_forward, 0, "SHARD_GRAD_OP: false");
	scenario_free(&s);

	/* MULTI_GPU is DDP; NO is one process */
	put("a.yaml", "distributed_type: MULTI_GPU\nnum_machines: 1\nnum_processes: 4\nmixed_precision: 'bf16'\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->strategy, STRAT_DDP);
	cr_expect_eq(t->precision, PREC_BF16);
	cr_expect_eq(s.world, 4);
	scenario_free(&s);

	/* DEEPSPEED with Accelerate's own fields */
	put("a.yaml", "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\ndeepspeed_config:\n"
	    "  zero_stage: 3\n  offload_optimizer_device: cpu\n  offload_param_device: none\n"
	    "  gradient_accumulation_steps: 4\n  zero3_init_flag: true\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->strategy, STRAT_ZERO3);
	cr_expect_eq(t->framework, FW_DEEPSPEED);
	cr_expect_eq(t->offload, OFFLOAD_OPTIMIZER);
	cr_expect_eq(t->grad_accum, 4);
	cr_expect_eq(t->precision, PREC_BF16);
	scenario_free(&s);

	/* DEEPSPEED through a deepspeed_config_file beside the YAML: the JSON's
	 * explicit bf16 agrees, its stage and offload win */
	put("ds.json", "{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}},"
	    " \"bf16\": {\"enabled\": true}, \"train_micro_batch_size_per_gpu\": 2}");
	put("a.yaml", "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\ndeepspeed_config:\n"
	    "  deepspeed_config_file: ds.json\n  zero3_init_flag: false\n");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->strategy, STRAT_ZERO2);
	cr_expect_eq(t->offload, OFFLOAD_OPTIMIZER);
	cr_expect_eq(t->micro_batch, 2);
	cr_expect(setting(&s, "micro_batch") && strstr(imp_file(s.imp, setting(&s, "micro_batch")), "ds.json"));
	scenario_free(&s);
}

Test(accelerate, malformed_files_are_located_errors)
{
	static const struct bad_case cases[] = {
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 6\n",
		 "fsdp_config.fsdp_sharding_strategy = 6: out of range; expected 1 to 5", 3},
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: 0\n",
		 "fsdp_sharding_strategy = 0: out of range", 3},
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: QUARTER_SHARD\n",
		 "fsdp_sharding_strategy = QUARTER_SHARD: unknown value", 3},
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_stratgy: 1\n",
		 "unknown field 'fsdp_config.fsdp_sharding_stratgy'; did you mean 'fsdp_sharding_strategy'?", 3},
		{"num_processes: 8\n", "missing field 'distributed_type'", 0},
		{"distributed_type: XLA\n", "distributed_type = XLA: unknown value", 1},
		{"distributed_type: FSDP\nnum_processes: eight\n", "num_processes is a string; expected an integer", 2},
		{"distributed_type: FSDP\nnum_processes: 2.5\n", "not a whole number", 2},
		{"distributed_type: FSDP\nnum_machines: 2\nnum_processes: 9\n",
		 "num_processes = 9 is not a multiple of num_machines = 2", 3},
		{"distributed_type: FSDP\nfsdp_config: 3\n", "fsdp_config is a number; expected a mapping", 2},
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: maybe\n",
		 "fsdp_offload_params is a string; expected true or false", 3},
		{"distributed_type: FSDP\nfsdp_config:\n  fsdp_backward_prefetch: BACKWARD_PRE\n"
		 "  fsdp_backward_prefetch_policy: BACKWARD_POST\n", "disagree", 4},
		{"distributed_type: FSDP\ndistributed_type: DEEPSPEED\n", "duplicate key 'distributed_type' (first at line 1)", 2},
		{"distributed_type: FSDP\n  bad indent: [\n", "not valid YAML", 2},
		{"- a\n- b\n", "expected a mapping", 1},
		{"distributed_type: FSDP\nmixed_precision: fp8\n",
		 "mixed_precision gives [training] precision = fp8, which shardcast cannot take", 2},
		{"distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n",
		 "deepspeed_config.zero_stage = 4: out of range; expected 0 to 3", 3},
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct scenario s;
		struct err e = {0};
		char loc[160];

		put("a.yaml", cases[i].json);
		cr_expect_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
				  "accelerate_config = a.yaml\n", NULL, 0, &e), ERR_INPUT, "case %zu", i);
		cr_expect(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg,
			  cases[i].expect);
		if (cases[i].line)
			snprintf(loc, sizeof loc, "%s/a.yaml:%d: ", dir, cases[i].line);
		else
			snprintf(loc, sizeof loc, "%s/a.yaml", dir);
		cr_expect(strncmp(e.msg, loc, strlen(loc)) == 0, "case %zu: '%s' not at %s", i, e.msg, loc);
		scenario_free(&s);
	}
}

/* The importers check only the mappings they read: the value of a key they do
 * not read is never walked, so a duplicate inside it is not an error (before,
 * every value of the document was walked, through its aliases). A key they do
 * read still is. */
Test(accelerate, values_of_keys_not_read_are_not_walked)
{
	struct scenario s;
	struct err e = {0};
	const char *scn = "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
			  "accelerate_config = a.yaml\n";

	put("a.yaml", "distributed_type: FSDP\ndynamo_config:\n  dynamo_backend: INDUCTOR\n"
	    "  dynamo_backend: EAGER\n");
	cr_expect_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.strategy, STRAT_FSDP);
	scenario_free(&s);
	put("a.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n"
	    "  fsdp_offload_params: false\n");
	memset(&e, 0, sizeof e);
	cr_expect_eq(load(&s, scn, NULL, 0, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "a.yaml:4: duplicate key 'fsdp_config.fsdp_offload_params' (first at line 3)"),
		  "%s", e.msg);
	scenario_free(&s);
}

/* Bounds on what an import may hold (import_int.h): aliases counted before
 * the document is built, expansion, cycles and depth after. The 668-byte file
 * of ten levels of ten aliases kept simulate busy for hours. */
Test(accelerate, alias_expansion_is_bounded, .timeout = 10)
{
	static const struct bad_case cases[] = {
		{"distributed_type: FSDP\nx: &x [*x]\n", "an alias refers to a mapping or list that contains it", 2},
		{"distributed_type: FSDP\na: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
		 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
		 "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
		 "more than 100000 values", 1},
		{"distributed_type: FSDP\nx: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
		 "nested more than 32 levels deep", 2},
	};
	char text[4096];
	size_t i, n;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct scenario s;
		struct err e = {0};
		put("a.yaml", cases[i].json);
		cr_expect_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
				  "accelerate_config = a.yaml\n", NULL, 0, &e), ERR_INPUT, "case %zu", i);
		cr_expect(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].expect);
		scenario_free(&s);
	}
	/* 65 aliases, each of a scalar: refused by count, whatever they expand to */
	n = (size_t)snprintf(text, sizeof text, "distributed_type: FSDP\na: &a 1\nb: [");
	for (i = 0; i < 65; i++)
		n += (size_t)snprintf(text + n, sizeof text - n, "%s*a", i ? ", " : "");
	snprintf(text + n, sizeof text - n, "]\n");
	{
		struct scenario s;
		struct err e = {0};
		put("a.yaml", text);
		cr_expect_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\n"
				  "accelerate_config = a.yaml\n", NULL, 0, &e), ERR_INPUT);
		cr_expect(strstr(e.msg, "a.yaml:3: more than 64 aliases"), "%s", e.msg);
		scenario_free(&s);
	}
}

Test(accelerate, an_imported_value_the_scenario_rejects_names_the_import)
{
	/* bf16 from mixed_precision on a V100 (no bf16): the scenario's check names
	 * the YAML's line and field, and says how to override */
	struct scenario s;
	struct err e = {0};

	put("a.yaml", "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: bf16\n");
	cr_expect_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = v100-sxm2-32gb\n[training]\n"
			  "accelerate_config = a.yaml\n", NULL, 0, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "a.yaml:3: [training] precision = bf16 (imported from mixed_precision)"),
		  "%s", e.msg);
	cr_expect(strstr(e.msg, "set [training] precision in the scenario to override"), "%s", e.msg);
	scenario_free(&s);
}

/* ---- DeepSpeed ------------------------------------------------------------------------ */

Test(deepspeed, the_shipped_zero3_offload_config)
{
	/* scenarios/imports/ds_zero3_offload.json on T5-3B (d_model 1024): the
	 * "auto" sizes as transformers' HfTrainerDeepSpeedConfig fills them:
	 * reduce_bucket_size = 1024^2, stage3_prefetch_bucket_size = 0.9 x 1024^2
	 * (943718.4, an integer for DeepSpeed), persistence threshold = 10 x 1024 */
	struct scenario s;
	struct err e = {0};
	const struct scn_training *t = &s.s.training;

	cr_assert_eq(scenario_load(&s, "scenarios/t5-3b-deepspeed-offload.ini", NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->strategy, STRAT_ZERO3);
	cr_expect_eq(t->framework, FW_DEEPSPEED);
	cr_expect_eq(t->offload, OFFLOAD_OPTIMIZER_AND_PARAMS);
	cr_expect_eq(t->zero_reduce_bucket_size, 1048576);
	cr_expect_eq(t->zero_prefetch_bucket_size, 943718);
	cr_expect_eq(t->zero_param_persistence_threshold, 10240);
	cr_expect_eq(t->zero_max_live_parameters, 1e9);
	cr_expect_eq(t->zero_allgather_bucket_size, 5e8, "absent: DeepSpeed's default 5e8");
	cr_expect_eq(t->optimizer, OPT_ADAMW);
	cr_expect_eq(t->precision, PREC_BF16, "auto in the JSON, bf16 in the scenario");
	cr_expect_eq(t->micro_batch, -1, "auto in the JSON: shardcast searches the largest");
	cr_expect_eq(origin(&s, "training", "precision"), 19);
	cr_expect_eq(s.imp->nnotes, 6, "three auto sizes, precision, micro-batch, accumulation");
	scenario_free(&s);
}

Test(deepspeed, explicit_values_and_the_batch_rule)
{
	struct scenario s;
	struct err e = {0};
	const struct scn_training *t = &s.s.training;
	const char *scn = "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n"
		"[training]\ndeepspeed_config = ds.json\n";

	put("ds.json", "{\"train_batch_size\": 256, \"train_micro_batch_size_per_gpu\": 4,"
	    " \"gradient_accumulation_steps\": 8, \"fp16\": {\"enabled\": true},"
	    " \"zero_optimization\": {\"stage\": 1, \"reduce_bucket_size\": 2e8, \"allgather_bucket_size\": 3e8},"
	    " \"activation_checkpointing\": {\"partition_activations\": true}}");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->strategy, STRAT_ZERO1);
	cr_expect_eq(t->precision, PREC_FP16);
	cr_expect_eq(t->micro_batch, 4);
	cr_expect_eq(t->grad_accum, 8);
	cr_expect_eq(t->zero_reduce_bucket_size, 2e8);
	cr_expect_eq(t->zero_allgather_bucket_size, 3e8);
	cr_expect_eq(t->recompute, RECOMPUTE_FULL);
	scenario_free(&s);

	/* train_batch_size alone: DeepSpeed sets accumulation 1 and micro = T / dp */
	put("ds.json", "{\"train_batch_size\": 64}");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->micro_batch, 8, "64 / 8 GPUs");
	cr_expect_eq(t->grad_accum, 1);
	cr_expect_eq(t->strategy, STRAT_DDP, "no zero_optimization: stage 0");
	cr_expect_eq(t->precision, PREC_FP32, "no fp16/bf16 block: fp32");
	scenario_free(&s);

	/* train_batch_size and micro-batch: accumulation = T / (micro x dp) */
	put("ds.json", "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2}");
	cr_assert_eq(load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(t->grad_accum, 4);
	scenario_free(&s);

	/* inconsistent: 4 x 8 x 8 = 256, not 100 */
	put("ds.json", "{\n\"train_batch_size\": 100,\n\"train_micro_batch_size_per_gpu\": 4,\n"
	    "\"gradient_accumulation_steps\": 8}");
	cr_expect_eq(load(&s, scn, NULL, 0, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "ds.json:2: train_batch_size = 100, but micro-batch x gradient "
			 "accumulation x data-parallel GPUs = 4 x 8 x 8 = 256"), "%s", e.msg);
	scenario_free(&s);
}

Test(deepspeed, malformed_files_are_located_errors)
{
	static const struct bad_case cases[] = {
		{"{\n\"zero_optimization\": {\n\"stage\": 4}}", "zero_optimization.stage = 4: out of range; expected 0 to 3", 3},
		{"{\n\"zero_optimization\": {\n\"stage\": \"3\"}}", "zero_optimization.stage is a string; expected an integer", 3},
		{"{\"zero_optimization\": 3}", "zero_optimization is a number; expected an object", 1},
		{"{\n\"zero_optimization\": {\"stage\": 3,\n\"allgather_bucket_size\": \"auto\"}}",
		 "fills \"auto\" only for", 3},
		{"{\n\"zero_optimization\": {\"stage\": 3,\n\"reduce_bucket_sise\": 5}}",
		 "unknown field 'zero_optimization.reduce_bucket_sise'; did you mean 'reduce_bucket_size'?", 3},
		{"{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"gpu\"}}}",
		 "offload_param.device = gpu: unknown value; expected none, cpu or nvme", 1},
		{"{\n\"bf16\": {\"enabled\": true},\n\"fp16\": {\"enabled\": true}}", "both true", 3},
		{"{\n\"fp16\": {\"enabled\": \"yes\"}}", "fp16.enabled is a string; expected true or false", 2},
		{"{\n\"optimizer\": {\"params\": {}}}", "missing field 'optimizer.type'", 2},
		{"{\n\"train_micro_batch_size_per_gpu\": 0}", "out of range", 2},
		{"{\"zero_optimization\": {\"stage\": 2, \"stage\": 3}}", "duplicate field 'zero_optimization.stage'", 1},
		{"{\"zero_optimization\": {\"stage\": 2,}", "not valid JSON", 1},
		{"{\"zero_optimization\": {\"stage\": 3, \"prefetch_bucket_size\": 1, \"stage3_prefetch_bucket_size\": 2}}",
		 "are the same setting", 1},
		/* parameter offload below ZeRO-3: the scenario's check, located in the JSON */
		{"{\"zero_optimization\": {\"stage\": 2,\n\"offload_param\": {\"device\": \"cpu\"}}}",
		 "[training] offload = optimizer_and_params (imported from zero_optimization.offload_param.device): "
		 "parameter offload needs zero3", 2},
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct scenario s;
		struct err e = {0};
		char loc[160];

		put("ds.json", cases[i].json);
		cr_expect_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n"
				  "[training]\ndeepspeed_config = ds.json\n", NULL, 0, &e), ERR_INPUT, "case %zu", i);
		cr_expect(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg,
			  cases[i].expect);
		snprintf(loc, sizeof loc, "%s/ds.json:%d: ", dir, cases[i].line);
		cr_expect(strncmp(e.msg, loc, strlen(loc)) == 0, "case %zu: '%s' not at %s", i, e.msg, loc);
		scenario_free(&s);
	}
}

Test(deepspeed, batch_rule_alone)
{
	/* deepspeed/runtime/config.py _set_batch_related_parameters and
	 * _batch_assertion: train_batch = micro x accumulation x dp */
	struct imp_result r;
	struct err e = {0};
	int64_t micro, accum;

	imp_init(&r);
	snprintf(r.files[0], sizeof r.files[0], "ds.json");
	r.nfiles = 1;
	r.ds_train_batch = 96;
	micro = -1, accum = 3;
	cr_expect_eq(imp_batch(&r, 4, &micro, &accum, 1, &e), 0, "%s", e.msg);
	cr_expect_eq(micro, 8, "96 / (3 x 4)");
	micro = 6, accum = 1;
	cr_expect_eq(imp_batch(&r, 4, &micro, &accum, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(accum, 4, "96 / (6 x 4)");
	micro = 5, accum = 1;
	cr_expect_eq(imp_batch(&r, 4, &micro, &accum, 0, &e), ERR_INPUT, "96 is not a multiple of 20");
	err_clear(&e);
	micro = 6, accum = 4;
	cr_expect_eq(imp_batch(&r, 4, &micro, &accum, 1, &e), 0, "96 = 6 x 4 x 4");
	r.ds_train_batch = 0;
	micro = 5, accum = 7;
	cr_expect_eq(imp_batch(&r, 4, &micro, &accum, 1, &e), 0, "no train_batch_size: nothing to check");
}

/* ---- the same run, written two ways ------------------------------------------------------ */

/* Loads a and b and compares every setting but the import paths. */
static void same_settings(const char *a, const char *b)
{
	struct scenario sa, sb;
	struct err e = {0};

	cr_assert_eq(scenario_load(&sa, a, NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(scenario_load(&sb, b, NULL, 0, &e), 0, "%s", e.msg);
	memset(sa.s.training.accelerate_config, 0, CFG_STR_MAX);
	memset(sa.s.training.deepspeed_config, 0, CFG_STR_MAX);
	memset(sb.s.training.accelerate_config, 0, CFG_STR_MAX);
	memset(sb.s.training.deepspeed_config, 0, CFG_STR_MAX);
	cr_expect(memcmp(&sa.s, &sb.s, sizeof sa.s) == 0, "%s and %s resolve to different settings", a, b);
	cr_expect_eq(sa.world, sb.world);
	cr_expect_eq(sa.dp, sb.dp);
	scenario_free(&sa);
	scenario_free(&sb);
}

Test(equivalence, accelerate_yaml_and_the_ini_resolve_alike)
{
	same_settings("scenarios/llama-3-8b-accelerate.ini", "tests/equiv/llama-3-8b-fsdp.ini");
}

Test(equivalence, deepspeed_json_and_the_ini_resolve_alike)
{
	same_settings("scenarios/t5-3b-deepspeed-offload.ini", "tests/equiv/t5-3b-zero3-offload.ini");
	same_settings("tests/equiv/gpt2-ds-explicit.ini", "tests/equiv/gpt2-zero2.ini");
}

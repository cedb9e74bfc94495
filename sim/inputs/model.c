/*
 * model.c — loading network architectures from models/nn/ files (see model.h).
 */
#include "model.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog.h"

static const char *const families[] = {"decoder", "encoder", "encoder_decoder", NULL};
static const char *const activations[] = {"gelu", "relu", "swiglu", "gated_gelu", "gelu_new", NULL};
static const char *const norms[] = {"layernorm", "rmsnorm", NULL};
static const char *const positions[] = {"learned", "rotary", "relative", NULL};

#define F(x) offsetof(struct model, x)
#define BIG 1e15
static const struct cfg_key keys[] = {
	{"model", "family", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, F(family), families, "architecture family"},
	{"model", "vocab_size", CFG_INT, 0, CFG_REQUIRED, 1, 1e8, NULL, F(vocab), NULL, "vocabulary size"},
	{"model", "hidden", CFG_INT, 0, CFG_REQUIRED, 1, 1e6, NULL, F(hidden), NULL, "d_model"},
	{"model", "layers", CFG_INT, 0, CFG_REQUIRED, 1, 1e5, NULL, F(layers), NULL, "decoder layers (encoder layers for an encoder)"},
	{"model", "encoder_layers", CFG_INT, 0, 0, 0, 1e5, "0", F(encoder_layers), NULL, "encoder layers of an encoder-decoder"},
	{"model", "heads", CFG_INT, 0, CFG_REQUIRED, 1, 1e5, NULL, F(heads), NULL, "attention heads"},
	{"model", "kv_heads", CFG_INT, 0, CFG_REQUIRED, 1, 1e5, NULL, F(kv_heads), NULL, "key/value heads (< heads: grouped-query attention)"},
	{"model", "head_dim", CFG_INT, 0, CFG_REQUIRED, 1, 1e5, NULL, F(head_dim), NULL, "width of one head (d_kv)"},
	{"model", "ffn", CFG_INT, 0, CFG_REQUIRED, 1, 1e7, NULL, F(ffn), NULL, "MLP intermediate width"},
	{"model", "activation", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, F(activation), activations, "MLP activation (gelu: one fused kernel; gelu_new: the Python tanh formula; swiglu/gated_gelu: 3 matrices)"},
	{"model", "norm", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, F(norm), norms, "normalisation"},
	{"model", "norm_python", CFG_BOOL, 0, 0, 0, 0, "false", F(norm_python), NULL, "LayerNorm written as tensor expressions (time only)"},
	{"model", "flash_unpad", CFG_BOOL, 0, 0, 0, 0, "false", F(flash_unpad), NULL, "with attention = flash/flash3 the model calls flash-attn's variable-length kernel on unpadded tokens (bert_padding unpad_input/pad_input: index copies and device syncs; time only)"},
	{"model", "positions", CFG_ENUM, 0, CFG_REQUIRED, 0, 0, NULL, F(positions), positions, "position encoding"},
	{"model", "max_positions", CFG_INT, 0, CFG_REQUIRED, 1, 1e8, NULL, F(max_positions), NULL, "context length (size of a learned table)"},
	{"model", "relative_buckets", CFG_INT, 0, 0, 0, 1e5, "0", F(relative_buckets), NULL, "T5 relative-position buckets"},
	{"model", "qkv_bias", CFG_BOOL, 0, 0, 0, 0, "false", F(qkv_bias), NULL, "biases on q, k, v"},
	{"model", "out_bias", CFG_BOOL, 0, 0, 0, 0, "false", F(out_bias), NULL, "bias on the attention output projection"},
	{"model", "mlp_bias", CFG_BOOL, 0, 0, 0, 0, "false", F(mlp_bias), NULL, "biases on the MLP"},
	{"model", "lm_head_bias", CFG_BOOL, 0, 0, 0, 0, "false", F(lm_head_bias), NULL, "bias on the LM head"},
	{"model", "tied_embeddings", CFG_BOOL, 0, 0, 0, 0, "false", F(tied_embeddings), NULL, "LM head shares the token embedding"},
	{"model", "type_vocab", CFG_INT, 0, 0, 0, 1e3, "0", F(type_vocab), NULL, "token-type embeddings (BERT)"},
	{"model", "embed_norm", CFG_BOOL, 0, 0, 0, 0, "false", F(embed_norm), NULL, "norm after the embeddings (BERT)"},
	{"model", "pooler", CFG_BOOL, 0, 0, 0, 0, "false", F(pooler), NULL, "BERT pooler"},
	{"model", "num_labels", CFG_INT, 0, 0, 0, 1e6, "0", F(num_labels), NULL, "encoder: classes of a sequence-classification head (0: pre-training heads)"},
	{"model", "final_norm", CFG_BOOL, 0, 0, 0, 0, "true", F(final_norm), NULL, "norm after the last layer of each stack"},
	{"model", "dropout", CFG_NUM, 0, 0, 0, 1, "0", F(dropout), NULL, "dropout probability of the model"},
	{"model", "param_count", CFG_INT, 0, 0, 0, BIG, "0", F(param_count), NULL, "published parameter count (checked by the tests)"},
	{"model", "param_source", CFG_STR, 0, 0, 0, 0, "", F(param_source), NULL, "where param_count comes from"},
};
#undef F

static const struct cfg_table table = {keys, sizeof keys / sizeof keys[0]};

const struct cfg_table *model_keys(void)
{
	return &table;
}

int model_check(const struct model *m, const char *file, struct err *e)
{
	if (m->heads % m->kv_heads)
		return err_set(e, ERR_INPUT, file, 0, "kv_heads = %lld must divide heads = %lld",
			       (long long)m->kv_heads, (long long)m->heads);
	if (m->family == FAM_ENCODER_DECODER && m->encoder_layers < 1)
		return err_set(e, ERR_INPUT, file, 0, "an encoder_decoder needs encoder_layers >= 1");
	if (m->positions == POS_RELATIVE && m->relative_buckets < 1)
		return err_set(e, ERR_INPUT, file, 0, "positions = relative needs relative_buckets >= 1");
	if (m->num_labels > 0 && (m->family != FAM_ENCODER || !m->pooler))
		return err_set(e, ERR_INPUT, file, 0, "num_labels = %lld needs an encoder with a pooler "
			       "(BertForSequenceClassification)", (long long)m->num_labels);
	return 0;
}

int model_load(const char *name_or_path, struct model *m, const char *where, int line,
	       struct err *e)
{
	char path[PATH_MAX];
	int rc;

	rc = catalog_resolve("nn", name_or_path, path, sizeof path, where, line, "[model] name", e);
	if (rc)
		return rc;
	rc = cfg_load_file(&table, m, path, e);
	if (!rc)
		rc = model_check(m, path, e);
	if (!rc)
		snprintf(m->name, sizeof m->name, "%s", name_or_path);
	return rc;
}

/*
 * model.h — a network architecture from models/nn/<name>.ini.
 *
 * Three families: decoder-only (GPT-2, GPT-3, Llama), encoder-only (BERT) and
 * encoder-decoder (T5). The fields are what the Hugging Face configs say; the
 * graph (graph.c) turns them into layers, tensors and FLOPs.
 */
#ifndef SHARDCAST_MODEL_H
#define SHARDCAST_MODEL_H

#include <stdint.h>

#include "cfg.h"
#include "err.h"

enum family { FAM_DECODER, FAM_ENCODER, FAM_ENCODER_DECODER };
/* ACT_GELU: one fused kernel (nn.GELU, F.gelu, exact or tanh); ACT_GELU_NEW: the
 * tanh formula written in Python (GPT-2's NewGELUActivation), eight kernels */
enum activation { ACT_GELU, ACT_RELU, ACT_SWIGLU, ACT_GATED_GELU, ACT_GELU_NEW };
enum norm { NORM_LAYERNORM, NORM_RMSNORM };
enum positions { POS_LEARNED, POS_ROTARY, POS_RELATIVE };
/* The PyTorch + transformers stack a model runs in ([training] framework_version):
 * what its modules allocate differs (graph.h's GRAPH_EAGER, memwalk.c). */
enum fw_version { FWV_CURRENT, FWV_1_13 };

struct model {
	char name[CFG_STR_MAX];    /* catalog name or file path */
	int family;                /* enum family */
	int64_t vocab;             /* vocab_size */
	int64_t hidden;            /* d_model */
	int64_t layers;            /* decoder layers (encoder layers for FAM_ENCODER) */
	int64_t encoder_layers;    /* FAM_ENCODER_DECODER only */
	int64_t heads, kv_heads, head_dim;
	int64_t ffn;               /* MLP intermediate width */
	int activation;            /* enum activation */
	int norm;                  /* enum norm */
	int norm_python;           /* LayerNorm written as tensor expressions (mean, var,
				      sub, div, scale, shift), not nn.LayerNorm */
	int flash_unpad;           /* calls flash-attn's varlen kernel on unpadded tokens
				      (llm-foundry's MPT with attn_impl flash) */
	int positions;             /* enum positions */
	int64_t max_positions;
	int64_t relative_buckets;
	int qkv_bias, out_bias, mlp_bias, lm_head_bias, tied_embeddings;
	int64_t type_vocab;
	int embed_norm, pooler, final_norm;
	int64_t num_labels;        /* encoder: a sequence-classification head of this many
				      classes on the pooled first token (0: pre-training heads) */
	double dropout;            /* probability */
	int64_t param_count;       /* published count, 0 when none (a check, not an input) */
	char param_source[CFG_STR_MAX];
};

/* Loads the model named name_or_path (catalog name under models/nn/, or a path
 * to a file of the same form) into m. A missing entry is reported at where:line
 * (the key that named it; NULL when none); errors inside the file name its line. */
int model_load(const char *name_or_path, struct model *m, const char *where, int line,
	       struct err *e);

/* Checks the architecture's internal consistency (heads divide, etc.). */
int model_check(const struct model *m, const char *file, struct err *e);

/* The key table of model files, for the reference. */
const struct cfg_table *model_keys(void);

#endif

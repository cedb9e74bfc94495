/*
 * import_hf.c — a Hugging Face config.json as a struct model (see import.h).
 *
 * The field names and their defaults are those of the transformers
 * configuration classes: GPT2Config, BertConfig, T5Config, LlamaConfig and
 * MistralConfig. What the config does not say but the modelling code fixes
 * (GPT-2 and BERT have biases everywhere, T5 none; BERT has a pooler and a
 * LayerNorm after the embeddings; Llama's attention_bias covers q, k, v and o)
 * is set here, as in the catalog files of models/nn/.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "import_int.h"

enum hf_type { HF_GPT2, HF_BERT, HF_T5, HF_LLAMA, HF_MISTRAL };

static const char *const hf_types[] = {"gpt2", "bert", "t5", "llama", "mistral", NULL};
/* architectures[0] prefixes, in hf_types order */
static const char *const hf_arch[] = {"GPT2", "Bert", "T5", "Llama", "Mistral", NULL};

#define BIG_INT 1e12

/* An integer field of the top level: required, or def when absent. */
static int geti(const struct imp_json *j, const char *f, int flags, double lo, double hi,
		int64_t def, int64_t *out, struct err *e)
{
	double v;
	int kind;

	*out = def;
	if (imp_json_num(j, j->root, f, flags | IMP_INTEGER, lo, hi, &v, &kind, e))
		return e->code;
	if (kind == IMP_VALUE)
		*out = (int64_t)v;
	return 0;
}

static int getb(const struct imp_json *j, const char *f, int def, int *out, struct err *e)
{
	int kind;

	*out = def;
	return imp_json_bool(j, j->root, f, 0, out, &kind, e);
}

static int getd(const struct imp_json *j, const char *f, double lo, double hi, double def,
		double *out, struct err *e)
{
	int kind;

	*out = def;
	return imp_json_num(j, j->root, f, 0, lo, hi, out, &kind, e);
}

/* A string field that must be one of names; *idx its index. */
static int get_choice(const struct imp_json *j, const char *f, const char *def,
		      const char *const *names, const char *expect, int *idx, struct err *e)
{
	char v[64];
	int kind, i;

	snprintf(v, sizeof v, "%s", def);
	if (imp_json_str(j, j->root, f, 0, v, sizeof v, &kind, e))
		return e->code;
	for (i = 0; names[i]; i++)
		if (strcmp(v, names[i]) == 0) {
			*idx = i;
			return 0;
		}
	return err_set(e, ERR_INPUT, j->file, imp_json_line(j, f),
		       "%s = \"%s\": not supported; expected %s", f, v, expect);
}

/* hidden / heads, which must divide (GPT-2, BERT and Llama without head_dim). */
static int head_width(const struct imp_json *j, const char *hf, const char *nf, struct model *m,
		      struct err *e)
{
	if (m->hidden % m->heads)
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, nf),
			       "%s = %lld must divide %s = %lld", nf, (long long)m->heads, hf,
			       (long long)m->hidden);
	m->head_dim = m->hidden / m->heads;
	return 0;
}

static int common_layernorm_eps(const struct imp_json *j, const char *f, struct err *e)
{
	double eps;
	/* read for its type and range; the graph does not depend on it */
	return getd(j, f, 0, 1, 1e-5, &eps, e);
}

static int hf_gpt2(const struct imp_json *j, struct model *m, struct err *e)
{
	static const char *const acts[] = {"gelu_new", "gelu", "gelu_fast", "gelu_pytorch_tanh",
					   "quick_gelu", "relu", NULL};
	int64_t inner;
	int act = 0;

	m->family = FAM_DECODER;
	if (geti(j, "vocab_size", IMP_REQUIRED, 1, 1e8, 0, &m->vocab, e) ||
	    geti(j, "n_embd", IMP_REQUIRED, 1, 1e6, 0, &m->hidden, e) ||
	    geti(j, "n_layer", IMP_REQUIRED, 1, 1e5, 0, &m->layers, e) ||
	    geti(j, "n_head", IMP_REQUIRED, 1, 1e5, 0, &m->heads, e) ||
	    geti(j, "n_positions", IMP_REQUIRED, 1, 1e8, 0, &m->max_positions, e) ||
	    geti(j, "n_inner", 0, 1, 1e7, -1, &inner, e) ||
	    get_choice(j, "activation_function", "gelu_new", acts,
		       "a GELU (gelu_new, gelu, gelu_fast, gelu_pytorch_tanh, quick_gelu) or relu",
		       &act, e) ||
	    common_layernorm_eps(j, "layer_norm_epsilon", e) ||
	    getb(j, "tie_word_embeddings", 1, &m->tied_embeddings, e) ||
	    getd(j, "resid_pdrop", 0, 1, 0.1, &m->dropout, e) ||
	    head_width(j, "n_embd", "n_head", m, e))
		return e->code;
	m->kv_heads = m->heads;
	m->ffn = inner > 0 ? inner : 4 * m->hidden;   /* GPT2MLP: n_inner or 4 * n_embd */
	/* transformers' ACT2FN: gelu_new, gelu_fast and quick_gelu are Python formulas
	 * (NewGELUActivation, FastGELUActivation, QuickGELUActivation), gelu and
	 * gelu_pytorch_tanh one fused kernel */
	m->activation = strcmp(acts[act], "relu") == 0 ? ACT_RELU :
		strcmp(acts[act], "gelu") == 0 || strcmp(acts[act], "gelu_pytorch_tanh") == 0 ? ACT_GELU :
		ACT_GELU_NEW;
	m->norm = NORM_LAYERNORM;
	m->positions = POS_LEARNED;
	m->qkv_bias = m->out_bias = m->mlp_bias = 1;  /* Conv1D layers carry biases */
	m->final_norm = 1;                             /* ln_f */
	return 0;
}

static int hf_bert(const struct imp_json *j, struct model *m, struct err *e)
{
	static const char *const acts[] = {"gelu", "gelu_new", "relu", NULL};
	static const char *const pos[] = {"absolute", NULL};
	int act = 0, p;

	m->family = FAM_ENCODER;
	if (geti(j, "vocab_size", IMP_REQUIRED, 1, 1e8, 0, &m->vocab, e) ||
	    geti(j, "hidden_size", IMP_REQUIRED, 1, 1e6, 0, &m->hidden, e) ||
	    geti(j, "num_hidden_layers", IMP_REQUIRED, 1, 1e5, 0, &m->layers, e) ||
	    geti(j, "num_attention_heads", IMP_REQUIRED, 1, 1e5, 0, &m->heads, e) ||
	    geti(j, "intermediate_size", IMP_REQUIRED, 1, 1e7, 0, &m->ffn, e) ||
	    geti(j, "max_position_embeddings", IMP_REQUIRED, 1, 1e8, 0, &m->max_positions, e) ||
	    geti(j, "type_vocab_size", 0, 0, 1e3, 2, &m->type_vocab, e) ||
	    get_choice(j, "hidden_act", "gelu", acts, "gelu, gelu_new or relu", &act, e) ||
	    get_choice(j, "position_embedding_type", "absolute", pos,
		       "absolute (relative_key variants add distance tables shardcast does not model)",
		       &p, e) ||
	    common_layernorm_eps(j, "layer_norm_eps", e) ||
	    getd(j, "hidden_dropout_prob", 0, 1, 0.1, &m->dropout, e) ||
	    head_width(j, "hidden_size", "num_attention_heads", m, e))
		return e->code;
	m->kv_heads = m->heads;
	m->activation = act == 2 ? ACT_RELU : act == 1 ? ACT_GELU_NEW : ACT_GELU;
	m->norm = NORM_LAYERNORM;
	m->positions = POS_LEARNED;
	m->qkv_bias = m->out_bias = m->mlp_bias = 1;
	m->tied_embeddings = 1;   /* BertModel has no LM head of its own */
	m->embed_norm = 1;        /* BertEmbeddings.LayerNorm */
	m->pooler = 1;            /* BertPooler */
	m->final_norm = 0;        /* post-norm layers */
	return 0;
}

static int hf_t5(const struct imp_json *j, struct model *m, struct err *e)
{
	/* T5Config.feed_forward_proj: "[gated-]ACT"; gated-gelu is T5 v1.1 */
	static const char *const projs[] = {"relu", "gelu", "gated-gelu", "gated-silu", NULL};
	static const int acts[] = {ACT_RELU, ACT_GELU, ACT_GATED_GELU, ACT_SWIGLU};
	int proj = 0;

	m->family = FAM_ENCODER_DECODER;
	if (geti(j, "vocab_size", IMP_REQUIRED, 1, 1e8, 0, &m->vocab, e) ||
	    geti(j, "d_model", IMP_REQUIRED, 1, 1e6, 0, &m->hidden, e) ||
	    geti(j, "d_kv", IMP_REQUIRED, 1, 1e5, 0, &m->head_dim, e) ||
	    geti(j, "d_ff", IMP_REQUIRED, 1, 1e7, 0, &m->ffn, e) ||
	    geti(j, "num_layers", IMP_REQUIRED, 1, 1e5, 0, &m->encoder_layers, e) ||
	    geti(j, "num_decoder_layers", 0, 1, 1e5, m->encoder_layers, &m->layers, e) ||
	    geti(j, "num_heads", IMP_REQUIRED, 1, 1e5, 0, &m->heads, e) ||
	    geti(j, "relative_attention_num_buckets", 0, 1, 1e5, 32, &m->relative_buckets, e) ||
	    geti(j, "n_positions", 0, 1, 1e8, 512, &m->max_positions, e) ||
	    get_choice(j, "feed_forward_proj", "relu", projs, "relu, gelu, gated-gelu or gated-silu",
		       &proj, e) ||
	    common_layernorm_eps(j, "layer_norm_epsilon", e) ||
	    getb(j, "tie_word_embeddings", 1, &m->tied_embeddings, e) ||
	    getd(j, "dropout_rate", 0, 1, 0.1, &m->dropout, e))
		return e->code;
	m->kv_heads = m->heads;
	m->activation = acts[proj];
	m->norm = NORM_RMSNORM;        /* T5LayerNorm: weight only, no mean */
	m->positions = POS_RELATIVE;
	m->final_norm = 1;             /* final_layer_norm of each stack */
	return 0;
}

/* LlamaConfig and MistralConfig share these fields. */
static int hf_llama(const struct imp_json *j, struct model *m, struct err *e)
{
	static const char *const acts[] = {"silu", "swish", NULL};
	int64_t hd;
	int act, bias;

	m->family = FAM_DECODER;
	if (geti(j, "vocab_size", IMP_REQUIRED, 1, 1e8, 0, &m->vocab, e) ||
	    geti(j, "hidden_size", IMP_REQUIRED, 1, 1e6, 0, &m->hidden, e) ||
	    geti(j, "intermediate_size", IMP_REQUIRED, 1, 1e7, 0, &m->ffn, e) ||
	    geti(j, "num_hidden_layers", IMP_REQUIRED, 1, 1e5, 0, &m->layers, e) ||
	    geti(j, "num_attention_heads", IMP_REQUIRED, 1, 1e5, 0, &m->heads, e) ||
	    geti(j, "num_key_value_heads", 0, 1, 1e5, m->heads, &m->kv_heads, e) ||
	    geti(j, "head_dim", 0, 1, 1e5, -1, &hd, e) ||
	    geti(j, "max_position_embeddings", IMP_REQUIRED, 1, 1e8, 0, &m->max_positions, e) ||
	    get_choice(j, "hidden_act", "silu", acts,
		       "silu (the SwiGLU MLP of Llama and Mistral)", &act, e) ||
	    common_layernorm_eps(j, "rms_norm_eps", e) ||
	    getb(j, "tie_word_embeddings", 0, &m->tied_embeddings, e) ||
	    getb(j, "attention_bias", 0, &bias, e) ||
	    getb(j, "mlp_bias", 0, &m->mlp_bias, e) ||
	    getd(j, "attention_dropout", 0, 1, 0, &m->dropout, e))
		return e->code;
	if (hd > 0)
		m->head_dim = hd;
	else if (head_width(j, "hidden_size", "num_attention_heads", m, e))
		return e->code;
	if (m->heads % m->kv_heads)
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, "num_key_value_heads"),
			       "num_key_value_heads = %lld must divide num_attention_heads = %lld",
			       (long long)m->kv_heads, (long long)m->heads);
	m->qkv_bias = m->out_bias = bias;   /* q_proj, k_proj, v_proj and o_proj */
	m->activation = ACT_SWIGLU;
	m->norm = NORM_RMSNORM;
	m->positions = POS_ROTARY;
	m->final_norm = 1;
	return 0;
}

/* model_type, or else the prefix of architectures[0]. */
static int hf_kind(const struct imp_json *j, int *kind, struct err *e)
{
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j->root, "architectures");
	char type[96] = "";
	int k, i;

	if (imp_json_str(j, j->root, "model_type", 0, type, sizeof type, &k, e))
		return e->code;
	if (k == IMP_VALUE) {
		for (i = 0; hf_types[i]; i++)
			if (strcmp(type, hf_types[i]) == 0) {
				*kind = i;
				return 0;
			}
		return err_set(e, ERR_INPUT, j->file, imp_json_line(j, "model_type"),
			       "model_type = \"%s\": unknown architecture; shardcast reads gpt2, bert, "
			       "t5, llama and mistral configs (or name a catalog model with [model] name)",
			       type);
	}
	if (!cJSON_IsArray(arch) || !cJSON_IsString(cJSON_GetArrayItem(arch, 0)))
		return err_set(e, ERR_INPUT, j->file, 0,
			       "missing field 'model_type' (and no architectures list to tell the "
			       "architecture by)");
	snprintf(type, sizeof type, "%s", cJSON_GetArrayItem(arch, 0)->valuestring);
	for (i = 0; hf_arch[i]; i++)
		if (strncmp(type, hf_arch[i], strlen(hf_arch[i])) == 0) {
			*kind = i;
			return 0;
		}
	return err_set(e, ERR_INPUT, j->file, imp_json_line(j, "architectures"),
		       "architectures[0] = \"%s\": unknown architecture; shardcast reads GPT2*, Bert*, "
		       "T5*, Llama* and Mistral* models", type);
}

int imp_hf_model(const char *path, struct model *m, struct err *e)
{
	char file[PATH_MAX];
	struct imp_json j;
	struct stat st;
	int kind = 0, rc;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(file, sizeof file, "%s/config.json", path);   /* a model folder */
	else
		snprintf(file, sizeof file, "%s", path);
	memset(m, 0, sizeof *m);
	rc = imp_json_load(&j, file, e);
	if (!rc)
		rc = hf_kind(&j, &kind, e);
	if (!rc) {
		switch (kind) {
		case HF_GPT2: rc = hf_gpt2(&j, m, e); break;
		case HF_BERT: rc = hf_bert(&j, m, e); break;
		case HF_T5: rc = hf_t5(&j, m, e); break;
		default: rc = hf_llama(&j, m, e); break;
		}
	}
	if (!rc)
		rc = model_check(m, file, e);
	if (!rc)
		snprintf(m->name, sizeof m->name, "%s", path);
	imp_json_free(&j);
	return rc;
}

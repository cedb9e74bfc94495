/*
 * graph.h — the model graph: the ordered ops of one training sample's forward
 * pass, with the tensors each op produces and keeps for backward.
 *
 * Built from a struct model, sequence lengths, the tensor-parallel degree and a
 * flavour that says whose implementation is followed:
 *  - GRAPH_EAGER: a Hugging Face module run by eager PyTorch (what autograd
 *    saves op by op: norm inputs and statistics, reshaped q/k/v copies, the
 *    (heads, S, S) scores and softmax, dropout masks, MLP intermediates, fp32
 *    logits and log-softmax);
 *  - GRAPH_SHARDCAST: shardcast's own runtime, which keeps exactly the tensors
 *    of Korthikanti et al. 2022 (arXiv 2205.05198, §4.1) plus the norms'
 *    fp32 statistics.
 * Sizes are per sample (one sequence) and per tensor-parallel rank, so the
 * memory and time models multiply by the micro-batch. The runtime walks the same
 * ops, which is what lets the simulator predict its memory byte for byte.
 */
#ifndef SHARDCAST_GRAPH_H
#define SHARDCAST_GRAPH_H

#include "err.h"
#include "model.h"

enum graph_flavor { GRAPH_EAGER, GRAPH_SHARDCAST };

/* The attention kernel that runs (resolved from [training] attention by
 * scenario.c). AK_EAGER: the composite ops (QK^T, mask, softmax, dropout, PV)
 * with the (heads, S, S) scores saved; the others are one fused op that saves
 * q, k, v, its output and the fp32 log-sum-exp of each row, recomputes the
 * scores in backward and never materialises them. */
enum attn_kernel { AK_EAGER, AK_FLASH2, AK_MEM_EFFICIENT, AK_FLASH3, AK_CUDNN, AK_COUNT };

/* How the graph is built. */
struct graph_opts {
	long seq_len;      /* tokens per sample (encoder input for encoder-decoder) */
	long target_len;   /* decoder tokens of an encoder-decoder (else = seq_len) */
	double dropout;    /* probability; 0 = no dropout ops (eval-mode forward) */
	int tp;            /* tensor-parallel degree */
	int flavor;        /* enum graph_flavor */
	int act_bytes;     /* bytes of the compute dtype: 2 (fp16/bf16) or 4 */
	int autocast;      /* PyTorch autocast: fp32 master weights, fp32 residual, norms,
			      softmax and loss in fp32, bf16 casts before each matmul */
	int attn;          /* enum attn_kernel */
	int fwv;           /* enum fw_version (model.h): the transformers and PyTorch whose
			      modules GRAPH_EAGER follows */
	int kv_cache;      /* GRAPH_EAGER: decoder attention keeps k and v in transformers'
			      KV cache to the end of the step (use_cache, on by default; off
			      in checkpointed layers) */
};

enum op_kind {
	OP_EMBED, OP_NORM, OP_MATMUL, OP_ATTN_SCORE, OP_SOFTMAX, OP_ATTN_CTX, OP_ACT,
	OP_DROPOUT, OP_ADD, OP_MUL, OP_COPY, OP_LOSS, OP_ATTN, OP_KIND_COUNT
};

enum { GRAPH_MAX_IN = 3, GRAPH_MAX_SAVED = 6 };

/* The sub-module of a block an op belongs to (FSDP's size-based wrapping walks
 * this tree: Linear < attention/MLP < block < model). */
enum op_module { MOD_NONE, MOD_ATTN, MOD_XATTN, MOD_MLP };

/* Bytes of a name built by graph_op_name or graph_tensor_name, its 0 included. */
#define GRAPH_NAME 32

struct gtensor {
	const char *what;  /* a string constant: the name of a tensor its producer makes for
			      its own backward ("stats", "mask"), after the op's name and a
			      dot; NULL: the producer's output, named as the op; an input
			      of the model (no producer): its name ("ids") */
	double elems;      /* elements per sample (per TP rank) */
	int dsize;         /* bytes per element */
	int producer;      /* op index, -1 for inputs */
	int last_fwd_use;  /* last op (index) that reads it in forward */
	int first_saver;   /* smallest op index that saves it for backward, -1 = none */
	int held;          /* kept to the end of the step (model outputs such as logits) */
	int fixed;         /* 1: elems is the whole tensor, not per sample (position biases,
			      index tensors of the sequence) */
	int nograd;        /* no gradient flows into it (masks, indices) */
	int fwd_held;      /* kept to the end of the forward (the backbone's output, which the
			      model's output object holds until the head's loss is done) */
};

struct gop {
	const char *base;  /* a string constant: its name within its block ("attn.qkv"),
			      or in the model outside the blocks ("lm_head"); graph_op_name */
	int kind;          /* enum op_kind */
	int stack;         /* 0 = decoder (or the only stack), 1 = encoder */
	int layer;         /* block index within the model, -1 outside blocks */
	int unit;          /* wrap unit: 0 = root (embeddings, final norm, head), b+1 = block b */
	double params;     /* weight elements owned (per TP rank) */
	double rows;       /* dim 0 of its first parameter tensor as the module stores it:
			      nn.Linear's (out, in) weight, an embedding table's rows, a
			      vector's length (graph_param_rows) */
	double m, n, k;    /* matmul: (m x k) @ (k x n), m per sample */
	double flops_fwd;  /* per sample */
	double flops_bwd;  /* per sample */
	double io_elems;   /* activation elements read + written in forward, per sample */
	int in[GRAPH_MAX_IN], nin;
	int out;           /* tensor produced, -1 none */
	int saved[GRAPH_MAX_SAVED], nsaved;
	int tp_allreduce;  /* 1: the output is all-reduced across tensor-parallel ranks */
	int attn_core;     /* part of attention's core (recomputed under selective) */
	int module;        /* enum op_module */
	int tied;          /* reads the token table owned by another op (tied LM head,
			      T5's decoder embedding): vocab x hidden / tp elements */
	double bwd_ws;     /* bytes per sample of workspace its backward allocates and
			      frees (fused attention: fp32 dQ accumulator, row sums) */
	double flops_model;/* OP_ATTN: forward FLOPs of Q·K^T over the whole S x S matrix,
			      per sample (the MFU convention's attention term) */
	int attn;          /* OP_ATTN: enum attn_kernel */
};

/* The parameter tensors an op owns (elements per TP rank, as its module
 * holds them): a product's weight and bias, a LayerNorm's weight and bias,
 * one table or vector otherwise; none for an op without parameters. */
#define GRAPH_OP_PTENSORS 2    /* the most an op owns: what per-tensor arrays hold per op */
struct gparams {
	int64_t el[GRAPH_OP_PTENSORS]; /* elements of tensor 0 (the weight) and 1 (the bias) */
	int n;             /* tensors: 0 .. GRAPH_OP_PTENSORS */
};

struct graph {
	struct gop *ops;
	int nops, capops;
	struct gtensor *t;
	int nt, capt;
	struct graph_opts o;
	int nblocks;            /* transformer blocks over all stacks */
	int capblocks;          /* room in block_first and block_in */
	double params;          /* trained parameters of the whole model (all TP ranks) */
	double params_backbone; /* the published count's scope (e.g. BertModel) */
	double params_rank;     /* parameters held by one TP rank */
	double tokens;          /* tokens per sample (decoder tokens + encoder tokens) */
	double flops_fwd;       /* per sample, one TP rank */
	double flops_bwd;
	int input;              /* token ids tensor */
	int *block_first;       /* per block (over stacks, in forward order): its first op */
	int *block_in;          /* per block: the tensor entering it (what full recompute keeps) */
	int *same;              /* (nops) the first op that does what op i does on the same sizes:
				   the same kind, attention kernel, parameters, shapes and FLOPs,
				   and inputs and output of the same sizes (a transformer's blocks
				   repeat their ops); i for the first of its kind */
	double buffer_bytes;    /* the module's non-parameter buffers (bytes, whole model) */
	int copied;             /* blocks copied from the one before (graph_build), not built */
	int alike[2][2];        /* per stack whose blocks were copied: blocks alike[k][0] ..
				   alike[k][1] - 1 are one block moved on, bit for bit but for
				   their indices (its second, third and the copies); nalike */
	int nalike;
	struct gparams *pt;     /* (nops) each op's parameter tensors (graph_op_params): one
				   compact table, read op by op by every walk over the model states */
};

/* The parameter tensors of op i: their count, their elements in out[0 ..]. */
static inline int graph_op_params(const struct graph *g, int i, int64_t out[GRAPH_OP_PTENSORS])
{
	const struct gparams *x = &g->pt[i];

	out[0] = x->el[0];
	out[1] = x->el[1];
	return x->n;
}

/* Rows (dim 0) of op i's parameter tensor k (weight 0, bias 1) of n
 * elements: what FSDP2 shards (torch.chunk on dim 0). A bias is a vector. */
static inline double graph_param_rows(const struct graph *g, int i, int k, double n)
{
	double r = k == 0 && g->ops[i].rows > 0 ? g->ops[i].rows : n;
	double per = r > 0 ? n / r : 0;

	return r > 0 && per == (double)(long long)per ? r : n;
}

/* Bytes of tensor i: per sample, or the whole tensor when it is fixed. */
static inline double graph_tensor_bytes(const struct graph *g, int i)
{
	return g->t[i].elems * g->t[i].dsize;
}

/* Builds the graph of model m under o. Returns 0 or fills e; g is freed with
 * graph_free (also after an error). */
int graph_build(struct graph *g, const struct model *m, const struct graph_opts *o,
		struct err *e);

/* The op at op i's place in the first block of its alike range (graph.alike)
 * when i lies in a later block of it but the last, -1 otherwise: what is
 * computed of an op alone (its fields, its tensors' sizes, the names and
 * kinds of the ops beside it in its block) is that op's. */
static inline int graph_alike_op(const struct graph *g, int i)
{
	int k, f, len;

	for (k = 0; k < g->nalike; k++) {
		f = g->block_first[g->alike[k][0]];
		len = g->block_first[g->alike[k][0] + 1] - f;
		if (i >= f + len && i < f + (g->alike[k][1] - g->alike[k][0] - 1) * len)
			return f + (i - f) % len;
	}
	return -1;
}

/* graph_build with every block built op by op, none copied from the one
 * before (tests compare the two). */
int graph_build_whole(struct graph *g, const struct model *m, const struct graph_opts *o, struct err *e);

void graph_free(struct graph *g);

/* Parameter count of m's published scope (no graph needed): what the tests assert. */
double graph_param_count(const struct model *m);

/* Model FLOPs per training sample (all TP ranks): 6N per token plus attention
 * 6·s·(h_attn)·L per token (PaLM appendix B convention, Kaplan et al. 2020);
 * the MFU numerator. N excludes the embedding tables. */
double graph_model_flops_per_sample(const struct graph *g, const struct model *m);

/* Parameter tensors of the graph (graph_op_params over every op): what a
 * per-tensor optimizer steps over. */
double graph_param_tensors(const struct graph *g);

const char *graph_kind_name(int kind);

/* The name of op i, its block's prefix and its base ("L12.attn.qkv", "enc3.ffn.up",
 * "lm_head"), into buf, cut to GRAPH_NAME - 1 bytes; returns buf. Names are
 * built only where they are written (reports, traces, timelines): a graph of
 * GPT-3's 96 blocks has about 2,900 ops and as many tensors, and naming each
 * as it was built took 3 % of an in-process simulate. */
const char *graph_op_name(const struct graph *g, int i, char buf[GRAPH_NAME]);

/* The name of tensor t: its producer's name, and ".what" for a tensor the op
 * makes for its backward ("L3.ln1.stats"), or an input's own ("ids"), cut to
 * GRAPH_NAME - 1 bytes; returns buf. */
const char *graph_tensor_name(const struct graph *g, int t, char buf[GRAPH_NAME]);

/* Whether ops i and j have the same name (graph_op_name): the same block of the
 * same stack, or both outside the blocks, and the same base. */
int graph_same_name(const struct graph *g, int i, int j);

/* "eager", "flash2", "mem_efficient", "flash3" or "cudnn". */
const char *graph_attn_name(int kernel);

#endif

/*
 * graph.c — building the model graph (see graph.h).
 *
 * FLOPs: a (m x k)·(k x n) product is 2mkn in forward and 4mkn in backward
 * (input gradient and weight gradient); attention's two batched products are
 * 2·S_q·S_k·d per head each (Narayanan et al. 2021, eq. 3 derivation).
 *
 * What is saved follows the implementation named by the flavour:
 *  GRAPH_EAGER — Hugging Face transformers modules under eager PyTorch:
 *   * nn.Linear saves its input (under autocast: the bf16/fp16 cast copy);
 *   * torch.matmul on permuted 4-D q/k/v reshapes them into contiguous copies
 *     for bmm, and bmm saves both operands;
 *   * softmax saves its output (fp32 under autocast, whose fp32 list includes
 *     softmax, layer_norm, pow and cross_entropy; always fp32 in Llama, which
 *     passes dtype=torch.float32, and T5, which upcasts the scores first), and
 *     the cast back to the compute dtype is saved by the context product;
 *   * dropout saves a 1-byte mask; its output is saved by the next consumer;
 *   * GPT-2's gelu_new is a Python formula that keeps x, tanh(.), 1 + tanh(.)
 *     and 0.5x; BERT's F.gelu keeps its input; T5's ReLU keeps its output;
 *     SiLU keeps its input and the gating product keeps both operands;
 *   * LayerNorm keeps its input and fp32 mean and rstd; Llama/T5 RMSNorm
 *     (Python) keeps the fp32 input, the fp32 rsqrt and the normalised tensor;
 *   * the loss upcasts logits to fp32, copies the shifted slice, and
 *     log_softmax keeps its fp32 output; the logits stay alive as the output.
 *  GRAPH_SHARDCAST — the runtime keeps the set of Korthikanti et al. 2022
 *   §4.1 (34·sbh + 5·as²b bytes per layer in 16-bit) plus fp32 norm statistics.
 */
#include "graph.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

struct bld {
	struct graph *g;
	const struct model *m;
	const struct graph_opts *o;
	int eager;
	int A;          /* bytes of the compute dtype */
	int U;          /* bytes of autocast's fp32 ops (= A without autocast) */
	int stack, layer, unit;
	int module;     /* enum op_module of the ops being built */
	int old;        /* the 1.13 stack: transformers 4.26's modules */
	int mask;       /* the stack's additive causal mask (eager, current stack), -1 none */
	int pbias;      /* the stack's relative position bias (T5), -1 none */
	int xbias;      /* T5 cross-attention's zero position bias, -1 none */
	double S;       /* tokens of the current stack */
	struct err *e;
	int whole;      /* 1: every block built (graph_build_whole), none copied */
};

/* dst = a b c (any may be NULL) cut to n - 1 bytes, as snprintf "%s%s%s" would. */
static void name3(char *dst, size_t n, const char *a, const char *b, const char *c)
{
	const char *parts[3] = {a, b, c};
	size_t k = 0;
	int i;

	for (i = 0; i < 3; i++)
		for (const char *p = parts[i]; p && *p && k + 1 < n; p++)
			dst[k++] = *p;
	dst[k] = 0;
}

/* A tensor of producer, named as it (what NULL) or as its ".what"; an input
 * (producer -1) named what. */
static int tensor(struct bld *b, const char *what, double elems, int dsize, int producer)
{
	struct graph *g = b->g;
	struct gtensor *t;

	if (vec_grow((void **)&g->t, &g->capt, g->nt + 1, sizeof *g->t))
		return -1;
	t = &g->t[g->nt];
	memset(t, 0, sizeof *t);
	t->what = what;
	t->elems = elems;
	t->dsize = dsize;
	t->producer = producer;
	t->last_fwd_use = producer;
	t->first_saver = -1;
	return g->nt++;
}

/* "L12." or "enc3.": the prefix of a block's op names. */
static void layer_prefix(char pre[16], int stack, int layer)
{
	char digits[12];
	int d = 0, k = stack ? 3 : 1;

	do {
		digits[d++] = (char)('0' + layer % 10);
		layer /= 10;
	} while (layer > 0 && d < 11);
	memcpy(pre, stack ? "enc" : "L", (size_t)k);
	while (d > 0)
		pre[k++] = digits[--d];
	pre[k++] = '.';
	pre[k] = 0;
}

const char *graph_op_name(const struct graph *g, int i, char buf[GRAPH_NAME])
{
	const struct gop *o = &g->ops[i];
	char pre[16];

	if (o->layer >= 0) {
		layer_prefix(pre, o->stack, o->layer);
		name3(buf, GRAPH_NAME, pre, o->base, NULL);
	} else {
		name3(buf, GRAPH_NAME, o->base, NULL, NULL);
	}
	return buf;
}

const char *graph_tensor_name(const struct graph *g, int t, char buf[GRAPH_NAME])
{
	char op[GRAPH_NAME];

	if (g->t[t].producer < 0) {  /* an input of the model ("ids") */
		name3(buf, GRAPH_NAME, g->t[t].what, NULL, NULL);
		return buf;
	}
	if (!g->t[t].what)
		return graph_op_name(g, g->t[t].producer, buf);
	name3(buf, GRAPH_NAME, graph_op_name(g, g->t[t].producer, op), ".", g->t[t].what);
	return buf;
}

int graph_same_name(const struct graph *g, int i, int j)
{
	const struct gop *x = &g->ops[i], *y = &g->ops[j];
	char a[GRAPH_NAME], b[GRAPH_NAME];

	if (x->layer != y->layer || (x->layer >= 0 && x->stack != y->stack))
		return 0;
	if (strcmp(x->base, y->base) == 0)
		return 1;
	/* names cut to GRAPH_NAME - 1 bytes may still agree */
	return strcmp(graph_op_name(g, i, a), graph_op_name(g, j, b)) == 0;
}

/* A new op reading in0..in2 (-1 = none), producing a tensor of elems x dsize. */
static int op(struct bld *b, int kind, const char *name, int in0, int in1, int in2,
	      double elems, int dsize)
{
	struct graph *g = b->g;
	struct gop *o;
	int ins[3] = {in0, in1, in2}, i, idx;

	if (vec_grow((void **)&g->ops, &g->capops, g->nops + 1, sizeof *g->ops))
		return -1;
	idx = g->nops++;
	o = &g->ops[idx];
	memset(o, 0, sizeof *o);
	o->base = name;
	o->kind = kind;
	o->stack = b->stack;
	o->layer = b->layer;
	o->unit = b->unit;
	o->module = b->module;
	o->out = -1;
	for (i = 0; i < 3; i++) {
		if (ins[i] < 0)
			continue;
		o->in[o->nin++] = ins[i];
		g->t[ins[i]].last_fwd_use = idx;
		o->io_elems += g->t[ins[i]].elems;
	}
	if (elems > 0) {
		int t = tensor(b, NULL, elems, dsize, idx);
		o = &g->ops[idx];  /* tensor() may not move ops, but keep it obvious */
		o->out = t;
		o->io_elems += elems;
	}
	return idx;
}

static int out(struct bld *b, int o)
{
	return b->g->ops[o].out;
}

static void save(struct bld *b, int o, int t)
{
	struct gop *p = &b->g->ops[o];
	int i;

	if (t < 0)
		return;
	for (i = 0; i < p->nsaved; i++)
		if (p->saved[i] == t)
			return;
	if (p->nsaved < GRAPH_MAX_SAVED)
		p->saved[p->nsaved++] = t;
	if (b->g->t[t].first_saver < 0 || b->g->t[t].first_saver > o)
		b->g->t[t].first_saver = o;
}

/* A tensor op o creates for its own backward (e.g. norm statistics, a mask). */
static void save_new(struct bld *b, int o, const char *what, double elems, int dsize)
{
	int t = tensor(b, what, elems, dsize, o);

	save(b, o, t);
}

/* A tensor op o makes, of elems elements in all (not per sample), that no
 * gradient flows into: an index or mask of the sequence. Returns it. */
static int made_fixed(struct bld *b, int o, const char *what, double elems, int dsize, int saved)
{
	int t = tensor(b, what, elems, dsize, o);

	if (t < 0)
		return -1;
	b->g->t[t].fixed = 1;
	b->g->t[t].nograd = 1;
	if (saved)
		save(b, o, t);
	return t;
}

/* The input a matmul saves: under autocast a cast copy to the compute dtype. */
static int cast_in(struct bld *b, int x, const char *name)
{
	int c;

	if (b->g->t[x].dsize == b->A)
		return x;
	c = op(b, OP_COPY, name, x, -1, -1, b->g->t[x].elems, b->A);
	return out(b, c);
}

/* y = x W (+ bias): k inputs per token, n outputs per token (per TP rank). */
static int linear(struct bld *b, const char *name, int x, double k, double n, int bias,
		  int tp_allreduce)
{
	int xin = cast_in(b, x, name), o;
	struct gop *p;

	o = op(b, OP_MATMUL, name, xin, -1, -1, b->S * n, b->A);
	p = &b->g->ops[o];
	p->m = b->S;
	p->k = k;
	p->n = n;
	/* column-parallel biases are split; a row-parallel bias is whole on every rank */
	p->params = k * n + (bias ? n : 0);
	p->rows = n;  /* nn.Linear's weight is (out, in) */
	p->flops_fwd = 2 * b->S * k * n;
	p->flops_bwd = 4 * b->S * k * n;
	p->tp_allreduce = tp_allreduce && b->o->tp > 1;
	save(b, o, xin);
	return out(b, o);
}

static int norm(struct bld *b, const char *name, int x)
{
	const struct model *m = b->m;
	double h = (double)m->hidden;
	int o;

	if (m->norm == NORM_LAYERNORM || !b->eager) {
		/* LayerNorm (or the runtime's norm): input, fp32 mean and rstd */
		int dsize = b->eager ? b->U : b->A;
		o = op(b, OP_NORM, name, x, -1, -1, b->S * h, dsize);
		b->g->ops[o].params = m->norm == NORM_LAYERNORM ? 2 * h : h;
		b->g->ops[o].rows = h;
		b->g->ops[o].flops_fwd = 8 * b->S * h;
		b->g->ops[o].flops_bwd = 16 * b->S * h;
		save(b, o, x);
		save_new(b, o, "stats", b->S * (m->norm == NORM_LAYERNORM ? 2 : 1), 4);
		return out(b, o);
	}
	/* Python RMSNorm (Llama, T5): x.to(fp32); pow(2).mean; x * rsqrt; weight * x.to(dtype) */
	{
		int x32 = x, ob;
		if (b->g->t[x].dsize != 4)
			x32 = out(b, op(b, OP_COPY, "norm_f32", x, -1, -1, b->S * h, 4));
		o = op(b, OP_NORM, name, x32, -1, -1, b->S * h, 4);
		b->g->ops[o].flops_fwd = 4 * b->S * h;
		b->g->ops[o].flops_bwd = 8 * b->S * h;
		save(b, o, x32);
		if (m->positions == POS_RELATIVE)  /* T5LayerNorm: x * rsqrt(var) takes x itself */
			save(b, o, x);
		save_new(b, o, "rsqrt", b->S, 4);
		if (b->old)  /* torch 1.13's MeanBackward1 keeps its input: the fp32 x^2 */
			save_new(b, o, "pow", b->S * h, 4);
		/* weight * hidden.to(input or weight dtype): a 16-bit model saves
		 * that cast, autocast's fp32 one the normalised tensor itself */
		x32 = out(b, o);
		if (b->U != 4)
			x32 = out(b, op(b, OP_COPY, "norm_cast", x32, -1, -1, b->S * h, b->U));
		ob = op(b, OP_MUL, "norm_w", x32, -1, -1, b->S * h, b->U);
		b->g->ops[ob].params = h;
		b->g->ops[ob].rows = h;
		save(b, ob, x32);
		return out(b, ob);
	}
}

static int dropout(struct bld *b, const char *name, int x)
{
	int o;

	if (b->o->dropout <= 0)
		return x;
	o = op(b, OP_DROPOUT, name, x, -1, -1, b->g->t[x].elems, b->g->t[x].dsize);
	save_new(b, o, "mask", b->g->t[x].elems, 1);
	return out(b, o);
}

/* The bmm operand of q, k or v: a copy in the compute dtype made contiguous
 * for bmm (a permuted view; repeat_kv's copy under grouped-query attention),
 * except a KV-cache copy already contiguous in that dtype. */
static int operand(struct bld *b, int x, const char *name, double elems, int cached)
{
	int o;

	if (cached && b->g->t[x].dsize == b->A && b->g->t[x].elems == elems)
		return x;
	/* the copies are made by matmul inside the attention function, so
	 * selective checkpointing recomputes them with the core */
	o = op(b, OP_COPY, name, x, -1, -1, elems, b->A);
	b->g->ops[o].attn_core = 1;
	return out(b, o);
}

/* The softmax and what follows it: the cast back to the compute dtype,
 * dropout (a 1-byte mask), and the product with v. */
static int softmax_pv(struct bld *b, int y, int mask, int vc, double Sq, double Sk)
{
	const struct model *m = b->m;
	double a = (double)(m->heads / b->o->tp), d = (double)m->head_dim;
	/* softmax in fp32: under autocast (its fp32 op list), and always in the
	 * Hugging Face Llama (softmax(..., dtype=torch.float32)) and transformers
	 * 4.26's T5 (softmax(scores.float())) */
	int softmax_bytes = b->eager && (b->o->autocast || m->positions == POS_ROTARY ||
					 (m->positions == POS_RELATIVE && b->old)) ? 4 : b->A;
	int sm, ctx;

	sm = op(b, OP_SOFTMAX, "softmax", y, mask, -1, a * Sq * Sk, softmax_bytes);
	b->g->ops[sm].flops_fwd = 5 * a * Sq * Sk;
	b->g->ops[sm].flops_bwd = 3 * a * Sq * Sk;
	b->g->ops[sm].attn_core = 1;
	save(b, sm, out(b, sm));
	y = out(b, sm);
	if (b->g->t[y].dsize != b->A) {  /* .to(query.dtype) / .type_as(scores) */
		y = out(b, op(b, OP_COPY, "softmax_cast", y, -1, -1, a * Sq * Sk, b->A));
		b->g->ops[b->g->nops - 1].attn_core = 1;
	}
	if (b->o->dropout > 0) {
		int dr = op(b, OP_DROPOUT, "attn_drop", y, -1, -1, a * Sq * Sk, b->A);
		save_new(b, dr, "mask", a * Sq * Sk, 1);
		b->g->ops[dr].attn_core = 1;
		b->g->ops[b->g->nops - 1].attn_core = 1;
		y = out(b, dr);
	}
	ctx = op(b, OP_ATTN_CTX, "ctx", y, vc, -1, Sq * a * d, b->A);
	b->g->ops[ctx].flops_fwd = 2 * a * Sq * Sk * d;
	b->g->ops[ctx].flops_bwd = 4 * a * Sq * Sk * d;
	b->g->ops[ctx].attn_core = 1;
	save(b, ctx, y);
	save(b, ctx, vc);
	return out(b, ctx);
}

/* Attention's eager core over q, k, v (the projections, or the KV cache's
 * copies when cached): the operands for bmm, QK^T (plus the position bias
 * bias, -1 none), the additive mask (-1 none), softmax, dropout and PV, then
 * the merge of the heads. Returns the context tensor. */
static int eager_core(struct bld *b, int q, int k, int v, double Sq, double Sk, int cached,
		      int bias, int mask)
{
	const struct model *m = b->m;
	int tp = b->o->tp;
	double a = (double)(m->heads / tp), d = (double)m->head_dim;
	double hq = a * d, hkv = (double)(m->kv_heads / tp) * d;
	int qc = q, kc = k, vc = v, sc, y;

	if (b->eager) {
		double kv_elems = m->kv_heads < m->heads ? Sk * hq : Sk * hkv;
		qc = operand(b, q, "q_bmm", Sq * hq, 0);
		kc = operand(b, k, "k_bmm", kv_elems, cached);
		vc = operand(b, v, "v_bmm", kv_elems, cached);
	}
	sc = op(b, OP_ATTN_SCORE, "scores", qc, kc, bias, a * Sq * Sk, b->A);
	b->g->ops[sc].flops_fwd = 2 * a * Sq * Sk * d;
	b->g->ops[sc].flops_bwd = 4 * a * Sq * Sk * d;
	b->g->ops[sc].attn_core = 1;
	save(b, sc, qc);
	save(b, sc, kc);
	if (b->eager && b->old && m->family == FAM_DECODER && m->positions == POS_LEARNED)
		/* transformers 4.26 GPT-2: bias[..].to(torch.bool), a copy of the
		 * causal buffer's slice that torch.where saves */
		made_fixed(b, sc, "causal", Sq * Sk, 1, 1);
	y = out(b, sc);
	if (b->eager && m->positions == POS_RELATIVE && b->old && b->A != 4) {
		/* T5 (4.26): softmax(scores.float()) — an fp32 copy of the scores */
		y = out(b, op(b, OP_COPY, "scores_f32", y, -1, -1, a * Sq * Sk, 4));
		b->g->ops[b->g->nops - 1].attn_core = 1;
	}
	y = softmax_pv(b, y, mask, vc, Sq, Sk);
	if (b->eager)  /* transpose(1, 2).contiguous() before the output projection */
		y = out(b, op(b, OP_COPY, "merge_heads", y, -1, -1, Sq * hq, b->A));
	return y;
}

static double round_up(double x, double m)
{
	return ceil(x / m) * m;
}

/* A fused attention kernel over q, k, v (FlashAttention-2/3, the memory-
 * efficient kernel, cuDNN), one op:
 *  - FLOPs: forward QK^T and PV, 4·a·Sq·Sk·d; backward recomputes QK^T and runs
 *    dV, dP, dQ, dK, 10·a·Sq·Sk·d (Dao 2023, arXiv 2307.08691, §3.1-3.2: 5
 *    products in backward against 2 in forward). Causal kernels skip the tiles
 *    above the diagonal and compute the diagonal ones whole: (n + 1) / (2n) of
 *    the matrix for n tiles of 128 rows (FlashAttention-2's kBlockM);
 *  - saved: q, k, v and the output (what _scaled_dot_product_flash_attention's
 *    backward takes), the fp32 log-sum-exp (B, heads, Sq) (flash_api.cpp
 *    mha_fwd: softmax_lse; the memory-efficient kernel pads Sq to 32); the
 *    dropout mask is regenerated from the saved Philox state (16 bytes, left
 *    out);
 *  - backward workspace (flash_api.cpp mha_bwd): dq_accum fp32 (B, Sq rounded
 *    to 128, heads, d rounded to 32) and softmax_d fp32 (B, heads, Sq rounded
 *    to 128); with one fused q/k/v projection, dq, dk and dv are separate
 *    tensors until SplitBackward concatenates them into its gradient;
 *  - the output is (B, S, heads, d) in memory, so the heads merge without a
 *    copy. */
static int fused_core(struct bld *b, int q, int k, int v, double Sq, double Sk, int causal)
{
	const struct model *m = b->m;
	double a = (double)(m->heads / b->o->tp), d = (double)m->head_dim, hq = a * d;
	double n = ceil(Sq / 128), frac = causal && Sq == Sk ? (n + 1) / (2 * n) : 1;
	double lse_rows = b->o->attn == AK_MEM_EFFICIENT ? round_up(Sq, 32) : Sq;
	int o;
	struct gop *p;

	/* autocast casts the kernel's fp32 inputs (rotary's output, an fp32 KV
	 * cache) to the compute dtype; the casts are what the kernel saves */
	if (b->g->t[q].dsize != b->A)
		q = cast_in(b, q, "q_cast");
	if (b->g->t[k].dsize != b->A)
		k = cast_in(b, k, "k_cast");
	if (b->g->t[v].dsize != b->A)
		v = cast_in(b, v, "v_cast");
	o = op(b, OP_ATTN, "attn", q, k, v, Sq * hq, b->A);
	p = &b->g->ops[o];

	p->m = Sq;
	p->n = Sk;
	p->k = d;
	p->flops_fwd = 4 * a * Sq * Sk * d * frac;
	p->flops_bwd = 10 * a * Sq * Sk * d * frac;
	p->flops_model = 2 * a * Sq * Sk * d;
	p->attn_core = 1;
	p->attn = b->o->attn;
	p->bwd_ws = 4 * (round_up(Sq, 128) * a * round_up(d, 32) + a * round_up(Sq, 128));
	if (q == k && k == v)
		p->bwd_ws += graph_tensor_bytes(b->g, q);
	save(b, o, q);
	save(b, o, k);
	save(b, o, v);
	save(b, o, out(b, o));
	save_new(b, o, "lse", a * lse_rows, 4);
	return out(b, o);
}

/* The rotary embedding of q or k (Llama): (x * cos) + (rotate_half(x) * sin)
 * with cos and sin in the dtype of the hidden states, so under autocast the
 * result is fp32 (transformers' LlamaRotaryEmbedding returns cos/sin in x's
 * dtype, and x is the fp32 residual stream). Saves nothing of x's size. */
static int rope(struct bld *b, int x, const char *name)
{
	if (!b->eager || b->m->positions != POS_ROTARY)
		return x;
	return out(b, op(b, OP_MUL, name, x, -1, -1, b->g->t[x].elems, b->U));
}

/* transformers' KV cache (DynamicLayer.update: torch.cat onto an empty tensor
 * of the key's dtype): copies of k and v held to the end of the step. */
static int cache_copy(struct bld *b, int x, const char *name, double elems, int dsize)
{
	int t = out(b, op(b, OP_COPY, name, x, -1, -1, elems, dsize));

	b->g->t[t].held = 1;
	return t;
}

/* T5's position bias of the stack's first self-attention (its relative
 * buckets, an int64 (Sq, Sk) index tensor the embedding saves) or the zero
 * bias of its first cross-attention; one (1, heads, Sq, Sk) fp32 tensor every
 * layer of the stack adds to its scores. */
static int position_bias(struct bld *b, int cross, double Sq, double Sk)
{
	const struct model *m = b->m;
	double a = (double)(m->heads / b->o->tp);
	int o, t;

	if (m->positions != POS_RELATIVE || b->layer != 0)
		return cross ? b->xbias : b->pbias;
	if (!b->eager) {  /* the runtime's graph: the table only */
		if (!cross) {
			o = op(b, OP_EMBED, "rel_bias", -1, -1, -1, 0, 0);
			b->g->ops[o].params = (double)m->relative_buckets * a;
			b->g->ops[o].rows = (double)m->relative_buckets;
		}
		return -1;
	}
	o = op(b, cross ? OP_COPY : OP_EMBED, cross ? "xpos_bias" : "rel_bias", -1, -1, -1, a * Sq * Sk, 4);
	t = out(b, o);
	b->g->t[t].fixed = 1;
	b->g->t[t].nograd = cross;
	if (!cross) {
		b->g->ops[o].params = (double)m->relative_buckets * a;
		b->g->ops[o].rows = (double)m->relative_buckets;
		made_fixed(b, o, "buckets", Sq * Sk, 8, 1);
	}
	if (b->old) {  /* 4.26 adds the extended attention mask: (B, heads, Sq, Sk) */
		t = out(b, op(b, OP_ADD, cross ? "xbias_mask" : "bias_mask", t, -1, -1, a * Sq * Sk, b->U));
		b->g->t[t].nograd = cross;
	}
	return cross ? (b->xbias = t) : (b->pbias = t);
}

/* q, k and v of the current stack's attention (kv_src = -1: self). */
static void qkv(struct bld *b, int x, int kv_src, double Sk, int *q, int *k, int *v)
{
	const struct model *m = b->m;
	double h = (double)m->hidden, hq = (double)(m->heads / b->o->tp) * m->head_dim;
	double hkv = (double)(m->kv_heads / b->o->tp) * m->head_dim, Sq = b->S;

	if (kv_src < 0 && !b->eager) {
		/* runtime: one fused qkv projection, q/k/v are views of its output */
		*q = *k = *v = linear(b, "qkv", x, h, hq + 2 * hkv, m->qkv_bias, 0);
	} else if (kv_src < 0 && m->family == FAM_DECODER && m->positions == POS_LEARNED) {
		/* GPT-2's Conv1D c_attn: one product, q/k/v are views */
		*q = *k = *v = linear(b, "c_attn", x, h, hq + 2 * hkv, m->qkv_bias, 0);
	} else {
		*q = linear(b, "q", x, h, hq, m->qkv_bias, 0);
		b->S = Sk;
		*k = linear(b, "k", kv_src < 0 ? x : kv_src, h, hkv, m->qkv_bias, 0);
		*v = linear(b, "v", kv_src < 0 ? x : kv_src, h, hkv, m->qkv_bias, 0);
		b->S = Sq;
		*q = rope(b, *q, "q_rope");
		*k = rope(b, *k, "k_rope");
	}
}

/* Self- or cross-attention of the current stack; kv_src = -1 for self. */
static int attention(struct bld *b, int x, int kv_src, double Sk, int causal)
{
	const struct model *m = b->m;
	double h = (double)m->hidden, hq = (double)(m->heads / b->o->tp) * m->head_dim;
	double hkv = (double)(m->kv_heads / b->o->tp) * m->head_dim;
	double Sq = b->S, saveS = b->S;
	int decoder = m->family == FAM_DECODER || (m->family == FAM_ENCODER_DECODER && b->stack == 0);
	int cached = b->eager && decoder && b->o->kv_cache && !b->old;
	int q, k, v, y, bias;

	b->module = kv_src < 0 ? MOD_ATTN : MOD_XATTN;
	qkv(b, x, kv_src, Sk, &q, &k, &v);
	if (cached) {  /* transformers 5: the cache's copies are what attention reads */
		k = cache_copy(b, k, "k_cache", Sk * hkv, b->g->t[k].dsize);
		v = cache_copy(b, v, "v_cache", Sk * hkv, b->g->t[k].dsize);
	} else if (b->eager && decoder && b->o->kv_cache) {
		/* transformers 4.26: present = (key, value), views of the products */
		b->g->t[k].held = 1;
		b->g->t[v].held = 1;
	}
	bias = position_bias(b, kv_src >= 0, Sq, Sk);
	if (b->o->attn != AK_EAGER)
		y = fused_core(b, q, k, v, Sq, Sk, causal);
	else
		y = eager_core(b, q, k, v, Sq, Sk, cached, bias, kv_src < 0 ? b->mask : -1);
	y = linear(b, "attn_out", y, hq, h, m->out_bias, 1);
	b->S = saveS;
	b->module = MOD_NONE;
	return y;
}

static int mlp(struct bld *b, int x)
{
	const struct model *m = b->m;
	double h = (double)m->hidden, f = (double)(m->ffn / b->o->tp), S = b->S;
	int gated = m->activation == ACT_SWIGLU || m->activation == ACT_GATED_GELU;
	int up, gate, act, y;

	b->module = MOD_MLP;
	if (gated) {
		gate = linear(b, "gate", x, h, f, m->mlp_bias, 0);
		up = linear(b, "up", x, h, f, m->mlp_bias, 0);
		act = op(b, OP_ACT, m->activation == ACT_SWIGLU ? "silu" : "gelu", gate, -1, -1, S * f, b->A);
		b->g->ops[act].flops_fwd = 8 * S * f;
		b->g->ops[act].flops_bwd = 16 * S * f;
		save(b, act, gate);
		y = op(b, OP_MUL, "gate_mul", out(b, act), up, -1, S * f, b->A);
		save(b, y, out(b, act));
		save(b, y, up);
		y = out(b, y);
	} else {
		up = linear(b, "fc1", x, h, f, m->mlp_bias, 0);
		act = op(b, OP_ACT, m->activation == ACT_RELU ? "relu" : "gelu", up, -1, -1, S * f, b->A);
		b->g->ops[act].flops_fwd = (m->activation == ACT_RELU ? 1 : 8) * S * f;
		b->g->ops[act].flops_bwd = (m->activation == ACT_RELU ? 1 : 16) * S * f;
		if (m->activation == ACT_RELU) {
			save(b, act, out(b, act));
		} else if (b->eager && m->activation == ACT_GELU_NEW) {
			/* gelu_new: 0.5*x*(1+tanh(c*(x+0.044715*x^3))); pow is on
			 * autocast's fp32 list, so under autocast the x it saves is
			 * an fp32 copy (and x itself is not saved) */
			if (b->U != b->A)
				save_new(b, act, "x_f32", S * f, b->U);
			else
				save(b, act, up);
			save_new(b, act, "tanh", S * f, b->U);
			save_new(b, act, "1p_tanh", S * f, b->U);
			save_new(b, act, "half_x", S * f, b->A);
			b->g->t[out(b, act)].dsize = b->U;
		} else {
			save(b, act, up);
		}
		y = out(b, act);
		if (m->family == FAM_ENCODER_DECODER)  /* T5DenseActDense: dropout on the hidden */
			y = dropout(b, "ff_drop", y);
	}
	y = linear(b, "fc2", y, f, h, m->mlp_bias, 1);
	b->module = MOD_NONE;
	return y;
}

static int add(struct bld *b, const char *name, int x, int y)
{
	int dsize = b->g->t[x].dsize > b->g->t[y].dsize ? b->g->t[x].dsize : b->g->t[y].dsize;
	int o = op(b, OP_ADD, name, x, y, -1, b->g->t[x].elems, dsize);
	return out(b, o);
}

static int mark_block(struct bld *b, int x)
{
	struct graph *g = b->g;
	int i = g->nblocks, cap = g->capblocks;

	if (vec_grow((void **)&g->block_first, &cap, i + 1, sizeof *g->block_first) ||
	    vec_grow((void **)&g->block_in, &g->capblocks, i + 1, sizeof *g->block_in))
		return -1;
	g->block_first[i] = g->nops;
	g->block_in[i] = x;
	g->nblocks++;
	return i;
}

/* Pre-norm block (GPT, Llama, T5): x + attn(norm(x)); x + mlp(norm(x)). */
static int prenorm_block(struct bld *b, int x, int enc_out, double S_enc, int causal)
{
	int y;

	y = attention(b, norm(b, "norm1", x), -1, b->S, causal);
	x = add(b, "res1", x, dropout(b, "drop1", y));
	if (enc_out >= 0) {
		y = attention(b, norm(b, "norm_x", x), enc_out, S_enc, 0);
		x = add(b, "res_x", x, dropout(b, "drop_x", y));
	}
	y = mlp(b, norm(b, "norm2", x));
	return add(b, "res2", x, dropout(b, "drop2", y));
}

/* Post-norm block (BERT): norm(x + attn(x)); norm(x + mlp(x)). */
static int postnorm_block(struct bld *b, int x)
{
	int y = attention(b, x, -1, b->S, 0);

	x = norm(b, "norm1", add(b, "res1", x, dropout(b, "drop1", y)));
	y = mlp(b, x);
	return norm(b, "norm2", add(b, "res2", x, dropout(b, "drop2", y)));
}

static int embed(struct bld *b, int ids, int stack)
{
	const struct model *m = b->m;
	double h = (double)m->hidden;
	int o, x;

	b->layer = -1;
	b->unit = 0;
	o = op(b, OP_EMBED, stack ? "enc.embed" : "embed", ids, -1, -1, b->S * h, b->U);
	/* token table once (T5's stacks share it; the encoder is built first),
	 * split over TP ranks by vocabulary (Megatron's VocabParallelEmbedding) */
	b->g->ops[o].params = m->family != FAM_ENCODER_DECODER || stack == 1
		? (double)m->vocab * h / b->o->tp : 0;
	b->g->ops[o].tied = b->g->ops[o].params == 0;  /* T5's decoder reads the shared table */
	b->g->ops[o].rows = (double)m->vocab / b->o->tp;
	save(b, o, ids);
	x = out(b, o);
	if (m->positions == POS_LEARNED || m->type_vocab) {
		int p = op(b, OP_ADD, "pos_embed", x, -1, -1, b->S * h, b->U);
		b->g->ops[p].params = (m->positions == POS_LEARNED ? (double)m->max_positions * h : 0) +
			(double)m->type_vocab * h;
		b->g->ops[p].rows = b->g->ops[p].params / h;
		x = out(b, p);
	}
	if (m->embed_norm)
		x = norm(b, "embed_norm", x);
	return dropout(b, stack ? "enc.embed_drop" : "embed_drop", x);
}

/* transformers 5's additive causal mask for eager attention (create_causal_mask:
 * (B, 1, S, S) in the hidden states' dtype), made once per stack and read by
 * every layer; SDPA and FlashAttention take is_causal instead. transformers
 * 4.26's GPT-2 slices its causal buffer in each layer instead (eager_core). */
static int causal_mask(struct bld *b, int stack)
{
	const struct model *m = b->m;
	int t;

	if (!b->eager || b->old || b->o->attn != AK_EAGER ||
	    !(m->family == FAM_DECODER || (m->family == FAM_ENCODER_DECODER && stack == 0)))
		return -1;
	t = out(b, op(b, OP_COPY, "causal_mask", -1, -1, -1, b->S * b->S, b->U));
	if (t >= 0)
		b->g->t[t].nograd = 1;
	return t;
}

/* ---- repeated blocks, copied --------------------------------------------------------------- */

/* One block as the builder left it (its ops and tensors, before the next block
 * read anything of it), the range it took, its input and output, and the
 * builder's state after it. */
struct block_shot {
	struct gop *ops;
	struct gtensor *t;
	int op0, nops, t0, nt;
	int in, out;
	int module, mask, pbias, xbias;
	double S;
};

/* A block's references to tensors: relative ones (its own tensors, the
 * previous block's output) move by the block's tensors from block to block;
 * absolute ones (the stack's causal mask, T5's position biases built in its
 * first block, the encoder's output) stay. */
struct block_refs {
	unsigned char *rel;     /* (nops x GRAPH_REFS) 1: relative */
	int cap;
};
#define GRAPH_REFS (GRAPH_MAX_IN + 1 + GRAPH_MAX_SAVED)

static int shot_take(struct block_shot *k, const struct bld *b, int op0, int t0, int in, int out)
{
	const struct graph *g = b->g;

	k->op0 = op0;
	k->nops = g->nops - op0;
	k->t0 = t0;
	k->nt = g->nt - t0;
	k->in = in;
	k->out = out;
	k->module = b->module;
	k->mask = b->mask;
	k->pbias = b->pbias;
	k->xbias = b->xbias;
	k->S = b->S;
	k->ops = malloc((size_t)(k->nops > 0 ? k->nops : 1) * sizeof *k->ops);
	k->t = malloc((size_t)(k->nt > 0 ? k->nt : 1) * sizeof *k->t);
	if (!k->ops || !k->t)
		return -1;
	memcpy(k->ops, g->ops + op0, (size_t)k->nops * sizeof *k->ops);
	memcpy(k->t, g->t + t0, (size_t)k->nt * sizeof *k->t);
	return 0;
}

static void shot_free(struct block_shot *k)
{
	free(k->ops);
	free(k->t);
	k->ops = NULL;
	k->t = NULL;
}

/* The references of op o, slot by slot (GRAPH_REFS: inputs, output, saved);
 * -1 where the slot is unused. */
static void op_refs(const struct gop *o, int *r)
{
	int k;

	for (k = 0; k < GRAPH_MAX_IN; k++)
		r[k] = k < o->nin ? o->in[k] : -1;
	r[GRAPH_MAX_IN] = o->out;
	for (k = 0; k < GRAPH_MAX_SAVED; k++)
		r[GRAPH_MAX_IN + 1 + k] = k < o->nsaved ? o->saved[k] : -1;
}

static void op_set_refs(struct gop *o, const int *r)
{
	int k;

	for (k = 0; k < o->nin; k++)
		o->in[k] = r[k];
	o->out = r[GRAPH_MAX_IN];
	for (k = 0; k < o->nsaved; k++)
		o->saved[k] = r[GRAPH_MAX_IN + 1 + k];
}

/* Op index x of a block, -1 kept, moved by d ops. */
static inline int moved(int x, int d)
{
	return x >= 0 ? x + d : x;
}

/* Whether block y is block x one block on: the same ops and tensors, every
 * op and tensor index moved by x's counts, each reference relative (moved)
 * or absolute (the same, made before x), and the builder in the same state
 * after each. Fills f->rel with which references are relative. */
static int block_next(const struct block_shot *x, const struct block_shot *y, struct block_refs *f)
{
	int dop = x->nops, dt = x->nt, j, k, r1[GRAPH_REFS], r2[GRAPH_REFS];
	struct gop o;
	struct gtensor t;

	if (y->nops != x->nops || y->nt != x->nt || y->op0 != x->op0 + dop || y->t0 != x->t0 + dt ||
	    y->in != x->in + dt || y->out != x->out + dt || y->module != x->module || y->mask != x->mask ||
	    y->pbias != x->pbias || y->xbias != x->xbias || memcmp(&y->S, &x->S, sizeof x->S))
		return 0;
	if (x->in < x->t0 - dt || x->in >= x->t0)  /* x's input: the block before's output */
		return 0;
	if (vec_grow((void **)&f->rel, &f->cap, dop * GRAPH_REFS + 1, 1))
		return 0;
	for (j = 0; j < dop; j++) {
		op_refs(&x->ops[j], r1);
		op_refs(&y->ops[j], r2);
		for (k = 0; k < GRAPH_REFS; k++) {
			if (r1[k] >= x->t0 - dt && r2[k] == r1[k] + dt)
				f->rel[j * GRAPH_REFS + k] = 1;
			else if (r2[k] == r1[k] && r1[k] < x->t0)
				f->rel[j * GRAPH_REFS + k] = 0;
			else
				return 0;
		}
		memcpy(&o, &x->ops[j], sizeof o);
		o.layer = y->ops[j].layer;
		o.unit = y->ops[j].unit;
		op_set_refs(&o, r2);
		if (x->ops[j].layer < 0 || y->ops[j].layer != x->ops[j].layer + 1 ||
		    y->ops[j].unit != x->ops[j].unit + 1 || memcmp(&o, &y->ops[j], sizeof o))
			return 0;
	}
	for (j = 0; j < dt; j++) {
		memcpy(&t, &x->t[j], sizeof t);
		t.producer = moved(t.producer, dop);
		t.last_fwd_use = moved(t.last_fwd_use, dop);
		t.first_saver = moved(t.first_saver, dop);
		if (x->t[j].producer < x->op0 || memcmp(&t, &y->t[j], sizeof t))
			return 0;
	}
	return 1;
}

/* Block n of the stack as block shot y moved n - layer(y) blocks on (y one
 * block on from the one before it: block_next), its reads and saves of
 * tensors before it taken as the builder takes them (op, save). Returns its
 * output, or -1 (out of memory). */
static int block_copy(struct bld *b, const struct block_shot *y, const struct block_refs *f, int x, int n)
{
	struct graph *g = b->g;
	int s = n - y->ops[0].layer, dop = s * y->nops, dt = s * y->nt, j, k, idx, t0, sv;

	if (mark_block(b, x) < 0 || vec_grow((void **)&g->ops, &g->capops, g->nops + y->nops, sizeof *g->ops) ||
	    vec_grow((void **)&g->t, &g->capt, g->nt + y->nt, sizeof *g->t))
		return -1;
	g->copied++;
	t0 = g->nt;
	for (j = 0; j < y->nt; j++) {
		struct gtensor *t = &g->t[g->nt++];
		*t = y->t[j];
		t->producer = moved(t->producer, dop);
		t->last_fwd_use = moved(t->last_fwd_use, dop);
		t->first_saver = moved(t->first_saver, dop);
	}
	for (j = 0; j < y->nops; j++) {
		struct gop *o = &g->ops[idx = g->nops++];
		const unsigned char *rel = f->rel + j * GRAPH_REFS;  /* op_refs' slots */
		*o = y->ops[j];
		o->layer = n;
		o->unit += s;
		for (k = 0; k < o->nin; k++) {
			o->in[k] += rel[k] ? dt : 0;
			if (o->in[k] < t0)  /* a read of a tensor before the block (op) */
				g->t[o->in[k]].last_fwd_use = idx;
		}
		o->out = rel[GRAPH_MAX_IN] ? moved(o->out, dt) : o->out;
		for (k = 0; k < o->nsaved; k++) {
			sv = o->saved[k] += rel[GRAPH_MAX_IN + 1 + k] ? dt : 0;
			if (sv < t0 && (g->t[sv].first_saver < 0 || g->t[sv].first_saver > idx))  /* a save of one (save) */
				g->t[sv].first_saver = idx;
		}
	}
	return y->out + dt;
}

/* The blocks of a stack. From the fourth on, a block is a copy of the third
 * moved on (block_copy) when the third is the second moved on (block_next):
 * the builder reads nothing of a block's index but whether it is the first
 * (position_bias), so each later block would be built the same. graph_build_whole
 * builds every one (tests/test_graph.c compares the two on every model). */
static int stack_blocks(struct bld *b, int x, long nlayers, int stack, int enc_out, double S_enc)
{
	struct block_shot k[2] = {{0}};
	struct block_refs f = {0};
	long l;
	int op0, t0, in, copy = 0, rc = 0;

	b->pbias = b->xbias = -1;
	b->mask = causal_mask(b, stack);
	for (l = 0; l < nlayers; l++) {
		b->stack = stack;
		b->layer = (int)l;
		if (copy) {
			if ((x = block_copy(b, &k[1], &f, x, (int)l)) < 0)
				goto fail;
			continue;
		}
		op0 = b->g->nops;
		t0 = b->g->nt;
		in = x;
		if (mark_block(b, x) < 0)
			goto fail;
		b->unit = b->g->nblocks;
		if (b->m->family == FAM_ENCODER)
			x = postnorm_block(b, x);
		else
			x = prenorm_block(b, x, enc_out, S_enc, stack == 0);
		if (x < 0 || b->whole || l < 1 || l > 2 || !b->g->ops || !b->g->t)
			continue;
		if (shot_take(&k[l - 1], b, op0, t0, in, x))
			goto fail;
		copy = l == 2 && block_next(&k[0], &k[1], &f);
		/* room for the copies at once: one realloc, not one per doubling */
		if (copy && (vec_grow((void **)&b->g->ops, &b->g->capops, b->g->nops + (int)(nlayers - 3) * k[1].nops,
				      sizeof *b->g->ops) ||
			     vec_grow((void **)&b->g->t, &b->g->capt, b->g->nt + (int)(nlayers - 3) * k[1].nt,
				      sizeof *b->g->t)))
			goto fail;
	}
	if (copy && b->g->nalike < 2) {  /* the second block on: one block moved on */
		b->g->alike[b->g->nalike][0] = b->g->nblocks - (int)nlayers + 1;
		b->g->alike[b->g->nalike++][1] = b->g->nblocks;
	}
	b->layer = -1;
	b->unit = 0;
	if (b->m->final_norm && x >= 0) {
		x = norm(b, stack ? "enc.final_norm" : "final_norm", x);
		if (b->m->family == FAM_ENCODER_DECODER)
			x = dropout(b, stack ? "enc.final_drop" : "final_drop", x);
	}
	rc = x;
out:
	shot_free(&k[0]);
	shot_free(&k[1]);
	free(f.rel);
	return rc;
fail:
	rc = -1;
	goto out;
}

/* Hugging Face's language-model loss over the logits, as PyTorch runs it:
 *  - transformers 4.26's decoders shift the logits: logits[..., :-1, :]
 *    .contiguous(), a copy in the logits' dtype; transformers 5 pads and shifts
 *    the labels instead (loss_utils.py, ForCausalLMLoss);
 *  - 16-bit logits are copied to fp32 by transformers 5's causal-LM loss
 *    (logits.float()) and by autocast (cross_entropy is on its fp32 list); T5's
 *    and BERT's CrossEntropyLoss in a 16-bit model without autocast (FSDP's
 *    MixedPrecision) runs in 16 bits;
 *  - F.cross_entropy is log_softmax, which saves its fp32 output, then
 *    nll_loss. In backward nll_loss_backward makes a gradient of the
 *    log-probabilities' size (zeros, then a scatter), and log_softmax_backward
 *    makes its input's gradient while that one and the log-probabilities are
 *    still alive (aten/src/ATen/native/LossNLL.cpp, SoftMax.cpp). */
static void loss_eager(struct bld *b, int logits)
{
	const struct model *m = b->m;
	double V = (double)m->vocab / b->o->tp, S = b->S, rows = S;
	int x = logits, lsm;

	if (b->old && m->family == FAM_DECODER) {
		rows = S - 1;
		x = out(b, op(b, OP_COPY, "shift_logits", x, -1, -1, rows * V, b->g->t[x].dsize));
	}
	if (b->g->t[x].dsize != 4 && (b->o->autocast || (!b->old && m->family == FAM_DECODER)))
		x = out(b, op(b, OP_COPY, "logits_f32", x, -1, -1, rows * V, 4));
	lsm = op(b, OP_SOFTMAX, "log_softmax", x, -1, -1, rows * V, b->g->t[x].dsize);
	b->g->ops[lsm].flops_fwd = 5 * S * V;
	b->g->ops[lsm].flops_bwd = 3 * S * V;
	save(b, lsm, out(b, lsm));
	op(b, OP_LOSS, "nll_loss", out(b, lsm), -1, -1, 0, 0);
}

/* BertForSequenceClassification's head: the pooler on the first token (dense +
 * tanh), dropout and a num_labels-way classifier, cross-entropy over the labels. */
static void classifier_and_loss(struct bld *b, int x)
{
	const struct model *m = b->m;
	double h = (double)m->hidden, S = b->S, L = (double)m->num_labels;
	int o;

	b->S = 1;
	x = linear(b, "pooler", x, h, h, 1, 0);
	x = dropout(b, "cls_drop", x);
	x = linear(b, "classifier", x, h, L, 1, 0);
	o = op(b, OP_LOSS, "cross_entropy", x, -1, -1, L, b->eager ? 4 : b->A);
	b->g->ops[o].flops_fwd = 5 * L;
	b->g->ops[o].flops_bwd = 3 * L;
	save(b, o, out(b, o));
	b->S = S;
}

/* LM head and cross-entropy over S positions (Megatron splits the vocabulary). */
static void head_and_loss(struct bld *b, int x)
{
	const struct model *m = b->m;
	double V = (double)m->vocab / b->o->tp, h = (double)m->hidden, S = b->S;
	int logits, lsm, tied = m->tied_embeddings, pooled = -1;
	int o;

	if (b->eager)  /* last_hidden_state, referenced until the forward returns */
		b->g->t[x].fwd_held = 1;
	if (m->family == FAM_ENCODER) {
		/* BertModel's pooler (dense + tanh on the first token) runs before
		 * the heads; the NSP classifier after the MLM decoder, the losses
		 * last: autograd's backward takes the nodes made last first */
		b->S = 1;
		pooled = linear(b, "pooler", x, h, h, 1, 0);
		b->S = S;
		/* BertForPreTraining's MLM transform: dense + gelu + LayerNorm */
		x = linear(b, "mlm_dense", x, h, h, 1, 0);
		o = op(b, OP_ACT, "mlm_gelu", x, -1, -1, S * h, b->A);
		save(b, o, x);
		x = norm(b, "mlm_norm", out(b, o));
	}
	logits = linear(b, "lm_head", x, h, V, m->lm_head_bias || m->family == FAM_ENCODER, 0);
	o = b->g->nops - 1;
	if (tied) {  /* the weight is the token embedding's */
		b->g->ops[o].params = (m->lm_head_bias || m->family == FAM_ENCODER) ? V : 0;
		b->g->ops[o].rows = 0;  /* its one tensor is the bias */
		b->g->ops[o].tied = 1;
	}
	b->g->t[logits].held = b->eager;  /* returned in the model output */
	if (m->family == FAM_ENCODER) {  /* NSP: the 2-way classifier of the pooled token */
		b->S = 1;
		linear(b, "nsp", pooled, h, 2, 1, 0);
		b->S = S;
	} else if (m->pooler) {
		b->g->ops[o].params += h * h + h;
	}
	if (b->eager) {
		loss_eager(b, logits);
	} else {
		lsm = op(b, OP_LOSS, "cross_entropy", logits, -1, -1, S * V, b->A);
		b->g->ops[lsm].flops_fwd = 5 * S * V;
		b->g->ops[lsm].flops_bwd = 3 * S * V;
		save(b, lsm, out(b, lsm));  /* log_softmax output */
	}
}

double graph_param_count(const struct model *m)
{
	double h = (double)m->hidden, hq = (double)(m->heads * m->head_dim);
	double hkv = (double)(m->kv_heads * m->head_dim), f = (double)m->ffn;
	double nrm = m->norm == NORM_LAYERNORM ? 2 * h : h;
	double attn = h * hq + 2 * h * hkv + hq * h +
		(m->qkv_bias ? hq + 2 * hkv : 0) + (m->out_bias ? h : 0);
	double cross = 2 * h * hq + 2 * h * hq + (m->qkv_bias ? 3 * hq : 0) + (m->out_bias ? h : 0);
	int gated = m->activation == ACT_SWIGLU || m->activation == ACT_GATED_GELU;
	double mlp = (gated ? 3 : 2) * h * f + (m->mlp_bias ? (gated ? 2 * f : f) + h : 0);
	double p = (double)m->vocab * h, stacks = 1;

	if (m->positions == POS_LEARNED)
		p += (double)m->max_positions * h;
	p += (double)m->type_vocab * h;
	if (m->embed_norm)
		p += nrm;
	if (m->family == FAM_ENCODER_DECODER) {
		stacks = 2;
		p += (double)m->encoder_layers * (2 * nrm + attn + mlp);
		p += (double)m->layers * (3 * nrm + attn + cross + mlp);
	} else {
		p += (double)m->layers * (2 * nrm + attn + mlp);
	}
	if (m->positions == POS_RELATIVE)
		p += stacks * (double)m->relative_buckets * (double)m->heads;
	if (m->final_norm)
		p += stacks * nrm;
	if (!m->tied_embeddings)
		p += (double)m->vocab * h;
	if (m->lm_head_bias)
		p += (double)m->vocab;
	if (m->pooler)
		p += h * h + h;
	if (m->num_labels > 0)  /* the classifier of a sequence-classification head */
		p += h * (double)m->num_labels + (double)m->num_labels;
	return p;
}

/* ---- ops that repeat (graph.h: same) ------------------------------------------- */

static int same_bits(double x, double y)
{
	return memcmp(&x, &y, sizeof x) == 0;
}

/* Tensors a and b (or none, -1) of the same size: elements and bytes each. */
static int same_tensor(const struct graph *g, int a, int b)
{
	if (a < 0 || b < 0)
		return a == b;
	return same_bits(g->t[a].elems, g->t[b].elems) && g->t[a].dsize == g->t[b].dsize;
}

/* Whether ops a and b do the same on the same sizes (the bits of every
 * number: nothing computed from them can tell them apart). */
static int same_op(const struct graph *g, const struct gop *a, const struct gop *b)
{
	int j;

	if (a->kind != b->kind || a->attn != b->attn || a->nin != b->nin || !same_tensor(g, a->out, b->out) ||
	    !same_bits(a->params, b->params) || !same_bits(a->m, b->m) || !same_bits(a->n, b->n) ||
	    !same_bits(a->k, b->k) || !same_bits(a->flops_fwd, b->flops_fwd) ||
	    !same_bits(a->flops_bwd, b->flops_bwd) || !same_bits(a->flops_model, b->flops_model))
		return 0;
	for (j = 0; j < a->nin; j++)
		if (!same_tensor(g, a->in[j], b->in[j]))
			return 0;
	return 1;
}

static uint64_t op_hash(const struct graph *g, const struct gop *o)
{
	double v[5] = {o->m, o->n, o->k, o->flops_fwd, o->out >= 0 ? g->t[o->out].elems : -1};
	uint64_t h = (uint64_t)o->kind, w;
	int i;

	for (i = 0; i < 5; i++) {
		memcpy(&w, &v[i], sizeof w);
		h = (h ^ w) * 0x9e3779b97f4a7c15u;  /* the golden-ratio multiply, high bits folded down */
		h ^= h >> 32;
	}
	return h;
}

/* g->same: each op's first of its kind (same_op), through an open-addressing
 * table of the first ops; an op of an alike block (graph_alike_op) takes its
 * template's: it is the template's op, bit for bit, so its probe passes the
 * slots the template's passed, all taken since, to the template's first (the
 * template itself when it was the first of its kind). Returns 0 or -1 (out
 * of memory). */
static int same_ops(struct graph *g)
{
	int size = 16, i, j, h, a, *first;

	while (size < 2 * g->nops)
		size *= 2;
	g->same = malloc((size_t)(g->nops > 0 ? g->nops : 1) * sizeof *g->same);
	first = malloc((size_t)size * sizeof *first);
	if (!g->same || !first) {
		free(first);
		return -1;
	}
	for (h = 0; h < size; h++)
		first[h] = -1;
	for (i = 0; i < g->nops; i++) {
		if ((a = graph_alike_op(g, i)) >= 0) {
			g->same[i] = g->same[a];
			continue;
		}
		for (h = (int)(op_hash(g, &g->ops[i]) & (uint64_t)(size - 1)); (j = first[h]) >= 0;
		     h = (h + 1) & (size - 1))
			if (same_op(g, &g->ops[j], &g->ops[i]))
				break;
		g->same[i] = j >= 0 ? j : i;
		if (j < 0)
			first[h] = i;
	}
	free(first);
	return 0;
}

/* g->pt: each op's parameter tensors (struct gparams). A product's weight is
 * k x n (per TP rank) and the rest of its parameters its bias; a norm of 2h
 * parameters is a LayerNorm's weight and bias (an RMSNorm has the weight
 * alone); an embedding table, a tied head's share or a vector is one tensor.
 * Returns 0 or -1 (out of memory). */
static int param_table(struct graph *g, const struct model *m)
{
	int64_t p, wt;
	int i;

	g->pt = calloc((size_t)(g->nops > 0 ? g->nops : 1), sizeof *g->pt);
	if (!g->pt)
		return -1;
	for (i = 0; i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		struct gparams *x = &g->pt[i];
		if ((p = (int64_t)o->params) <= 0)
			continue;
		if (o->kind == OP_MATMUL && !o->tied) {
			wt = (int64_t)(o->k * o->n);
			x->el[0] = wt < p ? wt : p;
			x->el[1] = p - x->el[0];
			x->n = x->el[1] > 0 ? 2 : 1;
		} else if (o->kind == OP_NORM && p == 2 * (int64_t)m->hidden) {
			x->el[0] = x->el[1] = p / 2;
			x->n = 2;
		} else {
			x->el[0] = p;
			x->n = 1;
		}
	}
	return 0;
}

static int build(struct graph *g, const struct model *m, const struct graph_opts *o, int whole,
		 struct err *e)
{
	struct bld b = {0};
	int ids, x, enc = -1, i;
	double S_enc = 0;

	memset(g, 0, sizeof *g);
	g->o = *o;
	if (o->tp < 1 || m->heads % o->tp || m->kv_heads % o->tp || m->ffn % o->tp || m->vocab % o->tp)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "tensor_parallel = %d must divide heads, kv_heads, ffn and vocab_size", o->tp);
	b.g = g;
	b.m = m;
	b.o = o;
	b.e = e;
	b.whole = whole;
	b.eager = o->flavor == GRAPH_EAGER;
	b.A = o->act_bytes;
	b.U = o->autocast && b.eager ? 4 : o->act_bytes;
	b.old = b.eager && o->fwv == FWV_1_13;
	b.mask = b.pbias = b.xbias = -1;
	b.layer = -1;

	if (m->family == FAM_ENCODER_DECODER) {
		b.S = (double)o->seq_len;
		S_enc = b.S;
		ids = tensor(&b, "enc.ids", b.S, 8, -1);
		b.stack = 1;
		x = embed(&b, ids, 1);
		enc = stack_blocks(&b, x, m->encoder_layers, 1, -1, 0);
		b.S = (double)o->target_len;
		b.stack = 0;
		g->input = tensor(&b, "ids", b.S, 8, -1);
		x = embed(&b, g->input, 0);
		x = stack_blocks(&b, x, m->layers, 0, enc, S_enc);
	} else {
		b.S = (double)o->seq_len;
		g->input = tensor(&b, "ids", b.S, 8, -1);
		x = embed(&b, g->input, 0);
		x = stack_blocks(&b, x, m->layers, m->family == FAM_ENCODER, -1, 0);
	}
	if (x < 0 || !g->ops || !g->t)
		goto nomem;
	if (m->family == FAM_ENCODER && m->num_labels > 0)
		classifier_and_loss(&b, x);
	else
		head_and_loss(&b, x);
	if ((!g->block_first && g->nblocks) || same_ops(g) || param_table(g, m))
		goto nomem;
	if (b.old && m->family == FAM_DECODER && m->positions == POS_LEARNED)
		/* transformers 4.26's GPT2Attention buffers: the uint8 causal
		 * tril (max_positions^2) and masked_bias (one fp32) per layer */
		g->buffer_bytes = (double)m->layers * ((double)m->max_positions * m->max_positions + 4);

	g->tokens = (double)o->seq_len + (m->family == FAM_ENCODER_DECODER ? (double)o->target_len : 0);
	for (i = 0; i < g->nops; i++) {
		g->params_rank += g->ops[i].params;
		g->flops_fwd += g->ops[i].flops_fwd;
		g->flops_bwd += g->ops[i].flops_bwd;
	}
	g->params_backbone = graph_param_count(m);
	g->params = g->params_backbone;
	if (m->family == FAM_ENCODER && m->num_labels == 0)  /* MLM transform + decoder bias + NSP classifier */
		g->params += (double)m->hidden * m->hidden + m->hidden + 2.0 * m->hidden +
			(double)m->vocab + 2.0 * m->hidden + 2;
	return 0;
nomem:
	return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory building the model graph");
}

int graph_build(struct graph *g, const struct model *m, const struct graph_opts *o, struct err *e)
{
	return build(g, m, o, 0, e);
}

int graph_build_whole(struct graph *g, const struct model *m, const struct graph_opts *o, struct err *e)
{
	return build(g, m, o, 1, e);
}

void graph_free(struct graph *g)
{
	free(g->ops);
	free(g->t);
	free(g->block_first);
	free(g->block_in);
	free(g->same);
	free(g->pt);
	memset(g, 0, sizeof *g);
}

double graph_model_flops_per_sample(const struct graph *g, const struct model *m)
{
	double w = 0, att = 0;
	int i;

	(void)m;
	/* 6N per token with N the weights of every product (the LM head included,
	 * embedding lookups excluded): 3 x the forward FLOPs of the products.
	 * Attention 6·L·s·d_attn per token (Kaplan et al. 2020, Table 1): 3 x the
	 * forward FLOPs of Q·K^T. Both over all TP ranks. */
	for (i = 0; i < g->nops; i++) {
		if (g->ops[i].kind == OP_MATMUL)
			w += g->ops[i].flops_fwd;
		else if (g->ops[i].kind == OP_ATTN_SCORE)
			att += g->ops[i].flops_fwd;
		else if (g->ops[i].kind == OP_ATTN)
			att += g->ops[i].flops_model;
	}
	return 3 * (w + att) * g->o.tp;
}

const char *graph_kind_name(int kind)
{
	static const char *const names[] = {"embed", "norm", "matmul", "attn_score", "softmax",
		"attn_ctx", "act", "dropout", "add", "mul", "copy", "loss", "attn"};
	return kind >= 0 && kind < OP_KIND_COUNT ? names[kind] : "?";
}

const char *graph_attn_name(int kernel)
{
	static const char *const names[] = {"eager", "flash2", "mem_efficient", "flash3", "cudnn"};
	return kernel >= 0 && kernel < AK_COUNT ? names[kernel] : "?";
}

double graph_param_tensors(const struct graph *g)
{
	double n = 0;
	int i;

	for (i = 0; i < g->nops; i++)
		n += g->pt[i].n;
	return n;
}

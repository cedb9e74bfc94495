/*
 * model_rt.c — the decoder's micro-step over the model graph (see model_rt.h).
 */
#include "model_rt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"


/* ---- layout ------------------------------------------------------------- */

static int check_model(const struct model *m, struct err *e)
{
	if (m->family != FAM_DECODER || m->positions == POS_RELATIVE || m->activation == ACT_RELU ||
	    m->activation == ACT_GATED_GELU || m->heads % m->kv_heads || m->heads * m->head_dim != m->hidden ||
	    m->head_dim % 2 || m->lm_head_bias || !m->final_norm || m->type_vocab || m->embed_norm || m->pooler)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "model %s: the runtime implements GPT-2 and Llama style decoders (learned or "
			       "rotary positions, LayerNorm or RMSNorm, GELU or SwiGLU, multi-head or "
			       "grouped-query attention with heads x head_dim = hidden)", m->name);
	return 0;
}

static int add_param(struct rtm *r, int op, const char *what, size_t n, int kind)
{
	struct rt_param *p;
	int u = r->g.ops[op].unit;
	char name[GRAPH_NAME];

	p = realloc(r->p, (size_t)(r->np + 1) * sizeof *p);
	if (!p)
		return -1;
	r->p = p;
	p = &r->p[r->np];
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s.%s", graph_op_name(&r->g, op, name), what);
	p->op = op;
	p->unit = u;
	p->off = r->unit_n[u];
	p->n = n;
	p->kind = kind;
	r->unit_n[u] += n;
	return r->np++;
}

static int layout(struct rtm *r, struct err *e)
{
	struct graph *g = &r->g;
	int i, embed = -1;
	char name[GRAPH_NAME];

	r->nunits = g->nblocks + 1;
	r->unit_n = calloc((size_t)r->nunits, sizeof *r->unit_n);
	r->unit_goff = calloc((size_t)r->nunits, sizeof *r->unit_goff);
	r->op_w = malloc((size_t)g->nops * sizeof *r->op_w);
	r->op_b = malloc((size_t)g->nops * sizeof *r->op_b);
	r->rope_op = calloc((size_t)g->nops, 1);
	r->tname = malloc((size_t)g->nt * sizeof *r->tname);
	if (!r->unit_n || !r->unit_goff || !r->op_w || !r->op_b || !r->rope_op || !r->tname)
		goto nomem;
	for (i = 0; i < g->nt; i++)
		graph_tensor_name(g, i, r->tname[i]);
	for (i = 0; i < g->nops; i++) {
		struct gop *o = &g->ops[i];
		size_t C = (size_t)r->C;
		r->op_w[i] = r->op_b[i] = -1;
		switch (o->kind) {
		case OP_EMBED:
			r->op_w[i] = embed = add_param(r, i, "wte", (size_t)r->V * C, PK_EMBED);
			break;
		case OP_ADD:
			if (o->params > 0)
				r->op_w[i] = add_param(r, i, "wpe", (size_t)o->params, PK_EMBED);
			break;
		case OP_NORM:
			r->op_w[i] = add_param(r, i, "weight", C, PK_NORM_W);
			if (o->params > (double)C)  /* LayerNorm; RMSNorm has no bias */
				r->op_b[i] = add_param(r, i, "bias", C, PK_NORM_B);
			break;
		case OP_MATMUL:
			if (o->params == 0) {  /* tied LM head: the token embedding */
				r->op_w[i] = embed;
				break;
			}
			r->op_w[i] = add_param(r, i, "weight", (size_t)(o->k * o->n), PK_MATRIX);
			if (o->params > o->k * o->n)
				r->op_b[i] = add_param(r, i, "bias", (size_t)o->n, PK_BIAS);
			break;
		case OP_MUL:
			if (o->params > 0 || o->nin != 2)
				goto unsupported;
			break;
		case OP_ATTN_SCORE: case OP_SOFTMAX: case OP_ATTN_CTX: case OP_ACT: case OP_DROPOUT:
		case OP_LOSS:
			break;
		default:
		unsupported:
			return err_set(e, ERR_INPUT, NULL, 0, "model %s: op %s (%s) is not implemented by the runtime",
				       r->m.name, graph_op_name(g, i, name), graph_kind_name(o->kind));
		}
		if (o->kind == OP_MATMUL && r->m.positions == POS_ROTARY && strstr(graph_op_name(g, i, name), ".qkv"))
			r->rope_op[i] = 1;
		if ((r->op_w[i] < -1 || r->op_b[i] < -1) || (o->kind == OP_MATMUL && r->op_w[i] < 0))
			goto nomem;
	}
	for (i = 1; i < r->nunits; i++)
		r->unit_goff[i] = r->unit_goff[i - 1] + r->unit_n[i - 1];
	r->nparams = r->unit_goff[r->nunits - 1] + r->unit_n[r->nunits - 1];
	for (i = 0; i < r->np; i++)
		r->p[i].goff = r->unit_goff[r->p[i].unit] + r->p[i].off;
	for (i = 0; i < g->nops; i++)  /* the logits: what the loss reads */
		if (g->ops[i].kind == OP_LOSS)
			r->logits = g->ops[i].in[0];
	if ((double)r->nparams != g->params_rank)
		return err_set(e, ERR_SYSTEM, NULL, 0, "runtime layout has %zu parameters, the graph %.0f",
			       r->nparams, g->params_rank);
	return 0;
nomem:
	return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory laying out parameters");
}

int rtm_has_pgrads(const struct rtm *r, int i)
{
	return r->op_w[i] >= 0 || r->op_b[i] >= 0;
}

int rtm_init(struct rtm *r, const struct model *m, int T, double dropout, int recompute, int dt,
	     struct backend *be, struct err *e)
{
	struct graph_opts o = {0};
	int rc;

	memset(r, 0, sizeof *r);
	r->m = *m;
	r->be = be;
	rc = check_model(m, e);
	if (rc)
		return rc;
	r->T = T;
	r->C = (int)m->hidden;
	r->NH = (int)m->heads;
	r->NKV = (int)m->kv_heads;
	r->hs = (int)m->head_dim;
	r->theta = 10000.0f;
	r->V = (int)m->vocab;
	r->F = (int)m->ffn;
	r->recompute = recompute;
	r->dt = dt;
	r->dropout = (float)dropout;
	o.seq_len = T;
	o.target_len = T;
	o.dropout = dropout;
	o.tp = 1;
	o.flavor = GRAPH_SHARDCAST;
	o.act_bytes = dt == RT_F32 ? 4 : 2;
	rc = graph_build(&r->g, m, &o, e);
	if (!rc)
		rc = layout(r, e);
	if (!rc && life_build(&r->lf, &r->g, recompute))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	if (!rc) {
		r->val = calloc((size_t)r->g.nt, sizeof *r->val);
		r->gblk = malloc((size_t)r->g.nt * sizeof *r->gblk);
		r->bptr = calloc((size_t)r->g.nt, sizeof *r->bptr);
		r->bref = calloc((size_t)r->g.nt, sizeof *r->bref);
		if (!r->val || !r->gblk || !r->bptr || !r->bref)
			rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
		else
			for (int t = 0; t < r->g.nt; t++)
				r->gblk[t] = -1;
	}
	if (rc)
		rtm_free(r);
	return rc;
}

void rtm_free(struct rtm *r)
{
	graph_free(&r->g);
	free(r->unit_n);
	free(r->unit_goff);
	free(r->p);
	free(r->op_w);
	free(r->op_b);
	free(r->rope_op);
	free(r->tname);
	free(r->val);
	free(r->gblk);
	free(r->bptr);
	free(r->bref);
	life_free(&r->lf);
	memset(r, 0, sizeof *r);
}

/* ---- initial values and data -------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* element i of splitmix64 seeded with seed: mix(seed + (i+1) * golden) */
static uint64_t stream(uint64_t seed, uint64_t i)
{
	return mix64(seed + (i + 1) * 0x9e3779b97f4a7c15ull);
}

float rtm_init_value(uint64_t seed, size_t i, int kind)
{
	double u = (double)(stream(seed, i) >> 11) * 0x1p-53 * 2.0 - 1.0;  /* U[-1, 1) */

	switch (kind) {
	case PK_MATRIX: return (float)(0.08 * u);
	case PK_EMBED:  return (float)(0.1 * u);
	case PK_BIAS:   return (float)(0.02 * u);
	case PK_NORM_W: return (float)(1.0 + 0.1 * u);
	default:        return (float)(0.02 * u);  /* PK_NORM_B */
	}
}

void rtm_init_unit(const struct rtm *r, uint64_t seed, int u, size_t from, float *dst, size_t n)
{
	size_t j = 0;
	int p;

	for (p = 0; p < r->np && j < n; p++) {
		const struct rt_param *q = &r->p[p];
		size_t a, b;
		if (q->unit != u || q->off + q->n <= from + j || q->off >= from + n)
			continue;
		a = from + j > q->off ? from + j : q->off;
		b = from + n < q->off + q->n ? from + n : q->off + q->n;
		for (; a < b; a++)
			dst[a - from] = rtm_init_value(seed, q->goff + (a - q->off), q->kind);
		j = b - from;
	}
	/* padding past the unit's end */
	if (from + n > r->unit_n[u]) {
		size_t z = from > r->unit_n[u] ? from : r->unit_n[u];
		memset(dst + (z - from), 0, (from + n - z) * sizeof *dst);
	}
}

void rtm_sample(const struct rtm *r, uint64_t seed, uint64_t sample, int32_t *ids)
{
	/* a learnable stream: a random start and stride, 1 token in 8 random */
	uint64_t h = stream(seed ^ 0x5eed5eed5eedull, sample);
	int32_t x = (int32_t)(h % (uint64_t)r->V), stride = (int32_t)(1 + (h >> 20) % 7);
	int t;

	for (t = 0; t <= r->T; t++) {
		uint64_t n = stream(h, (uint64_t)t);
		int32_t tok = (n & 7) == 0 ? (int32_t)((n >> 8) % (uint64_t)r->V) : x;
		if (t < r->T)
			ids[t] = tok;
		if (t > 0)
			ids[r->T + t - 1] = tok;
		x = (tok + stride) % r->V;
	}
}

/* ---- execution ---------------------------------------------------------- */

size_t rtm_tensor_bytes(const struct rtm *r, int t, int B)
{
	return (size_t)B * (size_t)r->g.t[t].elems * (size_t)r->g.t[t].dsize;
}

/* Bytes the device holds for tensor t: a 16-bit tensor is counted at 2 bytes
 * per element and held in fp32 (its values rounded: backend.h round). */
static size_t held_bytes(const struct rtm *r, int t)
{
	size_t b = rtm_tensor_bytes(r, t, r->B);

	return r->g.t[t].dsize == 2 ? 2 * b : b;
}

static int talloc(struct rtm *r, void **slot, int t, struct err *e)
{
	return arena_alloc_as(r->ar, slot, rtm_tensor_bytes(r, t, r->B), held_bytes(r, t), r->tname[t], e);
}

static void tfree(struct rtm *r, void **slot)
{
	arena_free(r->ar, *slot);
	*slot = NULL;
}

static float *W(struct rtm *r, int param)
{
	return param < 0 ? NULL : r->h.param(r->h.ctx, param);
}

static float *dW(struct rtm *r, int param)
{
	return param < 0 ? NULL : r->h.grad(r->h.ctx, param);
}

static float *F(struct rtm *r, int t)
{
	return t < 0 ? NULL : r->val[t];
}

static float *G(struct rtm *r, int t)
{
	return t < 0 || r->gblk[t] < 0 ? NULL : r->bptr[r->gblk[t]];
}

static int saved_tensor(const struct gop *o, int k)
{
	return k < o->nsaved ? o->saved[k] : -1;
}

static void forward_kernel(struct rtm *r, int i)
{
	struct backend *be = r->be;
	const struct gop *o = &r->g.ops[i];
	int B = r->B, T = r->T, C = r->C, N = B * T;
	const int32_t *ids = r->val[r->g.input];
	float *y = F(r, o->out), *x = F(r, o->in[0]);

	switch (o->kind) {
	case OP_EMBED:
		be->embed_fwd(be, y, ids, W(r, r->op_w[i]), B, T, C);
		break;
	case OP_ADD:
		if (o->nin == 1)
			be->pos_fwd(be, y, x, W(r, r->op_w[i]), B, T, C);
		else
			be->add_fwd(be, y, x, F(r, o->in[1]), (size_t)N * C);
		break;
	case OP_NORM:
		if (r->op_b[i] >= 0)
			be->layernorm_fwd(be, y, F(r, o->out + 1), x, W(r, r->op_w[i]), W(r, r->op_b[i]), N, C);
		else
			be->rmsnorm_fwd(be, y, F(r, o->out + 1), x, W(r, r->op_w[i]), N, C);
		break;
	case OP_MUL:
		be->mul_fwd(be, y, x, F(r, o->in[1]), (size_t)B * (size_t)r->g.t[o->out].elems);
		break;
	case OP_MATMUL:
		be->matmul_fwd(be, y, x, W(r, r->op_w[i]), W(r, r->op_b[i]), N, (int)o->k, (int)o->n);
		if (r->rope_op[i])  /* rotary positions on q and k, in place */
			be->rope(be, y, B, T, r->NH, r->NKV, r->hs, r->theta, 1);
		if (r->capture_logits && o->out == r->logits)
			be->copy(be, r->capture_logits, y, (size_t)N * r->V * sizeof *y, COPY_D2H);
		break;
	case OP_ATTN_SCORE:
		be->attn_score_fwd(be, y, x, B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_SOFTMAX:
		be->softmax_fwd(be, y, x, B * r->NH * T, T);
		break;
	case OP_ATTN_CTX:
		be->attn_ctx_fwd(be, y, x, F(r, o->in[1]), B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_ACT:
		if (r->m.activation == ACT_SWIGLU)
			be->silu_fwd(be, y, x, (size_t)B * (size_t)r->g.t[o->out].elems);
		else
			be->gelu_fwd(be, y, x, (size_t)B * (size_t)r->g.t[o->out].elems);
		break;
	case OP_DROPOUT:
		be->dropout_fwd(be, y, r->val[o->out + 1], x, (size_t)B * (size_t)r->g.t[o->out].elems,
				r->dropout, r->seed ^ (r->rng_step * 0x9e3779b97f4a7c15ull),
				(uint64_t)i << 40);
		break;
	case OP_LOSS:
		be->xent_fwd(be, y, &r->loss_sum, x, ids, B, T, r->V);
		break;
	}
}

static int hook(int (*f)(void *, int, struct err *), void *ctx, int op, struct err *e)
{
	return f ? f(ctx, op, e) : 0;
}

/* The tensors op i produces (life.h: its output, then what it creates for backward). */
static int alloc_products(struct rtm *r, int i, struct err *e)
{
	int p, t, rc;

	for (p = r->lf.poff[i]; p < r->lf.poff[i + 1]; p++) {
		t = r->lf.prod[p];
		if (r->val[t])
			return err_set(e, ERR_SYSTEM, NULL, 0, "internal: %s produced twice", r->tname[t]);
		rc = talloc(r, &r->val[t], t, e);
		if (rc)
			return rc;
	}
	return 0;
}

/* Rounds buffer p of tensor t's size (values or gradient) to the 16-bit
 * storage type when the tensor is 16-bit. */
static void round_tensor(struct rtm *r, int t, float *p)
{
	if (p && r->dt != RT_F32 && r->g.t[t].dsize == 2)
		r->be->round(r->be, p, (size_t)r->B * (size_t)r->g.t[t].elems, r->dt);
}

/* After op i's forward kernel: its products, as stored. */
static void round_products(struct rtm *r, int i)
{
	int p;

	for (p = r->lf.poff[i]; p < r->lf.poff[i + 1]; p++)
		round_tensor(r, r->lf.prod[p], F(r, r->lf.prod[p]));
}

/* After op i's backward kernel: the gradients it accumulated into, as stored
 * (its inputs', and its parameters', which are 16-bit with the activations:
 * memory.h S2). */
static void round_grads(struct rtm *r, int i)
{
	const struct gop *o = &r->g.ops[i];
	int k, t, q;

	if (r->dt == RT_F32)
		return;
	for (k = 0; k < o->nin; k++)
		if ((t = life_distinct_in(o, k)) >= 0 && r->g.t[t].producer >= 0)
			round_tensor(r, t, G(r, t));
	for (k = 0; k < 2; k++)
		if ((q = k ? r->op_b[i] : r->op_w[i]) >= 0)
			r->be->round(r->be, dW(r, q), r->p[q].n, r->dt);
}

/* Input k < nin of op i, or its product k - nin: -1 for a repeated input. */
static int in_or_product(const struct rtm *r, int i, int k)
{
	const struct gop *o = &r->g.ops[i];

	return k < o->nin ? life_distinct_in(o, k) : r->lf.prod[r->lf.poff[i] + k - o->nin];
}

static int forward_op(struct rtm *r, int i, struct err *e)
{
	int n = r->g.ops[i].nin + r->lf.poff[i + 1] - r->lf.poff[i], k, t, rc;

	rc = hook(r->h.fwd_pre, r->h.ctx, i, e);
	if (!rc)
		rc = alloc_products(r, i, e);
	if (rc)
		return rc;
	forward_kernel(r, i);
	round_products(r, i);
	for (k = 0; k < n; k++) {
		t = in_or_product(r, i, k);
		if (t >= 0 && r->val[t] && life_fwd_frees(&r->lf, &r->g, i, t))
			tfree(r, &r->val[t]);
	}
	return hook(r->h.fwd_post, r->h.ctx, i, e);
}

/* Replays region R's forward before its backward. */
static int replay(struct rtm *r, int R, struct err *e)
{
	int i, k, t, n, rc;

	for (i = r->lf.rfirst[R]; i <= r->lf.rlast[R]; i++) {
		rc = alloc_products(r, i, e);
		if (rc)
			return rc;
		forward_kernel(r, i);
		round_products(r, i);
		n = r->g.ops[i].nin + r->lf.poff[i + 1] - r->lf.poff[i];
		for (k = 0; k < n; k++) {
			t = in_or_product(r, i, k);
			if (t >= 0 && r->val[t] && life_replay_frees(&r->lf, &r->g, i, t))
				tfree(r, &r->val[t]);
		}
	}
	return 0;
}

static void backward_kernel(struct rtm *r, int i)
{
	struct backend *be = r->be;
	const struct gop *o = &r->g.ops[i];
	int B = r->B, T = r->T, C = r->C, N = B * T, k;
	const int32_t *ids = r->val[r->g.input];
	float *dy = G(r, o->out), *dx = G(r, o->in[0]);

	switch (o->kind) {
	case OP_EMBED:
		be->embed_bwd(be, dW(r, r->op_w[i]), dy, ids, B, T, C);
		break;
	case OP_ADD:
		/* an input holding the output's gradient itself needs nothing */
		if (o->nin == 1)
			be->pos_bwd(be, dx == dy ? NULL : dx, dW(r, r->op_w[i]), dy, B, T, C);
		else
			for (k = 0; k < o->nin; k++)
				if (life_distinct_in(o, k) >= 0 && G(r, o->in[k]) != dy)
					be->axpy(be, G(r, o->in[k]), dy, 1.0f, (size_t)N * C);
		break;
	case OP_NORM:
		if (r->op_b[i] >= 0)
			be->layernorm_bwd(be, dx, dW(r, r->op_w[i]), dW(r, r->op_b[i]), dy, F(r, o->in[0]),
					  F(r, saved_tensor(o, 1)), W(r, r->op_w[i]), N, C);
		else
			be->rmsnorm_bwd(be, dx, dW(r, r->op_w[i]), dy, F(r, o->in[0]), F(r, saved_tensor(o, 1)),
					W(r, r->op_w[i]), N, C);
		break;
	case OP_MUL:
		be->mul_bwd(be, dx, G(r, o->in[1]), dy, F(r, o->in[0]), F(r, o->in[1]),
			    (size_t)B * (size_t)r->g.t[o->out].elems);
		break;
	case OP_MATMUL:
		if (r->rope_op[i])  /* back through the rotation: the gradient is no longer read */
			be->rope(be, dy, B, T, r->NH, r->NKV, r->hs, r->theta, -1);
		be->matmul_bwd(be, dx, dW(r, r->op_w[i]), dW(r, r->op_b[i]), dy, F(r, o->in[0]),
			       W(r, r->op_w[i]), N, (int)o->k, (int)o->n);
		break;
	case OP_ATTN_SCORE:
		be->attn_score_bwd(be, dx, dy, F(r, o->in[0]), B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_SOFTMAX:
		be->softmax_bwd(be, dx, dy, F(r, o->out), B * r->NH * T, T);
		break;
	case OP_ATTN_CTX:
		be->attn_ctx_bwd(be, dx, G(r, o->in[1]), dy, F(r, o->in[0]), F(r, o->in[1]), B, T, r->NH, r->NKV,
				 r->hs);
		break;
	case OP_ACT:
		if (r->m.activation == ACT_SWIGLU)
			be->silu_bwd(be, dx, dy, F(r, o->in[0]), (size_t)B * (size_t)r->g.t[o->out].elems);
		else
			be->gelu_bwd(be, dx, dy, F(r, o->in[0]), (size_t)B * (size_t)r->g.t[o->out].elems);
		break;
	case OP_DROPOUT:
		be->dropout_bwd(be, dx, dy, r->val[o->out + 1], (size_t)B * (size_t)r->g.t[o->out].elems,
				r->dropout);
		break;
	case OP_LOSS:
		be->xent_bwd(be, dx, F(r, o->out), ids, B, T, r->V, r->loss_scale);
		break;
	}
}

/* Gradient buffers of op i's inputs (memory.h S4 (a)). */
static int input_grads(struct rtm *r, int i, struct err *e)
{
	const struct gop *o = &r->g.ops[i];
	int k, t, b, rc, gout = o->out >= 0 ? r->gblk[o->out] : -1;

	for (k = 0; k < o->nin; k++) {
		t = life_distinct_in(o, k);
		if (t < 0 || r->g.t[t].producer < 0 || r->gblk[t] >= 0)
			continue;
		if (o->kind == OP_ADD && gout >= 0) {
			r->gblk[t] = gout;   /* the add passes its gradient through */
			r->bref[gout]++;
			continue;
		}
		b = r->nblk++;
		rc = talloc(r, &r->bptr[b], t, e);
		if (rc)
			return rc;
		r->be->zero(r->be, r->bptr[b], held_bytes(r, t));
		r->bref[b] = 1;
		r->gblk[t] = b;
	}
	return 0;
}

static void unref_grad(struct rtm *r, int t)
{
	int b = r->gblk[t];

	if (b < 0)
		return;
	r->gblk[t] = -1;
	if (--r->bref[b] == 0)
		tfree(r, &r->bptr[b]);
}

static int backward_op(struct rtm *r, int i, struct err *e)
{
	const struct gop *o = &r->g.ops[i];
	int R = r->lf.reg[i], p, rc, pg = rtm_has_pgrads(r, i);
	int runs = o->kind == OP_LOSS || (o->out >= 0 && r->gblk[o->out] >= 0) || pg;

	rc = hook(r->h.bwd_pre, r->h.ctx, i, e);
	if (!rc && R >= 0 && i == r->lf.rlast[R])
		rc = replay(r, R, e);
	if (!rc && runs)
		rc = input_grads(r, i, e);
	if (!rc && runs && pg)
		rc = hook(r->h.pgrad_begin, r->h.ctx, i, e);
	if (rc)
		return rc;
	if (runs) {
		backward_kernel(r, i);
		round_grads(r, i);
	}
	if (runs && pg && (rc = hook(r->h.pgrad_end, r->h.ctx, i, e)))
		return rc;
	if (o->out >= 0)
		unref_grad(r, o->out);
	for (p = r->lf.foff[i]; p < r->lf.foff[i + 1]; p++)  /* forward copies, then replays */
		if (r->val[r->lf.ffree[p]])
			tfree(r, &r->val[r->lf.ffree[p]]);
	for (p = r->lf.roff[i]; p < r->lf.roff[i + 1]; p++)
		if (r->val[r->lf.rfree[p]])
			tfree(r, &r->val[r->lf.rfree[p]]);
	return hook(r->h.bwd_post, r->h.ctx, i, e);
}

static void free_all(struct rtm *r)
{
	int t;

	for (t = r->g.nt - 1; t >= 0; t--) {
		if (r->val[t])
			tfree(r, &r->val[t]);
		r->gblk[t] = -1;
	}
	for (t = 0; t < r->nblk; t++)
		if (r->bptr[t])
			tfree(r, &r->bptr[t]);
	r->nblk = 0;
}

static int forward(struct rtm *r, struct err *e)
{
	int i, rc = 0;

	for (i = 0; !rc && i < r->g.nops; i++)
		rc = forward_op(r, i, e);
	return rc;
}

static int backward(struct rtm *r, struct err *e)
{
	int i, rc = 0;

	for (i = r->g.nops - 1; !rc && i >= 0; i--)
		rc = backward_op(r, i, e);
	return rc;
}

static int load_ids(struct rtm *r, int B, const int32_t *ids_host, struct err *e)
{
	int rc;

	r->B = B;
	r->loss_sum = 0;
	r->nblk = 0;
	rc = talloc(r, &r->val[r->g.input], r->g.input, e);
	if (!rc)
		r->be->copy(r->be, r->val[r->g.input], ids_host, (size_t)B * 2 * r->T * sizeof *ids_host, COPY_H2D);
	return rc;
}

int rtm_micro_step(struct rtm *r, int B, const int32_t *ids_host, struct err *e)
{
	int rc = load_ids(r, B, ids_host, e);

	if (!rc)
		rc = forward(r, e);
	if (!rc)
		rc = backward(r, e);
	free_all(r);
	return rc;
}

int rtm_forward_only(struct rtm *r, int B, const int32_t *ids_host, struct err *e)
{
	struct rtm_hooks h = r->h;
	int rc;

	/* no strategy hooks: the parameters must be resident (tests) */
	r->h.fwd_pre = r->h.fwd_post = NULL;
	rc = load_ids(r, B, ids_host, e);
	if (!rc)
		rc = forward(r, e);
	free_all(r);
	r->h = h;
	return rc;
}

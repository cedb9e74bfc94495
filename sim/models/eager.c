/*
 * eager.c — extra elementwise kernels of eager PyTorch modules (see eager.h).
 */
#include "eager.h"

#include <string.h>

/* The op's last name component ("L3.q" -> "q"). */
static const char *leaf(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot ? dot + 1 : name;
}

/* A formula of k kernels moving total bytes per sample in forward, of which
 * the op's own read and write (own bytes, one kernel) are already counted. */
static void formula(struct eager_extra *x, double k, double total, double own)
{
	x->kernels_fwd = k - 1;
	x->bytes_fwd = total > own ? total - own : 0;
	x->kernels_bwd = 1.5 * k - 1;
	x->bytes_bwd = 2 * x->bytes_fwd;
}

void eager_varlen(const struct graph *g, int i, struct eager_extra *x)
{
	const struct gop *o = &g->ops[i];
	double qkv = 0, out;
	int j, fused;

	if (o->kind != OP_ATTN || o->out < 0 || o->nin < 3)
		return;
	fused = o->in[0] == o->in[1] && o->in[1] == o->in[2];  /* one q/k/v tensor */
	for (j = 0; j < (fused ? 1 : 3); j++)
		qkv += graph_tensor_bytes(g, o->in[j]);
	out = graph_tensor_bytes(g, o->out);
	/* forward: per unpad_input sum, nonzero, max, item, cumsum, pad, gather;
	 * pad_input's zeros and index_put */
	x->kernels_fwd += 3 * 6 + 2;
	x->calls_fwd += 3 * 7 + 2;
	x->bytes_fwd += 2 * qkv + 3 * out;
	x->sync_fwd = 1;
	/* backward: three zeros + scatter_, one index, SplitBackward's cat */
	x->kernels_bwd += 3 * 2 + 1 + (fused ? 1 : 0);
	x->calls_bwd += 3 * 2 + 1;
	x->bytes_bwd += 3 * qkv + 2 * out + (fused ? 2 * qkv : 0);
}

int eager_internal(const struct graph *g, int i)
{
	const struct gop *o = &g->ops[i];
	const char *n = leaf(o->base);

	if (g->o.flavor != GRAPH_EAGER || o->kind != OP_COPY)
		return 0;
	if (strcmp(n, "q_bmm") == 0 || strcmp(n, "k_bmm") == 0 || strcmp(n, "v_bmm") == 0)
		return 1;
	/* graph.c's cast_in: a copy named as the linear layer that reads it */
	return i + 1 < g->nops && g->ops[i + 1].kind == OP_MATMUL && graph_same_name(g, i, i + 1);
}

void eager_extra(const struct graph *g, const struct model *m, int i, struct eager_extra *x)
{
	const struct gop *o = &g->ops[i];
	double E, A, U, own;

	memset(x, 0, sizeof *x);
	if (g->o.flavor != GRAPH_EAGER || o->out < 0 || o->nin < 1)
		return;
	E = g->t[o->out].elems;
	U = g->t[o->out].dsize;
	A = g->t[o->in[0]].dsize;
	own = E * (A + U);
	switch (o->kind) {
	case OP_ACT:
		if (m->activation == ACT_GELU_NEW && strcmp(leaf(o->base), "gelu") == 0)
			formula(x, 8, E * (5 * A + 13 * U), own);
		break;
	case OP_NORM:
		if (m->norm == NORM_LAYERNORM && m->norm_python)
			formula(x, 8, E * 10 * A, own);
		else if (m->norm == NORM_RMSNORM)  /* pow, mean, add, rsqrt, mul over fp32 */
			formula(x, 5, E * (8 + 4 + 8), own);
		break;
	case OP_ATTN_SCORE:  /* scaling and mask: two read-and-write passes */
		x->kernels_fwd = 2;
		x->bytes_fwd = 4 * E * U;
		x->kernels_bwd = 2;
		x->bytes_bwd = 2 * x->bytes_fwd;
		break;
	case OP_MATMUL: {
		const char *n = leaf(o->base);
		if (m->positions == POS_ROTARY && (strcmp(n, "q") == 0 || strcmp(n, "k") == 0)) {
			x->kernels_fwd = 5;
			x->bytes_fwd = 10 * E * U;
			x->kernels_bwd = 7.5;
			x->bytes_bwd = 2 * x->bytes_fwd;
		}
		if (!o->tied && o->params > o->k * o->n) {  /* a bias: its gradient is grad.sum(0) */
			x->kernels_bwd += 1;
			x->bytes_bwd += E * U;
		}
		break;
	}
	default:
		break;
	}
}

/*
 * period.c — finding a graph's repeated blocks (see period.h).
 */
#include "period.h"

#include "life.h"

/* Bytes per sample of tensor t (-1: none). */
static double bytes_or_none(const struct graph *g, int t)
{
	return t >= 0 ? graph_tensor_bytes(g, t) : -1;
}

int period_ops_alike(const struct graph *g, int i, int j)
{
	const struct gop *a = &g->ops[i], *b = &g->ops[j];
	int k;

	if (a->kind != b->kind || a->stack != b->stack || a->params != b->params || a->m != b->m ||
	    a->n != b->n || a->k != b->k || a->flops_fwd != b->flops_fwd || a->flops_bwd != b->flops_bwd ||
	    a->io_elems != b->io_elems || a->nin != b->nin || a->nsaved != b->nsaved ||
	    a->tp_allreduce != b->tp_allreduce || a->attn_core != b->attn_core || a->module != b->module ||
	    a->tied != b->tied || a->bwd_ws != b->bwd_ws || a->flops_model != b->flops_model ||
	    a->attn != b->attn || bytes_or_none(g, a->out) != bytes_or_none(g, b->out) ||
	    (a->out >= 0 && g->t[a->out].held != g->t[b->out].held))
		return 0;
	for (k = 0; k < a->nin; k++)
		if (bytes_or_none(g, a->in[k]) != bytes_or_none(g, b->in[k]))
			return 0;
	for (k = 0; k < a->nsaved; k++)
		if (bytes_or_none(g, a->saved[k]) != bytes_or_none(g, b->saved[k]))
			return 0;
	return 1;
}

/* Whether block b + p repeats block b, dop ops further on. Blocks the graph
 * built as one block moved on (graph.alike) are alike op for op. */
static int block_repeats(const struct graph *g, const double *key, int b, int p, int dop)
{
	int f = g->block_first[b], l = life_block_last(g, b), i, k, same = 0;

	if (g->block_first[b + p] != f + dop || life_block_last(g, b + p) != l + dop)
		return 0;
	for (k = 0; k < g->nalike; k++)
		same |= b >= g->alike[k][0] && b + p < g->alike[k][1];
	for (i = f; i <= l; i++)
		if ((!same && !period_ops_alike(g, i, i + dop)) || (key && key[i] != key[i + dop]))
			return 0;
	return 1;
}

/* The longest run of blocks repeating with period p: *s .. *t - 1. */
static void longest(const struct graph *g, const double *key, int p, int *s, int *t, int *dop)
{
	int b, run = 0, d, best = 0;

	*s = *t = 0;
	for (b = 0; b + p < g->nblocks; b++) {
		d = g->block_first[b + p] - g->block_first[b];
		if (run > 0 && d != *dop)
			run = 0;
		if (!block_repeats(g, key, b, p, d)) {
			run = 0;
			continue;
		}
		if (run == 0)
			*dop = d;
		run++;
		if (run + p > best) {  /* blocks b - run + 1 .. b + p */
			best = run + p;
			*s = b - run + 1;
			*t = b + p + 1;
		}
	}
}

int period_find(const struct graph *g, const double *key, int maxp, struct period *out)
{
	int p, s, t, dop = 0, best = 0;

	for (p = 1; p <= maxp && best < g->nblocks; p++) {
		longest(g, key, p, &s, &t, &dop);
		if ((t - s) / p >= 3 && t - s > best) {
			best = t - s;
			out->e0 = s;
			out->e1 = t;
			out->p = p;
			out->dop = dop;
		}
	}
	return best > 0 ? 0 : -1;
}

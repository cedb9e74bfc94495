/*
 * wrap.c — FSDP's wrap units (see wrap.h).
 */
#include "wrap.h"

#include <stdlib.h>
#include <string.h>

#include "life.h"
#include "scenario.h"
#include "vec.h"

/* A wrapping under way: the graph and the units so far. */
struct wctx {
	const struct graph *g;
	struct wrap_units *wu;
	int oom;
};

static int add_unit(struct wctx *w, int first, int last, int root)
{
	if (vec_grow((void **)&w->wu->u, &w->wu->cap, w->wu->n + 1, sizeof *w->wu->u)) {
		w->oom = 1;
		return -1;
	}
	w->wu->u[w->wu->n] = (struct wrap_unit){.first = first, .last = last, .elems = 0, .root = root};
	return w->wu->n++;
}

/* Claims for unit u the parameters of ops first..last not yet claimed. */
static int64_t claim(struct wctx *w, int u, int first, int last)
{
	int64_t n = 0;
	int i;

	for (i = first; i <= last; i++)
		if (w->wu->own[i] < 0 && w->g->ops[i].params > 0) {
			w->wu->own[i] = u;
			n += (int64_t)w->g->ops[i].params;
		}
	return n;
}

static int64_t unclaimed(const struct wctx *w, int first, int last, int module)
{
	int64_t n = 0;
	int i;

	for (i = first; i <= last; i++)
		if (w->wu->own[i] < 0 && (module < 0 || w->g->ops[i].module == module))
			n += (int64_t)w->g->ops[i].params;
	return n;
}

/* size_based_auto_wrap_policy (torch/distributed/fsdp/wrap.py): post-order, a
 * module is wrapped when the parameters not already wrapped below it reach
 * min_num_params. The tree here: Linear < attention / cross-attention / MLP <
 * block. ModuleList is never wrapped (EXCLUDE_WRAP_MODULES) and modules outside
 * the blocks stay in the root. */
static void size_wrap_block(struct wctx *w, int first, int last, int64_t min)
{
	static const int mods[] = {MOD_ATTN, MOD_XATTN, MOD_MLP};
	int i, m, lo, hi, u;

	for (i = first; i <= last; i++)
		if (w->g->ops[i].kind == OP_MATMUL && w->g->ops[i].params >= (double)min) {
			u = add_unit(w, i, i, 0);
			if (u >= 0)
				w->wu->u[u].elems = claim(w, u, i, i);
		}
	for (m = 0; m < 3; m++) {
		lo = hi = -1;
		for (i = first; i <= last; i++)
			if (w->g->ops[i].module == mods[m]) {
				if (lo < 0)
					lo = i;
				hi = i;
			}
		if (lo >= 0 && unclaimed(w, lo, hi, mods[m]) >= min && (u = add_unit(w, lo, hi, 0)) >= 0)
			w->wu->u[u].elems = claim(w, u, lo, hi);
	}
	if (unclaimed(w, first, last, -1) >= min && (u = add_unit(w, first, last, 0)) >= 0)
		w->wu->u[u].elems = claim(w, u, first, last);
}

/* Above the blocks: each stack (T5Stack, GPT2Model, LlamaModel, BertEncoder)
 * is a module with a forward, wrapped when what its blocks and final norm left
 * unwrapped reaches min_num_params. Its embeddings stay in the root (T5's are
 * the top-level shared table). */
static void size_wrap_stacks(struct wctx *w, int64_t min)
{
	const struct graph *g = w->g;
	int b, st, first, last, u;

	for (st = 0; st < 2; st++) {
		first = last = -1;
		for (b = 0; b < g->nblocks; b++)
			if (g->ops[g->block_first[b]].stack == st) {
				if (first < 0)
					first = g->block_first[b];
				last = life_block_last(g, b);
			}
		if (first < 0)
			continue;
		while (last + 1 < g->nops && g->ops[last + 1].stack == st && g->ops[last + 1].layer < 0 &&
		       (g->ops[last + 1].kind == OP_NORM || g->ops[last + 1].kind == OP_DROPOUT ||
			g->ops[last + 1].kind == OP_MUL || g->ops[last + 1].kind == OP_COPY))
			last++;
		if (unclaimed(w, first, last, -1) >= min && (u = add_unit(w, first, last, 0)) >= 0)
			w->wu->u[u].elems = claim(w, u, first, last);
	}
}

/* The units that can be gathered next (not the root, owning parameters),
 * ordered for next_units: forward by (first op, index), backward by (last op
 * descending, index). */
static int by_first(const void *x, const void *y, void *ctx)
{
	const struct wrap_unit *u = ctx;
	int a = *(const int *)x, b = *(const int *)y;

	return u[a].first != u[b].first ? (u[a].first > u[b].first) - (u[a].first < u[b].first) : (a > b) - (a < b);
}

static int by_last_down(const void *x, const void *y, void *ctx)
{
	const struct wrap_unit *u = ctx;
	int a = *(const int *)x, b = *(const int *)y;

	return u[a].last != u[b].last ? (u[a].last < u[b].last) - (u[a].last > u[b].last) : (a > b) - (a < b);
}

/* w->wu->next: for each unit u, the next unit in forward order: among the
 * others (not the root, owning parameters) that start after u, or start with
 * it, end before it and come after it in index, the one that starts first,
 * the lowest index among equals; in backward order likewise, by last op
 * descending and first op after u's. A unit starting with u (nested in it,
 * outer first) comes before any starting later, so the answer is the first
 * such in u's group of the sorted order, else the first unit of the next
 * group: a sort per direction instead of a scan of every unit per call (one
 * per unit and micro-step: 2.3 % of a simulate of GPT-3's 97 units, perf).
 * Returns 0 or -1. */
static int next_units(struct wctx *w)
{
	const struct wrap_unit *U = w->wu->u;
	int *e = malloc(((size_t)w->wu->n + 1) * sizeof *e), n = 0, u, v, k, lo, hi, mid, fwd;

	w->wu->next = malloc(((size_t)2 * w->wu->n + 1) * sizeof *w->wu->next);
	if (!e || !w->wu->next) {
		free(e);
		return -1;
	}
	for (fwd = 0; fwd < 2; fwd++) {
		for (n = 0, v = 0; v < w->wu->n; v++)
			if (!U[v].root && U[v].elems > 0)
				e[n++] = v;
		qsort_r(e, (size_t)n, sizeof *e, fwd ? by_first : by_last_down, (void *)U);
		for (u = 0; u < w->wu->n; u++) {
			int key = fwd ? U[u].first : U[u].last, best = -1;
			for (lo = 0, hi = n; lo < hi;) {  /* the first of u's group or after it */
				mid = (lo + hi) / 2;
				if (fwd ? U[e[mid]].first < key : U[e[mid]].last > key)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (k = lo; k < n && (fwd ? U[e[k]].first : U[e[k]].last) == key; k++) {
				v = e[k];
				if (v > u && (fwd ? U[v].last < U[u].last : U[v].first > U[u].first)) {
					best = v;  /* nested in u, or u in it: the lowest index */
					break;
				}
			}
			if (best < 0 && k < n)  /* the next group's lowest index */
				best = e[k];
			w->wu->next[2 * u + fwd] = best;
		}
	}
	free(e);
	return 0;
}


int wrap_units_build(struct wrap_units *wu, const struct graph *g, int policy, double min_params)
{
	struct wctx w = {g, wu, 0};
	int b, i, root;

	memset(wu, 0, sizeof *wu);
	wu->own = malloc(((size_t)g->nops + 1) * sizeof *wu->own);
	if (!wu->own)
		return -1;
	for (i = 0; i < g->nops; i++)
		wu->own[i] = -1;
	root = add_unit(&w, 0, g->nops - 1, 1);
	for (b = 0; b < g->nblocks && policy != WRAP_NONE; b++) {
		int first = g->block_first[b], last = life_block_last(g, b), u;
		if (policy == WRAP_SIZE) {
			size_wrap_block(&w, first, last, (int64_t)min_params);
		} else if ((u = add_unit(&w, first, last, 0)) >= 0) {
			wu->u[u].elems = claim(&w, u, first, last);
		}
	}
	if (policy == WRAP_SIZE)
		size_wrap_stacks(&w, (int64_t)min_params);
	if (root >= 0)
		wu->u[root].elems = claim(&w, root, 0, g->nops - 1);
	if (w.oom || next_units(&w)) {
		wrap_units_free(wu);
		return -1;
	}
	return 0;
}

void wrap_units_free(struct wrap_units *w)
{
	free(w->u);
	free(w->own);
	free(w->next);
	memset(w, 0, sizeof *w);
}

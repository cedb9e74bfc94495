/*
 * life.c — the lifetime analysis of a model graph (see life.h).
 */
#include "life.h"

#include <stdlib.h>
#include <string.h>

#include "scenario.h"

int *life_csr(const int *key, int nitems, int nkeys, int **off_out)
{
	int *off = calloc((size_t)nkeys + 2, sizeof *off), *items, i, k;

	if (!off)
		return NULL;
	for (i = 0; i < nitems; i++)
		if (key[i] >= 0)
			off[key[i] + 2]++;
	for (k = 0; k < nkeys; k++)
		off[k + 2] += off[k + 1];
	items = malloc(((size_t)off[nkeys + 1] + 1) * sizeof *items);
	if (!items) {
		free(off);
		return NULL;
	}
	for (i = 0; i < nitems; i++)
		if (key[i] >= 0)
			items[off[key[i] + 1]++] = i;
	*off_out = off;  /* items of key k: off[k] .. off[k+1]-1 */
	return items;
}

/* Recompute regions: each block (full), each run of attention-core ops (selective). */
static void regions(struct life *l, const struct graph *g, int recompute)
{
	int i, b;

	l->nreg = 0;
	for (i = 0; i < g->nops; i++)
		l->reg[i] = -1;
	if (recompute == RECOMPUTE_FULL) {
		for (b = 0; b < g->nblocks; b++) {
			l->rfirst[b] = g->block_first[b];
			l->rlast[b] = life_block_last(g, b);
			for (i = l->rfirst[b]; i <= l->rlast[b]; i++)
				l->reg[i] = b;
		}
		l->nreg = g->nblocks;
		return;
	}
	for (i = 0; recompute == RECOMPUTE_SELECTIVE && i < g->nops; i++) {
		if (!g->ops[i].attn_core)
			continue;
		if (i == 0 || !g->ops[i - 1].attn_core)
			l->rfirst[l->nreg++] = i;
		l->reg[i] = l->nreg - 1;
		l->rlast[l->nreg - 1] = i;
	}
}

static void set_min(int *v, int x)
{
	if (*v < 0 || x < *v)
		*v = x;
}

/* fb (forward copies), rs and lastr (replays). */
static void keepers(struct life *l, const struct graph *g)
{
	int i, k, t, R, pr;

	for (t = 0; t < g->nt; t++) {
		l->fb[t] = l->rs[t] = -1;
		l->lastr[t] = g->t[t].producer;
	}
	for (i = 0; i < g->nops; i++) {
		const struct gop *o = &g->ops[i];
		R = l->reg[i];
		for (k = 0; k < o->nsaved; k++) {
			t = o->saved[k];
			pr = g->t[t].producer;
			if (R < 0)
				set_min(&l->fb[t], i);
			else if (pr < 0 || l->reg[pr] != R)
				set_min(&l->fb[t], l->rfirst[R]);
			else
				set_min(&l->rs[t], i);
		}
		for (k = 0; k < o->nin; k++) {
			t = o->in[k];
			pr = g->t[t].producer;
			if (R >= 0 && (pr < 0 || l->reg[pr] != R))
				set_min(&l->fb[t], l->rfirst[R]);
			if (R >= 0 && pr >= 0 && l->reg[pr] == R && i > l->lastr[t])
				l->lastr[t] = i;
		}
	}
}

int life_build(struct life *l, const struct graph *g, int recompute)
{
	int nt = g->nt, no = g->nops, t, *key;

	memset(l, 0, sizeof *l);
	l->reg = malloc(((size_t)no + 1) * sizeof *l->reg);
	l->rfirst = malloc(((size_t)no + 1) * sizeof *l->rfirst);
	l->rlast = malloc(((size_t)no + 1) * sizeof *l->rlast);
	l->fb = malloc(((size_t)nt + 1) * sizeof *l->fb);
	l->rs = malloc(((size_t)nt + 1) * sizeof *l->rs);
	l->lastr = malloc(((size_t)nt + 1) * sizeof *l->lastr);
	key = calloc((size_t)nt + 1, sizeof *key);
	if (!l->reg || !l->rfirst || !l->rlast || !l->fb || !l->rs || !l->lastr || !key) {
		free(key);
		return -1;
	}
	regions(l, g, recompute);
	keepers(l, g);
	for (t = 0; t < nt; t++)
		key[t] = g->t[t].producer;
	l->prod = life_csr(key, nt, no, &l->poff);
	for (t = 0; t < nt; t++)
		key[t] = g->t[t].held ? -1 : l->fb[t];
	l->ffree = life_csr(key, nt, no, &l->foff);
	l->rfree = life_csr(l->rs, nt, no, &l->roff);
	free(key);
	return !l->prod || !l->ffree || !l->rfree ? -1 : 0;
}

void life_free(struct life *l)
{
	free(l->reg);
	free(l->rfirst);
	free(l->rlast);
	free(l->fb);
	free(l->rs);
	free(l->lastr);
	free(l->poff);
	free(l->prod);
	free(l->foff);
	free(l->ffree);
	free(l->roff);
	free(l->rfree);
	memset(l, 0, sizeof *l);
}

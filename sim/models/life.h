/*
 * life.h — the lifetime analysis of a model graph: when each tensor is
 * produced, how long its forward copy is kept (until the backward of its first
 * saver), when it is last used, and what activation checkpointing recomputes.
 * One analysis, read by the simulator's memory walk (memwalk.c) and by the
 * runtime's interpreter (runtime/model_rt.c), so the arena's peak and its
 * prediction follow the same rules (sim/models/memory.h S4-S5; tests/test_grid.c
 * checks them equal byte for byte).
 *
 * Rules (memory.h S4-S5):
 *  - forward: op i produces its output, then the tensors it creates for its
 *    backward (norm statistics, dropout masks), in graph order; after op i,
 *    each distinct input and each product whose last forward use is i and
 *    that nothing keeps is freed (a fwd_held one at the forward's end);
 *  - kept: a tensor some op outside a recompute region saves, or that a region
 *    reads from outside it, stays until the backward of its first keeper (fb);
 *    held tensors (the outputs a step returns) stay to the micro-step's end;
 *  - recompute regions: full = each block, selective = each run of attention
 *    core ops (Korthikanti et al. 2022 §5). Before the backward of a region's
 *    last op its forward is replayed; a replayed tensor saved inside the region
 *    stays until the backward of its first saver there (rs), the others are
 *    freed after their last use inside the region (lastr).
 */
#ifndef SHARDCAST_LIFE_H
#define SHARDCAST_LIFE_H

#include "graph.h"

struct life {
	int nreg;
	int *reg;            /* (nops) recompute region of each op, -1 none */
	int *rfirst, *rlast; /* (nreg) first and last op of each region */
	int *fb;             /* (nt) op whose backward frees the forward copy, -1 not kept */
	int *rs;             /* (nt) replay: first saver inside the region, -1 none */
	int *lastr;          /* (nt) replay: last use inside the region */
	int *poff, *prod;    /* tensors op i produces, graph order: prod[poff[i] .. poff[i+1]) */
	int *foff, *ffree;   /* forward copies freed at op i's backward (not held), ascending */
	int *roff, *rfree;   /* replay copies freed at op i's backward, ascending */
};

/* Analyses graph g under activation checkpointing recompute (enum recompute).
 * Returns 0, or -1 when out of memory; l is then to be freed with life_free. */
int life_build(struct life *l, const struct graph *g, int recompute);

void life_free(struct life *l);

/* Items 0..nitems-1 grouped by key (keys < 0 left out), ascending within a
 * key: those of key k are items[off[k] .. off[k+1]-1]. Returns the malloc'd
 * items and sets *off_out (malloc'd), or NULL when out of memory. */
int *life_csr(const int *key, int nitems, int nkeys, int **off_out);

/* The last op of block b (its ops run from g->block_first[b]). */
static inline int life_block_last(const struct graph *g, int b)
{
	int i = g->block_first[b];

	while (i + 1 < g->nops && g->ops[i + 1].unit == b + 1)
		i++;
	return i;
}

/* Input k of op o unless it repeats an earlier input (scores reads qkv twice): -1. */
static inline int life_distinct_in(const struct gop *o, int k)
{
	int j;

	for (j = 0; j < k; j++)
		if (o->in[j] == o->in[k])
			return -1;
	return o->in[k];
}

/* Whether tensor t outlives its forward uses (a saver's backward or the step's end frees it). */
static inline int life_kept(const struct life *l, const struct graph *g, int t)
{
	return l->fb[t] >= 0 || g->t[t].held;
}

/* Whether tensor t (an input or product of op i, -1 none) is freed right after op i's forward. */
static inline int life_fwd_frees(const struct life *l, const struct graph *g, int i, int t)
{
	return t >= 0 && g->t[t].last_fwd_use == i && !life_kept(l, g, t) && !g->t[t].fwd_held;
}

/* Whether tensor t (an input or product of op i, -1 none) is freed right after op
 * i's replay: made inside i's region, saved by none of its ops, last used by i. */
static inline int life_replay_frees(const struct life *l, const struct graph *g, int i, int t)
{
	int R = l->reg[i], pr = t >= 0 ? g->t[t].producer : -1;

	return t >= 0 && R >= 0 && l->rs[t] < 0 && l->lastr[t] == i && pr >= l->rfirst[R] && pr <= l->rlast[R];
}

#endif

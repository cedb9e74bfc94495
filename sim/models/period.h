/*
 * period.h — the repeated blocks of a model graph.
 *
 * A transformer's blocks are the same ops with the same sizes, so the models
 * that walk a graph do the same work for each of them. period_find says which
 * consecutive blocks repeat: blocks e0 .. e1 - 1 where block b + p has the ops
 * of block b (same kinds, parameters, shapes, FLOPs, tensor sizes, the same
 * wrapping module and tensor-parallel all-reduces), op for op. A caller's own
 * per-op values that must repeat too (DDP's bucket boundaries, say) come in
 * key. The step model (step.c) simulates a few of them and extends by the
 * period; a period of several blocks covers what repeats less often than
 * every block (a bucket closing every third block).
 */
#ifndef SHARDCAST_PERIOD_H
#define SHARDCAST_PERIOD_H

#include "graph.h"

struct period {
	int e0, e1;        /* blocks e0 .. e1 - 1 repeat */
	int p;             /* blocks per period */
	int dop;           /* ops per period: block b + p's ops are block b's + dop */
};

/* Whether ops i and j of g are alike (same work on same-sized tensors). */
int period_ops_alike(const struct graph *g, int i, int j);

/* The longest run of blocks of g that repeat with a period of at most maxp
 * blocks, ops alike and key[i] == key[i + dop] (key may be NULL); the
 * shortest period of that length. Returns 0 and fills *out, or -1 when no
 * run holds three periods. */
int period_find(const struct graph *g, const double *key, int maxp, struct period *out);

#endif

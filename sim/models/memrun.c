/*
 * memrun.c — finding the periodic runs of a memory tape (see memrun.h).
 *
 * Greedy, left to right: at each event that no run covers yet, the events one
 * block further on (op + dop for each block length of the graph, either way:
 * forward walks the blocks up, backward and the optimizer down) that look the
 * same are candidates for the start of its next copy; the longest exact
 * repetition found becomes a run, otherwise the event stays literal. Each
 * event links to the next of its op, and a cursor per op stands at its first
 * event not yet passed (the walk only moves forward), so each look-up is short
 * and the index is one pass over the tape. A run is taken from
 * MEMRUN_MIN_REPS copies on: shorter ones cost the evaluation as much as they
 * save.
 */
#include "memrun.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "life.h"
#include "vec.h"

#define MEMRUN_MIN_REPS 3
#define MEMRUN_MAX_DOPS MEM_TAPE_MAX_DOPS /* op shifts tried: + and - each block length */
#define MEMRUN_MAX_TRIES 4     /* candidate starts per shift */
#define MEMRUN_MAX_LOOK 32     /* events of the shifted op looked at per shift */

/* Whether y is x moved by dop ops (-1 stays -1), every other field equal.
 * The fields' differences are or'ed and tested once: nearly every comparison
 * of a run's copies is equal, and the comparisons were half of memrun_build's
 * samples with a test per field; tested once, memrun_build went from 9.3 to
 * 7.7 % of bench/sweep.ini's tables (perf). */
static inline int same(const struct mem_event *x, const struct mem_event *y, int dop)
{
	uint64_t a, c;
	int32_t op = x->op >= 0 ? x->op + dop : -1;

	/* what, cat, sign, phase, micro, pooled and pad: the 8 bytes after op */
	_Static_assert(offsetof(struct mem_event, pad) + 1 == offsetof(struct mem_event, what) + 8, "event layout");
	memcpy(&a, &x->what, 8);
	memcpy(&c, &y->what, 8);
	return ((uint64_t)(x->fixed ^ y->fixed) | (uint64_t)(x->per_sample ^ y->per_sample) | (a ^ c) |
		(uint32_t)(op ^ y->op)) == 0;
}

/* The op shifts a repetition may have: plus and minus the distance between
 * the first ops of consecutive blocks of a stack (0 for a graph without
 * blocks). Returns how many. */
static int shifts(const struct graph *g, int *dop)
{
	int n = 0, b, d, k;

	dop[n++] = 0;
	for (b = 0; b + 1 < g->nblocks; b++) {
		if (g->ops[g->block_first[b]].stack != g->ops[g->block_first[b + 1]].stack)
			continue;
		d = g->block_first[b + 1] - g->block_first[b];
		for (k = 0; k < n && dop[k] != d; k++)
			;
		if (k == n && n + 2 <= MEMRUN_MAX_DOPS) {
			dop[n++] = d;
			dop[n++] = -d;
		}
	}
	return n;
}

/* The events by op, linked: t->ix[i] is the next event of event i's op (-1
 * none), t->ixoff[o + 1] the first event of op o (-1 included; -1 none), to be
 * moved forward as the walk goes (next_of). Returns 0 or -1. */
static int index_ops(struct mem_tape *t, int nops)
{
	int i, o, *next, *first;

	if (vec_grow((void **)&t->ixoff, &t->capixoff, nops + 1, sizeof *t->ixoff) ||
	    vec_grow((void **)&t->ix, &t->capix, t->n + 1, sizeof *t->ix))
		return -1;
	next = t->ix;
	first = t->ixoff;
	memset(first, 0xff, (size_t)(nops + 1) * sizeof *first);  /* all -1 */
	for (i = t->n - 1; i >= 0; i--) {
		o = t->ev[i].op;
		if (o >= -1 && o < nops) {
			next[i] = first[o + 1];
			first[o + 1] = i;
		}
	}
	return 0;
}

/* The first event of op o after event i: the cursor of op o moved past i
 * (every later look-up is for an event after i). */
static inline int next_of(struct mem_tape *t, int o, int i)
{
	int k = t->ixoff[o + 1];

	while (k >= 0 && k <= i)
		k = t->ix[k];
	t->ixoff[o + 1] = k;
	return k;
}

/* The copies of events from i on with period len and shift dop: how many
 * whole copies repeat exactly (1 = none). */
static int copies(const struct mem_tape *t, int i, int len, int dop)
{
	int m = 0;

	while (i + len + m < t->n && same(&t->ev[i + m], &t->ev[i + len + m], dop))
		m++;
	return 1 + m / len;
}

/* The best periodic run starting at event i: *len, *reps, *dop; 0 = none. */
static int find_run(struct mem_tape *t, int nops, int i, const int *dop, int ndop,
		    int *len, int *reps, int *dbest)
{
	const struct mem_event *e = &t->ev[i];
	int d, o, look, tries, j, r, best = 0;

	for (d = 0; d < ndop; d++) {
		o = e->op < 0 ? -1 : e->op + dop[d];  /* -1 stays -1 whatever the shift */
		if (o < -1 || o >= nops)
			continue;
		for (j = next_of(t, o, i), look = 0, tries = 0;  /* op o's events after i */
		     j >= 0 && look < MEMRUN_MAX_LOOK && tries < MEMRUN_MAX_TRIES; j = t->ix[j], look++) {
			if (!same(e, &t->ev[j], dop[d]))
				continue;
			tries++;
			r = copies(t, i, j - i, dop[d]);
			if (r < MEMRUN_MIN_REPS)
				continue;
			if ((long)r * (j - i) > best) {
				best = r * (j - i);
				*len = j - i;
				*reps = r;
				*dbest = dop[d];
			}
			break;  /* the shortest period of this shift: a longer one covers no more */
		}
	}
	return best > 0;
}

static int add_run(struct mem_tape *t, int start, int len, int reps, int dop)
{
	if (len <= 0)
		return 0;
	if (vec_grow((void **)&t->run, &t->caprun, t->nrun + 1, sizeof *t->run))
		return -1;
	t->run[t->nrun++] = (struct mem_run){start, len, reps, dop};
	return 0;
}

int memrun_build(struct mem_tape *t, const struct graph *g)
{
	int dop[MEMRUN_MAX_DOPS], ndop = shifts(g, dop), i = 0, lit = 0, len, reps, d;

	t->nrun = 0;
	memcpy(t->dop, dop, sizeof dop);
	t->ndop = ndop;
	t->gnops = g->nops;
	if (index_ops(t, g->nops))
		return -1;
	while (i < t->n) {
		if (!find_run(t, g->nops, i, dop, ndop, &len, &reps, &d)) {
			i++;
			continue;
		}
		if (add_run(t, lit, i - lit, 1, 0) || add_run(t, i, len, reps, d))
			return -1;
		i += len * reps;
		lit = i;
	}
	return add_run(t, lit, t->n - lit, 1, 0);
}

int memrun_again(struct mem_tape *t, const struct graph *g)
{
	int dop[MEMRUN_MAX_DOPS], ndop = shifts(g, dop), i;

	if (t->pnrun > 0 && t->pn == t->n && t->gnops == g->nops && t->ndop == ndop &&
	    memcmp(t->dop, dop, (size_t)ndop * sizeof *dop) == 0) {
		for (i = 0; i < t->n && same(&t->pev[i], &t->ev[i], 0); i++)
			;
		if (i == t->n) {  /* the same events: the runs found on them hold */
			t->nrun = t->pnrun;
			return 0;
		}
	}
	if (memrun_build(t, g)) {
		t->nrun = 0;  /* never kept half found */
		return -1;
	}
	return 0;
}

void memrun_free(struct mem_tape *t)
{
	free(t->run);
	free(t->ix);
	free(t->ixoff);
	t->run = NULL;
	t->ix = t->ixoff = NULL;
	t->nrun = t->caprun = t->capix = t->capixoff = 0;
}

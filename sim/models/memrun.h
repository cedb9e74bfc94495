/*
 * memrun.h — a memory tape as runs: literal events and periodic blocks.
 *
 * A transformer's blocks are alike, so the tape of a step repeats itself: the
 * forward of block b + 1 allocates and frees what the forward of block b did,
 * at the ops one block further on, and likewise the backward, the per-tensor
 * model states of the setup and the optimizer's temporaries. memrun_build
 * finds these repetitions in a built tape and describes it as a list of runs:
 * a literal run is events start .. start + len - 1 as they are; a periodic run
 * is events start .. start + len - 1 followed by reps - 1 copies of them, copy
 * k at start + k x len with every op index moved by k x dop (op -1 stays -1).
 * Only exact repetitions are runs (every field of every event of every copy is
 * compared), so the runs describe the tape event for event, and memory.c can
 * evaluate a periodic run in closed form from one copy's running sums (the
 * peak over its copies, the breakdown at it) instead of walking every copy.
 */
#ifndef SHARDCAST_MEMRUN_H
#define SHARDCAST_MEMRUN_H

#include "graph.h"
#include "memory.h"

/* Finds the runs of tape t, whose op indices are those of graph g (its blocks
 * give the op shifts a repetition may have). Fills t->run and t->nrun, keeping
 * their memory between calls. Returns 0, or -1 when out of memory. */
int memrun_build(struct mem_tape *t, const struct graph *g);

/* memrun_build, unless t's events are, field for field, those of the tape it
 * replaced in its plan (t->pev, mem_plan_rebuild) over a graph of the same
 * size and op shifts: then the runs found on those, which t->run still holds,
 * are kept. Sweep candidates that differ only in their node count often build
 * the same tape (sweep_eval.c evaluates them one after the other). Returns as
 * memrun_build. */
int memrun_again(struct mem_tape *t, const struct graph *g);

/* Frees what memrun_build keeps in t. */
void memrun_free(struct mem_tape *t);

#endif

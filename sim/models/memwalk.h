/*
 * memwalk.h — builds the allocation tape of one training step (see memory.h).
 *
 * memory.c owns the tapes and evaluates them; this file only turns a scenario,
 * its graph and a framework profile into the ordered alloc/free events of one
 * GPU role.
 */
#ifndef SHARDCAST_MEMWALK_H
#define SHARDCAST_MEMWALK_H

#include "memory.h"

enum memwalk_role {
	ROLE_RANK,       /* every rank alike (single, ddp, zero*, fsdp) */
	ROLE_DP_MASTER,  /* nn.DataParallel's GPU 0 */
	ROLE_DP_REPLICA  /* nn.DataParallel's other GPUs */
};

/* The walk's own events of the micro-steps (activations, their gradients,
 * autocast copies) with the strategy's hooks between them: what every
 * strategy but DataParallel shares for one graph, checkpointing, number of
 * micro-steps and autocast. Recorded by one walk, replayed by the others. */
struct mem_script {
	struct mem_event *ev;  /* (n) events, and hooks (sign 0, what = the hook) */
	int n, cap;
	int valid;
	const struct graph *g; /* the key */
	int recompute, nmicro, wcast;
	int64_t table;
};

/* The scripts of a sweep's group (graphs stay while it lasts). */
struct mem_scripts {
	struct mem_script *s;
	int n, cap;
	long recorded, replayed;  /* walks recorded into a script, replayed from one */
};

/* memwalk_build's flags. */
enum {
	MEMWALK_STOP_UNFIT = 1,   /* a walk whose events so far cannot hold one sample on the
				     device (mem_tape_bound below 1 at s->capacity; the whole tape's
				     bound is then too) stops and sets t->cut: checked after the
				     setup, and after the first micro-step's forward when the walk
				     is replayed from a script */
	MEMWALK_PREFETCH_SCAN = 2 /* ZeRO-3's prefetch steps over every gathered module from the
				     next op on, not from where the last one stopped (memstrat.c
				     zero3_pre): the same tape, the reference the tests compare */
};

/* Appends the events of one step for role to t. *host receives the host bytes
 * per node that offload keeps (ROLE_RANK and ROLE_DP_MASTER). With cache, the
 * walk's own events are replayed from a script when one fits (else recorded
 * into one): the same tape, at a fraction of the walk. flags: MEMWALK_*.
 * Returns 0 or fills e (out of memory). */
int memwalk_build(struct mem_tape *t, int role, const struct scenario *s, const struct graph *g,
		  const struct fw_profile *pf, unsigned flags, double *host, struct mem_scripts *cache,
		  struct err *e);

/* Forgets every script (their graphs are about to go); keeps the memory. */
void mem_scripts_clear(struct mem_scripts *c);
void mem_scripts_free(struct mem_scripts *c);

#endif

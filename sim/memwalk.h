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

/* Appends the events of one step for role to t. *host receives the host bytes
 * per node that offload keeps (ROLE_RANK and ROLE_DP_MASTER). Returns 0 or
 * fills e (out of memory). */
int memwalk_build(struct mem_tape *t, int role, const struct scenario *s, const struct graph *g,
		  const struct fw_profile *pf, double *host, struct err *e);

#endif

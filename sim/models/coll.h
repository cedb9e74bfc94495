/*
 * coll.h — cost models of collective operations over a group of GPUs.
 *
 * Each model is named, cited and selected by [cluster] collective_algorithm:
 *
 *  ring          NCCL's ring (Patarasuk & Yuan 2009; nccl-tests PERFORMANCE.md):
 *                all-reduce moves 2(n-1)/n·S through every link of the ring,
 *                reduce-scatter and all-gather (n-1)/n·S, broadcast and reduce S.
 *                Latency: NCCL's model (src/graph/tuning.cc): a base latency plus
 *                one hop per step, 2(n-1) steps for all-reduce, n-1 otherwise,
 *                of which 2(N-1) (resp. N-1) cross nodes.
 *  tree          NCCL's double binary tree for all-reduce (Sanders et al. 2009;
 *                NCCL 2.4): latency grows with log2 of the node count,
 *                2·((r-1)·α_intra + ⌈log2 N⌉·α_inter); bandwidth as NCCL's tuning
 *                model: algorithm bandwidth = 0.5 × 0.9 × the link's bus bandwidth.
 *                Other operations have no tree in NCCL and fall back to ring.
 *  hierarchical  two-level (Jia et al. 2018; Horovod's hierarchical all-reduce):
 *                reduce-scatter inside the node, all-reduce of 1/r of the data
 *                between nodes over the node's NICs, all-gather inside the node.
 *  auto          what NCCL's tuner does: the fastest of ring and tree by the
 *                models above (all-reduce); ring for the other operations.
 *
 * A collective runs as up to three sequential phases; inside a phase it keeps the
 * intra-node link and the NICs busy at once (a pipelined ring uses both). The
 * work of each phase is expressed in seconds of exclusive use of each link, so a
 * simulator can share a link between collectives that overlap on it (des.c).
 * Bandwidths are the links' line rate × efficiency (models/hw/links.ini); the
 * NICs of a node are divided among the groups that cross them at the same time.
 */
#ifndef SHARDCAST_COLL_H
#define SHARDCAST_COLL_H

#include "hw.h"

enum coll_op {
	COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_BROADCAST, COLL_REDUCE,
	COLL_GATHER, COLL_ALLTOALL, COLL_OP_COUNT
};
enum coll_algo { COLL_AUTO, COLL_RING, COLL_TREE, COLL_HIER, COLL_ALGO_COUNT };
enum { COLL_INTRA, COLL_INTER, COLL_NLINKS };

/* NCCL's base latency of the Simple protocol, ring (src/graph/tuning.cc
 * baseLat[Ring][Simple] = 8.4 us; REFERENCE.md). Large messages use Simple. */
#define COLL_BASE_LATENCY 8.4e-6 /* s */
/* NCCL's tree bandwidth model: busBw × 0.9, algorithm bandwidth = busBw / 2
 * (src/graph/tuning.cc, ncclTopoTuneModel). */
#define COLL_TREE_DERATE 0.9

struct coll_group {
	int n;              /* ranks in the group */
	int nodes;          /* nodes it spans, n / nodes ranks on each */
	double intra_bw;    /* bytes/s one GPU pushes on its intra-node link (line rate x efficiency) */
	double inter_bw;    /* bytes/s of the node's NICs available to this group */
	double intra_lat;   /* s per intra-node hop */
	double inter_lat;   /* s per inter-node hop */
};

struct coll_phase {
	double work[COLL_NLINKS];  /* s the phase keeps each link busy when alone on it */
};

struct coll_cost {
	int op, algo;              /* algo: the one chosen, never COLL_AUTO */
	double bytes;              /* buffer size (see coll_cost) */
	double latency;            /* s: base latency plus the hops */
	int nphase;
	struct coll_phase ph[3];   /* run one after the other */
};

/* The group of n ranks over nodes nodes, on intra (each GPU's link) and inter
 * (nics NICs per node, shared by sharing groups that communicate at once). */
void coll_group_make(struct coll_group *g, int n, int nodes, const struct link *intra,
		     const struct link *inter, int nics, int sharing);

/* Cost of op on a buffer of bytes: all-reduce's, broadcast's and reduce's
 * buffer, all-gather's output (the full tensor), reduce-scatter's input (the
 * full tensor), gather's gathered total, all-to-all's per-rank input. */
void coll_cost(int op, int algo, double bytes, const struct coll_group *g, struct coll_cost *c);

/* Its duration on links nobody else uses: latency + sum over phases of the
 * slowest link's work (inline: des_stream_bounds takes it per collective of a
 * step; work is never NaN, so the comparison is fmax). */
static inline double coll_time(const struct coll_cost *c)
{
	double t = c->latency, a, b;
	int i;

	for (i = 0; i < c->nphase; i++) {
		a = c->ph[i].work[COLL_INTRA];
		b = c->ph[i].work[COLL_INTER];
		t += a > b ? a : b;
	}
	return t;
}

const char *coll_op_name(int op);
const char *coll_algo_name(int algo);

#endif

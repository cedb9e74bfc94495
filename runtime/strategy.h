/*
 * strategy.h — one implementation of every data-parallel strategy over any
 * backend: how parameters, gradients and optimizer states are placed on each
 * device, gathered, reduced and updated around the model's micro-steps.
 *
 *   single        one device holds everything
 *   dp            one process, several devices (nn.DataParallel): device 0 holds
 *                 the model, gradients and optimizer; each micro-step copies the
 *                 parameters to the other devices (replica parameters and
 *                 gradients live there for the micro-step) and sums their
 *                 gradients into device 0's
 *   ddp           replicas; gradients copied into buckets (ddp_bucket_mb, the
 *                 first 1 MiB as torch's DDP) all-reduced as each fills in backward
 *   zero1         replicas; optimizer states sharded; the gradient all-reduced;
 *                 each rank updates its shard, then parameters are all-gathered
 *   zero2         as zero1 with gradients sharded: each unit's full gradient
 *                 lives during the unit's backward and is reduce-scattered
 *   zero3, fsdp full_shard   parameters sharded too: a unit is all-gathered for
 *                 its forward and freed after it (the root unit stays), gathered
 *                 again for its backward
 *   fsdp shard_grad_op       gathered in forward, kept until the unit's backward
 *   fsdp no_shard            replicas; each unit's gradient all-reduced after its backward
 *   fsdp hybrid_shard(_zero2) full_shard (shard_grad_op) inside groups of
 *                 gpus_per_node ranks, gradient shards all-reduced across groups
 *
 * Sharded flat buffers are padded to a multiple of the shard group's size.
 * Everything on a device is allocated through its arena; states are allocated
 * by strat_init, so a step's peak is states + the step's transients.
 */
#ifndef SHARDCAST_STRATEGY_H
#define SHARDCAST_STRATEGY_H

#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "model_rt.h"
#include "scenario.h"

enum { STRAT_MAX_DEV = 16 };

/* What the strategy runs: the scenario's training settings, resolved. */
struct strat_opts {
	int strategy;              /* enum strategy */
	int sharding;              /* enum fsdp_sharding (fsdp) */
	int bwd_prefetch;          /* enum fsdp_prefetch (fsdp) */
	int fwd_prefetch;
	int recompute;             /* enum recompute */
	int optimizer;             /* enum optimizer */
	int micro_batch;           /* samples per device per micro-step */
	int grad_accum;
	int group;                 /* hybrid: ranks per shard group */
	int devices;               /* dp: devices in this process */
	double bucket_mb;          /* ddp bucket cap, MiB */
	double capacity;           /* bytes per device, 0 = unlimited */
	double lr, beta1, beta2, eps, weight_decay, momentum;
	uint64_t seed;             /* weights, data and dropout */
	int agree;                 /* ranks agree before each collective (search trials) */
};

/* Fills o from a scenario (micro_batch auto -> 1; the caller sets the batch). */
void strat_opts_from(struct strat_opts *o, const struct scenario *s);

struct unit_state {
	size_t n;                  /* elements of the unit */
	size_t npad;               /* n padded to the shard group */
	size_t nshard;             /* npad / group size (sharded states), else n */
	float *p;                  /* resident parameters: full (npad or n) or shard */
	float *pg;                 /* gathered full parameters (sharded params), or NULL */
	float *g;                  /* resident gradients: full or shard */
	float *gfull;              /* the unit's full gradient during its backward (sharded grads) */
	float *m, *v;              /* optimizer states (local size) */
};

struct ddp_bucket {
	int p_hi, p_lo;            /* params p_hi down to p_lo (reverse order) */
	size_t n;                  /* elements */
	float *buf;
	int pending;
	struct rt_req req;
};

struct strat {
	struct strat_opts o;
	struct backend *be;
	struct rt_comm world;      /* a copy of the caller's (not freed here) */
	struct rt_comm shard, repl;  /* shard group, replicate group (hybrid) */
	int have_groups;
	int kind;                  /* internal enum */
	int shard_params, shard_grads, shard_opt;
	int dp_rank, dp_size;      /* data-parallel index of this rank (or device) */
	int ndev, cur;             /* devices in this process; the one running */
	struct arena ar[STRAT_MAX_DEV];
	struct rtm m;
	struct unit_state *u[STRAT_MAX_DEV];
	struct ddp_bucket *bk;
	int nbk;
	int sync;                  /* this micro-step reduces gradients */
	int agreed;                /* a collective's agreement saw a failed rank */
	int step;                  /* optimizer steps done */
	double loss;               /* mean token loss of the last step (all ranks) */
};

/* Sets up states on every device (allocating through the arenas) with the
 * initial weights of o->seed. Returns 0, RT_EOOM, or fills e. On error the
 * strategy is already freed. */
int strat_init(struct strat *s, const struct strat_opts *o, const struct model *m, int T,
	       double dropout, struct backend *be, struct rt_comm *world, struct err *e);

/* One optimizer step: grad_accum micro-steps of micro_batch samples per
 * device, reductions, update. s->loss gets the step's mean loss. The ranks
 * agree on the outcome: a rank's RT_EOOM is everyone's (rc RT_EOOM). */
int strat_step(struct strat *s, struct err *e);

/* The whole model's parameters (canonical order, nparams) on the host of
 * every rank: shards are gathered. For tests. */
int strat_gather_params(struct strat *s, float *host, struct err *e);

/* Peak bytes over this process's devices, and the device that holds it. */
size_t strat_peak(const struct strat *s, int *dev);
void strat_reset_peak(struct strat *s);

void strat_free(struct strat *s);

/* Parses a strategy spec for tests and tools: "single", "ddp", "zero1",
 * "fsdp:shard_grad_op", "dp:4", ... into o. Returns 0 or -1. */
int strat_parse(const char *spec, struct strat_opts *o);

#endif

/*
 * strategy.h — one implementation of every data-parallel strategy over any
 * backend: where parameters, gradients and optimizer states live on each
 * device, and how they are gathered, reduced and updated around the model's
 * micro-steps. What is allocated, and when, is sim/models/memory.h's contract for
 * framework = shardcast (S3, S6), so the memory model predicts the arena:
 *
 *   single, ddp   flat buffers of the whole model: parameters, optimizer
 *                 states (one buffer: m then v), gradients; ddp adds a flat
 *                 bucket buffer (unless ddp_gradient_as_bucket_view): buckets of
 *                 ddp_bucket_mb (the first 1 MiB) in reverse parameter order,
 *                 each copied in and all-reduced as soon as its gradients are
 *                 final during backward
 *   zero1         parameters and gradients whole; optimizer states of this
 *                 rank's 1/N of the flat model; gradients all-reduced, the shard
 *                 updated, parameters all-gathered
 *   zero2         as zero1 with a gradient shard; the gradients are written
 *                 into a bucket of min(zero_reduce_bucket_size, params) elements
 *                 kept across steps, then reduce-scattered into the shard
 *   zero3, fsdp   wrap units (the root: embeddings, final norm, head; each
 *                 block unless fsdp_auto_wrap_policy = no_wrap): flat shards of
 *                 every unit (params, optimizer, gradients), a unit gathered
 *                 before its first op (forward and backward) and freed after
 *                 its last (full_shard, hybrid_shard, zero3) or after its
 *                 backward (shard_grad_op, hybrid_shard_zero2); the root stays
 *                 gathered; its unsharded gradient lives from its first
 *                 parameter gradient to its reduce-scatter; fsdp's prefetch
 *                 keys gather the next unit early; no_shard keeps whole units
 *                 and all-reduces each unit's gradient after its backward;
 *                 hybrid shards inside groups of gpus_per_node ranks and
 *                 all-reduces the shards across them
 *   fsdp2         fsdp's units with FSDP2's layout and buffers (stratfsdp2.c,
 *                 sim/models/memfsdp2.c): every parameter sharded on dim 0 (its rows
 *                 padded to a multiple of the shard group), a unit all-gathered
 *                 into a flat buffer then copied out into its padded
 *                 per-parameter tensors, the buffer kept in forward until the
 *                 next unit's copy-out; after backward the unsharded gradient
 *                 is copied into a reduce-scatter input (rank-major), the
 *                 reduced shard into an output that is added to the gradient
 *                 shard; the input is kept until the next unit's reduction
 *   dp            one process, several devices (nn.DataParallel): device 0
 *                 holds parameters and optimizer states per tensor and the
 *                 whole batch's token ids; each micro-step copies the
 *                 parameters to the other devices; every device makes its
 *                 gradients per tensor as backward reaches them; at the end
 *                 device 0 sums them into its own gradients, allocated then.
 *
 * Mixed precision (plan.h widths, memory.h S2): parameters, gradients, buckets
 * and gathered copies in the 16-bit type (rounded after every write and every
 * reduction), an fp32 master beside this rank's parameters (allocated right
 * after them, per tensor for dp) that the fp32 optimizer updates and writes
 * back; fp16 adds the loss scale (torch.amp.GradScaler's rules) and its 8 bytes.
 */
#ifndef SHARDCAST_STRATEGY_H
#define SHARDCAST_STRATEGY_H

#include <stdint.h>

#include "arena.h"
#include "backend.h"
#include "model_rt.h"
#include "scenario.h"

enum { STRAT_MAX_DEV = 16 };

/* What the strategy runs: the scenario's plan (plan.h, the shardcast engine)
 * and the runtime's own settings. */
struct strat_opts {
	struct plan plan;          /* mechanism, sharding, prefetch, wrap (plan_from_spec for tests) */
	int recompute;             /* enum recompute */
	int optimizer;             /* enum optimizer */
	int micro_batch;           /* samples per device per micro-step */
	int grad_accum;
	int group;                 /* hybrid: ranks per shard group */
	int devices;               /* dp: devices in this process */
	double bucket_mb;          /* ddp bucket cap, MiB */
	double zero_bucket;        /* zero_reduce_bucket_size, elements (0: 5e8) */
	double capacity;           /* bytes per device, 0 = unlimited */
	double lr, beta1, beta2, eps, weight_decay, momentum;
	uint64_t seed;             /* weights, data and dropout */
	int agree;                 /* ranks agree before each collective (search trials) */
};

/* Fills o from a scenario (micro_batch auto -> 1; the caller sets the batch). */
void strat_opts_from(struct strat_opts *o, const struct scenario *s);

struct sunit {
	int first, last;           /* op range */
	size_t cstart, n;          /* canonical offset and elements of its parameters */
	size_t sh;                 /* shard: ceil(n / N) */
	size_t soff;               /* offset of its shard in the flat shard buffers */
	float *pg;                 /* gathered parameters (sh x N), or NULL */
	float *ug;                 /* unsharded gradient (sh x N), or NULL */
	float *ag;                 /* fsdp2: all-gather buffer (N x sh), or NULL */
	float *rs;                 /* fsdp2: reduce-scatter input (N x sh), or NULL */
};

struct ddp_bucket {
	int p_hi, p_lo;            /* params p_hi down to p_lo (reverse order) */
	size_t off, n;             /* elements: region of the bucket buffer */
	int pending;
	struct rt_req req;
};

struct strat {
	struct strat_opts o;
	struct backend *be;
	struct rt_comm world;      /* a copy of the caller's (not freed here) */
	struct rt_comm shard, repl;  /* shard group, replicate group (hybrid) */
	int have_groups;
	int mech;                  /* enum plan_mech (of the shardcast engine: no MECH_ZERO3) */
	int sharding;              /* enum fsdp_sharding of the unit mechanism */
	int gathers;               /* units are gathered (all but no_shard) */
	int reshard_fwd;           /* units freed after their forward */
	int zstage;                /* zero1/zero2 */
	int N;                     /* ranks sharing the model states */
	int dp_rank, dp_size;      /* data-parallel index of this rank, replicas */
	int ndev, cur;             /* devices in this process (dp); the one running */
	struct arena ar[STRAT_MAX_DEV];
	struct rtm m;
	size_t P;                  /* parameters (elements) */
	int dt;                    /* enum rt_dtype of params, grads and activations */
	size_t wp, wg;             /* bytes per element of working params, gradients (4 or 2) */
	/* flat states on device 0 */
	float *params, *opt, *grads, *bucket;
	float *master;             /* fp32 master of this rank's states (mixed precision), or NULL */
	void *lsstate;             /* fp16: the loss scale's 8 bytes (memory.h S2) */
	double lscale;             /* fp16: the loss scale (1 otherwise) */
	int good;                  /* fp16: clean steps since the scale last changed */
	int opt_steps;             /* updates applied (Adam's t): fp16 skips overflowed steps */
	size_t sh;                 /* zero1/zero2: shard of the flat model */
	size_t S;                  /* units: elements of all shards */
	struct sunit *u;
	int nu;
	int *punit;                /* per param: its unit */
	int layout;                /* enum plan_layout of the units */
	size_t *prow, *pcol;       /* fsdp2, per param: rows (dim 0) and elements per row */
	size_t *psh, *psoff;       /* fsdp2, per param: shard (ceil(rows / N) rows) and its offset
				      in the unit's shard */
	int agheld, rsheld;        /* fsdp2: unit whose all-gather buffer (forward) and reduce-scatter
				      input are kept, -1 none */
	/* dp: per tensor, per device */
	float **dpp[STRAT_MAX_DEV], **dpg[STRAT_MAX_DEV];
	float **dpm, **dpv;        /* device 0's optimizer states */
	float **dpw;               /* device 0's fp32 masters (mixed precision), per tensor */
	float **dmg;               /* device 0's gradients (during the step's end) */
	float *tmp;                /* a second contribution to a tensor's gradient */
	int tmp_p;
	/* ddp */
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

/* The persistent state a checkpoint holds (parameters and optimizer states on
 * device 0, as this rank keeps them): up to max buffers. Returns the count. */
int strat_state(struct strat *s, float **buf, size_t *n, int max);

/* Parses a strategy spec for tests and tools: a name of plan.h's strategy
 * table ("single", "ddp", "zero1", "fsdp:shard_grad_op", ...) or "dp:N" (N
 * devices) into o->plan (and o->devices). Returns 0 or -1. */
int strat_parse(const char *spec, struct strat_opts *o);

#endif

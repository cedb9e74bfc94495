/*
 * memory.h — memory per GPU as a timeline, and the largest micro-batch that fits.
 *
 * One training step is walked over the model graph (graph.h): setup (what lives
 * across steps), forward op by op, backward in reverse, gradient reduction, the
 * optimizer step. Every tensor the framework allocates becomes an alloc event
 * and a free event on a per-GPU tape (memwalk.c builds it). An event's size is
 * fixed + per_sample x micro_batch bytes, so one tape serves every batch:
 * peak(b) is one pass over the tape with no allocation, and the max-batch search
 * (linear bound, then exact checks) never rebuilds anything.
 *
 * The allocator of the framework profile (profile.h) is applied when the tape is
 * evaluated. With pools (PyTorch's caching allocator) the tape's requests run
 * through its emulation (alloc.h, with the scenario's max_split_size_mb,
 * expandable_segments, garbage_collection_threshold and memory_fraction), at
 * the device's capacity less what is outside the allocator (CUDA context,
 * NCCL): the reserved bytes are what it holds, and a micro-batch fits when it
 * never runs out. A free event releases the most recent live block of its size
 * (the tape pairs events by size, not identity). The packed-segments model —
 * requests rounded to the alignment, those <= small_pool_max packed into small
 * segments, those below large_split_max into large segments, larger ones a
 * segment rounded to huge_round — is the max-batch search's fast first guess.
 * Without pools (the shardcast runtime's arena) each request is rounded to the
 * alignment and the live total is what must fit.
 *
 * Sources of the mechanisms are cited where they are built (memwalk.c); the
 * model-state arithmetic reproduces ZeRO (Rajbhandari et al. 2020, Table 1)
 * and the activations of the GRAPH_SHARDCAST graph reproduce Korthikanti et al.
 * 2022 (arXiv 2205.05198) §4 — tests/test_memory.c checks both.
 *
 * ---------------------------------------------------------------------------
 * CONTRACT for framework = shardcast (the runtime follows these rules, and the
 * simulator then predicts its arena peak byte for byte):
 *
 *  S1 Sizes. Each allocation is rounded up to a multiple of 256 B. No pools, no
 *     caching: a free returns the block at once. The peak is the maximum over
 *     the step of the sum of live rounded sizes. On gpu = cpu nothing else is
 *     counted; on a GPU the fixed costs of models/frameworks/shardcast.ini
 *     (CUDA context, cuBLAS workspace, NCCL buffers) are added.
 *  S2 Dtypes. fp32/tf32: params, grads, optimizer states fp32 (4 B). fp16/bf16:
 *     working params and grads 16-bit (2 B) plus an fp32 master copy (4 B):
 *     ZeRO's 2 + 2 + K layout. Optimizer states per parameter: sgd 0,
 *     sgd_momentum 4 B, adam/adamw 8 B. fp16 adds an 8 B loss-scale state.
 *  S3 Model states are flat per-rank buffers, allocated before the step and kept
 *     across steps, in this order: working params, master, optimizer states
 *     (one buffer for all of them), gradients, then the strategy's buffers
 *     (S6), then the fp16 loss-scale state. A buffer of zero bytes is not
 *     allocated. A shard of U elements over N ranks is ceil(U / N) elements; a
 *     gathered unit is N x ceil(U / N) elements. Offloaded states are not
 *     allocated on the device (their bytes are reported as host memory).
 *  (S4-S5's lifetimes are computed once, by sim/models/life.c, for the walk and the
 *  runtime alike.)
 *  S4 Activations: the GRAPH_SHARDCAST graph, tensor bytes = elems x dsize x
 *     micro_batch (token ids: int64). At the start of each micro-step the ids
 *     tensors are allocated (encoder ids first).
 *     Forward, op by op: allocate the op's output, then the tensors it creates
 *     for its backward (norm statistics, dropout masks), in graph order; then
 *     free, in input order followed by produced order, each input or produced
 *     tensor whose last forward use is this op and that no op saves.
 *     Backward, ops in reverse, an op runs if it is the loss, has a live output
 *     gradient, or owns parameters: (a) for each distinct input produced by an
 *     op: if it has no gradient yet, allocate one of the input's size, except
 *     that an add passes its output gradient to its inputs without allocating;
 *     later contributions accumulate in place; (b) parameter gradients (S6);
 *     (c) free the output gradient (when no input shares it), then each tensor
 *     whose first saver is this op (graph order). The loss's output has no
 *     gradient.
 *  S5 Recompute. full: each block is a region; selective: each run of
 *     attention-core ops (scores .. ctx, with any softmax copies) is a region.
 *     In forward, a tensor made inside a region is kept only if an op outside
 *     any region saves it or another region reads it; a tensor read by a region
 *     but made outside it is kept until that region's backward ends (after the
 *     backward of its first op). Before the backward of a region's last op (and
 *     after S6's gather for it) the region's forward is replayed: outputs and
 *     created tensors allocated again; those saved by an op of the region are
 *     kept until their first saver inside the region, the others freed at their
 *     last use inside the region.
 *  S6 Strategies (N = data-parallel ranks; gradients in the working dtype):
 *     single   grads flat (S3).
 *     ddp      grads flat; gradient_as_bucket_view = false adds a second flat
 *              buffer of the same size (the buckets, all-reduced in place).
 *     zero1    params and grads full; master and optimizer states shards.
 *     zero2    params full; grad shard; then a bucket of
 *              min(zero_reduce_bucket_size, params) elements; gradients are
 *              written into the bucket and reduce-scattered into the shard.
 *     zero3, fsdp  units: each transformer block and the root (everything
 *              else); fsdp honours fsdp_auto_wrap_policy. Per-unit shards of
 *              params, master, optimizer states and grads, summed into the
 *              flat buffers of S3. N is the data-parallel degree, or for
 *              hybrid_shard(_zero2) the ranks of a node (gpus_per_node /
 *              tensor_parallel, at least 1) when that is smaller (plan.h
 *              shard_n, the one rule of every model). A unit is gathered (one
 *              buffer of the gathered size) before its first op in forward and
 *              freed after its last op (full_shard, hybrid_shard, zero3) or kept
 *              to the end of its backward (shard_grad_op, hybrid_shard_zero2).
 *              The root is gathered for the whole step. Backward: the unit is
 *              gathered again if freed, before the backward of its last op; an
 *              unsharded gradient buffer of the gathered size is allocated before
 *              its first parameter gradient; after the backward of its first op
 *              the gradient is reduce-scattered into the grad shard and the
 *              buffer, then the gathered params, are freed. no_shard: N = 1,
 *              nothing is gathered and gradients go straight into the grads.
 *              fsdp's prefetch keys gather the next unit early (forward_prefetch:
 *              at the current unit's start; backward_pre: at the current unit's
 *              backward start; backward_post: after the current unit is freed,
 *              except after the root, whose backward ends the micro-step).
 *              offload = optimizer_and_params: the param shard is staged in a
 *              shard-sized buffer around each gather, and the reduce-scattered
 *              gradient in one around each reduction.
 *     dp       nn.DataParallel's mechanics (memstrat.c) with these dtypes: model
 *              states per tensor, not flat (the one exception to S3); the
 *              runtime's dp follows memstrat.c.
 *     Optimizer steps are in place, no temporaries. offload = optimizer moves
 *     master and optimizer states to the host; optimizer_and_params moves the
 *     param and grad shards too.
 * ---------------------------------------------------------------------------
 */
#ifndef SHARDCAST_MEMORY_H
#define SHARDCAST_MEMORY_H

#include <stdint.h>
#include <stdio.h>

#include "alloc.h"
#include "err.h"
#include "graph.h"
#include "predict.h"
#include "profile.h"
#include "scenario.h"

/* What an allocation is, for the breakdown (JSON: activations = ACT + ACT_GRAD,
 * overhead = OVERHEAD + allocator slack). */
enum mem_cat {
	MEM_PARAMS, MEM_GRADS, MEM_OPTIM, MEM_ACT, MEM_ACT_GRAD, MEM_BUFFERS, MEM_OVERHEAD,
	MEM_NCAT
};

enum mem_phase { MEM_SETUP, MEM_FWD, MEM_BWD, MEM_OPT };

/* Finer labels, for the report's "at the peak" line and the CSV. */
enum mem_what {
	W_CONTEXT, W_CUBLAS, W_NCCL, W_PARAMS, W_MASTER, W_OPT_STATES, W_LOSS_SCALE,
	W_GRADS, W_GRAD_SHARD, W_FP32_GRADS, W_INPUT, W_SAVED, W_TEMP_ACT, W_RECOMPUTE,
	W_ACT_GRAD, W_WGRAD_TEMP, W_CAST, W_GATHERED, W_UNSHARDED_GRAD, W_RS_OUT, W_BUCKET,
	W_GATHERED_OUT, W_REPLICA_PARAMS, W_REPLICA_GRADS, W_OPT_TEMP, W_STAGING,
	W_AG_BUF, W_POST_FWD,
	W_NWHAT
};

struct mem_event {
	int64_t fixed;       /* bytes */
	int64_t per_sample;  /* bytes per sample of the micro-batch */
	int32_t op;          /* graph op index, -1 none */
	int16_t what;        /* enum mem_what */
	int8_t cat;          /* enum mem_cat */
	int8_t sign;         /* +1 alloc, -1 free (same sizes as its alloc) */
	int8_t phase;        /* enum mem_phase */
	int8_t micro;        /* micro-step (0, or 1 for the second and later) */
	int8_t pooled;       /* 1: through the framework's allocator; 0: outside it */
	int8_t pad;
};

/* A stretch of a tape (memrun.h): events start .. start + len - 1, then, for
 * reps >= 2, reps - 1 copies of them (copy k at start + k x len, its op
 * indices moved by k x dop; -1 stays -1). reps = 1: literal events. */
struct mem_run {
	int start;             /* first event (index into ev) */
	int len;               /* events of one copy */
	int reps;              /* copies */
	int dop;               /* op shift from one copy to the next */
};

/* The events of one GPU role (every rank alike, or dp's GPU 0 / its replicas). */
/* The most op shifts a tape's runs are looked for with (memrun.c). */
#define MEM_TAPE_MAX_DOPS 8

/* A field added here is kept across mem_plan_rebuild unless tape_reuse
 * (memory.c) resets it with those one build sets; mem_plan_restore sets those
 * from what mem_plan_keep kept (built_fields). */
struct mem_tape {
	struct mem_event *ev;  /* (n) */
	int n, cap;
	int gpu;               /* the GPU index it stands for in reports */
	struct mem_run *run;   /* (nrun) the events as literal and periodic runs, in order
				  (memrun.h); what evaluations read */
	int nrun, caprun;
	int *ix, *ixoff;       /* memrun's links of the events by op and cursors (kept between builds) */
	int capix, capixoff;
	int dop[MEM_TAPE_MAX_DOPS], ndop, gnops; /* the op shifts and graph size the runs were
				  found with (memrun_build) */
	struct mem_event *pev; /* (pn) the events of the tape this one replaced in its plan, whose
				  runs run still holds (pnrun): memrun_again */
	int pn, pcap, pnrun;
	int64_t outside;       /* bytes: the most the events outside the allocator hold (fixed) */
	int64_t outside_now;   /* bytes: what they hold after the events so far (the walk's) */
	int cut;               /* 1: the walk stopped where its events so far could not hold one
				  sample on the device (mem_plan.stop_unfit; memwalk.h
				  MEMWALK_STOP_UNFIT): the events are those, without runs */
};

struct mem_scripts;
struct mem_emu;

struct mem_plan {
	struct mem_tape tape[2];
	int ntapes;
	int64_t capacity;      /* bytes per GPU */
	int64_t align;         /* bytes */
	int64_t small_max, small_seg, split_max, large_seg, huge_round; /* bytes; small_max 0 = no pools */
	double host;           /* bytes of host memory per node (offload) */
	int64_t batch_mult;    /* global batch = micro-batch x this (dp x grad_accum) */
	struct mem_scripts *scripts; /* the walks to replay (memwalk.h), NULL none: set by the
					caller, kept by mem_plan_rebuild */
	struct alloc_cfg acfg;  /* the caching allocator's settings (capacity: per replay) */
	int emulate;            /* 1: reserved bytes come from the allocator's emulation (alloc.h) */
	struct mem_emu *emu;    /* its scratch, kept by mem_plan_rebuild */
	int stop_unfit;         /* set by the caller, kept by mem_plan_rebuild: a walk whose events
				   so far cannot hold one sample stops (mem_tape.cut): after the
				   setup (the model states, the fixed overheads), or after the
				   first micro-step's forward */
	int unfit;              /* 1: a tape was cut: not even one sample fits (mem_max_batch 0),
				   and nothing else may be asked of the plan */
	int whole_replays;      /* tests: every replay goes through every event (no periods
				   extended, emu.c emu_skip); 0 after a build */
};

/* The breakdown at the peak of one tape, at one micro-batch. */
struct mem_detail {
	int64_t peak;          /* reserved bytes (allocated + allocator slack) */
	int64_t live[MEM_NCAT];/* allocated bytes per category at the peak */
	int64_t slack;         /* pool slack at the peak */
	int64_t what[W_NWHAT]; /* allocated bytes per label at the peak */
	int64_t what_peak[W_NWHAT]; /* the most each label holds at any point of the step */
	int64_t states_peak;   /* max over the step of params + grads + optimizer */
	int64_t states_setup;  /* params + grads + optimizer kept across steps (after setup) */
	int event;             /* index of the peak event */
	int op, phase;         /* where the peak is: graph op (-1 none), enum mem_phase */
	int64_t tensors;       /* the most the step's tensors hold at once (every category but
				  the fixed overhead; sizes as the allocator hands them out) */
	int tensor_phase;      /* enum mem_phase of that moment */
};

/* Builds the tapes of scenario s over graph g with profile pf. Returns 0 or fills
 * e; p is freed with mem_plan_free (also after an error). */
int mem_plan_build(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		   const struct fw_profile *pf, struct err *e);

void mem_plan_free(struct mem_plan *p);

/* mem_plan_build into a plan built before (or zeroed), keeping its arrays: a
 * sweep builds tape after tape into the same memory. */
int mem_plan_rebuild(struct mem_plan *p, const struct scenario *s, const struct graph *g,
		     const struct fw_profile *pf, struct err *e);

/* A built plan's tapes kept for later (mem_plan_keep): each periodic run's
 * first copy only (memrun.h: the other copies are it with op indices moved),
 * and the plan's settings. A sweep checks a candidate's fit at a micro-batch
 * cells after its search built the tape (sweep_eval.c): restoring it costs a
 * copy of its events instead of the walk and the search for its runs. */
struct mem_kept {
	struct mem_plan p;      /* the plan's fields, its tapes' arrays NULL */
	struct mem_event *ev[2];/* each tape's runs' first copies, in run order */
	struct mem_run *run[2]; /* (p.tape[t].nrun) its runs as built */
	size_t bytes;           /* what ev and run hold */
};

/* Keeps plan p (built, not cut short: !p->unfit) in k (zeroed or freed).
 * Returns 0, or -1 when out of memory or the plan cannot be kept (k empty). */
int mem_plan_keep(const struct mem_plan *p, struct mem_kept *k);

/* Puts into plan p (built before, or zeroed) what mem_plan_rebuild would build
 * from the inputs of the plan k kept, field for field, keeping p's arrays,
 * scripts, scratch and stop_unfit as a rebuild does. Returns 0 or -1 (out of
 * memory; p then holds no tape: ntapes 0). */
int mem_plan_restore(struct mem_plan *p, const struct mem_kept *k);

void mem_kept_free(struct mem_kept *k);

/* Peak reserved bytes of tape t at micro-batch b: with emulate, what the
 * emulated caching allocator holds (plus what is outside it) when the tape's
 * requests run through it at the device's capacity (its cache released under
 * pressure, as PyTorch does), or, when even that fails, what it would need
 * unlimited; else the packed-segments model below. */
int64_t mem_peak(const struct mem_plan *p, int t, int64_t b);

/* The packed-segments model: each pool's live bytes packed into whole
 * segments. No allocation; the search's bound. */
int64_t mem_peak_packed(const struct mem_plan *p, int t, int64_t b);

/* The largest micro-batch whose unrounded live bytes (the fixed and the
 * per-sample sums of tape t's events so far, without rounding or pools) fit
 * p->capacity after every event, at most 2^40: the max-batch search's upper
 * bound; -1 when the fixed bytes alone do not fit. Read run by run. */
int64_t mem_linear_bound(const struct mem_plan *p, int t);

/* mem_linear_bound of tape t on a device of cap bytes: read run by run, or
 * its events as they are when it has no runs (a walk's tape so far). */
int64_t mem_tape_bound(const struct mem_tape *t, int64_t cap);

/* The breakdown at the peak of tape t at micro-batch b. */
void mem_detail(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d);

/* The same breakdown without what_peak, states_peak and states_setup (left 0):
 * two passes over the tape instead of one heavier one; what a sweep needs. */
void mem_detail_peak(const struct mem_plan *p, int t, int64_t b, struct mem_detail *d);

/* Whether a peak of peak bytes fits a device of capacity bytes: simulate's
 * report (mem_result.fits) and a sweep's check of the micro-batch it shows
 * (sweep_eval.c fitting) both ask it here. */
static inline int mem_fits(int64_t peak, int64_t capacity)
{
	return peak <= capacity;
}

/* The largest micro-batch whose peak fits on every tape (0 = not even one
 * sample); *binding = the tape that limits it. The packed model's peak is
 * non-decreasing in b and its search exact over integers; the emulated
 * allocator's fit is not monotone, and its search answers the largest b at or
 * below the packed model's answer that fits, each b between checked
 * (memory.c tape_max_emu). The emulation's tables and arrays are allocated on
 * first use and kept with the plan. */
int64_t mem_max_batch(const struct mem_plan *p, int *binding);

/* What the allocator's emulation of a plan has done since the plan was first
 * built (kept across mem_plan_rebuild): searches, replays, requests. */
struct mem_emu_counts {
	long searches;         /* max-batch searches (tape_max_known) */
	long remembered;       /* of which answered by a search of the same digest */
	long replays;          /* replays from the start (at the capacity or without a limit) */
	long events;           /* events those replays went through */
	long skipped;          /* copies of periodic runs made at once instead (emu.c emu_skip) */
	long probed;           /* alloc/free pairs the cache served, replayed as alloc_probe */
	long peaks;            /* peaks asked for (a breakdown's, mem_peak) */
	long peaks_known;      /* of which answered by a peak of the same digest and b */
};

/* p's counts into k (all 0 without the emulation). */
void mem_emu_counts(const struct mem_plan *p, struct mem_emu_counts *k);

/* Writes the timeline of tape t at micro-batch b as CSV (header + one row per
 * event: event,phase,micro,op,what,action,bytes, live bytes per category,
 * allocated, reserved). Returns 0 or fills e. */
int mem_write_timeline(const struct mem_plan *p, const struct graph *g, int t, int64_t b,
		       FILE *f, const char *path, struct err *e);

/* Label of a what / category / phase. */
const char *mem_what_name(int what);
const char *mem_cat_name(int cat);
const char *mem_phase_name(int phase);

/* predict.c's entry: fills pr->mem, micro_batch, max_micro_batch and
 * max_global_batch for scenario s over graph g. */
int mem_predict(const struct scenario *s, const struct graph *g, struct prediction *pr,
		struct err *e);

/* simulate --memory-timeline: the most loaded GPU's timeline at micro-batch b. */
int mem_timeline_csv(const struct scenario *s, const struct graph *g, int64_t b,
		     const char *path, struct err *e);

#endif

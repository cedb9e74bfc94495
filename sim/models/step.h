/*
 * step.h — step time, throughput and MFU from a discrete-event simulation of one
 * optimizer step (the `step` object of docs/CONTRACT.md's JSON).
 *
 * From the model graph (graph.h) the builder issues, in program order, what the
 * framework really launches on each stream of a rank: forward and backward
 * kernels (roofline times, compute.h), recomputation, the host thread's dispatch
 * of each of them, and per strategy the collectives (coll.h) with the
 * dependencies the framework's hooks create:
 *   dp      nn.DataParallel: parameter broadcast from GPU 0 every forward,
 *           forward outputs gathered on GPU 0, gradients reduced to GPU 0,
 *           the optimizer on GPU 0 (two simulated ranks: GPU 0 and a replica),
 *           each replica's backward, with its checkpointed regions' recompute,
 *           on its device's autograd thread;
 *   ddp     bucketed all-reduce launched as buckets fill during backward
 *           (first bucket 1 MiB, then ddp_bucket_mb), none on no_sync micro-steps;
 *   zero1   reduce-scatter after backward, sharded optimizer, all-gather;
 *   zero2   bucketed reduce-scatter during backward (overlap_comm), sharded
 *           optimizer, all-gather;
 *   zero3   per-module all-gather before forward and again before backward with
 *           prefetch up to stage3_prefetch_bucket_size, bucketed reduce-scatter;
 *   fsdp    per-unit all-gather (wrap.h's units, nested under size_based_wrap:
 *           an outer unit's hooks before an inner one's going in, after it going
 *           out; forward prefetch, backward_pre /
 *           backward_post / none, the two-in-flight rate limiter), reduce-scatter
 *           in post-backward; shard_grad_op keeps units gathered between forward
 *           and backward; hybrid shards inside a node and all-reduces the shard
 *           across nodes; no_shard all-reduces per unit;
 *   tensor parallel  Megatron's all-reduces after row-parallel outputs (forward)
 *           and column-parallel inputs (backward), and the vocabulary-parallel
 *           embedding's;
 *   offload host<->device copies on the copy engines and the optimizer on the
 *           host CPU.
 * Collectives of one process group share one NCCL stream (ProcessGroupNCCL), so
 * an all-gather issued after a reduce-scatter waits for it.
 *
 * Ranks are symmetric but for dp's GPU 0, so one representative rank is
 * simulated (two for dp); the links it shares with other ranks enter the
 * collective costs (NICs divided among the groups crossing them).
 */
#ifndef SHARDCAST_STEP_H
#define SHARDCAST_STEP_H

#include <stdint.h>

#include "des.h"
#include "eager.h"
#include "graph.h"
#include "predict.h"
#include "scenario.h"

struct step_unit;
struct step_dyn;
struct step_blocks;
struct step_bterm;

/* Reusable state of step simulations (arrays are kept between runs). */
struct step_sim {
	struct des d;
	const struct graph *g;      /* of the last run, for trace names */
	double *tf, *tb;            /* (nops) s per forward / backward kernel */
	double *tpb;                /* (nops) bytes of the TP all-reduce after the op's backward */
	double *tpx;                /* (nops) the same per sample */
	double *bkt;                /* (nops) bytes of the DDP bucket that the op's backward completes */
	double *kw;                 /* (nops) step_kernel_least: the ops that share op i's kernel
				       times when it is the first of its class (op_classes), else 0 */
	int *kop, nkop;             /* (nops) step_kernel_least: the ops with kw > 0, ascending */
	double *kwr;                /* (nops) step_kernel_least: of kw, the ops whose forward the
				       recomputation runs again (step.c recomputes) */
	const struct graph *kg;     /* step_kernel_least: the graph its kernel tables (ex, internal,
				       rep, kw) are of (with the model it was built from), NULL none;
				       whoever frees that graph while ss lives clears it (a new graph
				       can take the same address) */
	int kvarlen;                /* and whether they are flash-attn's varlen ones */
	/* step_kernel_least's memo: the kernel times of each class's first op
	 * (kop) at one micro-batch, under one set of what op_time reads beside
	 * the graph and its tables (struct op_in, step.c); emptied with the
	 * tables, or when the device's efficiencies differ from kce */
	struct op_in *kin;          /* (nkin) the sets met */
	int nkin, capkin;
	struct kmemo *km;           /* (nkm) each set's micro-batches done */
	int nkm, capkm;
	double *kmt;                /* (nkm x 2 nkop) their forward and backward times */
	int capkmt;
	struct compute_eff kce;
	int *unit_of;               /* (nops) ZeRO-3: the module of the op, -1 none */
	int capops;
	int *gfirst, *glast;        /* (nblocks + 1) first and last op of each graph unit */
	int capg;
	struct step_unit *units;
	int capunits;
	int *uso, *us, *ueo, *ue;   /* the units starting at op i, us[uso[i] .. uso[i + 1]), and
				       ending there (ue, ueo), outer first (unit_lists) */
	int capuso, capueo, capus, capue;
	int *unx, capunx;           /* (2 nu) FSDP: each unit's next in backward [2u] and in
				       forward [2u + 1] order (wrap.h), -1 none */
	/* what the graph in d was built for (step_resimulate) */
	int built;                  /* 1: d holds a graph built by step_simulate */
	const struct graph *bg;
	struct scn_training btrain; /* its settings (micro_batch aside) */
	struct scn_cluster bcluster;
	int64_t bdp, bworld;
	unsigned char *pos;         /* (nops) which of tf, tb, tpb were > 0 */
	struct eager_extra *ex;     /* (nops) eager kernels beyond each op's own (eager.h) */
	unsigned char *internal;    /* (nops) 1: a copy made inside another op (eager.h) */
	struct step_dyn *dyn;       /* collectives whose bytes scale with the micro-batch */
	int ndyn, capdyn;
	int *kern, nkern, capkern;  /* its kernel tasks (re-timed) */
	int *sums, nsums, capsums;  /* its TP and optimizer tasks (summed in results) */
	double flops_ps, flops_rc;  /* model FLOPs per sample, recomputed FLOPs per sample */
	/* ops whose kernel times are the same (a transformer's blocks repeat the
	 * same ops on the same sizes, graph.h): op_times computes one per class
	 * and copies it; the classes hold for the task graph in d (set when it
	 * is built, with the eager extras) */
	int *rep;                   /* (nops) the op whose times op i's are, i itself for the first */
	int each_op;                /* 1: every op timed on its own, no classes (tests compare) */
	int *drep, capdrep;         /* (ndyn) the first of dyn[j]'s class (the same op, group,
				       bytes per sample and multiplier: the same cost) */
	double *dynt;               /* (ndyn) s: each one's coll_time at the last bound */
	int capdynt;
	/* step_bound's sums without a pass over every task: the streams whose
	 * tasks all take a time independent of the micro-batch summed once per
	 * task graph, the others' tasks listed by stream in task order (the same
	 * sums, in the same order, as des_stream_bounds over the re-timed graph) */
	double bconst[DES_MAX_STREAMS]; /* s: the constant streams' sums */
	unsigned char bvar[DES_MAX_STREAMS]; /* 1: a stream whose tasks' times may vary */
	int bfirst[DES_MAX_STREAMS + 1]; /* each varying stream's first term in bsort */
	struct step_bterm *bterm, *bsort; /* the varying streams' tasks: in task order, by stream */
	int nbterm, capbterm, capbsort;
	double *pstart;             /* (ntasks) step_bound's critical path: each task's earliest start */
	int cappstart;
	int bready;                 /* 1: the terms are those of the task graph in d */
	int bok;                    /* 1: every task that varies is on a varying stream */
	long builds;                /* task graphs built (step_simulate) */
	/* periodic blocks (below): a step whose blocks repeat is simulated as three
	 * shorter steps, each in a simulation of its own that keeps its task graph */
	int full;                   /* 1: simulate every block (traces; the shorter steps) */
	int blocks;                 /* 1: the last step came from the shorter steps */
	int whole;                  /* 1: d holds the task graph of every block (re-timed) */
	struct step_blocks *blk;    /* the shorter steps and their plan, NULL until needed */
	/* in a shorter step: blocks cut_lo .. cut_hi - 1 left out, periods of cut_p blocks */
	unsigned char *skip;        /* (nops) the ops left out, NULL none */
	int capskip;
	int cut_lo, cut_hi, cut_p;  /* cut_p 0: no boundaries compared */
	int cut_e0, cut_e1;         /* the blocks that repeat */
	int chk;                    /* the builder's state was the same at the boundaries
				       around the cut, forward and backward */
	int cut_n;                  /* passes (forward, backward of each micro-step) seen */
	int cut_bnd[16][3];         /* tasks issued at each pass's three boundaries */
	int cut_zone[16];           /* tasks issued before each pass's repeating blocks */
	int cut_post[16];           /* the first task issued after each pass's cut */
	int cut_mk[16][8][3];       /* each pass's marked tasks: the first of its first period on
				       each device stream, its mark and its counterpart's (-1 none) */
};

/* Periodic blocks. When blocks e0 .. e1 - 1 of the graph repeat with a period
 * of p blocks (period.h: the same ops; for DDP the same bucket boundaries),
 * every block of them issues the same tasks with the same dependencies, and
 * once the simulation is in its steady state each further period adds the
 * same time to the step: T(n + 1) - T(n) is a constant, as for micro-steps
 * (below), and likewise compute, communication, exposed communication and the
 * other sums. So the step is simulated three times with two periods of
 * warm-up, then 1, 2 and 3 periods, then the last 3p to 4p - 1 blocks (the
 * others left out: the step goes on from the last period kept to the blocks
 * after those left out, which warm the backward up), and extended from the
 * last two by the periods left out, when
 *  - the builder issued the same around the cut: at the three period
 *    boundaries before it (forward) and after it (backward) the task graph
 *    builder's state is the same (the FSDP rate limiter's queue, the units
 *    gathered and their all-gathers, the gradient bucket's fill, each stream's
 *    last task, all relative to the boundary), so a left-out period would have
 *    issued exactly what a kept one did;
 *  - the periods settled: the three steps grow by the same amount to a relative
 *    STEP_PERIOD_TOL, in every sum.
 * Otherwise every block is simulated. The result is the full simulation's to
 * the rounding of a sum of a few hundred numbers (tests/test_periodic.c checks
 * it against full simulations of every strategy on NVLink, InfiniBand and
 * Ethernet, to 1e-9 relative); a trace shows every block. */
#define STEP_BLOCK_MAXP 4           /* longest period looked for, in blocks */

int step_sim_create(struct step_sim *ss);
void step_sim_delete(struct step_sim *ss);

/* Simulates one optimizer step of scenario s (graph g built for it) at
 * micro_batch samples per GPU per micro-step and fills r. Returns 0 or fills e. */
int step_simulate(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		  int64_t micro_batch, struct step_result *r, struct err *e);

/* step_simulate at another micro-batch of the graph ss holds: when s and g are
 * those of ss's last step_simulate but for s->s.training.micro_batch (checked:
 * g, the training and cluster settings, dp and world; the caller promises that
 * g and the rest of s, model, device, links, are unchanged too), the task graph
 * is kept and only what the micro-batch changes is recomputed: kernel times and
 * the bytes of the activations' collectives. The graph's structure depends on
 * the micro-batch only through which kernel times and TP bytes are positive,
 * which is checked. Otherwise it builds, as step_simulate. Either way the
 * results are step_simulate's, bit for bit. */
int step_resimulate(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		    int64_t micro_batch, struct step_result *r, struct err *e);

/* The kind of a step task as traces name it ("AccumulateGrad", "all-gather",
 * "bwd " ...): which mechanism put it there. */
const char *step_task_kind(const struct des_task *t);

/* Writes the last simulation of ss as a Chrome trace (JSON object format,
 * openable in Perfetto and chrome://tracing): one process per simulated rank,
 * one thread per stream. Writes path.tmp, then renames it. */
int step_trace_write(const struct step_sim *ss, const char *path, struct err *e);

/* A lower bound on a step's time without running it: its task graph is built
 * (or kept) as step_resimulate would, and for each stream the least time
 * its tasks take is summed (des_stream_bounds, from the terms in step_sim: a
 * graph kept is not re-timed, its tasks keep the last run's times; the sums
 * are those of the graph re-timed, bit for bit): tasks on a stream run one after
 * the other, a work task takes at least its duration (interference only
 * stretches it) and a collective at least its latency plus each phase's work
 * on its busiest link alone (sharing only slows it), so the step takes at least
 * the largest of those sums. recommend's tables use it to skip simulating
 * candidates that cannot be a cell's best or runner-up (sweep_eval.c). The
 * sums of a step of n micro-steps grow by the same amount per micro-step (every
 * micro-step but the last is the same tasks), so two of them bound a longer
 * step (step_bound_at). Tighter where the streams wait on each other (an
 * all-gather exposed before its unit's forward, the reduction after the last
 * backward kernel, a host-bound step): the critical path, each task at that
 * least time and started when the last task it waits for ends (des_path_bound).
 * It bounds the step of the task graph it walked, grad_accum micro-steps,
 * and no other. */
#define STEP_BOUND_STREAMS DES_MAX_STREAMS
struct step_bound {
	double stream[STEP_BOUND_STREAMS]; /* s: least time of each stream's tasks */
	double kern[STEP_BOUND_STREAMS];   /* s: of that, the kernels of the forward, the
					      recomputation and the backward (0: not told apart) */
	int nstream;
	double path;                       /* s: the critical path at least times (0 not asked) */
	int64_t grad_accum;                /* the micro-steps of the graph bounded */
};

/* A looser bound that needs no task graph: least[j] = the time of one
 * micro-step's forward, recomputed forward and backward kernels at
 * micro-batch mbs[j] (s; the same op_times as the graph's, with
 * des_work_least's factor), for j < n. Each micro-step of every strategy
 * issues each op's forward and backward kernel once on the compute stream
 * (forward, backward and dp_microstep in step.c; an op of no time issues
 * none), and, but under DataParallel, the forward of each op the
 * checkpointing recomputes once more before its block's backward (recompute),
 * so a step of ga micro-steps takes at least ga x least[j], and step_bound's
 * compute stream sums these terms and more (the optimizer, casts). ss's
 * kernel tables are overwritten: a task graph it held is built again when
 * next asked for, so a caller keeps a step_sim for this alone (the sweep's
 * tables keep one per graph). Kernel times already computed in ss for the same
 * graph, inputs and micro-batch are read back, not computed again (the memo
 * above). Returns 0 or fills e. */
int step_kernel_least(struct step_sim *ss, const struct scenario *s, const struct graph *g,
		      const int64_t *mbs, int n, double *least, struct err *e);

/* The bound of s over g at micro_batch into out (s's grad_accum micro-steps),
 * with its critical path when path is 1 (a pass over every task and
 * dependency, re-timed: a fifth of step_bound's instructions in
 * bench/sweep.ini's tables, 108 of 546 million, callgrind).
 * Needs ss->full (every block). Returns 0 or an error code with e filled. */
int step_bound(struct step_sim *ss, const struct scenario *s, const struct graph *g, int64_t micro_batch,
	       int path, struct step_bound *out, struct err *e);

/* Samples and tokens per second of step r from its time and global batch (0
 * when its time is 0): the throughput every step result reports, and the
 * most a step of a bounded time could reach (sweep_eval.c). */
void step_throughput(const struct graph *g, struct step_result *r);

/* The least time of a step of ga micro-steps: from the bound of one micro-step
 * (one) alone when ga is 1, else from those of one and two (two), each stream
 * extended by its growth per micro-step; and at least the critical path of
 * whichever of them was bounded at ga micro-steps. */
double step_bound_at(const struct step_bound *one, const struct step_bound *two, int64_t ga);

/* A looser least time of a step of ga micro-steps from the bound of one alone:
 * with ga = 1 step_bound_at's; else ga times the most any stream's kernels
 * take, since every micro-step runs each kernel of the forward, the
 * recomputation and the backward (below: every micro-step but the last is the
 * same tasks, and the last is one micro-step's), or one's critical path if one
 * was bounded at ga micro-steps. recommend's tables try it
 * before building the task graph of two micro-steps (sweep_eval.c). */
double step_bound_least(const struct step_bound *one, int64_t ga);

/* Steps of many micro-steps. Every micro-step but the last is the same tasks
 * with the same dependencies (forward and backward without gradient
 * synchronisation, or with the same per-micro-step collectives; FSDP1's
 * shard_grad_op under no_sync gathers in the first micro-step only, a cost
 * the steps of one and two micro-steps both hold once), so once the
 * state at a micro-step boundary repeats, each further micro-step adds the same
 * period to the step: T(n + 1) - T(n) is a constant, and likewise compute,
 * communication and exposed communication. A step of more than
 * STEP_ACCUM_FULL micro-steps is simulated with 1, 2, 3, ... micro-steps until
 * two successive periods agree (relative STEP_PERIOD_TOL; in every case tried
 * they agree from the first), at most STEP_PERIOD_PROBE, then extended by that
 * period: exact while micro-steps repeat, and a step of 10^6 micro-steps costs
 * what one of three does. tests/test_step.c checks it against full simulations.
 * recommend (sweep_eval.c) simulates 1 and 2 micro-steps only and extends by
 * the same step_extend without the third simulation that checks the period
 * (the check costs a sweep a quarter of its time: bench/sweep.ini 2.31 ->
 * 2.87 s); tests/test_sweep.c holds its results to simulate's within 1e-9. */
#define STEP_ACCUM_FULL 8
#define STEP_PERIOD_PROBE 16
#define STEP_PERIOD_TOL 1e-9

/* Extends step b (b->grad_accum micro-steps), whose step with one micro-step
 * fewer is a, to ga micro-steps by their difference: time, compute,
 * communication (all, exposed, tensor-parallel), the optimizer, copies and the
 * host optimizer grow by the period; the batch and the rates follow. */
void step_extend(const struct step_result *a, const struct step_result *b, int64_t ga,
		 struct step_result *out);

/* A simulation of k micro-steps (of whatever step the caller has in mind)
 * into r. Returns 0 or an error code with e filled. */
typedef int (*step_micro_fn)(void *ctx, int64_t k, struct step_result *r, struct err *e);

/* One step of ga micro-steps: sim(ctx, ga, ...) when ga <= STEP_ACCUM_FULL,
 * else extended by its period from sim(ctx, 1), sim(ctx, 2), ... (above;
 * out->events counts every micro-step simulated). The one rule of simulate
 * (step_run) and recommend (sweep_eval.c). Returns 0 or sim's error. */
int step_accumulate(int64_t ga, step_micro_fn sim, void *ctx, struct step_result *out, struct err *e);

/* PyTorch FSDP's (FSDP1) passes over the flat gradient of a unit of n
 * elements on its way to the reduction (torch/distributed/fsdp,
 * _runtime_utils.py, flat_param.py): the unit's parameters are views of one
 * flat parameter, so autograd's SplitWithSizesBackward concatenates their
 * gradients into the flat gradient (a read and a write of it); the
 * post-backward hook casts it to MixedPrecision's reduce_dtype where that
 * differs (flat_param.grad.to) and divides it by the predivide factor
 * (_reduce_grad, _div_if_needed) before the reduce-scatter; after it, the
 * shard is divided by the postdivide factor and cast to the fp32 parameters'
 * dtype (_cast_grad_to_param_dtype). Sets *bytes (read and written) and
 * returns the kernels. The step issues them after the unit's backward: the
 * hook runs them on its post-backward stream beside the next unit's backward,
 * and being memory-bound passes over every SM they are taken to hold the GPU
 * for their time, the shard's (1/shard_n of the traffic) counted with the
 * others rather than after the reduction. Left out: from the second
 * micro-step on the shard is also added to the saved one
 * (_accumulate_sharded_grad: 12 bytes per element of the shard, 8 to 16 % of
 * these passes at 8 ranks, less beyond), which would make the first
 * micro-step unlike the others (step_extend); likewise, under no_sync
 * (plan.h), AccumulateGrad's in-place add of each later micro-step's flat
 * gradient into the one kept (3 x n x the gradient's bytes, about one
 * flat-gradient pass); the no_sync micro-steps issue the concatenation
 * alone (their hook returns before _reduce_grad). */
int step_flat_grad(const struct plan *p, double n, double *bytes);

/* predict_run's entry: fills p->step at p->micro_batch (1 when the memory model
 * has not set it; p->step.batch_assumed says so); more than STEP_ACCUM_FULL
 * micro-steps are extended by their period (above). */
int step_run(const struct scenario *s, const struct graph *g, struct prediction *p, struct err *e);

/* Builds the graph, simulates s at micro_batch and writes the trace to path.
 * A step of more than STEP_ACCUM_FULL micro-steps is traced with its first
 * STEP_ACCUM_FULL - 1 and its last (the others repeat the period). */
int step_trace(const struct scenario *s, int64_t micro_batch, const char *path, struct err *e);

#endif

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
 *           the optimizer on GPU 0 (two simulated ranks: GPU 0 and a replica);
 *   ddp     bucketed all-reduce launched as buckets fill during backward
 *           (first bucket 1 MiB, then ddp_bucket_mb), none on no_sync micro-steps;
 *   zero1   reduce-scatter after backward, sharded optimizer, all-gather;
 *   zero2   bucketed reduce-scatter during backward (overlap_comm), sharded
 *           optimizer, all-gather;
 *   zero3   per-module all-gather before forward and again before backward with
 *           prefetch up to stage3_prefetch_bucket_size, bucketed reduce-scatter;
 *   fsdp    per-unit all-gather (wrap policy; forward prefetch, backward_pre /
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

/* Reusable state of step simulations (arrays are kept between runs). */
struct step_sim {
	struct des d;
	const struct graph *g;      /* of the last run, for trace names */
	double *tf, *tb;            /* (nops) s per forward / backward kernel */
	double *tpb;                /* (nops) bytes of the TP all-reduce after the op's backward */
	double *tpx;                /* (nops) the same per sample */
	double *bkt;                /* (nops) bytes of the DDP bucket that the op's backward completes */
	int *unit_of;               /* (nops) gather unit of the op, -1 none */
	int capops;
	int *gfirst, *glast;        /* (nblocks + 1) first and last op of each graph unit */
	int capg;
	struct step_unit *units;
	int capunits;
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
	long builds;                /* task graphs built (step_simulate) */
};

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

/* Steps of many micro-steps. Every micro-step but the last is the same tasks
 * with the same dependencies (forward and backward without gradient
 * synchronisation, or with the same per-micro-step collectives), so once the
 * state at a micro-step boundary repeats, each further micro-step adds the same
 * period to the step: T(n + 1) - T(n) is a constant, and likewise compute,
 * communication and exposed communication. A step of more than
 * STEP_ACCUM_FULL micro-steps is simulated with 1, 2, 3, ... micro-steps until
 * two successive periods agree (relative STEP_PERIOD_TOL; in every case tried
 * they agree from the first), at most STEP_PERIOD_PROBE, then extended by that
 * period: exact while micro-steps repeat, and a step of 10^6 micro-steps costs
 * what one of three does. tests/test_step.c checks it against full simulations;
 * recommend (sweep_eval.c) extends from 2 simulated micro-steps the same way. */
#define STEP_ACCUM_FULL 8
#define STEP_PERIOD_PROBE 16
#define STEP_PERIOD_TOL 1e-9

/* Extends step b (b->grad_accum micro-steps), whose step with one micro-step
 * fewer is a, to ga micro-steps by their difference: time, compute,
 * communication (all, exposed, tensor-parallel), the optimizer, copies and the
 * host optimizer grow by the period; the batch and the rates follow. */
void step_extend(const struct step_result *a, const struct step_result *b, int64_t ga,
		 struct step_result *out);

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
 * micro-step unlike the others (step_extend). */
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

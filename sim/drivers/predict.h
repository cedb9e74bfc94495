/*
 * predict.h — what the simulator predicts for a scenario: the objects of
 * docs/CONTRACT.md's JSON (memory, step, job) and the run that fills them.
 *
 * A section whose model is not run (no [failures]: no job) has valid = 0 and is
 * left out of reports and JSON rather than filled with invented numbers.
 */
#ifndef SHARDCAST_PREDICT_H
#define SHARDCAST_PREDICT_H

#include <stdint.h>

#include "err.h"
#include "failures.h"
#include "graph.h"
#include "scenario.h"

struct mem_result {
	int valid;
	double params;        /* bytes on the most loaded GPU at the peak */
	double grads;
	double optimizer;
	double activations;
	double buffers;       /* communication buckets, gathered shards, temporaries */
	double overhead;      /* context, library workspaces, allocator slack */
	double fixed_overhead;/* bytes of it that are not slack: context, workspaces, NCCL */
	double tensor_peak;   /* bytes: the most the step's tensors hold at once (no overhead) */
	int tensor_phase;     /* enum mem_phase (memory.h) of that moment */
	double peak;          /* bytes, most loaded GPU */
	double capacity;      /* bytes per GPU */
	int fits;
	int binding_gpu;      /* the most loaded GPU (0 for dp's master) */
	char binding[128];    /* the binding GPU and what dominates its peak, e.g.
				 "GPU 0: gathered logits (41% of the peak), backward lm_head" */
	double other_peak;    /* bytes on the other GPUs when they differ (dp's replicas), else 0 */
	double host;          /* bytes of host memory per node (offload, async checkpoints) */
};

struct step_result {
	int valid;
	double time;          /* s per optimizer step */
	double compute;       /* s of compute on the critical rank */
	double comm;          /* s of communication issued */
	double exposed_comm;  /* s of communication not hidden by compute */
	double tokens_per_s;
	double samples_per_s;
	double mfu;           /* model FLOPs / (time x peak x GPUs) */
	double hfu;           /* with recomputation */
	double comm_tp;       /* s of tensor-parallel all-reduces (included in comm) */
	double optimizer;     /* s of the optimizer step on the GPU (included in compute) */
	double copy;          /* s of host<->device copies (offload) */
	double host_optimizer;/* s of the optimizer on the host CPU (offload) */
	double flops_per_gpu; /* model FLOP/s achieved per GPU (MFU's numerator) */
	int64_t micro_batch;  /* samples per GPU per micro-step simulated */
	int64_t grad_accum;   /* micro-steps per optimizer step */
	int64_t global_batch; /* samples per optimizer step */
	int batch_assumed;    /* 1: no micro-batch from the memory model or the scenario; 1 was used */
	uint64_t events;      /* events the simulation processed (of the shorter steps simulated
				 when the step was extended by a period, step.h) */
	int64_t simulated_accum; /* micro-steps simulated: grad_accum, or fewer when the
				    step was extended by its period (step.h) */
	int period_settled;   /* 0: extended by a period that had not settled (approximate) */
	int timed;            /* 0: not timed: not even one sample fits and the scenario
				    names no micro-batch (1 would be an invention): no configuration
				    of it can run, and reports give no step time */
};

#define JOB_MAX_WARN 6

struct job_result {
	int valid;
	int not_run;          /* 1: not simulated: no step time (the configuration does not fit) */
	double ettr;          /* effective training time ratio: training kept / wall time */
	double ettr_lo, ettr_hi; /* 95% interval of the mean */
	double wall_days;     /* mean */
	double wall_days_lo, wall_days_hi; /* 95% interval of the mean */
	double wall_days_p025, wall_days_p975; /* 95% of the runs fall between */
	double interruptions; /* mean per run, planned ones included */
	double unexpected, planned; /* mean per run */
	double ckpt_interval; /* s of training between checkpoints */
	int interval_auto;    /* chosen by the search */
	double young, daly;   /* s: Young (1974) and Daly (2006) intervals for this cost and MTBF */
	double mtbf;          /* s between unexpected failures of the job; 0 = none fail */
	double lost;          /* s of training lost per run */
	double ckpt_overhead; /* s training is blocked by checkpoints per run */
	double downtime;      /* s of detection, waiting for nodes and restarts per run */
	double checkpoints;   /* completed per run */
	double waits;         /* times per run the job waited for a node or a repair */
	double work;          /* s of failure-free training; 0 for a fixed window */
	double window;        /* s, fixed-window runs */
	double useful;        /* s of training kept (mean) */
	double step_time;     /* s per step the job assumes */
	int step_from_scenario; /* [job] step_time (else the step model) */
	double steps;         /* optimizer steps of the work (0 for a window) */
	double ckpt_bytes, ckpt_bytes_per_param;
	double ckpt_block;    /* s training is blocked per checkpoint */
	double ckpt_background; /* s of background write (async) */
	double ckpt_background_first; /* s of the first save's background write (uncached plan) */
	double ckpt_stage;    /* s of the async staging copy to host */
	double ckpt_state_dict, ckpt_plan, ckpt_plan_first, ckpt_gather; /* s, phases of a save */
	double ckpt_serialize, ckpt_store, ckpt_meta; /* s: host side, storage side, file operations */
	double ckpt_node_bw;  /* B/s the busiest node writes at */
	double ckpt_slowdown; /* fraction training slows during the background write */
	double ckpt_interfere; /* s of training lost per save to that slowdown */
	double ckpt_node_bytes, ckpt_rank_bytes; /* B the busiest node and rank write */
	int64_t ckpt_writers; /* ranks that write */
	double ckpt_block_sync; /* s a synchronous save blocks */
	double ckpt_host;     /* B of host memory needed per node (async staging, full gather) */
	double restart;       /* s: restart_minutes + reading the checkpoint */
	double ckpt_load;     /* s to read the checkpoint */
	int64_t trials, seed, spares;
	int64_t search_trials; /* trials per interval of the auto search (at most trials; jobrun.h) */
	double expected_interruptions; /* per run, the estimate the work was bounded by */
	int ncomp;
	char comp[FAIL_MAX][FAIL_NAME_MAX];
	int comp_planned[FAIL_MAX];
	double comp_interruptions[FAIL_MAX]; /* mean per run */
	int nwarn;
	char warn[JOB_MAX_WARN][256];
};

struct prediction {
	double params;             /* trained parameters (whole model) */
	double params_backbone;    /* the published count's scope */
	double flops_per_token;    /* model FLOPs per token (training), MFU convention */
	int64_t micro_batch;       /* the batch the memory/step objects describe */
	int64_t max_micro_batch;   /* -1 = not computed */
	int64_t max_global_batch;
	struct mem_result mem;
	struct step_result step;
	struct job_result job;
};

/* The graph options that the scenario implies (flavour, dtype, autocast). */
int predict_graph_opts(const struct scenario *s, struct graph_opts *o);

/* Runs every model the scenario asks for. Returns 0 or fills e. */
int predict_run(const struct scenario *s, struct prediction *p, struct err *e);

/* Writes the memory timeline of the most loaded GPU at micro_batch to path (CSV,
 * see memory.h). Returns 0 or fills e. */
int predict_memory_timeline(const struct scenario *s, int64_t micro_batch, const char *path,
			    struct err *e);

#endif

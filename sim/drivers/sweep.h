/*
 * sweep.h — strategy sweeps: which strategy to use for each (model, batch,
 * sequence length) of a cluster, from the memory and step models.
 *
 * A sweep file is a scenario without a model or strategy plus a [sweep]
 * section of lists (scenarios/sweeps/a100x8.ini):
 *
 *   [cluster]   exactly as in a scenario (gpu, nodes, gpus_per_node, links)
 *   [training]  fixed settings for every candidate (optimizer, framework, ...)
 *   [job]       train_tokens, for objective = time_to_train
 *   [sweep]
 *   models = gpt2, gpt2-xl, llama-2-*:5e9..15e9   names, paths, or GLOB:MIN..MAX
 *   hf_configs = my-model/config.json             Hugging Face configs (after models)
 *   global_batch = 8, 32, 128                     (or micro_batch = 1, 4 | auto)
 *   seq_len = 1024
 *   strategies = ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op
 *   precision = bf16
 *   activation_checkpointing = none, full
 *   offload = none
 *   tensor_parallel = 1
 *   nodes = 1
 *   objective = throughput | cost | time_to_train
 *
 * Paths (model files, configs, the [cluster] entries given as files) are
 * relative to the sweep file, as a scenario's are to the scenario.
 *
 * A file with no [sweep] section sweeps its cluster with defaults (models from
 * gpt2 to llama-2-70b, global batches 8 to 2048, every strategy family, with
 * and without checkpointing, bf16 where the device has it).
 *
 * A cell is one (model, sequence length, batch); its candidates are strategies
 * x precision x checkpointing x offload x tensor_parallel x nodes. For each
 * candidate the memory model (memory.h) finds the largest micro-batch that fits
 * and divides the cell's global batch (global / dp; grad_accum = the rest), and
 * the step model (step.h) simulates one optimizer step at it; candidates that do
 * not fit are dropped, the rest ranked by the objective.
 *
 * The hot path (sweep_eval_cell) allocates nothing and reads no file once a
 * (model, sequence length) group is set up: graphs are built once per group and
 * graph options, allocation tapes once per (group, candidate), and one step
 * simulation is reused. Cells are independent, so a sweep splits across MPI
 * ranks (recommend_main.c); a result is a fixed-size record for gathering.
 */
#ifndef SHARDCAST_SWEEP_H
#define SHARDCAST_SWEEP_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "memory.h"
#include "scenario.h"

enum sweep_objective { SWEEP_THROUGHPUT, SWEEP_COST, SWEEP_TIME_TO_TRAIN };
enum sweep_batch { SWEEP_GLOBAL, SWEEP_MICRO, SWEEP_AUTO };

/* Outcome of one candidate in one cell. */
enum sweep_status {
	SWEEP_OK,           /* fits; step simulated */
	SWEEP_NOFIT,        /* not even micro-batch 1 fits (or the fixed micro-batch) */
	SWEEP_INDIVISIBLE,  /* the global batch is not a multiple of the data-parallel degree */
	SWEEP_INVALID,      /* the combination is not a valid setting (offload without sharding...) */
	SWEEP_BOUNDED       /* its step not simulated: a lower bound on its time shows it can be
			       neither the cell's best nor its runner-up (SWEEP_TABLES only); it
			       fits, or with global batches its memory may not have been searched
			       (max_micro_batch 0), the bound holding at any micro-batch */
};

#define SWEEP_MAX_AXIS 64

/* Micro-steps simulated per optimizer step: beyond, the step is extended by
 * its period, T(2) - T(1) (sweep_eval.c). */
#define SWEEP_ACCUM_SIMULATED 2

/* Scores that differ by rounding only (relative SWEEP_TIE, far below what the
 * models can tell apart) have a margin of 0 (sweep_out.c). */
#define SWEEP_TIE 1e-12

/* One candidate's settings. */
struct sweep_cand {
	int strategy;       /* enum strategy */
	int sharding;       /* enum fsdp_sharding (fsdp only) */
	int fsdp_version;   /* 1, or 2 (fsdp2) */
	int precision;      /* PREC_* */
	int recompute;      /* enum recompute */
	int offload;        /* enum offload */
	int64_t tp;         /* tensor-parallel degree */
	int64_t nodes;
	char label[64];     /* "fsdp:shard_grad_op", with the options that vary: "zero2 bf16 ckpt=full" */
	char strat[32];     /* the strategy part of label: "fsdp:shard_grad_op" */
};

struct sweep_settings {
	char models[CFG_STR_MAX];
	char hf_configs[CFG_STR_MAX];
	char global_batch[CFG_STR_MAX];
	char micro_batch[CFG_STR_MAX];
	char seq_len[CFG_STR_MAX];
	char strategies[CFG_STR_MAX];
	char precision[CFG_STR_MAX];
	char recompute[CFG_STR_MAX];
	char offload[CFG_STR_MAX];
	char tensor_parallel[CFG_STR_MAX];
	char nodes[CFG_STR_MAX];
	int objective;            /* enum sweep_objective */
	double gpu_hour_price;    /* currency units per GPU-hour; 0 = report GPU-hours */
};

struct sweep {
	char file[CFG_STR_MAX];
	char *text;               /* the whole file (owned) */
	size_t text_len;
	uint64_t hash;            /* FNV-1a 64 of text */
	struct sweep_settings set;
	int line[16];             /* where each [sweep] key was set */
	int is_default;           /* no [sweep] in the file: the default sweep of its cluster */
	int calibrated;           /* the device parameters come from a stored calibration */
	struct scenario base;     /* the cluster and fixed training settings (model: the first) */
	char base_model[2 * CFG_STR_MAX + 2]; /* the first model's catalog name or path (from the cwd) */
	int base_hf;              /* ... which is a Hugging Face config */
	struct model *models;     /* (nmodels) resolved, in the listed order; named as listed */
	double *model_params;     /* (nmodels) trained parameters (graph_param_count) */
	int nmodels;
	int64_t seqs[SWEEP_MAX_AXIS];
	int nseq;
	int64_t batches[SWEEP_MAX_AXIS]; /* global or micro-batch values */
	int nbatch;               /* 1 with batch_mode SWEEP_AUTO */
	int batch_mode;           /* enum sweep_batch */
	struct sweep_cand *cands; /* (ncand) */
	int ncand;
	int ncell;                /* nmodels x nseq x nbatch */
	double train_tokens;      /* [job] train_tokens (time_to_train) */
	int64_t train_steps;      /* [job] steps (time_to_train), instead of train_tokens */
};

/* The result of one candidate in one cell: a fixed-size record (no pointers),
 * so ranks can gather them as bytes. Memory figures are those of the most
 * loaded GPU at the chosen micro-batch (at micro-batch 1 when nothing fits). */
struct sweep_result {
	int32_t cell, cand;
	int32_t status;           /* enum sweep_status */
	int32_t rank;             /* 1 = best of its cell, 2 = next...; 0 = not ranked */
	int64_t micro_batch, grad_accum, global_batch;
	int64_t max_micro_batch;  /* largest that fits without accumulation (0: none) */
	int64_t world;            /* GPUs */
	double peak, capacity;    /* bytes */
	double params, grads, optimizer, activations, buffers, overhead; /* bytes at the peak */
	double step_time;         /* s per optimizer step */
	double compute, comm, exposed_comm; /* s */
	double tokens_per_s, samples_per_s, mfu;
	double gpu_hours_per_mtok;/* GPU-hours per million tokens */
	double train_days;        /* [job] work at this throughput: failure-free, or the job
				     model's mean wall time with [failures] (time_to_train) */
	double ettr;              /* training time / wall time with [failures]; 0 = not run */
	double score;             /* the objective, larger is better */
	int32_t memory;           /* 1: peak .. overhead and the binding note were computed
				     (every ok / no_fit result, or only each cell's best:
				     sweep_ctx_detail) */
	char note[112];           /* why it does not fit / is invalid; what binds its memory */
};

/* Which figures of a result were computed: the others are "not computed", an
 * empty CSV field and null in JSON and in the results database, never 0. */
enum sweep_has {
	SWEEP_HAS_ALWAYS,
	SWEEP_HAS_MEMORY,   /* memory figures: ok and no_fit (at micro-batch 1) */
	SWEEP_HAS_STEP,     /* the step and the batch: ok */
	SWEEP_HAS_SET       /* ok and the value is non-zero: rank, train_days, ettr (job model run) */
};
int sweep_has(const struct sweep_result *x, int what, double value);

/* Loads a sweep file: validates every list, resolves the models (catalog
 * names, paths, GLOB:MIN..MAX over models/nn by parameter count) and the
 * cluster. Errors name file:line and the key; returns 0 or fills e. sw is freed
 * with sweep_free (also after an error). */
int sweep_load(struct sweep *sw, const char *path, struct err *e);
void sweep_free(struct sweep *sw);

/* The key table of [sweep] (for --help and the README). */
const struct cfg_table *sweep_keys(void);

/* Cell index <-> axes: cell = (model x nseq + seq) x nbatch + batch. */
void sweep_cell_axes(const struct sweep *sw, int cell, int *model, int *seq, int *batch);

struct sweep_ctx;

/* A worker: the caches of one process (graphs, allocation tapes, profiles, one
 * step simulation). Returns NULL when out of memory. */
struct sweep_ctx *sweep_ctx_create(const struct sweep *sw);
void sweep_ctx_delete(struct sweep_ctx *c);

/* The cells [lo, hi) this context will evaluate (all of them by default): a
 * candidate's step simulations are done together for the cells of its group in
 * this range (one task graph, step_resimulate). Only the work done depends on
 * it, never a result. */
void sweep_ctx_cells(struct sweep_ctx *c, int lo, int hi);

/* What a context computes of each result: everything (SWEEP_ALL, the
 * default: what the CSV, JSON and the results database export), or what
 * recommend's Markdown and heatmap show (SWEEP_TABLES): the memory figures
 * (peak, the breakdown at the peak, the binding note; a replay of the
 * candidate's allocation tape at its micro-batch) of each cell's best only,
 * and the steps of only the candidates that could be the cell's best or its
 * runner-up: the others' steps are bounded below without a simulation
 * (step_bound, step.h) and, when even that bound leaves them behind, they are
 * SWEEP_BOUNDED; with global batches a candidate's memory is searched only
 * when its kernels' bound at any micro-batch leaves it in. Each cell's best
 * and runner-up, their figures and every step simulated are the same bits
 * either way (tests/test_sweep.c). */
enum sweep_detail { SWEEP_ALL, SWEEP_TABLES };
void sweep_ctx_detail(struct sweep_ctx *c, int which);
/* Evaluates every candidate of cell into out[0 .. ncand-1] and ranks those
 * whose step it simulated (under SWEEP_TABLES, not the SWEEP_BOUNDED ones).
 * Returns 0 or fills e (I/O or out of memory while setting up a group). */
int sweep_eval_cell(struct sweep_ctx *c, int cell, struct sweep_result *out, struct err *e);

/* Counts of the work done by a context (for the bench). */
struct sweep_counts {
	long candidates;     /* evaluated against memory (not invalid/indivisible) */
	long steps;          /* step simulations */
	long step_graphs;    /* their task graphs built (the rest re-timed, step_resimulate) */
	long tapes;          /* allocation tapes built */
	long tapes_replayed; /* of which from a recorded walk (memwalk.h scripts) */
	long tapes_cut;      /* of which cut short, not one sample fitting
				(mem_plan.stop_unfit, SWEEP_TABLES) */
	long tapes_kept;     /* tapes restored from the copy kept of their first build instead
				(mem_plan_restore; not counted in tapes) */
	long graphs;         /* graphs built */
	long events;         /* events the step simulations processed */
	long bounds;         /* task graphs bounded without a simulation (SWEEP_TABLES) */
	long kernel_bounds;  /* candidates bounded by their kernels alone, no task graph
				(step_kernel_least, SWEEP_TABLES) */
	long unsearched;     /* of the candidates of the cells, those ruled out before their
				memory was searched (their kernels at any micro-batch; global
				batches, SWEEP_TABLES) */
	struct mem_emu_counts emu; /* the allocator's emulation (memory.h) */
};
void sweep_ctx_counts(const struct sweep_ctx *c, struct sweep_counts *k);

/* What the allocator's emulation did (k.emu) as one line of text, without a
 * newline: recommend --stats and make bench print it. */
void sweep_emu_text(char *buf, size_t n, const struct mem_emu_counts *k);

/* The winner and runner-up of a cell: the best candidate, and the best one of a
 * different strategy (label's strategy part). -1 when none. */
void sweep_cell_best(const struct sweep *sw, const struct sweep_result *cell, int *best,
		     int *runner_up);

/* Outputs, over all ncell x ncand results (cell-major). */
int sweep_write_markdown(const struct sweep *sw, const struct sweep_result *r, FILE *f);
int sweep_write_csv(const struct sweep *sw, const struct sweep_result *r, FILE *f);
/* A malloc'd JSON document (caller frees), NULL when out of memory. */
char *sweep_json(const struct sweep *sw, const struct sweep_result *r);
/* The heatmap's data (one line per cell, see results/plots/heatmap.gp). */
int sweep_write_heatmap_data(const struct sweep *sw, const struct sweep_result *r, FILE *f);

const char *sweep_status_name(int status);
const char *sweep_objective_name(int objective);

#endif

/*
 * scenario.h — a training scenario: model, cluster, training, failures,
 * checkpoint and job, loaded from INI and resolved against the catalogs.
 *
 * The keys are a contract (docs/CONTRACT.md); scenario.c's table is the single place
 * they are defined (type, unit, range, default, help) and `simulate --keys`
 * prints it for the README.
 */
#ifndef SHARDCAST_SCENARIO_H
#define SHARDCAST_SCENARIO_H

#include <stdint.h>

#include "cfg.h"
#include "compute.h"
#include "err.h"
#include "failures.h"
#include "hw.h"
#include "model.h"
#include "plan.h"
#include "profile.h"

enum strategy { STRAT_SINGLE, STRAT_DP, STRAT_DDP, STRAT_ZERO1, STRAT_ZERO2, STRAT_ZERO3, STRAT_FSDP };
enum fsdp_sharding { SHARD_FULL, SHARD_GRAD_OP, SHARD_NONE, SHARD_HYBRID, SHARD_HYBRID_ZERO2 };
enum fsdp_wrap { WRAP_TRANSFORMER, WRAP_SIZE, WRAP_NONE };
enum fsdp_prefetch { PREFETCH_BACKWARD_PRE, PREFETCH_BACKWARD_POST, PREFETCH_NONE };
/* [training] fsdp_reduce_dtype: MixedPrecision's (FSDP1) or MixedPrecisionPolicy's (FSDP2)
 * reduce_dtype; default: FSDP1 the compute dtype, FSDP2 the parameters' own (fp32) */
enum fsdp_dtype { FDT_DEFAULT, FDT_FP32, FDT_BF16, FDT_FP16 };
/* [training] no_sync: whether micro-steps before the last run in the wrapper's
 * no_sync() (DDP, FSDP1) or under set_requires_gradient_sync(False) (FSDP2);
 * default resolves per strategy (plan.c) */
enum no_sync { NOSYNC_DEFAULT, NOSYNC_TRUE, NOSYNC_FALSE };
enum offload { OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_OPTIMIZER_AND_PARAMS };
enum optimizer { OPT_SGD, OPT_SGD_MOMENTUM, OPT_ADAM, OPT_ADAMW };
enum recompute { RECOMPUTE_NONE, RECOMPUTE_FULL, RECOMPUTE_SELECTIVE };
enum framework { FW_PYTORCH, FW_DEEPSPEED, FW_SHARDCAST };
/* [training] attention as written: default resolves per framework and model
 * family, sdpa per device, precision and head size (scenario.c) */
/* [training] optimizer_impl: torch.optim's implementations (default resolves
 * per engine and device: plan.h opt_impl) */
enum opt_impl { OPTI_DEFAULT, OPTI_FOR_LOOP, OPTI_FOREACH, OPTI_FUSED };
enum attn_choice { ATTN_DEFAULT, ATTN_EAGER, ATTN_SDPA, ATTN_SDPA_FLASH, ATTN_SDPA_MEM_EFFICIENT,
		   ATTN_SDPA_MATH, ATTN_FLASH, ATTN_FLASH3, ATTN_CUDNN };
enum ckpt_mode { CKPT_SYNC, CKPT_ASYNC };
enum ckpt_state { CKPT_SHARDED, CKPT_FULL };
enum ckpt_writer { CKPT_WRITER_AUTO, CKPT_WRITER_DCP, CKPT_WRITER_TORCH_SAVE, CKPT_WRITER_DEEPSPEED, CKPT_WRITER_PER_RANK };
enum ckpt_staging { CKPT_STAGE_PAGEABLE, CKPT_STAGE_PINNED, CKPT_STAGE_PINNED_PER_SAVE };
enum ckpt_executor { CKPT_EXEC_THREAD, CKPT_EXEC_PROCESS };
enum ckpt_replicas { CKPT_REPLICAS_AUTO, CKPT_REPLICAS_FIRST, CKPT_REPLICAS_BALANCED };

struct scn_model {
	char name[CFG_STR_MAX];   /* catalog name or path */
	char hf_config[CFG_STR_MAX]; /* a Hugging Face config.json instead of name; "" = none */
	int64_t seq_len;          /* tokens per sample (encoder input) */
	int64_t target_len;       /* decoder tokens (encoder-decoder); -1 = seq_len */
	double dropout;           /* -1 = the model file's rate */
	int64_t pad_vocab_multiple; /* vocabulary rounded up to a multiple of this; 1 = as is */
};

struct scn_cluster {
	char gpu[CFG_STR_MAX];
	double gpu_memory;        /* bytes; -1 = the device's capacity */
	int64_t nodes, gpus_per_node;
	char intra_node[CFG_STR_MAX], inter_node[CFG_STR_MAX];
	int64_t nics_per_node;
	int coll_algo;            /* enum coll_algo (coll.h): collective_algorithm */
};

struct scn_training {
	int strategy;             /* enum strategy */
	int64_t fsdp_version;     /* 1 FullyShardedDataParallel, 2 fully_shard */
	int fsdp_sharding;        /* enum fsdp_sharding */
	int fsdp_wrap;            /* enum fsdp_wrap */
	double fsdp_min_num_params;
	int fsdp_backward_prefetch; /* enum fsdp_prefetch */
	int fsdp_forward_prefetch;
	int fsdp_limit_all_gathers;
	int64_t fsdp_reshard_after_forward; /* FSDP2: -1 default, -2 true, 0 false, N ranks */
	int fsdp_reduce_dtype;    /* enum fsdp_dtype (FSDP1 MixedPrecision, FSDP2 MixedPrecisionPolicy) */
	int offload;              /* enum offload */
	int precision;            /* PREC_* */
	int optimizer;            /* enum optimizer */
	int64_t micro_batch;      /* -1 = auto (largest that fits) */
	int64_t grad_accum;
	int no_sync;              /* enum no_sync */
	int recompute;            /* activation_checkpointing: enum recompute */
	int64_t tensor_parallel;
	double ddp_bucket_mb;     /* MiB, as torch's bucket_cap_mb */
	int ddp_gradient_as_bucket_view;
	double zero_reduce_bucket_size;     /* elements (DeepSpeed reduce_bucket_size) */
	double zero_allgather_bucket_size;  /* elements */
	double zero_prefetch_bucket_size;   /* elements (stage3_prefetch_bucket_size) */
	double zero_max_live_parameters;    /* elements (stage3_max_live_parameters) */
	double zero_param_persistence_threshold; /* elements */
	int framework;            /* enum framework */
	int attention;            /* enum attn_choice */
	int optimizer_impl;       /* enum opt_impl */
	int grad_clipping;        /* clip_grad_norm_ before the step */
	int framework_version;    /* enum fw_version: which PyTorch stack's rules */
	double max_split_size_mb; /* MiB: PYTORCH_CUDA_ALLOC_CONF max_split_size_mb; 0 = unlimited */
	int expandable_segments;  /* PYTORCH_CUDA_ALLOC_CONF expandable_segments:True */
	double gc_threshold;      /* PYTORCH_CUDA_ALLOC_CONF garbage_collection_threshold; 0 = off */
	double memory_fraction;   /* torch.cuda.set_per_process_memory_fraction; 0 = not called */
	char accelerate_config[CFG_STR_MAX]; /* an `accelerate config` YAML to import; "" = none */
	char deepspeed_config[CFG_STR_MAX];  /* a DeepSpeed JSON to import; "" = none */
};

struct scn_failures {
	char catalog[CFG_STR_MAX];
	double restart_minutes;
	int64_t spare_nodes;
	int64_t trials;
	int64_t seed;
	double detection_minutes; /* failure to the job noticing it (minutes) */
};

struct scn_checkpoint {
	double interval_minutes;  /* -1 = auto */
	int mode;                 /* enum ckpt_mode */
	int state_dict;           /* enum ckpt_state */
	char storage[CFG_STR_MAX]; /* models/hw/storage.ini entry or path; "" = none */
	double storage_bandwidth; /* bytes/s, aggregate; -1 = auto (the storage's, else 100 GB/s) */
	double node_bandwidth;    /* bytes/s one node can write or read; -1 = auto (the storage's, else its NICs) */
	double storage_latency;   /* s per request and file operation; -1 = auto (the storage's, else 1 ms) */
	double host_copy_bandwidth; /* bytes/s device->pinned host per GPU (async staging) */
	double node_host_copy_bandwidth; /* bytes/s device->host per node; -1 = auto */
	double pageable_copy_bandwidth; /* bytes/s device->pageable host per process */
	double serialize_bandwidth; /* bytes/s one writer thread serializes (torch.save) */
	double pin_bandwidth;     /* bytes/s of allocating pinned host memory */
	int writer;               /* enum ckpt_writer */
	int64_t writer_threads;   /* per rank; -1 = auto (the writer's default) */
	int staging;              /* enum ckpt_staging */
	int executor;             /* enum ckpt_executor: async_executor */
	int plan_cache;           /* the save plan is cached after the first save */
	int replica_writers;      /* enum ckpt_replicas */
	int64_t load_gpus;        /* GPUs a restart loads into; -1 = auto (the same) */
	double host_memory;       /* bytes per node; -1 = not given (not checked) */
	int include_grads;        /* the checkpoint also holds the gradients */
	int include_optimizer;    /* it holds the optimizer states and master weights (else weights only) */
	double collective_timeout_minutes; /* NCCL/c10d collective timeout (minutes) */
};

struct scn_job {
	double train_tokens;      /* 0 = not set */
	int64_t steps;            /* 0 = not set */
	double wall_days;         /* 0 = not set */
	double step_time;         /* s per optimizer step; 0 = from the step model */
	double tokens_per_step;   /* 0 = from the batch: micro_batch x grad_accum x dp x seq_len */
};

/* The raw settings, exactly as the table fills them. */
struct scn_settings {
	struct scn_model model;
	struct scn_cluster cluster;
	struct scn_training training;
	struct scn_failures failures;
	struct scn_checkpoint checkpoint;
	struct scn_job job;
};

#define SCN_MAX_KEYS 96

/* line[] value of a key whose value came from an imported file (the
 * Accelerate or DeepSpeed config; see import.h and scenario->imp). */
#define SCN_IMPORTED (-2)

struct imp_result;

/* The stored calibration applied to the device's parameters (calib.h), or
 * none: reports and JSON name it. */
struct scn_calibration {
	int applied;              /* 0: none, the catalog's values */
	long long id;             /* its row in the calibrations table */
	char db[CFG_STR_MAX];     /* the results database it came from */
	char device[CFG_STR_MAX];
	char created_at[32];      /* UTC, ISO 8601 */
	int runs;                 /* validate runs it was fitted to */
	int fitted;               /* parameters fitted; -1: not recorded (an older calibration) */
	double heldout_error;     /* median |relative step-time error| on runs held out of the
				     fit; < 0: not measured (an older calibration) */
	char method[32];          /* how runs were held out: "leave-one-out", "5-fold" */
};

struct scenario {
	char file[CFG_STR_MAX];   /* the scenario's path as given */
	char *text;               /* the file's text (owned) */
	size_t text_len;
	uint64_t hash;            /* FNV-1a 64 of text, the --set overrides and imported files */
	struct scn_settings s;
	int line[SCN_MAX_KEYS];   /* where each key was set: line, 0 default, -1 --set,
				     SCN_IMPORTED from an import (which: imp) */
	struct imp_result *imp;   /* the imports' settings and notes (owned); NULL: none */
	int has_failures, has_checkpoint, has_job;

	/* resolved */
	struct model model;
	struct gpu gpu;
	struct link intra, inter;
	struct compute_eff eff;   /* models/hw/efficiency.ini entry of the device */
	int64_t seq_len, target_len; /* target_len = seq_len unless encoder-decoder */
	double dropout;           /* effective dropout probability */
	double capacity;          /* bytes per GPU: gpu_memory or the device's */
	int64_t world;            /* nodes * gpus_per_node */
	int64_t dp;               /* data-parallel degree: world / tensor_parallel */
	int attn;                 /* the attention kernel that runs: enum attn_kernel (graph.h) */
	struct plan plan;         /* what the strategy does (plan.h): every model reads this,
				     not the [training] strategy keys */
	struct fw_profile profile; /* the profile of plan's engine (plan_profile_load), read
				     once with the scenario */
	struct fail_catalog failures; /* [failures] catalog, loaded when has_failures */
	struct storage storage;   /* [checkpoint] storage, when has_storage */
	int has_storage;
	struct scn_calibration calib; /* applied by calib_apply_latest (cleared when resolved) */
};

/* Loads path, applies the nset overrides ("section.key=value"), validates and
 * resolves the catalog entries. Every path the file gives (a model, device or
 * link file, the [failures] catalog, the imports) is relative to the file's
 * folder, a path given by --set to the working directory; entries keep the
 * name as written. Imports ([model] hf_config, [training] accelerate_config and
 * deepspeed_config) are read during resolution: their settings apply first,
 * then the file's keys, then --set. On error fills e (file:line, key, expectation)
 * and returns ERR_INPUT or ERR_SYSTEM; s is then to be freed with scenario_free. */
int scenario_load(struct scenario *s, const char *path, const char *const *sets, int nset,
		  struct err *e);

/* scenario_load of a text already read (a sweep file's scenario sections):
 * takes ownership of text (malloc'd, NUL-terminated, len bytes); path names it
 * in messages. */
int scenario_load_text(struct scenario *s, const char *path, char *text, size_t len,
		       const char *const *sets, int nset, struct err *e);

/* Checks the training settings against the model and cluster and resolves
 * what follows from them: the plan (plan_build: strategy vs GPU count,
 * offload vs strategy, tensor parallel vs heads, precision vs device, the
 * optimizer implementation) and the attention kernel (s->attn). scenario_load
 * applies it; a sweep calls it for each candidate it builds in memory.
 * Returns 0 or ERR_INPUT with e saying why. */
int scenario_check_training(struct scenario *s, struct err *e);

/* An ERR_INPUT error about key (section, key) of s, located where it was set:
 * the scenario's line, --set, or the imported file's line and field. Returns
 * ERR_INPUT. */
int scenario_error(const struct scenario *s, struct err *e, const char *section, const char *key,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Applies one more override to an already loaded scenario and re-resolves it. */
int scenario_set(struct scenario *s, const char *assignment, struct err *e);

void scenario_free(struct scenario *s);

/* The key table (for --keys and tests). */
const struct cfg_table *scenario_keys(void);

/* Names of enum values, for reports. */
const char *scenario_strategy_name(int strategy);
const char *scenario_precision_name(int precision);
const char *scenario_enum_name(const char *section, const char *key, int value);

/* Bytes per element of the compute dtype (2 for fp16/bf16, 4 for fp32/tf32). */
int scenario_act_bytes(const struct scenario *s);

#endif

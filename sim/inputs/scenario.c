/*
 * scenario.c — the scenario key table, loading, validation and resolution.
 *
 * The table below is the contract (docs/CONTRACT.md, "Scenario files"): section, key,
 * type, unit, range, default, field and a line of help. Everything else about a
 * key follows from its row: parsing, range checks, typo suggestions, --set and
 * the README's reference (simulate --keys).
 */
#include "scenario.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "graph.h"
#include "import.h"

static const char *const strategies[] = {"single", "dp", "ddp", "zero1", "zero2", "zero3", "fsdp", NULL};
static const char *const shardings[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
					"hybrid_shard_zero2", NULL};
static const char *const wraps[] = {"transformer_based_wrap", "size_based_wrap", "no_wrap", NULL};
static const char *const fsdp_dtypes[] = {"default", "fp32", "bf16", "fp16", NULL};
static const char *const no_syncs[] = {"default", "true", "false", NULL};
static const char *const prefetches[] = {"backward_pre", "backward_post", "none", NULL};
static const char *const offloads[] = {"none", "optimizer", "optimizer_and_params", NULL};
static const char *const precisions[] = {"fp32", "tf32", "fp16", "bf16", NULL};
static const char *const optimizers[] = {"sgd", "sgd_momentum", "adam", "adamw", NULL};
static const char *const recomputes[] = {"none", "full", "selective", NULL};
static const char *const frameworks[] = {"pytorch", "deepspeed", "shardcast", NULL};
static const char *const fw_versions[] = {"current", "1.13", NULL};
static const char *const opt_impls[] = {"default", "for_loop", "foreach", "fused", NULL};
/* the order of enum attn_choice */
static const char *const attentions[] = {"default", "eager", "sdpa", "sdpa_flash", "sdpa_mem_efficient",
					 "sdpa_math", "flash", "flash3", "cudnn", NULL};
static const char *const modes[] = {"sync", "async", NULL};
static const char *const states[] = {"sharded", "full", NULL};
static const char *const writers[] = {"auto", "dcp", "torch_save", "deepspeed", "per_rank", NULL};
static const char *const stagings[] = {"pageable", "pinned", "pinned_per_save", NULL};
static const char *const executors[] = {"thread", "process", NULL};
static const char *const replica_writers[] = {"auto", "first", "balanced", NULL};
/* the order of enum coll_algo (coll.h) */
static const char *const coll_algos[] = {"auto", "ring", "tree", "hierarchical", NULL};

#define M(x) offsetof(struct scn_settings, model.x)
#define C(x) offsetof(struct scn_settings, cluster.x)
#define T(x) offsetof(struct scn_settings, training.x)
#define FA(x) offsetof(struct scn_settings, failures.x)
#define CK(x) offsetof(struct scn_settings, checkpoint.x)
#define J(x) offsetof(struct scn_settings, job.x)
static const struct cfg_key keys[] = {
	{"model", "name", CFG_STR, 0, 0, 0, 0, "", M(name), NULL, "models/nn/<name>.ini, or a path to a file of that form (required unless hf_config)"},
	{"model", "hf_config", CFG_STR, 0, 0, 0, 0, "", M(hf_config), NULL, "a Hugging Face config.json (or its folder) path: GPT-2, BERT, T5, Llama or Mistral, instead of name"},
	{"model", "seq_len", CFG_INT, 0, 0, 1, 1e7, "1024", M(seq_len), NULL, "tokens per sample (encoder input for encoder-decoder models)"},
	{"model", "target_len", CFG_INT, 0, CFG_DEFAULTV, 1, 1e7, "default", M(target_len), NULL, "decoder tokens per sample, encoder-decoder only (default: seq_len)"},
	{"model", "dropout", CFG_NUM, 0, CFG_DEFAULTV, 0, 0.99, "default", M(dropout), NULL, "dropout probability (default: the model file's); 0 = no dropout, as an eval-mode forward"},
	{"model", "pad_vocab_multiple", CFG_INT, 0, 0, 1, 1e6, "1", M(pad_vocab_multiple), NULL, "round the vocabulary up to a multiple of this, as the framework allocates it (llm.c's padded vocabulary: 128; llm-foundry's pad_vocab_multiple); 1 = the model's"},

	{"cluster", "gpu", CFG_STR, 0, CFG_REQUIRED, 0, 0, NULL, C(gpu), NULL, "models/hw/gpus.ini section, or a path (cpu = the runtime's CPU backend)"},
	{"cluster", "gpu_memory", CFG_NUM, UNIT_BYTES, CFG_DEFAULTV, 1 << 20, 1e14, "default", C(gpu_memory), NULL, "override the device's capacity, e.g. 40GiB, 64MiB"},
	{"cluster", "nodes", CFG_INT, 0, 0, 1, 1e5, "1", C(nodes), NULL, "number of nodes"},
	{"cluster", "gpus_per_node", CFG_INT, 0, 0, 1, 64, "1", C(gpus_per_node), NULL, "GPUs per node"},
	{"cluster", "intra_node", CFG_STR, 0, 0, 0, 0, "nvlink3", C(intra_node), NULL, "models/hw/links.ini section (pcie3..5, nvlink2..4, shm), or a path"},
	{"cluster", "inter_node", CFG_STR, 0, 0, 0, 0, "ib-hdr", C(inter_node), NULL, "models/hw/links.ini section (ib-*, roce-*, eth-*), or a path"},
	{"cluster", "nics_per_node", CFG_INT, 0, 0, 1, 64, "1", C(nics_per_node), NULL, "network interfaces per node"},
	{"cluster", "collective_algorithm", CFG_ENUM, 0, 0, 0, 0, "auto", C(coll_algo), coll_algos, "collective cost model: auto (NCCL's choice of ring/tree), ring, tree, hierarchical"},

	{"training", "strategy", CFG_ENUM, 0, 0, 0, 0, "ddp", T(strategy), strategies, "parallelism strategy"},
	{"training", "fsdp_version", CFG_INT, 0, 0, 1, 2, "1", T(fsdp_version), NULL, "FSDP implementation: 1 = FullyShardedDataParallel (flat parameters), 2 = fully_shard (per-parameter DTensor shards)"},
	{"training", "fsdp_sharding_strategy", CFG_ENUM, 0, 0, 0, 0, "full_shard", T(fsdp_sharding), shardings, "FSDP sharding strategy (hybrid: shard inside a node, replicate across)"},
	{"training", "fsdp_auto_wrap_policy", CFG_ENUM, 0, 0, 0, 0, "transformer_based_wrap", T(fsdp_wrap), wraps, "FSDP unit boundaries"},
	{"training", "fsdp_min_num_params", CFG_NUM, 0, 0, 1, 1e13, "1e8", T(fsdp_min_num_params), NULL, "size_based_wrap threshold (parameters)"},
	{"training", "fsdp_backward_prefetch", CFG_ENUM, 0, 0, 0, 0, "backward_pre", T(fsdp_backward_prefetch), prefetches, "FSDP backward prefetch"},
	{"training", "fsdp_forward_prefetch", CFG_BOOL, 0, 0, 0, 0, "false", T(fsdp_forward_prefetch), NULL, "FSDP forward prefetch"},
	{"training", "fsdp_reshard_after_forward", CFG_INT, 0, CFG_DEFAULTV | CFG_BOOLV, 0, 1e5, "default", T(fsdp_reshard_after_forward), NULL, "FSDP2: free a module's gathered parameters after its forward: default (the blocks, not the root), true (every module), false (none), or N = keep a shard over N ranks"},
	{"training", "fsdp_limit_all_gathers", CFG_BOOL, 0, 0, 0, 0, "true", T(fsdp_limit_all_gathers), NULL, "FSDP rate limiter: at most two units gathered ahead"},
	{"training", "fsdp_reduce_dtype", CFG_ENUM, 0, 0, 0, 0, "default", T(fsdp_reduce_dtype), fsdp_dtypes, "FSDP reduce_dtype: default (FSDP1 MixedPrecision: the compute dtype, bf16/fp16 under mixed precision, else fp32; FSDP2 MixedPrecisionPolicy: the parameters' fp32, PyTorch 2.15's reduce_dtype=None), fp32, bf16, fp16"},
	{"training", "offload", CFG_ENUM, 0, 0, 0, 0, "none", T(offload), offloads, "CPU offload (ZeRO-Offload / FSDP CPUOffload)"},
	{"training", "precision", CFG_ENUM, 0, 0, 0, 0, "fp32", T(precision), precisions, "fp16/bf16: mixed precision with fp32 master weights"},
	{"training", "optimizer", CFG_ENUM, 0, 0, 0, 0, "adamw", T(optimizer), optimizers, "optimizer"},
	{"training", "micro_batch", CFG_INT, 0, CFG_AUTO, 1, 1e7, "auto", T(micro_batch), NULL, "samples per GPU per micro-step, or auto = the largest that fits"},
	{"training", "grad_accum", CFG_INT, 0, 0, 1, 1e6, "1", T(grad_accum), NULL, "micro-steps per optimizer step"},
	{"training", "no_sync", CFG_ENUM, 0, 0, 0, 0, "default", T(no_sync), no_syncs, "micro-steps before the last run in the wrapper's no_sync(), their gradients not reduced: default (ddp yes, as Composer, Accelerate and the HF Trainer do; fsdp no, as Composer and a plain loop do), true (FSDP1: Accelerate's and the HF Trainer's, which keep every unit's unsharded gradient; FSDP2: set_requires_gradient_sync(False), each parameter keeping its unsharded gradient in the reduce dtype), false (every micro-step reduces); ddp and fsdp under framework pytorch only"},
	{"training", "activation_checkpointing", CFG_ENUM, 0, 0, 0, 0, "none", T(recompute), recomputes, "recompute activations in backward"},
	{"training", "tensor_parallel", CFG_INT, 0, 0, 1, 1024, "1", T(tensor_parallel), NULL, "Megatron-style tensor-parallel degree"},
	{"training", "ddp_bucket_mb", CFG_NUM, 0, 0, 0.001, 1e6, "25", T(ddp_bucket_mb), NULL, "DDP bucket_cap_mb (MiB)"},
	{"training", "ddp_gradient_as_bucket_view", CFG_BOOL, 0, 0, 0, 0, "false", T(ddp_gradient_as_bucket_view), NULL, "DDP gradients are views into the buckets"},
	{"training", "zero_reduce_bucket_size", CFG_NUM, 0, 0, 1, 1e13, "5e8", T(zero_reduce_bucket_size), NULL, "DeepSpeed reduce_bucket_size (elements)"},
	{"training", "zero_allgather_bucket_size", CFG_NUM, 0, 0, 1, 1e13, "5e8", T(zero_allgather_bucket_size), NULL, "DeepSpeed allgather_bucket_size (elements)"},
	{"training", "zero_prefetch_bucket_size", CFG_NUM, 0, 0, 0, 1e13, "5e7", T(zero_prefetch_bucket_size), NULL, "DeepSpeed stage3_prefetch_bucket_size (elements)"},
	{"training", "zero_max_live_parameters", CFG_NUM, 0, 0, 1, 1e13, "1e9", T(zero_max_live_parameters), NULL, "DeepSpeed stage3_max_live_parameters (elements)"},
	{"training", "zero_param_persistence_threshold", CFG_NUM, 0, 0, 0, 1e13, "1e5", T(zero_param_persistence_threshold), NULL, "DeepSpeed stage3_param_persistence_threshold (elements)"},
	{"training", "framework", CFG_ENUM, 0, 0, 0, 0, "pytorch", T(framework), frameworks, "whose buffers, allocator and overheads to model"},
	{"training", "framework_version", CFG_ENUM, 0, 0, 0, 0, "current", T(framework_version), fw_versions, "PyTorch stack whose rules apply (framework = pytorch): current (2.x) or 1.13"},
	{"training", "max_split_size_mb", CFG_NUM, 0, 0, 0, 1e9, "0", T(max_split_size_mb), NULL, "CUDA caching allocator (PYTORCH_CUDA_ALLOC_CONF): blocks this large (MiB) are never split; 0 = unlimited, else above 20"},
	{"training", "expandable_segments", CFG_BOOL, 0, 0, 0, 0, "false", T(expandable_segments), NULL, "CUDA caching allocator: segments grow by mapping pages instead of new cudaMallocs"},
	{"training", "garbage_collection_threshold", CFG_NUM, 0, 0, 0, 0.999, "0", T(gc_threshold), NULL, "CUDA caching allocator: free old cached blocks above this share of memory_fraction's limit (PyTorch ignores it when memory_fraction is not set); 0 = off"},
	{"training", "memory_fraction", CFG_NUM, 0, 0, 0, 1, "0", T(memory_fraction), NULL, "torch.cuda.set_per_process_memory_fraction: the allocator's limit as a share of the GPU's memory; 0 = not set"},
	{"training", "attention", CFG_ENUM, 0, 0, 0, 0, "default", T(attention), attentions, "attention kernel: default (transformers' choice: sdpa, T5 and framework shardcast eager), eager, sdpa (PyTorch picks flash, mem_efficient or math), sdpa_flash, sdpa_mem_efficient, sdpa_math, flash (flash-attn 2), flash3 (Hopper), cudnn"},
	{"training", "optimizer_impl", CFG_ENUM, 0, 0, 0, 0, "default", T(optimizer_impl), opt_impls, "torch.optim implementation: default (PyTorch 2.x: foreach on CUDA, for_loop on CPU; DeepSpeed and shardcast: fused), for_loop, foreach, fused"},
	{"training", "grad_clipping", CFG_BOOL, 0, 0, 0, 0, "false", T(grad_clipping), NULL, "clip_grad_norm_ before each optimizer step (the gradients' norm and a scaling pass)"},
	{"training", "accelerate_config", CFG_STR, 0, 0, 0, 0, "", T(accelerate_config), NULL, "an `accelerate config` YAML path to import (FSDP, MULTI_GPU, DEEPSPEED); the scenario's keys override it"},
	{"training", "deepspeed_config", CFG_STR, 0, 0, 0, 0, "", T(deepspeed_config), NULL, "a DeepSpeed JSON config path to import; the scenario's keys override it"},

	{"failures", "catalog", CFG_STR, 0, 0, 0, 0, "llama3-h100", FA(catalog), NULL, "models/failures/<name>.ini (per-component rates), or a path"},
	{"failures", "restart_minutes", CFG_NUM, 0, 0, 0, 1e5, "10", FA(restart_minutes), NULL, "time to restart the job after a failure (minutes)"},
	{"failures", "spare_nodes", CFG_INT, 0, 0, 0, 1e5, "0", FA(spare_nodes), NULL, "hot spare nodes that replace failed ones"},
	{"failures", "trials", CFG_INT, 0, 0, 1, 1e7, "1000", FA(trials), NULL, "Monte Carlo trials"},
	{"failures", "seed", CFG_INT, 0, 0, 0, 4e9, "1", FA(seed), NULL, "random seed"},
	{"failures", "detection_minutes", CFG_NUM, 0, 0, 0, 1e5, "0", FA(detection_minutes), NULL, "time from a failure to the job noticing it (minutes); hangs wait for the collective timeout"},

	{"checkpoint", "interval_minutes", CFG_NUM, 0, CFG_AUTO, 0.01, 1e7, "auto", CK(interval_minutes), NULL, "minutes of training between checkpoints, or auto = the interval that minimises expected wall time"},
	{"checkpoint", "mode", CFG_ENUM, 0, 0, 0, 0, "async", CK(mode), modes, "sync: training waits for the write; async: only for the copy to host"},
	{"checkpoint", "state_dict", CFG_ENUM, 0, 0, 0, 0, "sharded", CK(state_dict), states, "sharded: every rank writes its shard; full: gathered on rank 0"},
	{"checkpoint", "storage", CFG_STR, 0, 0, 0, 0, "", CK(storage), NULL, "models/hw/storage.ini entry (nfs, fsx-lustre, gpfs-nvme, object-fuse, local-nvme, tectonic) or a path; the keys below override its figures"},
	{"checkpoint", "storage_bandwidth", CFG_NUM, UNIT_BW, CFG_AUTO, 1e6, 1e15, "auto", CK(storage_bandwidth), NULL, "aggregate write bandwidth of the checkpoint storage; auto = the storage's, else 100GB/s"},
	{"checkpoint", "node_bandwidth", CFG_NUM, UNIT_BW, CFG_AUTO, 1e6, 1e15, "auto", CK(node_bandwidth), NULL, "what one node (storage client) can write or read; auto = the storage's, else its NICs (nics_per_node x inter_node)"},
	{"checkpoint", "storage_latency", CFG_NUM, UNIT_TIME, CFG_AUTO, 0, 100, "auto", CK(storage_latency), NULL, "per storage request and file operation; auto = the storage's, else 1ms"},
	{"checkpoint", "writer", CFG_ENUM, 0, 0, 0, 0, "auto", CK(writer), writers, "who writes it: dcp (torch.distributed.checkpoint: a global plan), torch_save (one file from rank 0), deepspeed (model and optimizer files per rank), per_rank (a file per rank, no global plan: shardcast's runtime, in-house trainers); auto = by framework and state_dict"},
	{"checkpoint", "writer_threads", CFG_INT, 0, CFG_AUTO, 1, 1024, "auto", CK(writer_threads), NULL, "writer threads per rank (DCP FileSystemWriter thread_count); auto = 1, the writers' default"},
	{"checkpoint", "staging", CFG_ENUM, 0, 0, 0, 0, "pageable", CK(staging), stagings, "async staging buffers: pageable (allocated per save, async_save's default), pinned (allocated once), pinned_per_save"},
	{"checkpoint", "async_executor", CFG_ENUM, 0, 0, 0, 0, "thread", CK(executor), executors, "where an async save serializes and writes: a thread of the trainer (GIL contention) or a process"},
	{"checkpoint", "plan_cache", CFG_BOOL, 0, 0, 0, 0, "true", CK(plan_cache), NULL, "DCP reuses the first save's plan (DefaultSavePlanner enable_plan_caching); false: every save plans anew"},
	{"checkpoint", "replica_writers", CFG_ENUM, 0, 0, 0, 0, "auto", CK(replica_writers), replica_writers, "who writes replicated state: first (one replica: HSDP replica 0, DeepSpeed dp rank 0), balanced (DCP dedup_save_plans spreads it); auto = by writer"},
	{"checkpoint", "load_gpus", CFG_INT, 0, CFG_AUTO, 1, 1e7, "auto", CK(load_gpus), NULL, "GPUs a restart loads the checkpoint into (resharding when not the job's); auto = the job's"},
	{"checkpoint", "host_copy_bandwidth", CFG_NUM, UNIT_BW, 0, 1e6, 1e15, "25GB/s", CK(host_copy_bandwidth), NULL, "device-to-pinned-host copy per GPU (PCIe 4 x16 reaches about 25 GB/s; 12.6 GB/s measured on an A100, 48 on an H100)"},
	{"checkpoint", "node_host_copy_bandwidth", CFG_NUM, UNIT_BW, CFG_AUTO, 1e6, 1e15, "auto", CK(node_host_copy_bandwidth), NULL, "device-to-host copies of a whole node; auto = gpus_per_node / 2 x host_copy_bandwidth (two GPUs per PCIe switch uplink, as in DGX A100/H100)"},
	{"checkpoint", "pageable_copy_bandwidth", CFG_NUM, UNIT_BW, 0, 1e6, 1e15, "1.4GB/s", CK(pageable_copy_bandwidth), NULL, "device-to-pageable-host copy per process into fresh memory (1.4 GB/s measured on an A100, PyTorch PR 138018)"},
	{"checkpoint", "serialize_bandwidth", CFG_NUM, UNIT_BW, 0, 1e6, 1e15, "0.65GB/s", CK(serialize_bandwidth), NULL, "torch.save of host tensors per writer thread: CRC-32, zip records, write(2) (derived from PyTorch PR 143342's A100 timings)"},
	{"checkpoint", "pin_bandwidth", CFG_NUM, UNIT_BW, 0, 1e6, 1e15, "2.3GB/s", CK(pin_bandwidth), NULL, "allocating pinned host memory (cudaHostAlloc: 16 GB in about 7 s, PaddleFormers PR 4897)"},
	{"checkpoint", "host_memory", CFG_NUM, UNIT_BYTES, CFG_DEFAULTV, 1 << 20, 1e15, "default", CK(host_memory), NULL, "host memory per node, to check async staging and full state dicts (default: not checked)"},
	{"checkpoint", "include_optimizer", CFG_BOOL, 0, 0, 0, 0, "true", CK(include_optimizer), NULL, "the checkpoint holds the optimizer states (and fp32 master weights); false: the weights only"},
	{"checkpoint", "include_grads", CFG_BOOL, 0, 0, 0, 0, "false", CK(include_grads), NULL, "the checkpoint also holds the gradients"},
	{"checkpoint", "collective_timeout_minutes", CFG_NUM, 0, 0, 0.01, 1e5, "10", CK(collective_timeout_minutes), NULL, "collective timeout (PyTorch's NCCL default: 10 min); a longer blocking save is warned about"},

	{"job", "train_tokens", CFG_NUM, 0, 0, 1, 1e18, NULL, J(train_tokens), NULL, "tokens to train on (one of train_tokens, steps, wall_days)"},
	{"job", "steps", CFG_INT, 0, 0, 1, 1e12, NULL, J(steps), NULL, "optimizer steps to run"},
	{"job", "wall_days", CFG_NUM, 0, 0, 0.001, 1e5, NULL, J(wall_days), NULL, "a fixed calendar window to simulate (days)"},
	{"job", "step_time", CFG_NUM, UNIT_TIME, 0, 1e-6, 1e6, NULL, J(step_time), NULL, "time of one optimizer step, e.g. 6.5s (default: the step model's)"},
	{"job", "tokens_per_step", CFG_NUM, 0, 0, 1, 1e12, NULL, J(tokens_per_step), NULL, "tokens per optimizer step (default: micro_batch x grad_accum x dp x seq_len)"},
};
#undef M
#undef C
#undef T
#undef FA
#undef CK
#undef J

#define NKEYS (sizeof keys / sizeof keys[0])
_Static_assert(NKEYS <= SCN_MAX_KEYS, "raise SCN_MAX_KEYS");

static const struct cfg_table table = {keys, NKEYS};

const struct cfg_table *scenario_keys(void)
{
	return &table;
}

const char *scenario_strategy_name(int strategy)
{
	return strategies[strategy];
}

const char *scenario_precision_name(int precision)
{
	return precisions[precision];
}

const char *scenario_enum_name(const char *section, const char *key, int value)
{
	int i = cfg_index(&table, section, key);
	return i < 0 || !keys[i].choices ? "?" : keys[i].choices[value];
}

int scenario_act_bytes(const struct scenario *s)
{
	return s->s.training.precision == PREC_FP16 || s->s.training.precision == PREC_BF16 ? 2 : 4;
}

static uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 1099511628211ull;
	}
	return h;
}

static int line_of(const struct scenario *s, const char *section, const char *key)
{
	return s->line[cfg_index(&table, section, key)];
}

static int section_set(const struct scenario *s, const char *section)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].section, section) == 0 && s->line[i] != 0)
			return 1;
	return 0;
}

/* The applied import setting of (section, key), or NULL. */
static const struct imp_setting *imported(const struct scenario *s, const char *section,
					  const char *key)
{
	int i;

	for (i = 0; s->imp && i < s->imp->nset; i++) {
		const struct imp_setting *t = &s->imp->set[i];
		if (t->state == IMP_APPLIED && !strcmp(t->section, section) && !strcmp(t->key, key))
			return t;
	}
	return NULL;
}

int scenario_error(const struct scenario *s, struct err *e, const char *section, const char *key,
		   const char *fmt, ...)
{
	int line = line_of(s, section, key);
	const struct imp_setting *t = line == SCN_IMPORTED ? imported(s, section, key) : NULL;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (t)
		return err_set(e, ERR_INPUT, imp_file(s->imp, t), t->line,
			       "[%s] %s = %s (imported from %s): %s; set [%s] %s in the scenario to override",
			       section, key, t->value, t->field, msg, section, key);
	return err_set(e, ERR_INPUT, line < 0 ? "--set" : s->file, line < 0 ? 0 : line,
		       "[%s] %s: %s", section, key, msg);
}

/* Which attention kernel runs (s->attn, enum attn_kernel of graph.h).
 *  default: what Hugging Face transformers picks with no attn_implementation
 *   (framework_version 1.13: eager, SDPA came with PyTorch 2.0) —
 *   "sdpa" since 4.36 for the decoders that support it (Llama; GPT-2 since
 *   4.42, PR #31172; BERT since 4.41, PR #28802), "eager" for T5, whose
 *   relative position bias had no SDPA path (PR #47014 adds one in 2026); the
 *   shardcast runtime runs its own eager kernels.
 *  sdpa: PyTorch's dispatcher (aten/src/ATen/native/transformers/cuda/
 *   sdp_utils.cpp) tries flash first (sm80+, fp16/bf16, head size <= 256 and a
 *   multiple of 8, no additive mask: HF passes is_causal and no mask for
 *   unpadded batches), then the memory-efficient kernel (sm50+, fp32 too, takes
 *   an additive mask such as T5's bias), then the math path (eager ops).
 * Explicit kernels are checked against the same constraints (flash_api.cpp:
 * sm80+, fp16/bf16, head_dim <= 256; FlashAttention-3: sm90). */
static int resolve_attention(struct scenario *s, struct err *e)
{
	const struct model *m = &s->model;
	double cc = s->gpu.compute_capability;
	int half = scenario_act_bytes(s) == 2, a = s->s.training.attention;
	int bias = m->positions == POS_RELATIVE, hd_ok = m->head_dim % 8 == 0 && m->head_dim <= 256;
	int flash_ok = cc >= 8.0 && half && hd_ok && !bias;
	const char *why = NULL;

	/* PyTorch 1.13 has no scaled_dot_product_attention (added in 2.0) */
	if (a == ATTN_DEFAULT)
		a = s->plan.framework == FW_SHARDCAST || bias ||
			(s->plan.framework == FW_PYTORCH && s->s.training.framework_version == FWV_1_13)
			? ATTN_EAGER : ATTN_SDPA;
	if (a == ATTN_SDPA)
		a = cc <= 0 ? ATTN_SDPA_MATH : flash_ok ? ATTN_SDPA_FLASH
			: cc >= 5.0 && m->head_dim % (half ? 8 : 4) == 0 ? ATTN_SDPA_MEM_EFFICIENT : ATTN_SDPA_MATH;
	switch (a) {
	case ATTN_SDPA_FLASH: case ATTN_FLASH:
		why = flash_ok ? NULL : "FlashAttention-2 needs compute capability 8.0+, precision fp16 or bf16, "
			"head_dim a multiple of 8 up to 256 and no additive bias (T5)";
		s->attn = AK_FLASH2;
		break;
	case ATTN_FLASH3:
		why = flash_ok && cc >= 9.0 ? NULL : "FlashAttention-3 needs a Hopper GPU (compute capability 9.0), "
			"fp16 or bf16, head_dim a multiple of 8 up to 256 and no additive bias (T5)";
		s->attn = AK_FLASH3;
		break;
	case ATTN_CUDNN:
		why = flash_ok ? NULL : "cuDNN fused attention needs compute capability 8.0+, fp16 or bf16, "
			"head_dim a multiple of 8 up to 256 and no additive bias (T5)";
		s->attn = AK_CUDNN;
		break;
	case ATTN_SDPA_MEM_EFFICIENT:
		why = cc >= 5.0 && m->head_dim % (half ? 8 : 4) == 0 ? NULL : "the memory-efficient kernel "
			"needs a CUDA device (compute capability 5.0+) and head_dim a multiple of 8 (4 in fp32)";
		s->attn = AK_MEM_EFFICIENT;
		break;
	default:  /* eager, sdpa_math */
		s->attn = AK_EAGER;
	}
	if (why)
		return scenario_error(s, e, "training", "attention", "%s: %s", attentions[s->s.training.attention], why);
	return 0;
}

int scenario_check_training(struct scenario *s, struct err *e)
{
	int rc = plan_build(&s->plan, s, e);

	double ms = s->s.training.max_split_size_mb;

	/* c10/cuda/CUDAAllocatorConfig.cpp: max_split_size_mb above kLargeBuffer (20 MiB) */
	if (!rc && ms > 0 && ms <= 20)
		return scenario_error(s, e, "training", "max_split_size_mb", "%s",
				      "must be above 20 (MiB), or 0 for unlimited");
	return rc ? rc : resolve_attention(s, e);
}

static int check_job(struct scenario *s, struct err *e)
{
	const struct scn_job *j = &s->s.job;
	int n = (j->train_tokens > 0) + (j->steps > 0) + (j->wall_days > 0);

	if (n > 1)
		return err_set(e, ERR_INPUT, s->file, line_of(s, "job", j->steps > 0 ? "steps" : "wall_days"),
			       "[job]: give one of train_tokens, steps or wall_days, not %d of them", n);
	if (s->has_job && n == 0)
		return err_set(e, ERR_INPUT, s->file, 0, "[job]: give one of train_tokens, steps or wall_days");
	return 0;
}

/* The file a path key names. One rule for every path in a scenario: a path the
 * scenario file gives is relative to that file's folder (as a path inside an
 * imported file is relative to that file, imp_relative); a path given by --set
 * is relative to the working directory; an absolute path is itself. A catalog
 * name (catalog_is_path false) is returned as it is, unless always_path (the
 * imports, which are always files). */
static void ref_path(const struct scenario *s, const char *section, const char *key,
		     const char *value, int always_path, char *out, size_t n)
{
	if (line_of(s, section, key) > 0 && (always_path || catalog_is_path(value)))
		imp_relative(s->file, value, out, n);
	else
		snprintf(out, n, "%s", value);
}

/* The path of an import file named by key (ref_path), which must exist. */
static int import_path(const struct scenario *s, const char *section, const char *key,
		       const char *value, char *out, size_t n, struct err *e)
{
	struct stat st;

	ref_path(s, section, key, value, 1, out, n);
	if (stat(out, &st) != 0)
		return scenario_error(s, e, section, key, "%s: no such file", out);
	return 0;
}

/* The model: a catalog entry or file ([model] name) or a Hugging Face config.
 * Either way the model's name is the value as written, whatever the folder. */
static int load_model(struct scenario *s, struct err *e)
{
	const struct scn_model *sm = &s->s.model;
	char path[CFG_STR_MAX * 2 + 2];
	int rc;

	if (sm->hf_config[0] && sm->name[0])
		return scenario_error(s, e, "model", "hf_config", "%s", "both name and hf_config name a model; give one");
	if (!sm->name[0] && !sm->hf_config[0])
		return err_set(e, ERR_INPUT, s->file, 0, "missing required key 'name' in [model] "
			       "(or hf_config = a Hugging Face config.json)");
	if (!sm->hf_config[0]) {
		ref_path(s, "model", "name", sm->name, 0, path, sizeof path);
		rc = model_load(path, &s->model, s->file, line_of(s, "model", "name"), e);
	} else {
		rc = import_path(s, "model", "hf_config", sm->hf_config, path, sizeof path, e);
		if (!rc)
			rc = imp_hf_model(path, &s->model, e);
	}
	if (!rc)
		snprintf(s->model.name, sizeof s->model.name, "%s", sm->name[0] ? sm->name : sm->hf_config);
	/* the framework's padded embedding and head: rows that no token uses, but
	 * products whose vocabulary dimension is aligned (compute.h) */
	s->model.vocab = (s->model.vocab + sm->pad_vocab_multiple - 1) / sm->pad_vocab_multiple *
		sm->pad_vocab_multiple;
	return rc;
}

/* Puts every imported key back to its default (before imports are re-read). */
static int unimport(struct scenario *s, struct err *e)
{
	size_t i;

	for (i = 0; i < NKEYS; i++) {
		if (s->line[i] != SCN_IMPORTED)
			continue;
		s->line[i] = 0;
		if (keys[i].def && cfg_store(&table, i, &s->s, keys[i].def, "(built-in default)", 0, e))
			return e->code;
	}
	return 0;
}

/* Applies the imports' settings to the keys the scenario left at their
 * defaults; a later import of the same key (DeepSpeed after Accelerate) wins. */
static int apply_imports(struct scenario *s, struct err *e)
{
	struct imp_result *r = s->imp;
	struct err why = {0};
	int i, j, idx;

	for (i = 0; i < r->nset; i++) {
		struct imp_setting *t = &r->set[i];
		for (j = i + 1; j < r->nset; j++)
			if (!strcmp(r->set[j].section, t->section) && !strcmp(r->set[j].key, t->key))
				t->state = IMP_SUPERSEDED;
		if (t->state == IMP_SUPERSEDED)
			continue;
		idx = cfg_index(&table, t->section, t->key);
		if (idx < 0)
			return err_set(e, ERR_SYSTEM, imp_file(r, t), t->line,
				       "internal: import of unknown key [%s] %s", t->section, t->key);
		if (s->line[idx] != 0) {
			t->state = IMP_OVERRIDDEN;
			continue;
		}
		if (cfg_store(&table, (size_t)idx, &s->s, t->value, NULL, 0, &why))
			return err_set(e, ERR_INPUT, imp_file(r, t), t->line,
				       "%s gives [%s] %s = %s, which shardcast cannot take (%s); set "
				       "[%s] %s in the scenario to override", t->field, t->section,
				       t->key, t->value, why.msg, t->section, t->key);
		s->line[idx] = SCN_IMPORTED;
		t->state = IMP_APPLIED;
	}
	return 0;
}

/* Reads the Accelerate and DeepSpeed configs the scenario names (the model
 * must be loaded: DeepSpeed's "auto" sizes depend on it) and applies them. */
static int load_imports(struct scenario *s, struct err *e)
{
	struct scn_training *t = &s->s.training;
	char path[CFG_STR_MAX * 2];
	int rc = unimport(s, e), i;

	if (rc || (!t->accelerate_config[0] && !t->deepspeed_config[0])) {
		free(s->imp);
		s->imp = NULL;
		return rc;
	}
	if (!s->imp && !(s->imp = malloc(sizeof *s->imp)))
		return err_set(e, ERR_SYSTEM, s->file, 0, "out of memory");
	imp_init(s->imp);
	if (t->accelerate_config[0]) {
		rc = import_path(s, "training", "accelerate_config", t->accelerate_config, path,
				 sizeof path, e);
		if (!rc)
			rc = imp_accelerate(s->imp, path, &s->model, e);
	}
	if (!rc && t->deepspeed_config[0]) {
		for (i = 0; i < s->imp->nset; i++)
			if (!strcmp(s->imp->set[i].key, "framework") &&
			    strcmp(s->imp->set[i].value, "deepspeed") != 0)
				return scenario_error(s, e, "training", "deepspeed_config", "%s",
					   "the accelerate_config's distributed_type is not DEEPSPEED; "
					   "a DeepSpeed config goes with distributed_type: DEEPSPEED");
		rc = import_path(s, "training", "deepspeed_config", t->deepspeed_config, path,
				 sizeof path, e);
		if (!rc)
			rc = imp_deepspeed(s->imp, path, &s->model, e);
	}
	return rc ? rc : apply_imports(s, e);
}

/* Records a value derived from an import (DeepSpeed's batch rule) as applied. */
static int derived(struct scenario *s, const char *key, const char *field, int64_t v,
		   struct err *e)
{
	struct imp_result *r = s->imp;

	if (imp_add(r, r->ds_train_batch_file, r->ds_train_batch_line, field, "training", key, e,
		    "%lld", (long long)v))
		return e->code;
	r->set[r->nset - 1].state = IMP_APPLIED;
	s->line[cfg_index(&table, "training", key)] = SCN_IMPORTED;
	return 0;
}

/* DeepSpeed's train_batch_size against the micro-batch, accumulation and dp. */
static int import_batch(struct scenario *s, struct err *e)
{
	struct scn_training *t = &s->s.training;
	int64_t micro = t->micro_batch, accum = t->grad_accum;

	if (!s->imp || s->imp->ds_train_batch <= 0)
		return 0;
	if (imp_batch(s->imp, s->dp, &micro, &accum, line_of(s, "training", "grad_accum") != 0, e))
		return e->code;
	if (micro != t->micro_batch &&
	    derived(s, "micro_batch", "train_batch_size / (gradient_accumulation_steps x dp)", micro, e))
		return e->code;
	if (accum != t->grad_accum &&
	    derived(s, "grad_accum", "train_batch_size / (micro_batch x dp)", accum, e))
		return e->code;
	t->micro_batch = micro;
	t->grad_accum = accum;
	return 0;
}

/* The [failures] catalog, and what a job simulation needs besides it. */
static int resolve_failures(struct scenario *s, struct err *e)
{
	const struct scn_job *j = &s->s.job;
	int line = line_of(s, "failures", "catalog");
	char path[CFG_STR_MAX * 2 + 2];
	int rc;

	if (j->train_tokens <= 0 && j->steps <= 0 && j->wall_days <= 0)
		return err_set(e, ERR_INPUT, s->file, line > 0 ? line : 0,
			       "[failures] needs the job's length: set [job] train_tokens, steps or wall_days");
	ref_path(s, "failures", "catalog", s->s.failures.catalog, 0, path, sizeof path);
	rc = fail_load(path, &s->failures, line < 0 ? "--set" : s->file, line < 0 ? 0 : line, e);
	if (!rc)
		snprintf(s->failures.name, sizeof s->failures.name, "%s", s->s.failures.catalog);
	return rc;
}

/* The device, its efficiencies and the links ([cluster] gpu, intra_node,
 * inter_node: catalog sections or files, ref_path; the efficiencies' host
 * link), named as written. */
static int load_cluster(struct scenario *s, struct err *e)
{
	const struct scn_cluster *c = &s->s.cluster;
	char path[CFG_STR_MAX * 2 + 2], intra[CFG_STR_MAX * 2 + 2], inter[CFG_STR_MAX * 2 + 2];
	char eff[PATH_MAX + 64];
	const struct hw_link_ref links[3] = {  /* links.ini read once for the three */
		{intra, &s->intra, line_of(s, "cluster", "intra_node"), "intra_node", NULL},
		{inter, &s->inter, line_of(s, "cluster", "inter_node"), "inter_node", NULL},
		{s->eff.host_link_name, &s->eff.host_link, 0, "host_link", eff},
	};
	int rc;

	ref_path(s, "cluster", "gpu", c->gpu, 0, path, sizeof path);
	rc = hw_gpu_load(path, &s->gpu, s->file, line_of(s, "cluster", "gpu"), "gpu", e);
	if (!rc) {
		snprintf(s->gpu.name, sizeof s->gpu.name, "%s", c->gpu);
		rc = compute_load_table(c->gpu, &s->eff, eff, sizeof eff, e);
	}
	if (!rc) {
		ref_path(s, "cluster", "intra_node", c->intra_node, 0, intra, sizeof intra);
		ref_path(s, "cluster", "inter_node", c->inter_node, 0, inter, sizeof inter);
		rc = hw_links_load(links, 3, s->file, e);
	}
	if (!rc) {
		snprintf(s->intra.name, sizeof s->intra.name, "%s", c->intra_node);
		snprintf(s->inter.name, sizeof s->inter.name, "%s", c->inter_node);
	}
	return rc;
}

/* Resolves catalog names and derived values after the settings are complete. */
static int resolve(struct scenario *s, struct err *e)
{
	struct scn_settings *st = &s->s;
	int rc;
	char d[256];

	memset(&s->calib, 0, sizeof s->calib);  /* the catalog's values are loaded again */
	rc = load_model(s, e);
	if (!rc)
		rc = load_imports(s, e);
	if (!rc)
		rc = load_cluster(s, e);
	s->has_storage = st->checkpoint.storage[0] != 0;
	if (!rc && s->has_storage) {
		char path[CFG_STR_MAX * 2 + 2];

		ref_path(s, "checkpoint", "storage", st->checkpoint.storage, 0, path, sizeof path);
		rc = hw_storage_load(path, &s->storage, s->file, line_of(s, "checkpoint", "storage"),
				     "storage", e);
		if (!rc)
			snprintf(s->storage.name, sizeof s->storage.name, "%s", st->checkpoint.storage);
	}
	if (rc)
		return rc;
	if (s->intra.kind != LINK_INTRA)
		return scenario_error(s, e, "cluster", "intra_node", "%s is a link between nodes; expected an intra-node link (pcie*, nvlink*, shm)", s->intra.name);
	if (s->inter.kind != LINK_INTER)
		return scenario_error(s, e, "cluster", "inter_node", "%s is a link inside a node; expected ib-*, roce-* or eth-*", s->inter.name);

	s->seq_len = st->model.seq_len;
	s->target_len = s->model.family == FAM_ENCODER_DECODER && st->model.target_len > 0
		? st->model.target_len : s->seq_len;
	if (st->model.target_len > 0 && s->model.family != FAM_ENCODER_DECODER)
		return scenario_error(s, e, "model", "target_len", "%s", "applies to encoder-decoder models only");
	if (s->model.positions == POS_LEARNED &&
	    (s->seq_len > s->model.max_positions || s->target_len > s->model.max_positions)) {
		snprintf(d, sizeof d, "exceeds the model's %lld learned positions", (long long)s->model.max_positions);
		return scenario_error(s, e, "model", "seq_len", "%s", d);
	}
	s->dropout = st->model.dropout < 0 ? s->model.dropout : st->model.dropout;
	s->capacity = st->cluster.gpu_memory > 0 ? st->cluster.gpu_memory : s->gpu.memory;
	if (s->capacity <= 0)
		return scenario_error(s, e, "cluster", "gpu_memory", "%s", "the device has no fixed capacity (gpu = cpu): set gpu_memory, e.g. 64MiB");
	s->world = st->cluster.nodes * st->cluster.gpus_per_node;
	rc = scenario_check_training(s, e);
	if (!rc)
		s->dp = s->plan.dp;
	if (!rc)
		rc = plan_profile_load(s, &s->profile, e);
	if (!rc)
		rc = import_batch(s, e);
	if (!rc)
		rc = check_job(s, e);
	if (!rc && s->has_failures)
		rc = resolve_failures(s, e);
	return rc;
}

static void rehash(struct scenario *s, const char *extra)
{
	if (extra) {
		s->hash = fnv1a(s->hash, "\n--set ", 7);
		s->hash = fnv1a(s->hash, extra, strlen(extra));
	}
}

int scenario_load(struct scenario *s, const char *path, const char *const *sets, int nset,
		  struct err *e)
{
	char *text;
	size_t len;
	int rc = cfg_read_file(path, &text, &len, e);

	if (rc) {
		memset(s, 0, sizeof *s);
		return rc;
	}
	return scenario_load_text(s, path, text, len, sets, nset, e);
}

int scenario_load_text(struct scenario *s, const char *path, char *text, size_t len,
		       const char *const *sets, int nset, struct err *e)
{
	struct cfg_origin origin = {s->line, NULL};
	int rc, i;

	memset(s, 0, sizeof *s);
	snprintf(s->file, sizeof s->file, "%s", path);
	s->text = text;
	s->text_len = len;
	s->hash = fnv1a(1469598103934665603ull, s->text, s->text_len);
	rc = cfg_defaults(&table, &s->s, e);
	if (!rc)
		rc = cfg_parse(&table, &s->s, &origin, s->file, s->text, s->text_len, e);
	for (i = 0; !rc && i < nset; i++) {
		rc = cfg_set(&table, &s->s, &origin, sets[i], e);
		rehash(s, sets[i]);
	}
	if (!rc)
		rc = cfg_check_required(&table, &origin, s->file, e);
	if (rc)
		return rc;
	s->has_failures = section_set(s, "failures");
	s->has_checkpoint = section_set(s, "checkpoint");
	s->has_job = section_set(s, "job");
	rc = resolve(s, e);
	if (s->imp) {  /* the imported files are part of what was simulated */
		s->hash = fnv1a(s->hash ^ s->imp->hash, "imports", 7);
		s->has_checkpoint = section_set(s, "checkpoint");  /* e.g. fsdp_state_dict_type */
	}
	return rc;
}

int scenario_set(struct scenario *s, const char *assignment, struct err *e)
{
	struct cfg_origin origin = {s->line, s->file};
	int rc = cfg_set(&table, &s->s, &origin, assignment, e);

	if (rc)
		return rc;
	rehash(s, assignment);
	return resolve(s, e);
}

void scenario_free(struct scenario *s)
{
	free(s->text);
	free(s->imp);
	s->text = NULL;
	s->imp = NULL;
}

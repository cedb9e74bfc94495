/*
 * import_accel.c — an `accelerate config` YAML as scenario settings (see
 * import.h).
 *
 * Mapping (Accelerate's launch environment -> FullyShardedDataParallelPlugin /
 * DeepSpeedPlugin, huggingface/accelerate src/accelerate/utils/dataclasses.py):
 *   distributed_type NO -> single, MULTI_GPU -> ddp, FSDP -> fsdp,
 *     DEEPSPEED -> zero<stage> (or the deepspeed_config_file it names)
 *   num_machines -> [cluster] nodes; num_processes (the total) / num_machines
 *     -> gpus_per_node
 *   mixed_precision no|fp16|bf16 -> precision fp32|fp16|bf16
 *   fsdp_sharding_strategy 1..5 or FULL_SHARD..HYBRID_SHARD_ZERO2 (torch's
 *     ShardingStrategy values)
 *   fsdp_version 2 -> fsdp_version 2 (fully_shard, utils/fsdp_utils.py
 *     fsdp2_prepare_model: the blocks, then the root, each with the plugin's
 *     reshard_after_forward); fsdp_reshard_after_forward true|false (absent:
 *     the plugin's True), or Accelerate's conversion of an FSDP1
 *     fsdp_sharding_strategy (FULL_SHARD true, SHARD_GRAD_OP false);
 *     mixed_precision is MixedPrecisionPolicy's param_dtype, its reduce_dtype
 *     the scenario's; FSDP1's backward and forward prefetch do not apply
 *   fsdp_offload_params -> offload optimizer_and_params (FSDP CPUOffload)
 *   fsdp_auto_wrap_policy, fsdp_min_num_params, fsdp_backward_prefetch(_policy),
 *     fsdp_forward_prefetch, fsdp_activation_checkpointing -> the fsdp_* keys
 *   fsdp_state_dict_type -> [checkpoint] state_dict
 *   FSDP1 -> no_sync true (Accelerator.accumulate's no_sync() before the last
 *     micro-step; GradientAccumulationPlugin's sync_each_batch is the training
 *     script's, not the YAML's: set no_sync = false for it)
 * A field the YAML leaves out takes Accelerate's default, which is not always
 * shardcast's: no backward prefetch, no auto wrap, a full state dict.
 */
#include <stdio.h>
#include <string.h>

#include "import_int.h"

static const char *const top_known[] = {
	"compute_environment", "debug", "distributed_type", "downcast_bf16", "dynamo_config",
	"enable_cpu_affinity", "fsdp_config", "deepspeed_config", "gpu_ids", "ipex_config",
	"machine_rank", "main_process_ip", "main_process_port", "main_training_function",
	"megatron_lm_config", "mixed_precision", "mpirun_config", "num_machines", "num_processes",
	"rdzv_backend", "same_network", "tpu_env", "tpu_name", "tpu_use_cluster", "tpu_use_sudo",
	"tpu_zone", "use_cpu", "fp8_config", "parallelism_config", "commands", "command_file", NULL};

static const char *const fsdp_known[] = {
	"fsdp_activation_checkpointing", "fsdp_auto_wrap_policy", "fsdp_backward_prefetch",
	"fsdp_backward_prefetch_policy", "fsdp_cpu_ram_efficient_loading", "fsdp_forward_prefetch",
	"fsdp_min_num_params", "fsdp_offload_params", "fsdp_sharding_strategy",
	"fsdp_state_dict_type", "fsdp_sync_module_states", "fsdp_transformer_layer_cls_to_wrap",
	"fsdp_use_orig_params", "fsdp_version", "fsdp_reshard_after_forward", NULL};

static const char *const ds_known[] = {
	"deepspeed_config_file", "deepspeed_hostfile", "deepspeed_multinode_launcher",
	"deepspeed_exclusion_filter", "deepspeed_inclusion_filter", "deepspeed_moe_layer_cls_names",
	"gradient_accumulation_steps", "gradient_clipping", "offload_optimizer_device",
	"offload_optimizer_nvme_path", "offload_param_device", "offload_param_nvme_path",
	"zero3_init_flag", "zero3_save_16bit_model", "zero_stage", NULL};

struct acc {
	struct imp_result *r;
	const struct imp_yaml *y;
	int file;
	const struct model *m;
	struct err *e;
	int type_line;          /* line of distributed_type */
};

/* Index of v in names (case-sensitive), or -1. */
static int find(const char *v, const char *const *names)
{
	int i;

	for (i = 0; names[i]; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	return -1;
}

#define ADD(a, line, field, sec, key, ...) \
	imp_add((a)->r, (a)->file, line, field, sec, key, (a)->e, __VA_ARGS__)

/* A field that is one of the upper-case names; *idx its index, -1 when absent. */
static int choice(struct acc *a, const yaml_node_t *map, const char *path,
		  const char *const *names, int *idx, int *line)
{
	char v[64], exp[256] = "";
	int kind, i;
	size_t used = 0;

	*idx = -1;
	if (imp_yaml_str(a->y, map, path, 0, v, sizeof v, &kind, line, a->e))
		return a->e->code;
	if (kind == IMP_ABSENT)
		return 0;
	*idx = find(v, names);
	if (*idx >= 0)
		return 0;
	for (i = 0; names[i] && used < sizeof exp; i++)
		used += (size_t)snprintf(exp + used, sizeof exp - used, "%s%s", i ? "|" : "", names[i]);
	return err_set(a->e, ERR_INPUT, a->y->file, *line, "%s = %s: unknown value; expected %s",
		       path, v, exp);
}

static int bool_field(struct acc *a, const yaml_node_t *map, const char *path, int *v, int *line)
{
	int kind;

	*v = -1;
	if (imp_yaml_bool(a->y, map, path, 0, v, &kind, line, a->e))
		return a->e->code;
	if (kind == IMP_ABSENT)
		*v = -1;
	return 0;
}

/* fsdp_sharding_strategy: torch's ShardingStrategy value 1..5 or its name. */
static int sharding(struct acc *a, const yaml_node_t *fs)
{
	static const char *const names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
					    "HYBRID_SHARD_ZERO2", NULL};
	static const char *const ours[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
					   "hybrid_shard_zero2"};
	const char *f = "fsdp_config.fsdp_sharding_strategy";
	char v[64], *end;
	int kind, line, idx, reshard;
	long n;

	if (imp_yaml_str(a->y, fs, f, 0, v, sizeof v, &kind, &line, a->e))
		return a->e->code;
	if (kind == IMP_ABSENT) {
		/* FSDP2 (fsdp_version: 2) says it with fsdp_reshard_after_forward */
		if (bool_field(a, fs, "fsdp_config.fsdp_reshard_after_forward", &reshard, &line))
			return a->e->code;
		if (reshard >= 0)
			return ADD(a, line, "fsdp_config.fsdp_reshard_after_forward", "training",
				   "fsdp_sharding_strategy", "%s", reshard ? "full_shard" : "shard_grad_op");
		return ADD(a, 0, "fsdp_config.fsdp_sharding_strategy (absent: Accelerate's FULL_SHARD)",
			   "training", "fsdp_sharding_strategy", "full_shard");
	}
	n = strtol(v, &end, 10);
	if (end != v && !*end) {
		if (n < 1 || n > 5)
			return err_set(a->e, ERR_INPUT, a->y->file, line,
				       "%s = %ld: out of range; expected 1 to 5 (FULL_SHARD, SHARD_GRAD_OP, "
				       "NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2) or one of those names",
				       f, n);
		idx = (int)n - 1;
	} else {
		idx = find(v[0] == '_' ? v + 1 : v, names);  /* torch spells it _HYBRID_SHARD_ZERO2 */
		if (idx < 0)
			return err_set(a->e, ERR_INPUT, a->y->file, line,
				       "%s = %s: unknown value; expected 1 to 5 or FULL_SHARD|SHARD_GRAD_OP|"
				       "NO_SHARD|HYBRID_SHARD|HYBRID_SHARD_ZERO2", f, v);
	}
	return ADD(a, line, f, "training", "fsdp_sharding_strategy", "%s", ours[idx]);
}

static int wrap(struct acc *a, const yaml_node_t *fs)
{
	static const char *const names[] = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP", NULL};
	static const char *const ours[] = {"transformer_based_wrap", "size_based_wrap", "no_wrap"};
	const char *f = "fsdp_config.fsdp_auto_wrap_policy";
	char cls[128];
	double min = 0;
	int idx, line, mline, kind;

	if (choice(a, fs, f, names, &idx, &line))
		return a->e->code;
	if (idx < 0)
		return ADD(a, 0, "fsdp_config.fsdp_auto_wrap_policy (absent: Accelerate's NO_WRAP)",
			   "training", "fsdp_auto_wrap_policy", "no_wrap");
	if (imp_yaml_num(a->y, fs, "fsdp_config.fsdp_min_num_params", IMP_INTEGER, 0, 1e13, &min,
			 &kind, &mline, a->e))
		return a->e->code;
	if (idx == 1 && !(min > 0)) {
		/* size_based_auto_wrap_policy is only installed when min_num_params > 0 */
		imp_note(a->r, "%s:%d: SIZE_BASED_WRAP without fsdp_min_num_params > 0: Accelerate "
			 "installs no wrap policy, so the model is one FSDP unit (no_wrap)",
			 a->y->file, line);
		return ADD(a, line, f, "training", "fsdp_auto_wrap_policy", "no_wrap");
	}
	if (idx == 1 && ADD(a, mline, "fsdp_config.fsdp_min_num_params", "training",
			    "fsdp_min_num_params", "%.0f", min))
		return a->e->code;
	if (idx == 0) {
		if (imp_yaml_str(a->y, fs, "fsdp_config.fsdp_transformer_layer_cls_to_wrap", 0, cls,
				 sizeof cls, &kind, &mline, a->e))
			return a->e->code;
		if (kind == IMP_VALUE)
			imp_note(a->r, "%s:%d: fsdp_transformer_layer_cls_to_wrap = %s: taken to be the "
				 "model's transformer block (shardcast wraps each block; the class name "
				 "is not checked)", a->y->file, mline, cls);
	}
	return ADD(a, line, f, "training", "fsdp_auto_wrap_policy", "%s", ours[idx]);
}

static int prefetch(struct acc *a, const yaml_node_t *fs)
{
	static const char *const names[] = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH", NULL};
	static const char *const ours[] = {"backward_pre", "backward_post", "none"};
	const char *f = "fsdp_config.fsdp_backward_prefetch", *old = "fsdp_config.fsdp_backward_prefetch_policy";
	int idx, idx_old, line, line_old;

	if (choice(a, fs, f, names, &idx, &line) || choice(a, fs, old, names, &idx_old, &line_old))
		return a->e->code;
	if (idx >= 0 && idx_old >= 0 && idx != idx_old)
		return err_set(a->e, ERR_INPUT, a->y->file, line_old,
			       "%s and %s (its older name) disagree; give one", f, old);
	if (idx < 0 && idx_old >= 0) {
		idx = idx_old;
		line = line_old;
		f = old;
	}
	if (idx < 0)
		return ADD(a, 0, "fsdp_config.fsdp_backward_prefetch (absent: Accelerate's NO_PREFETCH)",
			   "training", "fsdp_backward_prefetch", "none");
	return ADD(a, line, f, "training", "fsdp_backward_prefetch", "%s", ours[idx]);
}

/* FSDP2: fsdp_version, and reshard_after_forward from its own field or
 * from an FSDP1 sharding strategy (FULL_SHARD true, SHARD_GRAD_OP false);
 * the FSDP1 prefetch fields noted as ignored. */
static int fsdp2(struct acc *a, const yaml_node_t *fs, int vline)
{
	static const char *const names[] = {"FULL_SHARD", "SHARD_GRAD_OP", NULL};
	const char *f = "fsdp_config.fsdp_reshard_after_forward";
	int reshard, line, idx, kind;
	char v[64];

	if (ADD(a, vline, "fsdp_config.fsdp_version", "training", "fsdp_version", "2") ||
	    ADD(a, vline, "fsdp_config.fsdp_version", "training", "fsdp_sharding_strategy", "full_shard") ||
	    bool_field(a, fs, f, &reshard, &line))
		return a->e->code;
	if (reshard < 0) {
		if (imp_yaml_str(a->y, fs, "fsdp_config.fsdp_sharding_strategy", 0, v, sizeof v, &kind, &line, a->e))
			return a->e->code;
		idx = kind == IMP_VALUE ? find(v, names) : 0;
		if (idx < 0 && (!strcmp(v, "1") || !strcmp(v, "2")))  /* ShardingStrategy values */
			idx = v[0] - '1';
		if (idx < 0)
			return err_set(a->e, ERR_INPUT, a->y->file, line, "fsdp_config.fsdp_sharding_strategy = %s: "
				       "fsdp_version 2 converts FULL_SHARD or SHARD_GRAD_OP only (HSDP is a 2-D mesh: "
				       "set [training] fsdp_sharding_strategy = hybrid_shard)", v);
		reshard = idx == 0;
		f = kind == IMP_VALUE ? "fsdp_config.fsdp_sharding_strategy (fsdp_version 2: reshard_after_forward)"
			: "fsdp_config.fsdp_reshard_after_forward (absent: Accelerate's True)";
		line = kind == IMP_VALUE ? line : 0;
	}
	if (ADD(a, line, f, "training", "fsdp_reshard_after_forward", "%s", reshard ? "true" : "false"))
		return a->e->code;
	if (imp_yaml_str(a->y, fs, "fsdp_config.fsdp_backward_prefetch", 0, v, sizeof v, &kind, &line, a->e))
		return a->e->code;
	if (kind == IMP_VALUE)
		imp_note(a->r, "%s:%d: fsdp_backward_prefetch is FSDP1's: FSDP2 prefetches the previous "
			 "module in backward implicitly", a->y->file, line);
	return 0;
}

static int fsdp(struct acc *a)
{
	static const char *const states[] = {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT", NULL};
	const yaml_node_t *fs = NULL;
	int v, line, idx;
	double version = 1;
	int kind;

	if (imp_yaml_map(a->y, a->y->root, "fsdp_config", &fs, a->e))
		return a->e->code;
	if (fs && imp_yaml_names(a->r, a->y, fs, "fsdp_config", fsdp_known, a->e))
		return a->e->code;
	if (imp_yaml_num(a->y, fs, "fsdp_config.fsdp_version", IMP_INTEGER, 1, 2, &version, &kind,
			 &line, a->e))
		return a->e->code;
	if (version == 2 ? fsdp2(a, fs, line) : sharding(a, fs) || prefetch(a, fs))
		return a->e->code;
	/* Accelerator.accumulate wraps each micro-step but the last in the model's
	 * no_sync() unless GradientAccumulationPlugin(sync_each_batch=True): FSDP1
	 * keeps the unsharded gradients (plan.h no_sync); fully_shard has none */
	if (version != 2 && ADD(a, 0, "distributed_type FSDP (Accelerator.accumulate's no_sync)", "training",
				"no_sync", "true"))
		return a->e->code;
	if (wrap(a, fs))
		return a->e->code;
	if (bool_field(a, fs, "fsdp_config.fsdp_offload_params", &v, &line) ||
	    ADD(a, line, v < 0 ? "fsdp_config.fsdp_offload_params (absent: false)" :
		"fsdp_config.fsdp_offload_params", "training", "offload", "%s",
		v > 0 ? "optimizer_and_params" : "none"))
		return a->e->code;
	if (bool_field(a, fs, "fsdp_config.fsdp_forward_prefetch", &v, &line) ||
	    (v >= 0 && version != 2 && ADD(a, line, "fsdp_config.fsdp_forward_prefetch", "training",
					    "fsdp_forward_prefetch", "%s", v ? "true" : "false")))
		return a->e->code;
	if (bool_field(a, fs, "fsdp_config.fsdp_activation_checkpointing", &v, &line) ||
	    (v >= 0 && ADD(a, line, "fsdp_config.fsdp_activation_checkpointing", "training",
			   "activation_checkpointing", "%s", v ? "full" : "none")))
		return a->e->code;
	if (choice(a, fs, "fsdp_config.fsdp_state_dict_type", states, &idx, &line))
		return a->e->code;
	if (idx == 1)
		imp_note(a->r, "%s:%d: LOCAL_STATE_DICT is modelled as a sharded checkpoint (each rank "
			 "writes its flat shard)", a->y->file, line);
	return ADD(a, line, idx < 0 ? "fsdp_config.fsdp_state_dict_type (absent: Accelerate's FULL_STATE_DICT)"
		   : "fsdp_config.fsdp_state_dict_type", "checkpoint", "state_dict", "%s",
		   idx == 0 || idx < 0 ? "full" : "sharded");
}

/* Accelerate's own DeepSpeed fields (no deepspeed_config_file). */
static int deepspeed_inline(struct acc *a, const yaml_node_t *ds)
{
	static const char *const devices[] = {"none", "cpu", "nvme", NULL};
	const char *fs = "deepspeed_config.zero_stage";
	double stage = 2, ga;
	int kind, line, opt = -1, par = -1, oline, pline;

	if (imp_yaml_num(a->y, ds, fs, IMP_INTEGER, 0, 3, &stage, &kind, &line, a->e))
		return a->e->code;
	if (ADD(a, line, kind == IMP_ABSENT ? "deepspeed_config.zero_stage (absent: Accelerate's 2)" : fs,
		"training", "strategy", "%s", stage == 0 ? "ddp" : stage == 1 ? "zero1" :
		stage == 2 ? "zero2" : "zero3"))
		return a->e->code;
	if (choice(a, ds, "deepspeed_config.offload_optimizer_device", devices, &opt, &oline) ||
	    choice(a, ds, "deepspeed_config.offload_param_device", devices, &par, &pline))
		return a->e->code;
	if (par > 0) {
		if (ADD(a, pline, "deepspeed_config.offload_param_device", "training", "offload",
			"optimizer_and_params"))
			return a->e->code;
	} else if (opt >= 0 && ADD(a, oline, "deepspeed_config.offload_optimizer_device", "training",
				   "offload", "%s", opt > 0 ? "optimizer" : "none")) {
		return a->e->code;
	}
	if (opt == 2 || par == 2)
		imp_note(a->r, "%s: NVMe offload is modelled as CPU offload (the NVMe traffic and its "
			 "host staging buffers are not)", a->y->file);
	if (imp_yaml_num(a->y, ds, "deepspeed_config.gradient_accumulation_steps", IMP_INTEGER, 1, 1e6,
			 &ga, &kind, &line, a->e) ||
	    (kind == IMP_VALUE && ADD(a, line, "deepspeed_config.gradient_accumulation_steps",
				      "training", "grad_accum", "%.0f", ga)))
		return a->e->code;
	return 0;
}

static int deepspeed(struct acc *a)
{
	const yaml_node_t *ds = NULL;
	char file[CFG_STR_MAX], path[CFG_STR_MAX * 2];
	int kind, line;

	if (ADD(a, a->type_line, "distributed_type", "training", "framework", "deepspeed") ||
	    imp_yaml_map(a->y, a->y->root, "deepspeed_config", &ds, a->e))
		return a->e->code;
	if (ds && imp_yaml_names(a->r, a->y, ds, "deepspeed_config", ds_known, a->e))
		return a->e->code;
	if (imp_yaml_str(a->y, ds, "deepspeed_config.deepspeed_config_file", 0, file, sizeof file,
			 &kind, &line, a->e))
		return a->e->code;
	if (kind == IMP_ABSENT)
		return deepspeed_inline(a, ds);
	imp_relative(a->y->file, file, path, sizeof path);
	imp_note(a->r, "%s:%d: deepspeed_config_file = %s (read below; Accelerate then ignores its own "
		 "zero_stage, offload and accumulation fields)", a->y->file, line, file);
	return imp_deepspeed(a->r, path, a->m, a->e);
}

static int cluster(struct acc *a)
{
	double machines = 1, procs = 0;
	int kind_m, kind_p, lm, lp;

	if (imp_yaml_num(a->y, a->y->root, "num_machines", IMP_INTEGER, 1, 1e5, &machines, &kind_m,
			 &lm, a->e) ||
	    imp_yaml_num(a->y, a->y->root, "num_processes", IMP_INTEGER, 1, 1e7, &procs, &kind_p, &lp,
			 a->e))
		return a->e->code;
	if (kind_m == IMP_VALUE && ADD(a, lm, "num_machines", "cluster", "nodes", "%.0f", machines))
		return a->e->code;
	if (kind_p == IMP_ABSENT)
		return 0;
	if ((long long)procs % (long long)machines)
		return err_set(a->e, ERR_INPUT, a->y->file, lp,
			       "num_processes = %.0f is not a multiple of num_machines = %.0f; Accelerate "
			       "launches num_processes / num_machines processes (GPUs) per machine",
			       procs, machines);
	return ADD(a, lp, "num_processes / num_machines", "cluster", "gpus_per_node", "%.0f",
		   procs / machines);
}

static int precision(struct acc *a)
{
	char v[32] = "no";
	int kind, line;

	/* a plain `no` is a YAML boolean; `accelerate config` writes 'no' quoted */
	if (imp_yaml_str(a->y, a->y->root, "mixed_precision", 0, v, sizeof v, &kind, &line, a->e))
		return a->e->code;
	if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "False"))
		return ADD(a, line, kind == IMP_ABSENT ? "mixed_precision (absent: no)" : "mixed_precision",
			   "training", "precision", "fp32");
	/* anything else (fp8 included) is passed on: the scenario table rejects what
	 * shardcast does not model, unless the scenario sets precision itself */
	return ADD(a, line, "mixed_precision", "training", "precision", "%s", v);
}

int imp_accelerate(struct imp_result *r, const char *path, const struct model *m, struct err *e)
{
	static const char *const types[] = {"NO", "MULTI_GPU", "FSDP", "DEEPSPEED", NULL};
	struct imp_yaml y;
	struct acc a = {r, &y, 0, m, e, 0};
	int rc, type, line, cpu;

	rc = imp_yaml_load(&y, path, e);
	if (!rc && (a.file = imp_add_file(r, path, y.text, y.len)) < 0)
		rc = err_set(e, ERR_INPUT, path, 0, "too many imported files");
	if (!rc)
		rc = imp_yaml_names(r, &y, y.root, "", top_known, e);
	if (!rc)
		rc = choice(&a, y.root, "distributed_type", types, &type, &a.type_line);
	line = a.type_line;
	if (!rc && type < 0)
		rc = err_set(e, ERR_INPUT, path, 0, "missing field 'distributed_type'; expected NO, "
			     "MULTI_GPU, FSDP or DEEPSPEED");
	/* DEEPSPEED: the strategy follows from the ZeRO stage, below */
	if (!rc && type != 3)
		rc = ADD(&a, line, "distributed_type", "training", "strategy", "%s",
			 type == 0 ? "single" : type == 1 ? "ddp" : "fsdp");
	if (!rc && type != 3)
		rc = ADD(&a, line, "distributed_type", "training", "framework", "pytorch");
	if (!rc)
		rc = bool_field(&a, y.root, "use_cpu", &cpu, &line);
	if (!rc && cpu > 0)
		imp_note(r, "%s:%d: use_cpu = true: set [cluster] gpu = cpu in the scenario to model a "
			 "CPU run", path, line);
	if (!rc)
		rc = cluster(&a);
	if (!rc)
		rc = precision(&a);
	if (!rc && type == 2)
		rc = fsdp(&a);
	if (!rc && type == 3)
		rc = deepspeed(&a);
	imp_yaml_free(&y);
	return rc;
}

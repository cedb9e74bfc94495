/*
 * import_ds.c — a DeepSpeed ds_config.json as scenario settings (see import.h).
 *
 * Mapping (DeepSpeed's config keys, deepspeed/runtime/zero/config.py):
 *   zero_optimization.stage 0..3 -> strategy ddp|zero1|zero2|zero3
 *   zero_optimization.offload_optimizer.device cpu|nvme -> offload optimizer;
 *     offload_param.device cpu|nvme -> offload optimizer_and_params
 *   reduce_bucket_size, allgather_bucket_size, stage3_prefetch_bucket_size,
 *     stage3_max_live_parameters, stage3_param_persistence_threshold (and their
 *     unprefixed aliases) -> the zero_* keys (elements)
 *   bf16.enabled / fp16.enabled -> precision (neither: fp32)
 *   train_micro_batch_size_per_gpu -> micro_batch, gradient_accumulation_steps
 *     -> grad_accum, train_batch_size -> checked by imp_batch
 *   activation_checkpointing.{partition_activations,cpu_checkpointing,
 *     contiguous_memory_optimization} -> activation_checkpointing full
 *   framework = deepspeed
 * "auto" is not DeepSpeed's own: the Hugging Face Trainer (and Accelerate)
 * fill it in. Three keys depend on the model alone and are filled here as
 * HfTrainerDeepSpeedConfig.trainer_config_finalize does (huggingface/
 * transformers src/transformers/integrations/deepspeed.py), with h the model's
 * hidden_size: reduce_bucket_size = h^2; under ZeRO-3 also
 * stage3_prefetch_bucket_size = 0.9 h^2 and stage3_param_persistence_threshold
 * = 10 h. The others come from the training arguments (batch sizes, --bf16),
 * which shardcast takes from the scenario, and are reported as notes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "import_int.h"

static const char *const top_known[] = {
	"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
	"optimizer", "scheduler", "fp16", "bf16", "bfloat16", "amp", "zero_optimization",
	"activation_checkpointing", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
	"zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "communication_data_type",
	"prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "flops_profiler",
	"tensorboard", "wandb", "csv_monitor", "comet", "comms_logger", "checkpoint", "data_types",
	"aio", "elasticity", "autotuning", "compression_training", "data_efficiency", "pipeline",
	"dump_state", "memory_breakdown", "seq_parallel_communication_data_type", "torch_autocast",
	"tensor_parallel", "compile", "nebula", "curriculum_learning",
	"disable_allgather", "dataloader_drop_last", "hybrid_engine", "weight_quantization", NULL};

static const char *const zero_known[] = {
	"stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions",
	"allgather_bucket_size", "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint",
	"offload_param", "offload_optimizer", "sub_group_size", "cpu_offload", "cpu_offload_param",
	"cpu_offload_use_pin_memory", "prefetch_bucket_size", "stage3_prefetch_bucket_size",
	"param_persistence_threshold", "stage3_param_persistence_threshold",
	"model_persistence_threshold", "stage3_model_persistence_threshold", "max_live_parameters",
	"stage3_max_live_parameters", "max_reuse_distance", "stage3_max_reuse_distance",
	"gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
	"stage3_gather_fp16_weights_on_model_save", "ignore_unused_parameters", "legacy_stage1",
	"round_robin_gradients", "zero_hpz_partition_size", "zero_quantized_weights",
	"zero_quantized_nontrainable_weights", "zero_quantized_gradients", "mics_shard_size",
	"mics_hierarchical_params_gather", "memory_efficient_linear", "pipeline_loading_checkpoint",
	"override_module_apply", "use_multi_rank_bucket_allreduce", "log_trace_cache_warnings",
	"use_all_reduce_for_fetch_params", "module_granularity_threshold",
	"stage3_module_granularity_threshold", "zeropp_loco_param", NULL};

struct ds {
	struct imp_result *r;
	const struct imp_json *j;
	int file;
	const struct model *m;
	int stage;
	struct err *e;
};

#define ADD(d, path, key, ...) \
	imp_add((d)->r, (d)->file, imp_json_line((d)->j, path), path, "training", key, (d)->e, __VA_ARGS__)

/* A bucket-size key (elements) with an optional unprefixed alias; "auto" is
 * resolved by hf_auto (h = hidden size) when hf_auto >= 0 is given. */
static int bucket(struct ds *d, const cJSON *z, const char *name, const char *alias,
		  const char *key, double auto_value, const char *auto_rule)
{
	char path[128], apath[128];
	double v = 0, va = 0;
	int kind, kind_a = IMP_ABSENT;

	snprintf(path, sizeof path, "zero_optimization.%s", name);
	if (imp_json_num(d->j, z, path, IMP_INTEGER | IMP_ALLOW_AUTO, 0, 1e13, &v, &kind, d->e))
		return d->e->code;
	if (alias) {
		snprintf(apath, sizeof apath, "zero_optimization.%s", alias);
		if (imp_json_num(d->j, z, apath, IMP_INTEGER | IMP_ALLOW_AUTO, 0, 1e13, &va, &kind_a, d->e))
			return d->e->code;
		if (kind != IMP_ABSENT && kind_a != IMP_ABSENT)
			return err_set(d->e, ERR_INPUT, d->j->file, imp_json_line(d->j, apath),
				       "%s and %s are the same setting; give one", path, apath);
		if (kind == IMP_ABSENT) {
			kind = kind_a;
			v = va;
			strcpy(path, apath);
		}
	}
	if (kind == IMP_ABSENT)
		return 0;
	if (kind == IMP_AUTO) {
		if (auto_value < 0)
			return err_set(d->e, ERR_INPUT, d->j->file, imp_json_line(d->j, path),
				       "%s = \"auto\": the Hugging Face Trainer fills \"auto\" only for "
				       "reduce_bucket_size, stage3_prefetch_bucket_size and "
				       "stage3_param_persistence_threshold (ZeRO-3); give a number", path);
		imp_note(d->r, "%s:%d: %s = auto -> %.0f (%s, as transformers' "
			 "HfTrainerDeepSpeedConfig fills it)", d->j->file, imp_json_line(d->j, path),
			 path, auto_value, auto_rule);
		v = auto_value;
	}
	return ADD(d, path, key, "%.0f", v);
}

static int offload(struct ds *d, const cJSON *z)
{
	static const char *const names[] = {"optimizer", "param"};
	char path[96], dev[16];
	const cJSON *o;
	int kind, i, on[2] = {0, 0}, legacy = 0;

	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "zero_optimization.offload_%s", names[i]);
		if (imp_json_obj(d->j, z, path, &o, d->e))
			return d->e->code;
		if (!o)
			continue;
		strcat(path, ".device");
		if (imp_json_str(d->j, o, path, 0, dev, sizeof dev, &kind, d->e))
			return d->e->code;
		if (kind == IMP_ABSENT || !strcmp(dev, "none"))
			continue;
		if (strcmp(dev, "cpu") && strcmp(dev, "nvme"))
			return err_set(d->e, ERR_INPUT, d->j->file, imp_json_line(d->j, path),
				       "%s = %s: unknown value; expected none, cpu or nvme", path, dev);
		if (!strcmp(dev, "nvme"))
			imp_note(d->r, "%s:%d: NVMe offload is modelled as CPU offload (the NVMe traffic "
				 "and its host staging buffers are not)", d->j->file,
				 imp_json_line(d->j, path));
		on[i] = imp_json_line(d->j, path);
		on[i] += !on[i];
	}
	if (imp_json_bool(d->j, z, "zero_optimization.cpu_offload", 0, &legacy, &kind, d->e))
		return d->e->code;
	if (on[1]) {
		if (!on[0])
			imp_note(d->r, "%s:%d: offload_param without offload_optimizer is modelled as "
				 "optimizer_and_params (shardcast has no parameters-only offload)",
				 d->j->file, on[1]);
		return ADD(d, "zero_optimization.offload_param.device", "offload", "optimizer_and_params");
	}
	if (on[0])
		return ADD(d, "zero_optimization.offload_optimizer.device", "offload", "optimizer");
	if (kind == IMP_VALUE && legacy)  /* the ZeRO-Offload flag before offload_optimizer */
		return ADD(d, "zero_optimization.cpu_offload", "offload", "optimizer");
	return ADD(d, "zero_optimization.stage", "offload", "none");
}

static int zero_pp(struct ds *d, const cJSON *z)
{
	static const char *const flags[] = {"zero_quantized_weights", "zero_quantized_gradients",
					    "zero_quantized_nontrainable_weights", NULL};
	char path[96];
	double hpz = 1;
	int kind, v = 0, i;

	if (imp_json_num(d->j, z, "zero_optimization.zero_hpz_partition_size", IMP_INTEGER, 1, 1e6,
			 &hpz, &kind, d->e))
		return d->e->code;
	if (hpz > 1)
		imp_note(d->r, "%s:%d: zero_hpz_partition_size = %.0f (ZeRO++ hierarchical partitioning) "
			 "is not modelled: the secondary parameter copy and its traffic are left out",
			 d->j->file, imp_json_line(d->j, "zero_optimization.zero_hpz_partition_size"), hpz);
	for (i = 0; flags[i]; i++) {
		snprintf(path, sizeof path, "zero_optimization.%s", flags[i]);
		if (imp_json_bool(d->j, z, path, 0, &v, &kind, d->e))
			return d->e->code;
		if (kind == IMP_VALUE && v)
			imp_note(d->r, "%s:%d: %s (ZeRO++ quantized communication) is not modelled",
				 d->j->file, imp_json_line(d->j, path), path);
	}
	return 0;
}

static int zero(struct ds *d)
{
	const cJSON *z;
	double stage = 0, h = (double)d->m->hidden;
	int kind;

	if (imp_json_obj(d->j, d->j->root, "zero_optimization", &z, d->e))
		return d->e->code;
	if (z && imp_json_names(d->r, d->j, z, "zero_optimization", zero_known, d->e))
		return d->e->code;
	if (imp_json_num(d->j, z, "zero_optimization.stage", IMP_INTEGER, 0, 3, &stage, &kind, d->e))
		return d->e->code;
	d->stage = (int)stage;
	if (ADD(d, kind == IMP_ABSENT ? "zero_optimization.stage (absent: 0)" : "zero_optimization.stage",
		"strategy", "%s", d->stage == 0 ? "ddp" : d->stage == 1 ? "zero1" : d->stage == 2 ?
		"zero2" : "zero3"))
		return d->e->code;
	if (!z)
		return 0;
	if (offload(d, z) || zero_pp(d, z) ||
	    bucket(d, z, "reduce_bucket_size", NULL, "zero_reduce_bucket_size", h * h, "hidden_size^2") ||
	    bucket(d, z, "allgather_bucket_size", NULL, "zero_allgather_bucket_size", -1, NULL))
		return d->e->code;
	if (d->stage < 3)
		return 0;  /* the stage3_* keys do nothing below ZeRO-3 */
	/* transformers fills 0.9 h^2; DeepSpeed's field is an integer */
	if (bucket(d, z, "stage3_prefetch_bucket_size", "prefetch_bucket_size",
		   "zero_prefetch_bucket_size", floor(0.9 * h * h), "0.9 x hidden_size^2") ||
	    bucket(d, z, "stage3_param_persistence_threshold", "param_persistence_threshold",
		   "zero_param_persistence_threshold", 10 * h, "10 x hidden_size") ||
	    bucket(d, z, "stage3_max_live_parameters", "max_live_parameters",
		   "zero_max_live_parameters", -1, NULL))
		return d->e->code;
	return 0;
}

/* bf16.enabled / fp16.enabled; both absent or false = fp32. */
static int precision(struct ds *d)
{
	const cJSON *b, *f;
	const char *bpath = "bf16.enabled";
	int bv = 0, fv = 0, bk = IMP_ABSENT, fk = IMP_ABSENT;

	if (imp_json_obj(d->j, d->j->root, "bf16", &b, d->e))
		return d->e->code;
	if (!b) {  /* DeepSpeed's older spelling */
		bpath = "bfloat16.enabled";
		if (imp_json_obj(d->j, d->j->root, "bfloat16", &b, d->e))
			return d->e->code;
	}
	if (imp_json_obj(d->j, d->j->root, "fp16", &f, d->e) ||
	    imp_json_bool(d->j, b, bpath, IMP_ALLOW_AUTO, &bv, &bk, d->e) ||
	    imp_json_bool(d->j, f, "fp16.enabled", IMP_ALLOW_AUTO, &fv, &fk, d->e))
		return d->e->code;
	if (bk == IMP_VALUE && fk == IMP_VALUE && bv && fv)
		return err_set(d->e, ERR_INPUT, d->j->file, imp_json_line(d->j, "fp16.enabled"),
			       "bf16.enabled and fp16.enabled are both true; DeepSpeed allows one");
	if (bk == IMP_VALUE && bv)
		return ADD(d, bpath, "precision", "bf16");
	if (fk == IMP_VALUE && fv)
		return ADD(d, "fp16.enabled", "precision", "fp16");
	if (bk == IMP_AUTO || fk == IMP_AUTO) {
		imp_note(d->r, "%s:%d: %s = auto: filled by the HF Trainer from --bf16/--fp16 or by "
			 "Accelerate from mixed_precision; shardcast keeps [training] precision",
			 d->j->file, imp_json_line(d->j, bk == IMP_AUTO ? bpath : "fp16.enabled"),
			 bk == IMP_AUTO ? bpath : "fp16.enabled");
		return 0;
	}
	return ADD(d, b ? bpath : f ? "fp16.enabled" : "fp16 (absent: DeepSpeed trains in fp32)",
		   "precision", "fp32");
}

/* An integer batch key; "auto" leaves the scenario's value and says so. */
static int batch_key(struct ds *d, const char *path, const char *key, const char *hf_arg,
		     double *v, int *kind)
{
	*v = 0;
	if (imp_json_num(d->j, d->j->root, path, IMP_INTEGER | IMP_ALLOW_AUTO, 1, 1e9, v, kind, d->e))
		return d->e->code;
	if (*kind == IMP_AUTO && key)
		imp_note(d->r, "%s:%d: %s = auto: filled by the HF Trainer from %s; shardcast keeps "
			 "[training] %s", d->j->file, imp_json_line(d->j, path), path, hf_arg, key);
	if (*kind == IMP_VALUE && key)
		return ADD(d, path, key, "%.0f", *v);
	return 0;
}

static int batches(struct ds *d)
{
	double micro, accum, total;
	int km, ka, kt;

	if (batch_key(d, "train_micro_batch_size_per_gpu", "micro_batch", "per_device_train_batch_size",
		      &micro, &km) ||
	    batch_key(d, "gradient_accumulation_steps", "grad_accum", "gradient_accumulation_steps",
		      &accum, &ka) ||
	    batch_key(d, "train_batch_size", NULL, NULL, &total, &kt))
		return d->e->code;
	if (kt == IMP_VALUE) {
		d->r->ds_train_batch = (int64_t)total;
		d->r->ds_train_batch_file = d->file;
		d->r->ds_train_batch_line = imp_json_line(d->j, "train_batch_size");
	}
	return 0;
}

static int checkpointing(struct ds *d)
{
	static const char *const keys[] = {"partition_activations", "cpu_checkpointing",
					   "contiguous_memory_optimization", NULL};
	const cJSON *a;
	char path[96];
	int v, kind, i, on = 0;

	if (imp_json_obj(d->j, d->j->root, "activation_checkpointing", &a, d->e))
		return d->e->code;
	if (!a)
		return 0;
	for (i = 0; keys[i]; i++) {
		snprintf(path, sizeof path, "activation_checkpointing.%s", keys[i]);
		if (imp_json_bool(d->j, a, path, 0, &v, &kind, d->e))
			return d->e->code;
		if (kind == IMP_VALUE && v && !on) {
			on = 1;
			if (ADD(d, path, "activation_checkpointing", "full"))
				return d->e->code;
		}
		if (kind == IMP_VALUE && v && i == 1)
			imp_note(d->r, "%s:%d: cpu_checkpointing (checkpoints kept in host memory) is "
				 "modelled as full checkpointing on the GPU", d->j->file,
				 imp_json_line(d->j, path));
	}
	if (on)
		imp_note(d->r, "%s: the activation_checkpointing section configures "
			 "deepspeed.checkpointing; it takes effect when the model calls it (Hugging "
			 "Face: gradient_checkpointing_enable), which is assumed", d->j->file);
	return 0;
}

static int optimizer(struct ds *d)
{
	const cJSON *o, *p;
	char type[64];
	int kind, wmode = 1, wk;

	if (imp_json_obj(d->j, d->j->root, "optimizer", &o, d->e))
		return d->e->code;
	if (!o)
		return 0;
	if (imp_json_str(d->j, o, "optimizer.type", IMP_REQUIRED, type, sizeof type, &kind, d->e) ||
	    imp_json_obj(d->j, o, "optimizer.params", &p, d->e) ||
	    imp_json_bool(d->j, p, "optimizer.params.adam_w_mode", 0, &wmode, &wk, d->e))
		return d->e->code;
	if (!strcasecmp(type, "AdamW"))
		return ADD(d, "optimizer.type", "optimizer", "adamw");
	if (!strcasecmp(type, "Adam"))  /* DeepSpeed's Adam is AdamW unless adam_w_mode is false */
		return ADD(d, "optimizer.type", "optimizer", "%s", wmode ? "adamw" : "adam");
	imp_note(d->r, "%s:%d: optimizer.type = %s is not modelled; shardcast keeps [training] "
		 "optimizer", d->j->file, imp_json_line(d->j, "optimizer.type"), type);
	return 0;
}

int imp_deepspeed(struct imp_result *r, const char *path, const struct model *m, struct err *e)
{
	struct imp_json j;
	struct ds d = {r, &j, 0, m, 0, e};
	int rc;

	rc = imp_json_load(&j, path, e);
	if (!rc && (d.file = imp_add_file(r, path, j.text, j.len)) < 0)
		rc = err_set(e, ERR_INPUT, path, 0, "too many imported files");
	if (!rc)
		rc = imp_json_names(r, &j, j.root, "", top_known, e);
	if (!rc)
		rc = imp_add(r, d.file, 0, "(a DeepSpeed config)", "training", "framework", e, "deepspeed");
	if (!rc)
		rc = zero(&d);
	if (!rc)
		rc = precision(&d);
	if (!rc)
		rc = batches(&d);
	if (!rc)
		rc = checkpointing(&d);
	if (!rc)
		rc = optimizer(&d);
	imp_json_free(&j);
	return rc;
}

int imp_batch(const struct imp_result *r, int64_t dp, int64_t *micro, int64_t *accum,
	      int accum_given, struct err *e)
{
	int64_t t = r->ds_train_batch;
	const char *f = r->files[r->ds_train_batch_file];
	int line = r->ds_train_batch_line;

	if (t <= 0)
		return 0;
	if (*micro <= 0) {          /* micro from T / (accum x dp) */
		if (t % (*accum * dp))
			return err_set(e, ERR_INPUT, f, line, "train_batch_size = %lld is not divisible by "
				       "gradient_accumulation_steps x data-parallel GPUs = %lld x %lld",
				       (long long)t, (long long)*accum, (long long)dp);
		*micro = t / (*accum * dp);
		return 0;
	}
	if (!accum_given) {         /* accumulation from T / (micro x dp) */
		if (t % (*micro * dp))
			return err_set(e, ERR_INPUT, f, line, "train_batch_size = %lld is not divisible by "
				       "micro-batch x data-parallel GPUs = %lld x %lld",
				       (long long)t, (long long)*micro, (long long)dp);
		*accum = t / (*micro * dp);
		return 0;
	}
	if (t != *micro * *accum * dp)
		return err_set(e, ERR_INPUT, f, line, "train_batch_size = %lld, but micro-batch x "
			       "gradient accumulation x data-parallel GPUs = %lld x %lld x %lld = %lld "
			       "(DeepSpeed requires them equal)", (long long)t, (long long)*micro,
			       (long long)*accum, (long long)dp, (long long)(*micro * *accum * dp));
	return 0;
}

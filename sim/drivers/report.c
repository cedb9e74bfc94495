/*
 * report.c — readable report and JSON output of simulate (docs/CONTRACT.md).
 */
#include "report.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "calib.h"
#include "import.h"
#include "units.h"

static const char *fmt(char *b, size_t n, double v, enum unit u)
{
	return units_format(b, n, v, u);
}

static void text_memory(FILE *f, const struct prediction *p)
{
	const struct mem_result *m = &p->mem;
	char b[8][32];

	if (!m->valid)
		return;
	fprintf(f, "\nMemory per GPU at micro-batch %lld (GPU %d, the most loaded)\n",
		(long long)p->micro_batch, m->binding_gpu);
	fprintf(f, "  parameters        %14s\n", fmt(b[0], 32, m->params, UNIT_BYTES));
	fprintf(f, "  gradients         %14s\n", fmt(b[1], 32, m->grads, UNIT_BYTES));
	fprintf(f, "  optimizer states  %14s\n", fmt(b[2], 32, m->optimizer, UNIT_BYTES));
	fprintf(f, "  activations       %14s   saved tensors, temporaries and their gradients\n",
		fmt(b[3], 32, m->activations, UNIT_BYTES));
	fprintf(f, "  buffers           %14s   buckets, gathered parameters, casts, staging\n",
		fmt(b[4], 32, m->buffers, UNIT_BYTES));
	fprintf(f, "  fixed overhead    %14s   CUDA context, workspaces, NCCL, allocator slack\n",
		fmt(b[5], 32, m->overhead, UNIT_BYTES));
	fprintf(f, "  peak              %14s of %s (%s)\n", fmt(b[6], 32, m->peak, UNIT_BYTES),
		fmt(b[7], 32, m->capacity, UNIT_BYTES), m->fits ? "fits" : "DOES NOT FIT");
	if (m->other_peak > 0)
		fprintf(f, "  other GPUs        %14s peak each\n", fmt(b[0], 32, m->other_peak, UNIT_BYTES));
	if (m->binding[0])
		fprintf(f, "  binding           %s\n", m->binding);
	if (m->host > 0)
		fprintf(f, "  host memory       %14s per node (offloaded states)\n", fmt(b[0], 32, m->host, UNIT_BYTES));
}

/* Why a step is not reported as a run: not even one sample fits. */
static void text_step_not_run(FILE *f, const struct prediction *p)
{
	char b[2][32];

	fprintf(f, "\nStep      not simulated as a run: not even one sample fits (micro-batch %lld needs %s per "
		"GPU\n          of %s), so the configuration cannot run: no step time, throughput or MFU\n",
		(long long)p->micro_batch, fmt(b[0], 32, p->mem.peak, UNIT_BYTES), fmt(b[1], 32, p->mem.capacity, UNIT_BYTES));
}

static void text_step(FILE *f, const struct scenario *s, const struct prediction *p)
{
	const struct step_result *t = &p->step;
	char b[4][32];

	if (!t->valid)
		return;
	if (!t->timed) {
		text_step_not_run(f, p);
		return;
	}
	fprintf(f, "\nStep (one optimizer step: %lld micro-step%s of %lld sample%s per GPU, global batch %lld)\n",
		(long long)t->grad_accum, t->grad_accum > 1 ? "s" : "", (long long)t->micro_batch,
		t->micro_batch > 1 ? "s" : "", (long long)t->global_batch);
	if (t->batch_assumed)
		fprintf(f, "  (micro-batch 1 assumed: neither the scenario nor the memory model gave one)\n");
	if (p->mem.valid && !p->mem.fits && p->max_micro_batch > 0)
		fprintf(f, "  (micro-batch %lld does not fit by the memory model, whose largest is %lld: timed as if "
			"it did)\n", (long long)t->micro_batch, (long long)p->max_micro_batch);
	else if (p->mem.valid && !p->mem.fits)
		fprintf(f, "  (not even one sample fits by the memory model: micro-batch %lld timed as if it did)\n",
			(long long)t->micro_batch);
	if (t->simulated_accum < t->grad_accum)
		fprintf(f, "  (%lld micro-steps simulated, the other %lld added at their period%s)\n",
			(long long)t->simulated_accum, (long long)(t->grad_accum - t->simulated_accum),
			t->period_settled ? ": every micro-step but the last repeats" :
			"; WARNING: the period had not settled, the step time is approximate");
	fprintf(f, "  time              %14s\n", fmt(b[0], 32, t->time, UNIT_TIME));
	fprintf(f, "  compute           %14s (optimizer %s)\n", fmt(b[1], 32, t->compute, UNIT_TIME),
		fmt(b[2], 32, t->optimizer, UNIT_TIME));
	fprintf(f, "  communication     %14s (exposed %s", fmt(b[2], 32, t->comm, UNIT_TIME),
		fmt(b[3], 32, t->exposed_comm, UNIT_TIME));
	if (t->comm_tp > 0)
		fprintf(f, "; tensor-parallel %s", fmt(b[0], 32, t->comm_tp, UNIT_TIME));
	fprintf(f, "), collectives: %s\n",
		scenario_enum_name("cluster", "collective_algorithm", s->s.cluster.coll_algo));
	if (t->copy > 0 || t->host_optimizer > 0)
		fprintf(f, "  offload           %14s of host<->GPU copies, optimizer on the host %s\n",
			fmt(b[0], 32, t->copy, UNIT_TIME), fmt(b[1], 32, t->host_optimizer, UNIT_TIME));
	fprintf(f, "  throughput        %14.0f tokens/s, %.2f samples/s\n", t->tokens_per_s, t->samples_per_s);
	fprintf(f, "  MFU               %13.1f %% (HFU %.1f %%), %s per GPU\n", 100 * t->mfu,
		100 * t->hfu, fmt(b[0], 32, t->flops_per_gpu, UNIT_FLOPS));
	fprintf(f, "                    MFU = (6N + 6·L·s·d_attn) FLOPs per token x tokens/s / (%s peak x GPUs)\n",
		scenario_precision_name(s->s.training.precision));
}

static const char *hours(char *b, size_t n, double s)
{
	snprintf(b, n, "%.1f h", s / 3600);
	return b;
}

/* A duration in the unit a reader compares it in: ms, s, min or h. */
static const char *dur(char *b, size_t n, double s)
{
	if (s < 1)
		snprintf(b, n, "%.3g ms", s * 1e3);
	else if (s < 120)
		snprintf(b, n, "%.3g s", s);
	else if (s < 7200)
		snprintf(b, n, "%.3g min", s / 60);
	else
		snprintf(b, n, "%.3g h", s / 3600);
	return b;
}

/* What a save holds, blocks, writes behind training and slows. */
static void text_ckpt(FILE *f, const struct scenario *s, const struct job_result *j)
{
	const struct scn_checkpoint *k = &s->s.checkpoint;
	char b[8][32];

	fprintf(f, "  checkpoint        %s (%.0f B/param), %s, %s, storage %s\n",
		fmt(b[0], 32, j->ckpt_bytes, UNIT_BYTES), j->ckpt_bytes_per_param,
		scenario_enum_name("checkpoint", "state_dict", k->state_dict),
		scenario_enum_name("checkpoint", "mode", k->mode), s->has_storage ? s->storage.name : "(explicit)");
	fprintf(f, "    writes          %lld rank%s; the busiest writes %s, its node %s at %s\n",
		(long long)j->ckpt_writers, j->ckpt_writers == 1 ? "" : "s", fmt(b[0], 32, j->ckpt_rank_bytes, UNIT_BYTES),
		fmt(b[1], 32, j->ckpt_node_bytes, UNIT_BYTES), fmt(b[2], 32, j->ckpt_node_bw, UNIT_BW));
	fprintf(f, "    blocks training %s (state dict %s", dur(b[0], 32, j->ckpt_block),
		dur(b[1], 32, j->ckpt_state_dict));
	if (j->ckpt_gather > 0)
		fprintf(f, ", gather on rank 0 %s", dur(b[2], 32, j->ckpt_gather));
	if (j->ckpt_background > 0)
		fprintf(f, ", staging %s to %s host memory)\n", dur(b[3], 32, j->ckpt_stage),
			scenario_enum_name("checkpoint", "staging", k->staging));
	else
		fprintf(f, ", planning %s, serialization %s | storage %s, files %s)\n", dur(b[3], 32, j->ckpt_plan),
			dur(b[4], 32, j->ckpt_serialize), dur(b[5], 32, j->ckpt_store), dur(b[6], 32, j->ckpt_meta));
	if (j->ckpt_background > 0) {
		fprintf(f, "    background      %s (planning %s, serialization %s | storage %s, files %s)\n",
			dur(b[0], 32, j->ckpt_background), dur(b[1], 32, j->ckpt_plan), dur(b[2], 32, j->ckpt_serialize),
			dur(b[3], 32, j->ckpt_store), dur(b[4], 32, j->ckpt_meta));
		fprintf(f, "    interference    training %.0f%% slower meanwhile (%s executor): %s lost per save\n",
			100 * j->ckpt_slowdown, scenario_enum_name("checkpoint", "async_executor", k->executor),
			dur(b[0], 32, j->ckpt_interfere));
	}
	if (j->ckpt_plan_first > j->ckpt_plan + 1e-3)
		fprintf(f, "    first save      after a start or restart: planning %s (not cached yet)%s\n",
			dur(b[0], 32, j->ckpt_plan_first), j->ckpt_background > 0 ? ", in the background" : "");
}

static void text_job_setup(FILE *f, const struct scenario *s, const struct job_result *j)
{
	char b[6][32];

	fprintf(f, "\nJob with failures (catalog %s, %lld trials, seed %lld)\n", s->s.failures.catalog,
		(long long)j->trials, (long long)j->seed);
	if (j->work > 0)
		fprintf(f, "  training          %.0f steps of %s = %.2f days failure-free\n", j->steps,
			dur(b[0], 32, j->step_time), j->work / 86400);
	else
		fprintf(f, "  training          a fixed window of %.2f days, steps of %s\n", j->window / 86400,
			dur(b[0], 32, j->step_time));
	fprintf(f, "                    (step time from %s)\n", j->step_from_scenario ? "[job] step_time" : "the step model");
	if (j->mtbf > 0)
		fprintf(f, "  failures          one unexpected every %s of the job (MTBF)\n", hours(b[0], 32, j->mtbf));
	else
		fprintf(f, "  failures          none unexpected in the catalog\n");
	text_ckpt(f, s, j);
	fprintf(f, "  restart           %s (restart_minutes + %s to read the checkpoint), %lld spare node%s\n",
		dur(b[3], 32, j->restart), dur(b[4], 32, j->ckpt_load), (long long)j->spares, j->spares == 1 ? "" : "s");
	fprintf(f, "  interval          %s of training, %.0f steps (%s; Young %s, Daly %s)\n",
		dur(b[0], 32, j->ckpt_interval), j->ckpt_interval / j->step_time,
		j->interval_auto ? "auto: least expected wall time" : "set",
		j->mtbf > 0 ? dur(b[1], 32, j->young) : "-", j->mtbf > 0 ? dur(b[2], 32, j->daly) : "-");
	if (j->interval_auto && j->search_trials < j->trials)
		fprintf(f, "                    (the search evaluated each interval on %lld of the %lld trials: "
			"about %.3g interruptions a run)\n", (long long)j->search_trials, (long long)j->trials,
			j->expected_interruptions);
}

static void text_job(FILE *f, const struct scenario *s, const struct prediction *p)
{
	const struct job_result *j = &p->job;
	char b[3][32];
	int i;

	if (j->not_run) {
		fprintf(f, "\nJob with failures: not simulated: the configuration does not fit in memory, so the step "
			"model gives\n          no step time (set [job] step_time to simulate the job anyway)\n");
		return;
	}
	if (!j->valid)
		return;
	text_job_setup(f, s, j);
	if (j->work > 0)
		fprintf(f, "  wall time         %.2f days (95%% CI of the mean %.2f to %.2f; 95%% of runs %.2f to %.2f)\n",
			j->wall_days, j->wall_days_lo, j->wall_days_hi, j->wall_days_p025, j->wall_days_p975);
	else
		fprintf(f, "  training kept     %.2f days of %.2f\n", j->useful / 86400, j->window / 86400);
	fprintf(f, "  ETTR              %.2f %% (95%% CI %.2f to %.2f)\n", 100 * j->ettr, 100 * j->ettr_lo,
		100 * j->ettr_hi);
	fprintf(f, "  interruptions     %.1f per run: %.1f unexpected, %.1f planned", j->interruptions,
		j->unexpected, j->planned);
	fprintf(f, "\n");
	for (i = 0; i < j->ncomp; i++)
		fprintf(f, "    %-24s %8.1f%s\n", j->comp[i], j->comp_interruptions[i],
			j->comp_planned[i] ? "  (planned)" : "");
	fprintf(f, "  lost training     %s per run\n", hours(b[0], 32, j->lost));
	fprintf(f, "  checkpointing     %s per run blocked or slowed (%.0f checkpoints)\n",
		hours(b[1], 32, j->ckpt_overhead), j->checkpoints);
	fprintf(f, "  down              %s per run (detection, waiting for nodes, restarts)\n",
		hours(b[2], 32, j->downtime));
	for (i = 0; i < j->nwarn; i++)
		fprintf(f, "  warning: %s\n", j->warn[i]);
}

/* Where the imported values came from (key = value  <- file:line field). */
static void text_imports(FILE *f, const struct scenario *s)
{
	const struct imp_result *r = s->imp;
	char kv[128];
	int i, any = 0;

	if (!r)
		return;
	fprintf(f, "\nSettings from imports\n");
	for (i = 0; i < r->nset; i++) {
		const struct imp_setting *t = &r->set[i];
		if (t->state != IMP_APPLIED)
			continue;
		snprintf(kv, sizeof kv, "%s.%s = %s", t->section, t->key, t->value);
		fprintf(f, "  %-44s <- %s", kv, imp_file(r, t));
		if (t->line > 0)
			fprintf(f, ":%d", t->line);
		fprintf(f, " %s\n", t->field);
	}
	for (i = 0; i < r->nset; i++) {
		const struct imp_setting *t = &r->set[i];
		if (t->state != IMP_OVERRIDDEN)
			continue;
		if (!any++)
			fprintf(f, "  overridden by the scenario or --set:\n");
		snprintf(kv, sizeof kv, "%s.%s = %s", t->section, t->key, t->value);
		fprintf(f, "    %-42s <- %s", kv, imp_file(r, t));
		if (t->line > 0)
			fprintf(f, ":%d", t->line);
		fprintf(f, " %s\n", t->field);
	}
	for (i = 0; i < r->nnotes; i++)
		fprintf(f, "%s  - %s\n", i ? "" : "  notes:\n", r->notes[i]);
}

void report_text(FILE *f, const struct scenario *s, const struct prediction *p)
{
	const struct scn_training *t = &s->s.training;
	char b[4][32], cal[CFG_STR_MAX + 300];

	fprintf(f, "shardcast simulate — %s\n\n", s->file);
	fprintf(f, "Model     %s: %.0f parameters (%s), seq_len %lld", s->model.name, p->params,
		units_format_count(b[0], 32, p->params), (long long)s->seq_len);
	if (s->model.family == FAM_ENCODER_DECODER)
		fprintf(f, ", target_len %lld", (long long)s->target_len);
	fprintf(f, ", dropout %g\n", s->dropout);
	fprintf(f, "          %.4g training FLOPs per token (6N + 6·L·s·d_attn, Kaplan et al. 2020)\n",
		p->flops_per_token);
	fprintf(f, "Cluster   %lld x %s (%s each), %lld node%s x %lld GPU%s\n", (long long)s->world,
		s->gpu.name, fmt(b[0], 32, s->capacity, UNIT_BYTES), (long long)s->s.cluster.nodes,
		s->s.cluster.nodes > 1 ? "s" : "", (long long)s->s.cluster.gpus_per_node,
		s->s.cluster.gpus_per_node > 1 ? "s" : "");
	fprintf(f, "          intra-node %s (%s per GPU), inter-node %s (%s per NIC, %lld per node)\n",
		s->intra.name, fmt(b[1], 32, s->intra.bandwidth, UNIT_BW), s->inter.name,
		fmt(b[2], 32, s->inter.bandwidth, UNIT_BW), (long long)s->s.cluster.nics_per_node);
	fprintf(f, "Training  %s", scenario_strategy_name(s->plan.strategy));
	if (s->plan.strategy == STRAT_FSDP)
		fprintf(f, " (%s)", scenario_enum_name("training", "fsdp_sharding_strategy", s->plan.sharding));
	fprintf(f, ", %s, %s, framework %s", scenario_precision_name(t->precision),
		scenario_enum_name("training", "optimizer", t->optimizer),
		scenario_enum_name("training", "framework", s->plan.framework));
	fprintf(f, ", attention %s", graph_attn_name(s->attn));
	if (t->attention == ATTN_DEFAULT || t->attention == ATTN_SDPA)
		fprintf(f, " (%s)", scenario_enum_name("training", "attention", t->attention));
	if (t->tensor_parallel > 1)
		fprintf(f, ", tensor_parallel %lld", (long long)t->tensor_parallel);
	if (t->recompute)
		fprintf(f, ", activation checkpointing %s", scenario_enum_name("training", "activation_checkpointing", t->recompute));
	if (t->offload)
		fprintf(f, ", offload %s", scenario_enum_name("training", "offload", t->offload));
	fprintf(f, "\n          micro-batch %s, grad_accum %lld\n",
		t->micro_batch < 0 ? "auto" : (snprintf(b[3], 32, "%lld", (long long)t->micro_batch), b[3]),
		(long long)t->grad_accum);
	fprintf(f, "Calibration %s\n", calib_describe(&s->calib, cal, sizeof cal));
	text_imports(f, s);
	if (p->max_micro_batch >= 0)
		fprintf(f, "\nLargest micro-batch that fits: %lld per GPU, global batch %lld samples\n",
			(long long)p->max_micro_batch, (long long)p->max_global_batch);
	text_memory(f, p);
	text_step(f, s, p);
	text_job(f, s, p);
}

static cJSON *num(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v);
}

/* v when it was computed, else null ("not computed" is never a 0). */
static cJSON *num_if(cJSON *o, const char *k, double v, int computed)
{
	return computed ? cJSON_AddNumberToObject(o, k, v) : cJSON_AddNullToObject(o, k);
}

static void json_calibration(cJSON *root, const struct scn_calibration *c)
{
	cJSON *o;

	if (!c->applied) {
		cJSON_AddNullToObject(root, "calibration");
		return;
	}
	o = cJSON_AddObjectToObject(root, "calibration");
	cJSON_AddStringToObject(o, "device", c->device);
	cJSON_AddStringToObject(o, "created_at", c->created_at);
	num(o, "runs", c->runs);
	num_if(o, "parameters_fitted", c->fitted, c->fitted >= 0);
	num_if(o, "heldout_error", c->heldout_error, c->heldout_error >= 0);
	if (c->method[0])
		cJSON_AddStringToObject(o, "heldout_method", c->method);
	else
		cJSON_AddNullToObject(o, "heldout_method");
	cJSON_AddStringToObject(o, "database", c->db);
	num(o, "id", (double)c->id);
}

/* The step object; its times and rates are null when the configuration cannot
 * run (not even one sample fits and the scenario names no micro-batch). */
static void json_step(cJSON *root, const struct step_result *t)
{
	cJSON *o = cJSON_AddObjectToObject(root, "step");
	int r = t->timed;

	num_if(o, "time_s", t->time, r);
	num_if(o, "compute_s", t->compute, r);
	num_if(o, "comm_s", t->comm, r);
	num_if(o, "exposed_comm_s", t->exposed_comm, r);
	num_if(o, "tokens_per_s", t->tokens_per_s, r);
	num_if(o, "samples_per_s", t->samples_per_s, r);
	num_if(o, "mfu", t->mfu, r);
	num_if(o, "hfu", t->hfu, r);
	num_if(o, "comm_tp_s", t->comm_tp, r);
	num_if(o, "optimizer_s", t->optimizer, r);
	num_if(o, "copy_s", t->copy, r);
	num_if(o, "host_optimizer_s", t->host_optimizer, r);
	num_if(o, "flops_per_gpu", t->flops_per_gpu, r);
	num(o, "micro_batch", (double)t->micro_batch);
	num(o, "grad_accum", (double)t->grad_accum);
	num(o, "global_batch", (double)t->global_batch);
	cJSON_AddBoolToObject(o, "micro_batch_assumed", t->batch_assumed);
	num_if(o, "micro_steps_simulated", (double)t->simulated_accum, r);
	cJSON_AddBoolToObject(o, "period_settled", t->period_settled);
}

static void json_job(cJSON *root, const struct job_result *j)
{
	cJSON *o = cJSON_AddObjectToObject(root, "job"), *c, *w;
	int i;

	num(o, "ettr", j->ettr);
	num(o, "ettr_ci95_lo", j->ettr_lo);
	num(o, "ettr_ci95_hi", j->ettr_hi);
	num(o, "wall_days", j->wall_days);
	num(o, "wall_days_ci95_lo", j->wall_days_lo);
	num(o, "wall_days_ci95_hi", j->wall_days_hi);
	num(o, "wall_days_p025", j->wall_days_p025);
	num(o, "wall_days_p975", j->wall_days_p975);
	num(o, "interruptions", j->interruptions);
	num(o, "unexpected_interruptions", j->unexpected);
	num(o, "planned_interruptions", j->planned);
	num(o, "checkpoint_interval_s", j->ckpt_interval);
	cJSON_AddBoolToObject(o, "checkpoint_interval_auto", j->interval_auto);
	num_if(o, "young_interval_s", j->young, j->mtbf > 0);  /* null: nothing fails */
	num_if(o, "daly_interval_s", j->daly, j->mtbf > 0);
	num_if(o, "mtbf_s", j->mtbf, j->mtbf > 0);
	num(o, "lost_training_s", j->lost);
	num(o, "checkpoint_overhead_s", j->ckpt_overhead);
	num(o, "downtime_s", j->downtime);
	num(o, "checkpoints", j->checkpoints);
	num(o, "waits_for_nodes", j->waits);
	num_if(o, "work_s", j->work, j->work > 0);        /* null in a fixed window */
	num_if(o, "window_s", j->window, j->work <= 0);   /* null for a job of given work */
	num(o, "training_kept_s", j->useful);
	num(o, "step_time_s", j->step_time);
	num(o, "checkpoint_bytes", j->ckpt_bytes);
	num(o, "checkpoint_bytes_per_param", j->ckpt_bytes_per_param);
	num(o, "checkpoint_block_s", j->ckpt_block);
	num(o, "checkpoint_background_s", j->ckpt_background);
	num(o, "checkpoint_background_first_s", j->ckpt_background_first);
	num(o, "checkpoint_stage_s", j->ckpt_stage);
	num(o, "checkpoint_state_dict_s", j->ckpt_state_dict);
	num(o, "checkpoint_plan_s", j->ckpt_plan);
	num(o, "checkpoint_plan_first_s", j->ckpt_plan_first);
	num(o, "checkpoint_gather_s", j->ckpt_gather);
	num(o, "checkpoint_serialize_s", j->ckpt_serialize);
	num(o, "checkpoint_storage_s", j->ckpt_store);
	num(o, "checkpoint_files_s", j->ckpt_meta);
	num(o, "checkpoint_node_bandwidth", j->ckpt_node_bw);
	num(o, "checkpoint_slowdown", j->ckpt_slowdown);
	num(o, "checkpoint_interference_s", j->ckpt_interfere);
	num(o, "checkpoint_load_s", j->ckpt_load);
	num(o, "checkpoint_host_bytes", j->ckpt_host);
	num(o, "restart_s", j->restart);
	num(o, "trials", (double)j->trials);
	num_if(o, "search_trials", (double)j->search_trials, j->interval_auto);
	num(o, "expected_interruptions", j->expected_interruptions);
	num(o, "seed", (double)j->seed);
	num(o, "spare_nodes", (double)j->spares);
	c = cJSON_AddObjectToObject(o, "interruptions_by_component");
	for (i = 0; i < j->ncomp; i++)
		num(c, j->comp[i], j->comp_interruptions[i]);
	w = cJSON_AddArrayToObject(o, "warnings");
	for (i = 0; i < j->nwarn; i++)
		cJSON_AddItemToArray(w, cJSON_CreateString(j->warn[i]));
}

char *report_json(const struct scenario *s, const struct prediction *p)
{
	cJSON *root = cJSON_CreateObject(), *o;
	char *out;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "scenario", s->file);
	o = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(o, "name", s->model.name);
	num(o, "params", p->params);
	num(o, "seq_len", (double)s->seq_len);
	num(o, "flops_per_token", p->flops_per_token);
	o = cJSON_AddObjectToObject(root, "cluster");
	cJSON_AddStringToObject(o, "gpu", s->gpu.name);
	num(o, "gpus", (double)s->world);
	num(o, "gpu_memory_bytes", s->capacity);
	o = cJSON_AddObjectToObject(root, "training");
	cJSON_AddStringToObject(o, "strategy", scenario_strategy_name(s->plan.strategy));
	cJSON_AddStringToObject(o, "precision", scenario_precision_name(s->s.training.precision));
	cJSON_AddStringToObject(o, "attention", graph_attn_name(s->attn));
	num(o, "micro_batch", (double)p->micro_batch);
	if (!p->mem.valid) {
		cJSON_AddNullToObject(root, "memory");
	} else {
		const struct mem_result *m = &p->mem;
		o = cJSON_AddObjectToObject(root, "memory");
		num(o, "params_bytes", m->params);
		num(o, "grads_bytes", m->grads);
		num(o, "optimizer_bytes", m->optimizer);
		num(o, "activations_bytes", m->activations);
		num(o, "buffers_bytes", m->buffers);
		num(o, "overhead_bytes", m->overhead);
		num(o, "peak_bytes", m->peak);
		num(o, "capacity_bytes", m->capacity);
		cJSON_AddBoolToObject(o, "fits", m->fits);
		num(o, "binding_gpu", m->binding_gpu);
		cJSON_AddStringToObject(o, "binding", m->binding);
		num(o, "host_bytes", m->host);
		num_if(o, "other_gpus_peak_bytes", m->other_peak, m->other_peak > 0);  /* dp's replicas */
	}
	num_if(root, "max_micro_batch", (double)p->max_micro_batch, p->max_micro_batch >= 0);
	num_if(root, "max_global_batch", (double)p->max_global_batch, p->max_micro_batch >= 0);
	json_calibration(root, &s->calib);
	if (p->step.valid)
		json_step(root, &p->step);
	else
		cJSON_AddNullToObject(root, "step");
	if (p->job.valid)
		json_job(root, &p->job);
	else if (s->has_failures)  /* asked for, not computed */
		cJSON_AddNullToObject(root, "job");
	out = cJSON_Print(root);
	cJSON_Delete(root);
	return out;
}

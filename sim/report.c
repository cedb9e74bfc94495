/*
 * report.c — readable report and JSON output of simulate (DESIGN.md contract).
 */
#include "report.h"

#include <cjson/cJSON.h>
#include <string.h>

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

static void text_step(FILE *f, const struct scenario *s, const struct prediction *p)
{
	const struct step_result *t = &p->step;
	char b[4][32];

	if (!t->valid)
		return;
	fprintf(f, "\nStep (one optimizer step: %lld micro-step%s of %lld sample%s per GPU, global batch %lld)\n",
		(long long)t->grad_accum, t->grad_accum > 1 ? "s" : "", (long long)t->micro_batch,
		t->micro_batch > 1 ? "s" : "", (long long)t->global_batch);
	if (t->batch_assumed && p->max_micro_batch == 0)
		fprintf(f, "  (not even one sample fits in memory: simulated at micro-batch 1 for reference)\n");
	else if (t->batch_assumed)
		fprintf(f, "  (micro-batch 1 assumed: neither the scenario nor the memory model gave one)\n");
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
	fprintf(f, "  MFU               %13.1f %% (HFU %.1f %%), %.1f TFLOP/s per GPU\n", 100 * t->mfu,
		100 * t->hfu, t->flops_per_gpu / 1e12);
	fprintf(f, "                    MFU = (6N + 6·L·s·d_attn) FLOPs per token x tokens/s / (%s peak x GPUs)\n",
		scenario_precision_name(s->s.training.precision));
}

static void text_job(FILE *f, const struct prediction *p)
{
	const struct job_result *j = &p->job;
	char b[32];

	if (!j->valid)
		return;
	fprintf(f, "\nJob with failures\n");
	fprintf(f, "  wall time         %10.2f days (95%%: %.2f to %.2f)\n", j->wall_days,
		j->wall_days_lo, j->wall_days_hi);
	fprintf(f, "  ETTR              %13.1f %%\n", 100 * j->ettr);
	fprintf(f, "  interruptions     %13.1f\n", j->interruptions);
	fprintf(f, "  checkpoint every  %14s\n", fmt(b, 32, j->ckpt_interval, UNIT_TIME));
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
	char b[4][32];

	fprintf(f, "shardcast simulate — %s\n\n", s->file);
	fprintf(f, "Model     %s: %.0f parameters (%.3f B), seq_len %lld", s->model.name, p->params,
		p->params / 1e9, (long long)s->seq_len);
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
	fprintf(f, "Training  %s", scenario_strategy_name(t->strategy));
	if (t->strategy == STRAT_FSDP)
		fprintf(f, " (%s)", scenario_enum_name("training", "fsdp_sharding_strategy", t->fsdp_sharding));
	fprintf(f, ", %s, %s, framework %s", scenario_precision_name(t->precision),
		scenario_enum_name("training", "optimizer", t->optimizer),
		scenario_enum_name("training", "framework", t->framework));
	if (t->tensor_parallel > 1)
		fprintf(f, ", tensor_parallel %lld", (long long)t->tensor_parallel);
	if (t->recompute)
		fprintf(f, ", activation checkpointing %s", scenario_enum_name("training", "activation_checkpointing", t->recompute));
	if (t->offload)
		fprintf(f, ", offload %s", scenario_enum_name("training", "offload", t->offload));
	fprintf(f, "\n          micro-batch %s, grad_accum %lld\n",
		t->micro_batch < 0 ? "auto" : (snprintf(b[3], 32, "%lld", (long long)t->micro_batch), b[3]),
		(long long)t->grad_accum);
	text_imports(f, s);
	if (p->max_micro_batch >= 0)
		fprintf(f, "\nLargest micro-batch that fits: %lld per GPU, global batch %lld samples\n",
			(long long)p->max_micro_batch, (long long)p->max_global_batch);
	text_memory(f, p);
	text_step(f, s, p);
	text_job(f, p);
}

static cJSON *num(cJSON *o, const char *k, double v)
{
	return cJSON_AddNumberToObject(o, k, v);
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
	cJSON_AddStringToObject(o, "strategy", scenario_strategy_name(s->s.training.strategy));
	cJSON_AddStringToObject(o, "precision", scenario_precision_name(s->s.training.precision));
	num(o, "micro_batch", (double)p->micro_batch);
	if (p->mem.valid) {
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
		if (m->other_peak > 0)
			num(o, "other_gpus_peak_bytes", m->other_peak);
	}
	if (p->max_micro_batch >= 0) {
		num(root, "max_micro_batch", (double)p->max_micro_batch);
		num(root, "max_global_batch", (double)p->max_global_batch);
	}
	if (p->step.valid) {
		const struct step_result *t = &p->step;
		o = cJSON_AddObjectToObject(root, "step");
		num(o, "time_s", t->time);
		num(o, "compute_s", t->compute);
		num(o, "comm_s", t->comm);
		num(o, "exposed_comm_s", t->exposed_comm);
		num(o, "tokens_per_s", t->tokens_per_s);
		num(o, "samples_per_s", t->samples_per_s);
		num(o, "mfu", t->mfu);
		num(o, "hfu", t->hfu);
		num(o, "comm_tp_s", t->comm_tp);
		num(o, "optimizer_s", t->optimizer);
		num(o, "copy_s", t->copy);
		num(o, "host_optimizer_s", t->host_optimizer);
		num(o, "flops_per_gpu", t->flops_per_gpu);
		num(o, "micro_batch", (double)t->micro_batch);
		num(o, "grad_accum", (double)t->grad_accum);
		num(o, "global_batch", (double)t->global_batch);
		cJSON_AddBoolToObject(o, "micro_batch_assumed", t->batch_assumed);
	}
	if (p->job.valid) {
		const struct job_result *j = &p->job;
		o = cJSON_AddObjectToObject(root, "job");
		num(o, "ettr", j->ettr);
		num(o, "wall_days", j->wall_days);
		num(o, "wall_days_ci95_lo", j->wall_days_lo);
		num(o, "wall_days_ci95_hi", j->wall_days_hi);
		num(o, "interruptions", j->interruptions);
		num(o, "checkpoint_interval_s", j->ckpt_interval);
	}
	out = cJSON_Print(root);
	cJSON_Delete(root);
	return out;
}

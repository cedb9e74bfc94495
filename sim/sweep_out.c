/*
 * sweep_out.c — a sweep's results as Markdown (the table people read), CSV and
 * JSON (every candidate), and the heatmap's data file (see sweep.h).
 *
 * Everything written depends only on the sweep and its results, never on the
 * host, the time or how the cells were split across processes, so a sweep run
 * on one rank and on many writes the same bytes.
 */
#include "sweep.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "calib.h"
#include "units.h"

/* ---- formatting ----------------------------------------------------------------------- */

static const char *count(char *b, size_t n, double v)
{
	if (v >= 1e12)
		snprintf(b, n, "%.1fT", v / 1e12);
	else if (v >= 1e9)
		snprintf(b, n, "%.1fB", v / 1e9);
	else if (v >= 1e6)
		snprintf(b, n, "%.0fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(b, n, "%.0fK", v / 1e3);
	else
		snprintf(b, n, "%.0f", v);
	return b;
}

static const char *rate(char *b, size_t n, double v)
{
	if (v >= 1e6)
		snprintf(b, n, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(b, n, "%.1fk", v / 1e3);
	else
		snprintf(b, n, "%.0f", v);
	return b;
}

/* The objective's figure of r: "152.3k tok/s", "0.95 GPU-h/Mtok", "12.3 days". */
static const char *figure(char *b, size_t n, const struct sweep *sw, const struct sweep_result *r)
{
	char t[32];

	switch (sw->set.objective) {
	case SWEEP_COST:
		if (sw->set.gpu_hour_price > 0)
			snprintf(b, n, "%.3g/Mtok", r->gpu_hours_per_mtok * sw->set.gpu_hour_price);
		else
			snprintf(b, n, "%.3g GPU-h/Mtok", r->gpu_hours_per_mtok);
		break;
	case SWEEP_TIME_TO_TRAIN:
		snprintf(b, n, "%.3g days", r->train_days);
		break;
	default:
		snprintf(b, n, "%s tok/s", rate(t, sizeof t, r->tokens_per_s));
	}
	return b;
}

/* How much worse the runner-up is under the objective, in percent. */
static double margin(const struct sweep *sw, const struct sweep_result *best, const struct sweep_result *ru)
{
	switch (sw->set.objective) {
	case SWEEP_COST: return 100 * (ru->gpu_hours_per_mtok / best->gpu_hours_per_mtok - 1);
	case SWEEP_TIME_TO_TRAIN: return 100 * (ru->train_days / best->train_days - 1);
	default: return 100 * (best->tokens_per_s / ru->tokens_per_s - 1);
	}
}

/* "tie with", "+0.7% vs", "+12% vs": the winner's lead over the runner-up. */
static const char *lead(char *b, size_t n, double pct)
{
	if (pct < 0.05)
		snprintf(b, n, "tie with");
	else if (pct < 10)
		snprintf(b, n, "+%.1f%% vs", pct);
	else
		snprintf(b, n, "+%.0f%% vs", pct);
	return b;
}

/* The heatmap's version: ", tied", ", +0.7% ahead". */
static const char *ahead(char *b, size_t n, double pct)
{
	if (pct < 0.05)
		snprintf(b, n, ", tied");
	else
		snprintf(b, n, pct < 10 ? ", +%.1f%% ahead" : ", +%.0f%% ahead", pct);
	return b;
}

static const char *batch_name(const struct sweep *sw, int b, char *buf, size_t n)
{
	if (sw->batch_mode == SWEEP_AUTO)
		snprintf(buf, n, "largest micro-batch");
	else
		snprintf(buf, n, "%s %lld", sw->batch_mode == SWEEP_GLOBAL ? "global batch" : "micro-batch",
			 (long long)sw->batches[b]);
	return buf;
}

static int cell_index(const struct sweep *sw, int model, int seq, int batch)
{
	return (model * sw->nseq + seq) * sw->nbatch + batch;
}

/* ---- Markdown ---------------------------------------------------------------------------- */

/* What the objective measures, for the header. */
static const char *objective_text(const struct sweep *sw)
{
	switch (sw->set.objective) {
	case SWEEP_COST:
		return "cost: GPU-hours per million tokens (lowest wins)";
	case SWEEP_TIME_TO_TRAIN:
		return sw->base.has_failures ? "time to train [job]'s work, failures, checkpoints and restarts "
			"included (the job model's mean wall time; lowest wins)" :
			"time to train [job]'s work without failures (lowest wins)";
	default:
		return "throughput in tokens per second (highest wins)";
	}
}

static void md_header(const struct sweep *sw, FILE *f)
{
	const struct scenario *b = &sw->base;
	const struct sweep_settings *st = &sw->set;
	char cap[32], bw[32], ibw[32], cal[CFG_STR_MAX + 400], what[CFG_STR_MAX + 300];
	int fw = b->s.training.framework, multi = sw->cands[sw->ncand - 1].nodes > 1 || sw->cands[0].nodes > 1;

	if (b->calib.applied)
		snprintf(cal, sizeof cal, " Device parameters: the latest calibration of the device (validate "
			 "--calibrate): %s.", calib_describe(&b->calib, what, sizeof what));
	else
		snprintf(cal, sizeof cal, " Device parameters: the catalog's (no calibration).");

	units_format(cap, sizeof cap, b->capacity, UNIT_BYTES);
	units_format(bw, sizeof bw, b->intra.bandwidth, UNIT_BW);
	units_format(ibw, sizeof ibw, b->inter.bandwidth, UNIT_BW);
	fprintf(f, "## Which strategy: %lld x %s per node (%s each), %s (%s per GPU); ",
		(long long)b->s.cluster.gpus_per_node, b->gpu.name, cap, b->intra.name, bw);
	if (st->nodes[0])
		fprintf(f, "%s nodes", st->nodes);
	else
		fprintf(f, "%lld node%s", (long long)b->s.cluster.nodes, b->s.cluster.nodes > 1 ? "s" : "");
	if (multi)
		fprintf(f, " over %s (%lld x %s per node)", b->inter.name, (long long)b->s.cluster.nics_per_node, ibw);
	fprintf(f, "\n\n%s `%s`: %d cells (%d models x %d %s x %d sequence length%s) x %d candidates "
		"(strategies %s; precision %s; activation checkpointing %s; offload %s; tensor parallel %s%s%s). "
		"Optimizer %s, framework %s%s. Each candidate runs at the largest micro-batch that fits and divides "
		"the batch per GPU, and accumulates the rest.%s\n\nObjective: %s. Each cell: the best candidate, "
		"its figure, and its lead over the best candidate of another strategy.\n",
		sw->is_default ? "The default sweep of the cluster in" : "Sweep", sw->file, sw->ncell, sw->nmodels, sw->nbatch, sw->batch_mode == SWEEP_GLOBAL ? "global batches" :
		sw->batch_mode == SWEEP_MICRO ? "micro-batches" : "(largest micro-batch)", sw->nseq,
		sw->nseq > 1 ? "s" : "", sw->ncand,
		st->strategies, st->precision, st->recompute, st->offload, st->tensor_parallel,
		st->nodes[0] ? "; nodes " : "", st->nodes, scenario_enum_name("training", "optimizer", b->s.training.optimizer),
		scenario_enum_name("training", "framework", fw), fw == FW_PYTORCH ? " (DeepSpeed's engine for zero1-3)" : "",
		cal,
		objective_text(sw));
}

/* The grid of one sequence length: models down, batches across. */
static void md_grid(const struct sweep *sw, const struct sweep_result *r, int seq, FILE *f)
{
	char b1[64], p[32];
	int m, b, best, ru;

	fprintf(f, "\n### seq_len %lld\n\n| model | params |", (long long)sw->seqs[seq]);
	for (b = 0; b < sw->nbatch; b++)
		fprintf(f, " %s |", batch_name(sw, b, b1, sizeof b1));
	fprintf(f, "\n|---|---:|");
	for (b = 0; b < sw->nbatch; b++)
		fprintf(f, "---|");
	fprintf(f, "\n");
	for (m = 0; m < sw->nmodels; m++) {
		fprintf(f, "| %s | %s |", sw->models[m].name, count(p, sizeof p, sw->model_params[m]));
		for (b = 0; b < sw->nbatch; b++) {
			const struct sweep_result *c = r + (size_t)cell_index(sw, m, seq, b) * sw->ncand;
			sweep_cell_best(sw, c, &best, &ru);
			if (best < 0) {
				fprintf(f, " none fits |");
				continue;
			}
			fprintf(f, " **%s** %s", sw->cands[best].label, figure(b1, sizeof b1, sw, &c[best]));
			if (ru >= 0)
				fprintf(f, " (%s %s)", lead(b1, sizeof b1, margin(sw, &c[best], &c[ru])), sw->cands[ru].strat);
			fprintf(f, " |");
		}
		fprintf(f, "\n");
	}
}

static void md_details(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	char b1[64], b2[64], pk[32], cap[32];
	int cell, model, seq, batch, best, ru;

	fprintf(f, "\n### Details\n\n| model | seq_len | batch | best | micro-batch x accum x dp | %s | MFU "
		"| peak memory / GPU | runner-up | margin | what binds the memory |\n"
		"|---|---:|---|---|---|---:|---:|---|---|---:|---|\n",
		sw->set.objective == SWEEP_THROUGHPUT ? "throughput" : sweep_objective_name(sw->set.objective));
	for (cell = 0; cell < sw->ncell; cell++) {
		const struct sweep_result *c = r + (size_t)cell * sw->ncand;
		sweep_cell_axes(sw, cell, &model, &seq, &batch);
		sweep_cell_best(sw, c, &best, &ru);
		if (sw->batch_mode == SWEEP_AUTO)
			snprintf(b1, sizeof b1, "max");
		else
			snprintf(b1, sizeof b1, "%s%lld", sw->batch_mode == SWEEP_MICRO ? "micro " : "",
				 (long long)sw->batches[batch]);
		fprintf(f, "| %s | %lld | %s |", sw->models[model].name, (long long)sw->seqs[seq], b1);
		if (best < 0) {
			fprintf(f, " none fits | | | | | | | |\n");
			continue;
		}
		units_format(pk, sizeof pk, c[best].peak, UNIT_BYTES);
		units_format(cap, sizeof cap, c[best].capacity, UNIT_BYTES);
		fprintf(f, " %s | %lld x %lld x %lld | %s | %.1f%% | %s of %s |", sw->cands[best].label,
			(long long)c[best].micro_batch, (long long)c[best].grad_accum,
			(long long)(c[best].global_batch / (c[best].micro_batch * c[best].grad_accum)),
			figure(b1, sizeof b1, sw, &c[best]), 100 * c[best].mfu, pk, cap);
		if (ru >= 0)
			fprintf(f, " %s %s | +%.1f%% |", sw->cands[ru].label, figure(b2, sizeof b2, sw, &c[ru]),
				margin(sw, &c[best], &c[ru]));
		else
			fprintf(f, " (no other strategy fits) | |");
		fprintf(f, " %s |\n", c[best].note);
	}
}

int sweep_write_markdown(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	int s;

	md_header(sw, f);
	for (s = 0; s < sw->nseq; s++)
		md_grid(sw, r, s, f);
	md_details(sw, r, f);
	return ferror(f) ? -1 : 0;
}

/* ---- CSV ----------------------------------------------------------------------------------- */

/* A CSV field (RFC 4180): quoted when it holds a comma, quote or newline. */
static void field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int sweep_write_csv(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	int cell, i, model, seq, batch;

	fprintf(f, "cell,model,model_params,seq_len,batch,candidate,strategy,label,precision,"
		"activation_checkpointing,offload,tensor_parallel,nodes,gpus,status,rank,micro_batch,grad_accum,"
		"global_batch,max_micro_batch,peak_bytes,capacity_bytes,params_bytes,grads_bytes,optimizer_bytes,"
		"activations_bytes,buffers_bytes,overhead_bytes,step_time_s,compute_s,comm_s,exposed_comm_s,"
		"tokens_per_s,samples_per_s,mfu,gpu_hours_per_mtok,train_days,ettr,score,note\n");
	for (cell = 0; cell < sw->ncell; cell++) {
		sweep_cell_axes(sw, cell, &model, &seq, &batch);
		for (i = 0; i < sw->ncand; i++) {
			const struct sweep_result *x = &r[(size_t)cell * sw->ncand + i];
			const struct sweep_cand *k = &sw->cands[i];
			fprintf(f, "%d,", cell);
			field(f, sw->models[model].name);
			fprintf(f, ",%.0f,%lld,%lld,%d,%s,", sw->model_params[model], (long long)sw->seqs[seq],
				(long long)sw->batches[batch], i, k->strat);
			field(f, k->label);
			fprintf(f, ",%s,%s,%s,%lld,%lld,%lld,%s,%d,%lld,%lld,%lld,%lld,"
				"%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.6g,%.6g,%.6g,%.6g,%.9g,",
				scenario_precision_name(k->precision),
				scenario_enum_name("training", "activation_checkpointing", k->recompute),
				scenario_enum_name("training", "offload", k->offload), (long long)k->tp,
				(long long)k->nodes, (long long)x->world, sweep_status_name(x->status), x->rank,
				(long long)x->micro_batch, (long long)x->grad_accum, (long long)x->global_batch,
				(long long)x->max_micro_batch, x->peak, x->capacity, x->params, x->grads, x->optimizer,
				x->activations, x->buffers, x->overhead, x->step_time, x->compute, x->comm,
				x->exposed_comm, x->tokens_per_s, x->samples_per_s, x->mfu, x->gpu_hours_per_mtok,
				x->train_days, x->ettr, x->score);
			field(f, x->note);
			fputc('\n', f);
		}
	}
	return ferror(f) ? -1 : 0;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static cJSON *json_cand(const struct sweep_cand *k)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "label", k->label);
	cJSON_AddStringToObject(o, "strategy", k->strat);
	cJSON_AddStringToObject(o, "precision", scenario_precision_name(k->precision));
	cJSON_AddStringToObject(o, "activation_checkpointing",
				scenario_enum_name("training", "activation_checkpointing", k->recompute));
	cJSON_AddStringToObject(o, "offload", scenario_enum_name("training", "offload", k->offload));
	cJSON_AddNumberToObject(o, "tensor_parallel", (double)k->tp);
	cJSON_AddNumberToObject(o, "nodes", (double)k->nodes);
	return o;
}

static cJSON *json_result(const struct sweep_result *x)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "candidate", x->cand);
	cJSON_AddStringToObject(o, "status", sweep_status_name(x->status));
	if (x->rank)
		cJSON_AddNumberToObject(o, "rank", x->rank);
	cJSON_AddNumberToObject(o, "gpus", (double)x->world);
	if (x->status == SWEEP_OK || x->status == SWEEP_NOFIT) {
		cJSON_AddNumberToObject(o, "max_micro_batch", (double)x->max_micro_batch);
		cJSON_AddNumberToObject(o, "peak_bytes", x->peak);
		cJSON_AddNumberToObject(o, "capacity_bytes", x->capacity);
		cJSON_AddNumberToObject(o, "params_bytes", x->params);
		cJSON_AddNumberToObject(o, "grads_bytes", x->grads);
		cJSON_AddNumberToObject(o, "optimizer_bytes", x->optimizer);
		cJSON_AddNumberToObject(o, "activations_bytes", x->activations);
		cJSON_AddNumberToObject(o, "buffers_bytes", x->buffers);
		cJSON_AddNumberToObject(o, "overhead_bytes", x->overhead);
	}
	if (x->status == SWEEP_OK) {
		cJSON_AddNumberToObject(o, "micro_batch", (double)x->micro_batch);
		cJSON_AddNumberToObject(o, "grad_accum", (double)x->grad_accum);
		cJSON_AddNumberToObject(o, "global_batch", (double)x->global_batch);
		cJSON_AddNumberToObject(o, "step_time_s", x->step_time);
		cJSON_AddNumberToObject(o, "compute_s", x->compute);
		cJSON_AddNumberToObject(o, "comm_s", x->comm);
		cJSON_AddNumberToObject(o, "exposed_comm_s", x->exposed_comm);
		cJSON_AddNumberToObject(o, "tokens_per_s", x->tokens_per_s);
		cJSON_AddNumberToObject(o, "samples_per_s", x->samples_per_s);
		cJSON_AddNumberToObject(o, "mfu", x->mfu);
		cJSON_AddNumberToObject(o, "gpu_hours_per_mtok", x->gpu_hours_per_mtok);
		if (x->train_days > 0)
			cJSON_AddNumberToObject(o, "train_days", x->train_days);
		if (x->ettr > 0)
			cJSON_AddNumberToObject(o, "ettr", x->ettr);
		cJSON_AddNumberToObject(o, "score", x->score);
	}
	cJSON_AddStringToObject(o, "note", x->note);
	return o;
}

static cJSON *json_head(const struct sweep *sw)
{
	const struct scenario *b = &sw->base;
	cJSON *o = cJSON_CreateObject(), *c = cJSON_AddObjectToObject(o, "cluster"), *a, *m;
	char hash[32];
	int i;

	cJSON_AddStringToObject(o, "sweep", sw->file);
	snprintf(hash, sizeof hash, "%016llx", (unsigned long long)sw->hash);
	cJSON_AddStringToObject(o, "hash", hash);
	cJSON_AddStringToObject(c, "gpu", b->gpu.name);
	cJSON_AddNumberToObject(c, "gpu_memory_bytes", b->capacity);
	cJSON_AddNumberToObject(c, "gpus_per_node", (double)b->s.cluster.gpus_per_node);
	cJSON_AddStringToObject(c, "intra_node", b->intra.name);
	cJSON_AddStringToObject(c, "inter_node", b->inter.name);
	cJSON_AddStringToObject(o, "objective", sweep_objective_name(sw->set.objective));
	cJSON_AddStringToObject(o, "batch", sw->batch_mode == SWEEP_GLOBAL ? "global_batch" :
				sw->batch_mode == SWEEP_MICRO ? "micro_batch" : "auto");
	a = cJSON_AddArrayToObject(o, "models");
	for (i = 0; i < sw->nmodels; i++) {
		cJSON_AddItemToArray(a, m = cJSON_CreateObject());
		cJSON_AddStringToObject(m, "name", sw->models[i].name);
		cJSON_AddNumberToObject(m, "params", sw->model_params[i]);
	}
	a = cJSON_AddArrayToObject(o, "candidates");
	for (i = 0; i < sw->ncand; i++)
		cJSON_AddItemToArray(a, json_cand(&sw->cands[i]));
	return o;
}

char *sweep_json(const struct sweep *sw, const struct sweep_result *r)
{
	cJSON *o = json_head(sw), *cells = cJSON_AddArrayToObject(o, "cells"), *c, *a;
	int cell, i, model, seq, batch, best, ru;
	char *s;

	for (cell = 0; cell < sw->ncell; cell++) {
		const struct sweep_result *x = r + (size_t)cell * sw->ncand;
		sweep_cell_axes(sw, cell, &model, &seq, &batch);
		sweep_cell_best(sw, x, &best, &ru);
		cJSON_AddItemToArray(cells, c = cJSON_CreateObject());
		cJSON_AddStringToObject(c, "model", sw->models[model].name);
		cJSON_AddNumberToObject(c, "seq_len", (double)sw->seqs[seq]);
		if (sw->batch_mode != SWEEP_AUTO)
			cJSON_AddNumberToObject(c, sw->batch_mode == SWEEP_GLOBAL ? "global_batch" : "micro_batch",
						(double)sw->batches[batch]);
		if (best >= 0)
			cJSON_AddStringToObject(c, "best", sw->cands[best].label);
		else
			cJSON_AddNullToObject(c, "best");
		if (ru >= 0) {
			cJSON_AddStringToObject(c, "runner_up", sw->cands[ru].label);
			cJSON_AddNumberToObject(c, "margin_pct", margin(sw, &x[best], &x[ru]));
		} else {
			cJSON_AddNullToObject(c, "runner_up");
		}
		a = cJSON_AddArrayToObject(c, "results");
		for (i = 0; i < sw->ncand; i++)
			cJSON_AddItemToArray(a, json_result(&x[i]));
	}
	s = cJSON_Print(o);
	cJSON_Delete(o);
	return s;
}

/* ---- heatmap data -------------------------------------------------------------------------- */

/* A fixed colour per strategy, so every plot reads alike (0xRRGGBB). */
static unsigned colour(const char *strat)
{
	static const struct { const char *name; unsigned rgb; } tab[] = {
		{"single", 0x9e9e9e}, {"dp", 0x9ecae1}, {"ddp", 0x3182bd}, {"zero1", 0xc7e9c0},
		{"zero2", 0x74c476}, {"zero3", 0x238b45}, {"fsdp:full_shard", 0xfd8d3c},
		{"fsdp:shard_grad_op", 0xe6550d}, {"fsdp:no_shard", 0xfdd0a2},
		{"fsdp:hybrid_shard", 0x9e9ac8}, {"fsdp:hybrid_shard_zero2", 0x6a51a3}};
	size_t i;

	for (i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (!strcmp(tab[i].name, strat))
			return tab[i].rgb;
	return 0x636363;
}

/* The options part of a candidate's label ("ckpt=full nodes=4"). */
static const char *options(const struct sweep_cand *k)
{
	const char *o = k->label + strlen(k->strat);
	return *o == ' ' ? o + 1 : o;
}

int sweep_write_heatmap_data(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	char b1[64], b2[64], b3[32], fig[96], lab[80];
	int m, s, b, best, ru, row, nrows = sw->nmodels * sw->nseq;

	fprintf(f, "# x y rgb xlabel ylabel strategy options figure  (recommend heatmap: %d rows x %d columns)\n",
		nrows, sw->nbatch);
	for (m = 0; m < sw->nmodels; m++)
		for (s = 0; s < sw->nseq; s++)
			for (b = 0; b < sw->nbatch; b++) {
				const struct sweep_result *c = r + (size_t)cell_index(sw, m, s, b) * sw->ncand;
				row = m * sw->nseq + s;
				sweep_cell_best(sw, c, &best, &ru);
				if (sw->nseq > 1)
					snprintf(lab, sizeof lab, "%.60s, seq %lld", sw->models[m].name, (long long)sw->seqs[s]);
				else
					snprintf(lab, sizeof lab, "%.79s", sw->models[m].name);
				fig[0] = 0;
				if (best >= 0)
					snprintf(fig, sizeof fig, "%s%s", figure(b2, sizeof b2, sw, &c[best]),
						 ru < 0 ? ", the only fit" : ahead(b3, sizeof b3, margin(sw, &c[best], &c[ru])));
				fprintf(f, "%d %d %u \"%s\" \"%s\" \"%s\" \"%s\" \"%s\"\n", b, nrows - 1 - row,
					best >= 0 ? colour(sw->cands[best].strat) : 0xeeeeee,
					sw->batch_mode == SWEEP_AUTO ? "largest micro-batch" :
					batch_name(sw, b, b1, sizeof b1), lab,
					best >= 0 ? sw->cands[best].strat : "none fits",
					best >= 0 ? options(&sw->cands[best]) : "", fig);
			}
	return ferror(f) ? -1 : 0;
}

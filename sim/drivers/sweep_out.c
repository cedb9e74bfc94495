/*
 * sweep_out.c — a sweep's results as Markdown (the table people read), CSV and
 * JSON (every candidate), the heatmap's data file, and the allocator emulation's
 * counts as a line of text (see sweep.h).
 *
 * Everything written depends only on the sweep and its results, never on the
 * host, the time or how the cells were split across processes, so a sweep run
 * on one rank and on many writes the same bytes.
 */
#include "sweep.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
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

/* How much worse the runner-up is under the objective, in percent; 0 for a
 * tie (scores within a relative SWEEP_TIE, rounding only: sweep.h). */
static double margin(const struct sweep *sw, const struct sweep_result *best, const struct sweep_result *ru)
{
	double pct;

	switch (sw->set.objective) {
	case SWEEP_COST: pct = 100 * (ru->gpu_hours_per_mtok / best->gpu_hours_per_mtok - 1); break;
	case SWEEP_TIME_TO_TRAIN: pct = 100 * (ru->train_days / best->train_days - 1); break;
	default: pct = 100 * (best->tokens_per_s / ru->tokens_per_s - 1); break;
	}
	return fabs(pct) <= 100 * SWEEP_TIE ? 0 : pct;
}

/* The winner's lead over the runner-up: "tie" (under 0.05 %), "+0.7%", "+12%". */
static const char *lead(char *b, size_t n, double pct)
{
	if (pct < 0.05)
		snprintf(b, n, "tie");
	else
		snprintf(b, n, pct < 10 ? "+%.1f%%" : "+%.0f%%", pct);
	return b;
}

/* The heatmap's version (lead's rule): ", tied", ", +0.7% ahead". */
static const char *ahead(char *b, size_t n, double pct)
{
	char l[24];

	if (!strcmp(lead(l, sizeof l, pct), "tie"))
		snprintf(b, n, ", tied");
	else
		snprintf(b, n, ", %s ahead", l);
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

/* Prose lines of the Markdown are wrapped at this width (characters); table
 * rows cannot be wrapped, so their cells are kept short instead and the long
 * notes go below the tables. */
#define MD_WIDTH 100

/* Writes text as lines of at most MD_WIDTH characters, broken at spaces (a
 * single longer word stays whole). */
static void md_wrap(FILE *f, const char *text)
{
	const char *p = text;

	while (*p) {
		const char *end = p, *brk = NULL;
		while (*end && end - p < MD_WIDTH) {
			if (*end == ' ')
				brk = end;
			end++;
		}
		if (!*end || *end == ' ')
			brk = end;
		else if (!brk)
			brk = strchr(end, ' ') ? strchr(end, ' ') : end + strlen(end);
		fprintf(f, "%.*s\n", (int)(brk - p), p);
		p = *brk ? brk + 1 : brk;
	}
}

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

/* The unit of the grid's figures (figure() without it: short()). */
static const char *figure_unit(const struct sweep *sw)
{
	switch (sw->set.objective) {
	case SWEEP_COST:
		return sw->set.gpu_hour_price > 0 ? "cost per million tokens" : "GPU-hours per million tokens";
	case SWEEP_TIME_TO_TRAIN:
		return "days to train";
	default:
		return "tokens/s";
	}
}

/* The objective's figure of r without its unit: "152.3k", "0.95", "12.3". */
static const char *short_figure(char *b, size_t n, const struct sweep *sw, const struct sweep_result *r)
{
	char t[32];

	switch (sw->set.objective) {
	case SWEEP_COST:
		snprintf(b, n, "%.3g", r->gpu_hours_per_mtok * (sw->set.gpu_hour_price > 0 ? sw->set.gpu_hour_price : 1));
		break;
	case SWEEP_TIME_TO_TRAIN:
		snprintf(b, n, "%.3g", r->train_days);
		break;
	default:
		snprintf(b, n, "%s", rate(t, sizeof t, r->tokens_per_s));
	}
	return b;
}

/* The objective's figure of r with its unit: "152.3k tok/s", "0.95 GPU-h/Mtok",
 * "0.95/Mtok" (with a price), "12.3 days". */
static const char *figure(char *b, size_t n, const struct sweep *sw, const struct sweep_result *r)
{
	char t[32];

	snprintf(b, n, "%s%s", short_figure(t, sizeof t, sw, r),
		 sw->set.objective == SWEEP_COST ? (sw->set.gpu_hour_price > 0 ? "/Mtok" : " GPU-h/Mtok") :
		 sw->set.objective == SWEEP_TIME_TO_TRAIN ? " days" : " tok/s");
	return b;
}

static void md_header(const struct sweep *sw, FILE *f)
{
	const struct scenario *b = &sw->base;
	const struct sweep_settings *st = &sw->set;
	char cap[32], bw[32], ibw[32], text[4 * CFG_STR_MAX + 2048], cal[CFG_STR_MAX + 400],
		what[CFG_STR_MAX + 300];
	int fw = b->plan.framework, multi = sw->cands[sw->ncand - 1].nodes > 1 || sw->cands[0].nodes > 1;

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
	snprintf(text, sizeof text, "%s `%s`: %d cells (%d models x %d %s x %d sequence length%s) x %d candidates "
		"(strategies %s; precision %s; activation checkpointing %s; offload %s; tensor parallel %s%s%s). "
		"Optimizer %s, framework %s%s. Each candidate runs at the largest micro-batch that fits and divides "
		"the batch per GPU, and accumulates the rest.%s",
		sw->is_default ? "The default sweep of the cluster in" : "Sweep", sw->file, sw->ncell, sw->nmodels, sw->nbatch, sw->batch_mode == SWEEP_GLOBAL ? "global batches" :
		sw->batch_mode == SWEEP_MICRO ? "micro-batches" : "(largest micro-batch)", sw->nseq,
		sw->nseq > 1 ? "s" : "", sw->ncand,
		st->strategies, st->precision, st->recompute, st->offload, st->tensor_parallel,
		st->nodes[0] ? "; nodes " : "", st->nodes, scenario_enum_name("training", "optimizer", b->s.training.optimizer),
		scenario_enum_name("training", "framework", fw), plan_engine_note(fw),
		cal);
	fprintf(f, "\n\n");
	md_wrap(f, text);
	snprintf(text, sizeof text, "Objective: %s. Each cell: the best candidate, its %s, and its lead over "
		 "the best candidate of another strategy (tie: within 0.05%%; the details name it).",
		 objective_text(sw), figure_unit(sw));
	fprintf(f, "\n");
	md_wrap(f, text);
}

/* The grid of one sequence length: models down, batches across. */
static void md_grid(const struct sweep *sw, const struct sweep_result *r, int seq, FILE *f)
{
	char b1[64], p[32];
	int m, b, best, ru;

	fprintf(f, "\n### seq_len %lld%s\n\n| model | params |", (long long)sw->seqs[seq],
		sw->batch_mode == SWEEP_GLOBAL ? ", global batch across" :
		sw->batch_mode == SWEEP_MICRO ? ", micro-batch across" : "");
	for (b = 0; b < sw->nbatch; b++)
		if (sw->batch_mode == SWEEP_AUTO)
			fprintf(f, " largest micro-batch |");
		else
			fprintf(f, " %lld |", (long long)sw->batches[b]);
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
			fprintf(f, " **%s** %s", sw->cands[best].label, short_figure(b1, sizeof b1, sw, &c[best]));
			fprintf(f, " (%s) |", ru < 0 ? "only fit" : lead(b1, sizeof b1, margin(sw, &c[best], &c[ru])));
		}
		fprintf(f, "\n");
	}
}

/* The details table, one row per cell; what binds each winner's memory below it. */
static void md_details(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	char b1[64], b2[64], pk[32], cap[32];
	int cell, model, seq, batch, best, ru;

	units_format(cap, sizeof cap, sw->base.capacity, UNIT_BYTES);
	fprintf(f, "\n### Details\n\n| model | seq_len | batch | best | micro x accum x dp | %s | MFU "
		"| peak / GPU (of %s) | runner-up: another strategy (lead) |\n"
		"|---|---:|---|---|---|---:|---:|---:|---|\n",
		sw->set.objective == SWEEP_THROUGHPUT ? "throughput" : sweep_objective_name(sw->set.objective), cap);
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
			fprintf(f, " none fits | | | | | |\n");
			continue;
		}
		units_format(pk, sizeof pk, c[best].peak, UNIT_BYTES);
		fprintf(f, " %s | %lld x %lld x %lld | %s | %.1f%% | %s |", sw->cands[best].label,
			(long long)c[best].micro_batch, (long long)c[best].grad_accum,
			(long long)(c[best].global_batch / (c[best].micro_batch * c[best].grad_accum)),
			figure(b1, sizeof b1, sw, &c[best]), 100 * c[best].mfu, pk);
		if (ru >= 0)
			fprintf(f, " %s, %s (%s) |\n", sw->cands[ru].label, figure(b2, sizeof b2, sw, &c[ru]),
				lead(b1, sizeof b1, margin(sw, &c[best], &c[ru])));
		else
			fprintf(f, " (no other strategy fits) |\n");
	}
	fprintf(f, "\n");
	md_wrap(f, "What binds the memory of each cell's best candidate (the largest part of its peak, "
		"and the op at the peak):");
	fprintf(f, "\n");
	for (cell = 0; cell < sw->ncell; cell++) {
		const struct sweep_result *c = r + (size_t)cell * sw->ncand;
		sweep_cell_axes(sw, cell, &model, &seq, &batch);
		sweep_cell_best(sw, c, &best, &ru);
		if (best >= 0 && c[best].note[0])
			fprintf(f, "- %s, seq_len %lld, %s — %s\n", sw->models[model].name, (long long)sw->seqs[seq],
				batch_name(sw, batch, b1, sizeof b1), c[best].note);
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

int sweep_has(const struct sweep_result *x, int what, double value)
{
	switch (what) {
	case SWEEP_HAS_MEMORY: return x->memory && (x->status == SWEEP_OK || x->status == SWEEP_NOFIT);
	case SWEEP_HAS_STEP: return x->status == SWEEP_OK;
	case SWEEP_HAS_SET: return x->status == SWEEP_OK && value != 0;
	default: return 1;
	}
}

/* The figures of a result in the CSV's column order (JSON's keys), each with
 * what it needs to have been computed (sweep_has) and its CSV precision. */
#define RF(x) offsetof(struct sweep_result, x)
static const struct {
	const char *name;
	char type;          /* 'r' int32, 'i' int64, 'd' double */
	size_t off;
	int has;            /* enum sweep_has */
	int digits;         /* significant digits in the CSV (%.*g); 0: a whole number */
} rfields[] = {
	{"rank", 'r', RF(rank), SWEEP_HAS_SET, 0},
	{"micro_batch", 'i', RF(micro_batch), SWEEP_HAS_STEP, 0},
	{"grad_accum", 'i', RF(grad_accum), SWEEP_HAS_STEP, 0},
	{"global_batch", 'i', RF(global_batch), SWEEP_HAS_STEP, 0},
	{"max_micro_batch", 'i', RF(max_micro_batch), SWEEP_HAS_MEMORY, 0},
	{"peak_bytes", 'd', RF(peak), SWEEP_HAS_MEMORY, 0},
	{"capacity_bytes", 'd', RF(capacity), SWEEP_HAS_MEMORY, 0},
	{"params_bytes", 'd', RF(params), SWEEP_HAS_MEMORY, 0},
	{"grads_bytes", 'd', RF(grads), SWEEP_HAS_MEMORY, 0},
	{"optimizer_bytes", 'd', RF(optimizer), SWEEP_HAS_MEMORY, 0},
	{"activations_bytes", 'd', RF(activations), SWEEP_HAS_MEMORY, 0},
	{"buffers_bytes", 'd', RF(buffers), SWEEP_HAS_MEMORY, 0},
	{"overhead_bytes", 'd', RF(overhead), SWEEP_HAS_MEMORY, 0},
	{"step_time_s", 'd', RF(step_time), SWEEP_HAS_STEP, 9},
	{"compute_s", 'd', RF(compute), SWEEP_HAS_STEP, 9},
	{"comm_s", 'd', RF(comm), SWEEP_HAS_STEP, 9},
	{"exposed_comm_s", 'd', RF(exposed_comm), SWEEP_HAS_STEP, 9},
	{"tokens_per_s", 'd', RF(tokens_per_s), SWEEP_HAS_STEP, 9},
	{"samples_per_s", 'd', RF(samples_per_s), SWEEP_HAS_STEP, 9},
	{"mfu", 'd', RF(mfu), SWEEP_HAS_STEP, 6},
	{"gpu_hours_per_mtok", 'd', RF(gpu_hours_per_mtok), SWEEP_HAS_STEP, 6},
	{"train_days", 'd', RF(train_days), SWEEP_HAS_SET, 6},
	{"ettr", 'd', RF(ettr), SWEEP_HAS_SET, 6},
	{"score", 'd', RF(score), SWEEP_HAS_STEP, 9},
};
#undef RF
#define NRFIELDS (sizeof rfields / sizeof rfields[0])

/* Field i of x as a double; *has: whether it was computed. */
static double rfield(const struct sweep_result *x, size_t i, int *has)
{
	const char *p = (const char *)x + rfields[i].off;
	double v = rfields[i].type == 'r' ? (double)*(const int32_t *)p :
		   rfields[i].type == 'i' ? (double)*(const int64_t *)p : *(const double *)p;

	*has = sweep_has(x, rfields[i].has, v);
	return v;
}

int sweep_write_csv(const struct sweep *sw, const struct sweep_result *r, FILE *f)
{
	int cell, i, model, seq, batch, has;
	size_t j;

	fprintf(f, "cell,model,model_params,seq_len,batch,candidate,strategy,label,precision,"
		"activation_checkpointing,offload,tensor_parallel,nodes,gpus,status");
	for (j = 0; j < NRFIELDS; j++)
		fprintf(f, ",%s", rfields[j].name);
	fprintf(f, ",note\n");
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
			fprintf(f, ",%s,%s,%s,%lld,%lld,%lld,%s", scenario_precision_name(k->precision),
				scenario_enum_name("training", "activation_checkpointing", k->recompute),
				scenario_enum_name("training", "offload", k->offload), (long long)k->tp,
				(long long)k->nodes, (long long)x->world, sweep_status_name(x->status));
			for (j = 0; j < NRFIELDS; j++) {
				double v = rfield(x, j, &has);
				fputc(',', f);
				if (has && rfields[j].digits)
					fprintf(f, "%.*g", rfields[j].digits, v);
				else if (has)
					fprintf(f, "%.0f", v);
			}
			fputc(',', f);
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

/* A result: every figure of rfields, null where it was not computed. */
static cJSON *json_result(const struct sweep_result *x)
{
	cJSON *o = cJSON_CreateObject();
	size_t j;
	int has;

	cJSON_AddNumberToObject(o, "candidate", x->cand);
	cJSON_AddStringToObject(o, "status", sweep_status_name(x->status));
	cJSON_AddNumberToObject(o, "gpus", (double)x->world);
	for (j = 0; j < NRFIELDS; j++) {
		double v = rfield(x, j, &has);
		if (has)
			cJSON_AddNumberToObject(o, rfields[j].name, v);
		else
			cJSON_AddNullToObject(o, rfields[j].name);
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

void sweep_emu_text(char *buf, size_t n, const struct mem_emu_counts *k)
{
	snprintf(buf, n, "%ld max-batch searches (%ld remembered from a tape met before), %ld replays, %ld "
		 "events (%ld copies of periodic runs made at once instead), %ld alloc/free pairs probed, %ld peaks "
		 "for breakdowns (%ld remembered)", k->searches, k->remembered, k->replays, k->events, k->skipped,
		 k->probed, k->peaks, k->peaks_known);
}

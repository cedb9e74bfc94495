/*
 * test_sweep.c — strategy sweeps (sweep.h): loading, the batch each candidate
 * runs at, ranking, and that a sweep's in-memory candidates give exactly what
 * simulate gives for the same scenario written out as a file.
 */
#include <criterion/criterion.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph.h"
#include "predict.h"
#include "scenario.h"
#include "step.h"
#include "sweep.h"

static char path[64];

static const char *write_tmp(const char *text)
{
	FILE *f;

	snprintf(path, sizeof path, "/tmp/shardcast-sweep-%d.ini", (int)getpid());
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void load_text(struct sweep *sw, const char *text)
{
	struct err e = {0};

	cr_assert_eq(sweep_load(sw, write_tmp(text), &e), 0, "%s", e.msg);
}

/* All results of sw, cell-major, from one context. */
static struct sweep_result *eval_all(const struct sweep *sw)
{
	struct sweep_result *r = calloc((size_t)sw->ncell * sw->ncand, sizeof *r);
	struct sweep_ctx *c = sweep_ctx_create(sw);
	struct err e = {0};
	int cell;

	cr_assert(r && c);
	for (cell = 0; cell < sw->ncell; cell++)
		cr_assert_eq(sweep_eval_cell(c, cell, r + (size_t)cell * sw->ncand, &e), 0, "%s", e.msg);
	sweep_ctx_delete(c);
	return r;
}

static int cand_index(const struct sweep *sw, const char *label)
{
	int i;

	for (i = 0; i < sw->ncand; i++)
		if (!strcmp(sw->cands[i].label, label))
			return i;
	cr_assert_fail("no candidate %s", label);
	return -1;
}

/* simulate's prediction for a scenario text (memory, then step). */
static void predict_text(const char *text, struct prediction *p)
{
	struct scenario s;
	struct err e = {0};

	cr_assert_eq(scenario_load(&s, write_tmp(text), NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(predict_run(&s, p, &e), 0, "%s", e.msg);
	scenario_free(&s);
}

static const char small[] =
	"[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\nintra_node = nvlink3\n"
	"[sweep]\nmodels = gpt2, gpt2-xl\nglobal_batch = 8, 64, 512\n"
	"strategies = dp, ddp, zero1, zero2, zero3, fsdp:full_shard\nprecision = bf16\n"
	"activation_checkpointing = none, full\n";

Test(sweep, loads_axes_and_candidates)
{
	struct sweep sw;

	load_text(&sw, small);
	cr_expect_eq(sw.nmodels, 2);
	cr_expect_eq(sw.nbatch, 3);
	cr_expect_eq(sw.nseq, 1);
	cr_expect_eq(sw.seqs[0], 1024, "[sweep] seq_len defaults to 1024");
	cr_expect_eq(sw.ncand, 12, "6 strategies x 2 checkpointing modes");
	cr_expect_eq(sw.ncell, 6);
	cr_expect_eq(sw.batch_mode, SWEEP_GLOBAL);
	cr_expect_str_eq(sw.cands[0].label, "dp ckpt=none");
	cr_expect_str_eq(sw.cands[11].label, "fsdp:full_shard ckpt=full");
	cr_expect_str_eq(sw.cands[11].strat, "fsdp:full_shard");
	cr_expect_eq(sw.cands[11].strategy, STRAT_FSDP);
	cr_expect_eq(sw.cands[11].sharding, SHARD_FULL);
	cr_expect_eq(sw.cands[11].precision, PREC_BF16);
	cr_expect_eq(sw.base.world, 8);
	/* GPT-2 small has 124,439,808 parameters (Hugging Face gpt2, tied head) */
	cr_expect_eq(sw.model_params[0], 124439808.0);
	sweep_free(&sw);
}

Test(sweep, globs_select_by_parameter_count)
{
	struct sweep sw;

	/* the GPT-2 family between 300M and 2B: medium (355M), large (774M) and
	 * xl (1.56B), smallest first; gpt2 (124M) is outside the range */
	load_text(&sw, "[cluster]\ngpu = a100-sxm4-80gb\n[sweep]\nmodels = gpt2*:300M..2B\n");
	cr_assert_eq(sw.nmodels, 3);
	cr_expect_str_eq(sw.models[0].name, "gpt2-medium");
	cr_expect_str_eq(sw.models[1].name, "gpt2-large");
	cr_expect_str_eq(sw.models[2].name, "gpt2-xl");
	cr_expect(sw.model_params[0] < sw.model_params[1] && sw.model_params[1] < sw.model_params[2]);
	cr_expect_eq(sw.batch_mode, SWEEP_AUTO, "neither global_batch nor micro_batch: each candidate's largest");
	sweep_free(&sw);
}

/* Each fitting candidate runs the cell's global batch as micro-batch x
 * grad_accum x dp with the largest micro-batch that divides global / dp and
 * fits: the next larger divisor must not fit (simulate says so). */
Test(sweep, micro_batch_is_the_largest_divisor_that_fits)
{
	struct sweep sw;
	struct sweep_result *r;
	struct prediction p;
	char text[1024];
	int cell, i, checked = 0;
	int64_t per, d;

	load_text(&sw, small);
	r = eval_all(&sw);
	for (cell = 0; cell < sw.ncell; cell++) {
		for (i = 0; i < sw.ncand; i++) {
			const struct sweep_result *x = &r[cell * sw.ncand + i];
			int model, seq, batch;
			if (x->status != SWEEP_OK)
				continue;
			sweep_cell_axes(&sw, cell, &model, &seq, &batch);
			per = sw.batches[batch] / 8;
			cr_expect_eq(x->micro_batch * x->grad_accum, per, "%s %s", sw.models[model].name, sw.cands[i].label);
			cr_expect_eq(x->global_batch, sw.batches[batch]);
			cr_expect_leq(x->peak, x->capacity);
			for (d = x->micro_batch + 1; d <= per && per % d; d++)
				;
			if (d > per)
				continue;
			/* the next divisor, as simulate sees it */
			snprintf(text, sizeof text, "[model]\nname = %s\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n"
				 "[training]\nstrategy = %s\nprecision = bf16\nactivation_checkpointing = %s\n"
				 "micro_batch = %lld\ngrad_accum = %lld\n", sw.models[model].name,
				 scenario_strategy_name(sw.cands[i].strategy),
				 sw.cands[i].recompute ? "full" : "none", (long long)d, (long long)(per / d));
			predict_text(text, &p);
			cr_expect(!p.mem.fits, "%s %s global %lld: micro-batch %lld fits, but the sweep chose %lld",
				  sw.models[model].name, sw.cands[i].label, (long long)sw.batches[batch], (long long)d,
				  (long long)x->micro_batch);
			checked++;
		}
	}
	cr_expect_gt(checked, 5, "the gpt2-xl cells at 64 and 512 need accumulation for most strategies");
	free(r);
	sweep_free(&sw);
}

/* A sweep builds its candidates in memory (no scenario file, no graph per
 * candidate) and extends steps of 3+ micro-steps by their period; both must
 * give exactly simulate's numbers for the same scenario: memory bit for bit,
 * step time to 1e-9 (the extension is exact while micro-steps repeat; a full
 * simulation of every micro-step is the reference). simulate's scenario keeps
 * the sweep's framework (pytorch): its zero1-3 run DeepSpeed's engine and
 * profile in both, from the one plan (plan.h). */
static void same_as_simulate_with(const char *cluster, const char *training, const char *strategies,
				  int64_t global, int nodes, int min_extended)
{
	struct sweep sw;
	struct sweep_result *r;
	struct prediction p;
	char text[2048];
	int i, extended = 0;

	snprintf(text, sizeof text, "%s[training]\n%s[sweep]\nmodels = gpt2-xl\nglobal_batch = %lld\nstrategies = %s\n"
		 "precision = bf16\n", cluster, training, (long long)global, strategies);
	load_text(&sw, text);
	r = eval_all(&sw);
	for (i = 0; i < sw.ncand; i++) {
		const struct sweep_cand *k = &sw.cands[i];
		if (r[i].status != SWEEP_OK)
			continue;
		snprintf(text, sizeof text, "[model]\nname = gpt2-xl\n%s[training]\n%sstrategy = %s\n"
			 "fsdp_sharding_strategy = %s\nprecision = bf16\nmicro_batch = %lld\n"
			 "grad_accum = %lld\n", cluster, training, scenario_strategy_name(k->strategy),
			 scenario_enum_name("training", "fsdp_sharding_strategy", k->sharding),
			 (long long)r[i].micro_batch, (long long)r[i].grad_accum);
		predict_text(text, &p);
		cr_expect_eq(r[i].peak, p.mem.peak, "%s: peak %.0f vs simulate %.0f", k->label, r[i].peak, p.mem.peak);
		if (r[i].grad_accum == 1)  /* the sweep's max is without accumulation */
			cr_expect_eq(r[i].max_micro_batch, p.max_micro_batch, "%s", k->label);
		cr_expect(fabs(r[i].step_time / p.step.time - 1) < 1e-9, "%s (micro %lld x %lld on %d nodes): step %.9f s vs simulate %.9f s",
			  k->label, (long long)r[i].micro_batch, (long long)r[i].grad_accum, nodes, r[i].step_time, p.step.time);
		cr_expect(fabs(r[i].exposed_comm - p.step.exposed_comm) <= 1e-9 * p.step.time, "%s exposed", k->label);
		cr_expect(fabs(r[i].tokens_per_s / p.step.tokens_per_s - 1) < 1e-9, "%s tokens/s", k->label);
		cr_expect(fabs(r[i].mfu / p.step.mfu - 1) < 1e-9, "%s MFU", k->label);
		extended += r[i].grad_accum > SWEEP_ACCUM_SIMULATED;
	}
	cr_expect_geq(extended, min_extended, "most candidates need more micro-steps than are simulated");
	free(r);
	sweep_free(&sw);
}

static void same_as_simulate(const char *cluster, const char *strategies, int64_t global, int nodes)
{
	same_as_simulate_with(cluster, "", strategies, global, nodes, 4);
}

Test(sweep, same_as_simulate_on_nvlink, .timeout = 60)
{
	same_as_simulate("[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\nintra_node = nvlink3\n",
			 "dp, ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op", 1024, 1);
}

Test(sweep, same_as_simulate_over_infiniband, .timeout = 60)
{
	/* 4 nodes on one HDR NIC each: communication-bound, where overlap across
	 * micro-steps would show */
	same_as_simulate("[cluster]\ngpu = a100-sxm4-80gb\nnodes = 4\ngpus_per_node = 8\nintra_node = nvlink3\n"
			 "inter_node = ib-hdr\nnics_per_node = 1\n",
			 "ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op, fsdp:hybrid_shard", 2048, 4);
}

/* FSDP1 under no_sync (plan.h), over a slow network where the collectives
 * show: the sweep's step is simulate's and so is the memory of the unsharded
 * gradients kept. Where the gathered parameters stay (shard_grad_op,
 * hybrid_shard_zero2) only the first micro-step gathers, and only the last
 * reduces; the steps of one and two micro-steps the sweep extends from both
 * hold that gather and that reduction once, so their difference is still a
 * middle micro-step's (simulate probes 1, 2, 3, ... until the period
 * settles: step.h). DDP's no_sync = false reduces every micro-step. */
Test(sweep, same_as_simulate_under_no_sync, .timeout = 60)
{
	same_as_simulate_with("[cluster]\ngpu = a100-sxm4-80gb\nnodes = 2\ngpus_per_node = 8\nintra_node = nvlink3\n"
			      "inter_node = eth-25\nnics_per_node = 1\n", "no_sync = true\n",
			      "fsdp:full_shard, fsdp:shard_grad_op, fsdp:hybrid_shard_zero2", 1024, 2, 3);
	same_as_simulate_with("[cluster]\ngpu = a100-sxm4-80gb\nnodes = 2\ngpus_per_node = 8\nintra_node = nvlink3\n"
			      "inter_node = ib-hdr\nnics_per_node = 1\n", "no_sync = false\n", "ddp", 1024, 2, 1);
}

/* The property MPI relies on: a cell's results do not depend on which cells a
 * process evaluated before it (caches and memoised simulations), byte for byte. */
Test(sweep, results_do_not_depend_on_evaluation_order, .timeout = 60)
{
	struct sweep sw;
	struct sweep_result *a, *b;
	struct sweep_ctx *c1, *c2;
	struct err e = {0};
	int cell;

	load_text(&sw, small);
	a = eval_all(&sw);
	b = calloc((size_t)sw.ncell * sw.ncand, sizeof *b);
	c1 = sweep_ctx_create(&sw);
	c2 = sweep_ctx_create(&sw);
	cr_assert(b && c1 && c2);
	for (cell = sw.ncell - 1; cell >= 0; cell--)  /* backwards, odd and even cells in two contexts */
		cr_assert_eq(sweep_eval_cell(cell % 2 ? c1 : c2, cell, b + (size_t)cell * sw.ncand, &e), 0, "%s", e.msg);
	cr_expect_eq(memcmp(a, b, (size_t)sw.ncell * sw.ncand * sizeof *a), 0);
	sweep_ctx_delete(c1);
	sweep_ctx_delete(c2);
	free(a);
	free(b);
	sweep_free(&sw);
}

/* A document written from a sweep's results (Markdown or heatmap data), as a
 * malloc'd string. */
static char *written(const struct sweep *sw, const struct sweep_result *r,
		     int (*write)(const struct sweep *, const struct sweep_result *, FILE *))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert(f);
	cr_assert_eq(write(sw, r, f), 0);
	fclose(f);
	return text;
}

/* SWEEP_TABLES (recommend without --csv, --json or --db) computes what the
 * tables show: the breakdown of each cell's best only, and the steps of the
 * candidates whose lower bound (step_bound) does not rule them out as the best
 * or the runner-up. Against every breakdown and every step (SWEEP_ALL):
 * each cell's best and runner-up are the same candidates, the best's record is
 * identical whole, every simulated step the same bits, every skipped one truly
 * below what it would have had to beat, and the Markdown and heatmap are the
 * same text. Returns how many steps were skipped (*nofit: results that do not
 * fit). */
static int best_only_same_tables(const char *text, int *nofit)
{
	struct sweep sw;
	struct sweep_result *a, *b, x;
	struct sweep_ctx *c;
	struct err e = {0};
	char *ta, *tb;
	int cell, i, j, skipped = 0, bounded = 0, best, ru, best2, ru2;

	load_text(&sw, text);
	a = eval_all(&sw);
	b = calloc((size_t)sw.ncell * sw.ncand, sizeof *b);
	c = sweep_ctx_create(&sw);
	cr_assert(b && c);
	sweep_ctx_detail(c, SWEEP_TABLES);
	*nofit = 0;
	for (cell = 0; cell < sw.ncell; cell++) {
		const struct sweep_result *ca = a + (size_t)cell * sw.ncand, *cb = b + (size_t)cell * sw.ncand;
		cr_assert_eq(sweep_eval_cell(c, cell, b + (size_t)cell * sw.ncand, &e), 0, "%s", e.msg);
		sweep_cell_best(&sw, ca, &best, &ru);
		sweep_cell_best(&sw, cb, &best2, &ru2);
		cr_expect(best == best2 && ru == ru2, "cell %d: best %d / %d, runner-up %d / %d", cell, best, best2, ru,
			  ru2);
		for (j = 0; j < sw.ncand; j++) {
			i = cell * sw.ncand + j;
			if (j == best || (a[i].status != SWEEP_OK && a[i].status != SWEEP_NOFIT)) {
				cr_expect_eq(memcmp(&a[i], &b[i], sizeof x), 0, "cell %d candidate %d", cell, j);
				continue;
			}
			cr_expect(sweep_has(&a[i], SWEEP_HAS_MEMORY, 0) && !sweep_has(&b[i], SWEEP_HAS_MEMORY, 0));
			skipped++;
			*nofit += a[i].status == SWEEP_NOFIT;
			if (b[i].status == SWEEP_BOUNDED) {  /* does not fit, or truly below what it had to beat */
				bounded++;
				cr_expect(!sweep_has(&b[i], SWEEP_HAS_STEP, 0));
				if (a[i].status == SWEEP_NOFIT)
					continue;
				cr_expect_lt(a[i].score, ca[best].score, "cell %d candidate %d", cell, j);
				cr_expect(!strcmp(sw.cands[j].strat, sw.cands[best].strat) ||
					  (ru >= 0 && a[i].score < ca[ru].score), "cell %d candidate %d", cell, j);
				continue;
			}
			if (a[i].status == SWEEP_NOFIT)
				cr_expect(strstr(b[i].note, "does not fit") || strstr(b[i].note, "largest micro-batch"),
					  "%s", b[i].note);
			x = b[i];  /* with a's memory figures, note and rank: the same bytes */
			x.peak = a[i].peak, x.capacity = a[i].capacity, x.params = a[i].params, x.grads = a[i].grads;
			x.optimizer = a[i].optimizer, x.activations = a[i].activations, x.buffers = a[i].buffers;
			x.overhead = a[i].overhead, x.memory = a[i].memory, x.rank = a[i].rank;
			memcpy(x.note, a[i].note, sizeof x.note);
			cr_expect_eq(memcmp(&a[i], &x, sizeof x), 0, "cell %d candidate %d", cell, j);
		}
	}
	cr_expect_gt(skipped, 0);
	ta = written(&sw, a, sweep_write_markdown);
	tb = written(&sw, b, sweep_write_markdown);
	cr_expect_str_eq(ta, tb);
	free(ta);
	free(tb);
	ta = written(&sw, a, sweep_write_heatmap_data);
	tb = written(&sw, b, sweep_write_heatmap_data);
	cr_expect_str_eq(ta, tb);
	free(ta);
	free(tb);
	sweep_ctx_delete(c);
	free(a);
	free(b);
	sweep_free(&sw);
	return bounded;
}

Test(sweep, best_memory_only_changes_no_table, .timeout = 120)
{
	int nofit, bounded;

	bounded = best_only_same_tables(small, &nofit);
	cr_expect_gt(bounded, 0, "steps skipped on their bounds");
	/* Llama-2-13B under DDP: 16 bytes per parameter (ZeRO, Table 1), 208 GB >
	 * 80 GB: no fit; 2048 samples on 8 GPUs accumulate (bounds of 1 and 2
	 * micro-steps extended) */
	bounded = best_only_same_tables("[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\n"
					"models = gpt2-xl, llama-2-13b\nglobal_batch = 8, 2048\n"
					"strategies = ddp, zero3, fsdp:full_shard, fsdp:shard_grad_op\n"
					"activation_checkpointing = none, full\nprecision = bf16\n", &nofit);
	cr_expect_gt(nofit, 0);
	cr_expect_gt(bounded, 0);
	/* several nodes over InfiniBand (exposed communication: the bound's
	 * collectives), tensor parallelism, and the cost objective */
	best_only_same_tables("[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\nintra_node = nvlink3\n"
			      "inter_node = ib-hdr\nnics_per_node = 1\n[sweep]\nmodels = gpt2-xl\n"
			      "global_batch = 64, 512\nstrategies = ddp, zero2, zero3, fsdp:hybrid_shard\n"
			      "tensor_parallel = 1, 2\nnodes = 1, 4\nobjective = cost\n", &nofit);
	/* micro-batch mode (as bench/sweep-1m.ini) */
	best_only_same_tables("[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\nintra_node = nvlink4\n"
			      "inter_node = ib-ndr\nnics_per_node = 8\n[sweep]\nmodels = gpt2, gpt2-xl\n"
			      "micro_batch = 1, 4, 64\nstrategies = ddp, zero1, zero3, fsdp:full_shard\n"
			      "offload = none, optimizer\nnodes = 1, 8\n", &nofit);
	cr_expect_gt(nofit, 0, "gpt2-xl at micro-batch 64 under DDP");
	/* the largest micro-batch (auto), and time to train without failures (the
	 * bound's train_days) */
	best_only_same_tables("[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[job]\ntrain_tokens = 1e10\n"
			      "[sweep]\nmodels = gpt2, gpt2-xl\nmicro_batch = auto\nstrategies = ddp, zero2, fsdp:full_shard\n"
			      "activation_checkpointing = none, full\nobjective = time_to_train\n", &nofit);
	/* with [failures] the job model's time is not bounded: every step simulated */
	cr_expect_eq(best_only_same_tables("[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\n"
					   "intra_node = nvlink4\ninter_node = ib-ndr\nnics_per_node = 8\n"
					   "[failures]\ncatalog = llama3-h100\ntrials = 20\n[checkpoint]\n"
					   "interval_minutes = auto\nstorage_bandwidth = 100GB/s\n[job]\n"
					   "train_tokens = 1e12\n[sweep]\nmodels = gpt2-xl\nglobal_batch = 256\n"
					   "strategies = ddp, fsdp\nnodes = 1, 4\nobjective = time_to_train\n", &nofit), 0);
}

/* What one context does over every cell of the sweep text with detail (its
 * counts into k): the sweep into sw and its results into *r (cell-major), for
 * the caller to free. Returns its max-batch searches. */
static long searches(const char *text, int detail, struct sweep *sw, struct sweep_result **r,
		     struct sweep_counts *k)
{
	struct sweep_ctx *c;
	struct err e = {0};
	int cell;

	load_text(sw, text);
	*r = calloc((size_t)sw->ncell * sw->ncand, sizeof **r);
	c = sweep_ctx_create(sw);
	cr_assert(*r && c);
	sweep_ctx_detail(c, detail);
	for (cell = 0; cell < sw->ncell; cell++)
		cr_assert_eq(sweep_eval_cell(c, cell, *r + (size_t)cell * sw->ncand, &e), 0, "%s", e.msg);
	sweep_ctx_counts(c, k);
	sweep_ctx_delete(c);
	return k->emu.searches;
}

/* The tables search a candidate's memory only when its kernels alone, at any
 * micro-batch the batch per GPU could be split into, leave it able to be a
 * cell's best or runner-up (sweep_eval.c bounds_any), and bound a cell's step
 * only once its memory is searched there (cell_choices). GPT-2 XL on one node
 * of 8 A100s or on four: each one-node candidate's bound is its 8 GPUs' kernel
 * time alone, and a four-node candidate's whole step, communication included,
 * runs more than a quarter as fast per GPU, so no one-node candidate is ever
 * searched: the tables search under half the tapes that every figure needs
 * (8 against 28 when written), and show the same tables (above). With global
 * batches of 8 and 2048 and TP 1 and 2, some candidates searched at 8 are
 * ruled out at 2048 before their tapes with accumulation are needed: 12
 * searches when written, 16 when a bound made every cell's choice at once.
 * A simulated step ruled out, with every smaller micro-batch's kernels, is not
 * checked to fit (tables): 2 breakdowns in the first sweep, 3 when every
 * simulated step was checked. In the second, 5 and 6 when written; the
 * critical path in the bounds (step.h) then reordered its queue, and it makes
 * 6 either way, so only its ceiling is held there. */
Test(sweep, tables_search_memory_only_where_kernels_leave_a_chance, .timeout = 120)
{
	const char *head = "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\nintra_node = nvlink3\n"
			   "inter_node = ib-hdr\nnics_per_node = 8\n[sweep]\nmodels = gpt2-xl\n"
			   "strategies = ddp, zero2, zero3, fsdp:full_shard\nactivation_checkpointing = none, full\n"
			   "nodes = 1, 4\n";
	char text[1024];
	struct sweep sw;
	struct sweep_result *r;
	struct sweep_counts k;
	long all, tables;
	int cell, i, nofit;

	snprintf(text, sizeof text, "%sglobal_batch = 512, 1024\n", head);
	best_only_same_tables(text, &nofit);
	all = searches(text, SWEEP_ALL, &sw, &r, &k);
	free(r);
	sweep_free(&sw);
	tables = searches(text, SWEEP_TABLES, &sw, &r, &k);
	cr_expect_leq(k.emu.peaks, 2, "tables: %ld breakdowns", k.emu.peaks);
	for (cell = 0; cell < sw.ncell; cell++)
		for (i = 0; i < sw.ncand; i++) {
			const struct sweep_result *x = &r[(size_t)cell * sw.ncand + i];
			if (sw.cands[i].nodes != 1)
				continue;
			/* bounded, and never searched: a search sets the largest micro-batch */
			cr_expect_eq(x->status, SWEEP_BOUNDED, "cell %d %s", cell, sw.cands[i].label);
			cr_expect_eq(x->max_micro_batch, 0, "cell %d %s", cell, sw.cands[i].label);
		}
	cr_expect_lt(2 * tables, all + 8, "tables %ld, every figure %ld searches", tables, all);
	free(r);
	sweep_free(&sw);

	snprintf(text, sizeof text, "%sglobal_batch = 8, 2048\ntensor_parallel = 1, 2\n", head);
	best_only_same_tables(text, &nofit);
	tables = searches(text, SWEEP_TABLES, &sw, &r, &k);
	cr_expect_leq(tables, 13, "tables %ld searches", tables);
	cr_expect_leq(k.emu.peaks, 6, "tables: %ld breakdowns", k.emu.peaks);
	free(r);
	sweep_free(&sw);
}

/* Some of the n words of list (a random non-empty subset, in list order),
 * comma-separated into buf. */
static void some_of(gsl_rng *g, const char *const *list, int n, char *buf, size_t size)
{
	int i, any = 0, first = (int)gsl_rng_uniform_int(g, (unsigned long)n);

	buf[0] = 0;
	for (i = 0; i < n; i++)
		if (i == first || gsl_rng_uniform(g) < 0.4) {
			snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", any ? ", " : "", list[i]);
			any = 1;
		}
}

/* The tables against every figure (best_only_same_tables) on random sweeps
 * of global batches, from a fixed seed (GSL's MT19937, seed 16): models,
 * batches, strategies, checkpointing, TP, node counts, links and objective
 * offload drawn at random, so the tables' bounds (any micro-batch, each
 * cell's once its memory is searched, the kernels with recomputation, a step
 * ruled out before its fit check) meet cells that accumulate, candidates that
 * do not fit, settings that are not valid and batches that do not divide.
 * Each sweep is logged (--verbose) before its checks. */
Test(sweep, tables_match_every_figure_on_random_sweeps, .timeout = 300)
{
	static const char *const models[] = {"gpt2", "gpt2-medium", "gpt2-xl", "llama-tiny", "llama-2-7b"};
	static const char *const batches[] = {"8", "16", "24", "64", "96", "128", "512", "2048"};
	static const char *const strats[] = {"dp", "ddp", "zero1", "zero2", "zero3", "fsdp:full_shard",
					     "fsdp:shard_grad_op", "fsdp:hybrid_shard"};
	static const char *const ckpts[] = {"none", "selective", "full"};
	static const char *const gpus[] = {"a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb"};
	static const char *const inter[] = {"ib-hdr", "roce-100", "eth-25"};
	gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
	char text[1024], m[128], b[128], st[256], ck[64];
	int k, nofit, bounded = 0;

	cr_assert(g);
	gsl_rng_set(g, 16);
	for (k = 0; k < 24; k++) {
		/* one model (GPT-2's vocabulary of 50,257 takes no TP 2) */
		snprintf(m, sizeof m, "%s", models[gsl_rng_uniform_int(g, 5)]);
		some_of(g, batches, 8, b, sizeof b);
		some_of(g, strats, 8, st, sizeof st);
		some_of(g, ckpts, 3, ck, sizeof ck);
		snprintf(text, sizeof text,
			 "[cluster]\ngpu = %s\ngpus_per_node = 8\nintra_node = nvlink3\ninter_node = %s\n"
			 "nics_per_node = %d\n[sweep]\nmodels = %s\nglobal_batch = %s\nstrategies = %s\n"
			 "activation_checkpointing = %s\ntensor_parallel = %s\nnodes = %s\nobjective = %s\n"
			 "offload = %s\n",
			 gpus[gsl_rng_uniform_int(g, 3)], inter[gsl_rng_uniform_int(g, 3)],
			 gsl_rng_uniform(g) < 0.5 ? 1 : 8, m, b, st, ck,
			 !strncmp(m, "llama", 5) && gsl_rng_uniform(g) < 0.5 ? "1, 2" : "1",
			 gsl_rng_uniform(g) < 0.5 ? "1, 2" : "1, 4", gsl_rng_uniform(g) < 0.7 ? "throughput" : "cost",
			 gsl_rng_uniform(g) < 0.7 ? "none" : "none, optimizer");
		cr_log_info("random sweep %d:\n%s", k, text);
		bounded += best_only_same_tables(text, &nofit);
	}
	cr_expect_gt(bounded, 0, "steps skipped on their bounds");
	gsl_rng_free(g);
}

Test(sweep, ranks_by_the_objective)
{
	struct sweep sw;
	struct sweep_result *r;
	int cell, i, best, ru, nok;

	load_text(&sw, small);
	r = eval_all(&sw);
	for (cell = 0; cell < sw.ncell; cell++) {
		const struct sweep_result *c = r + cell * sw.ncand;
		int seen[64] = {0};
		nok = 0;
		for (i = 0; i < sw.ncand; i++) {
			if (c[i].status != SWEEP_OK) {
				cr_expect_eq(c[i].rank, 0);
				continue;
			}
			nok++;
			cr_assert(c[i].rank >= 1 && c[i].rank <= sw.ncand);
			seen[c[i].rank]++;
			cr_expect_eq(c[i].score, c[i].tokens_per_s, "objective throughput");
		}
		for (i = 1; i <= nok; i++)
			cr_expect_eq(seen[i], 1, "ranks 1..%d once each", nok);
		sweep_cell_best(&sw, c, &best, &ru);
		cr_assert_geq(best, 0);
		for (i = 0; i < sw.ncand; i++)
			if (c[i].status == SWEEP_OK)
				cr_expect_geq(c[best].tokens_per_s, c[i].tokens_per_s);
		if (ru >= 0) {
			cr_expect_str_neq(sw.cands[ru].strat, sw.cands[best].strat, "the runner-up is another strategy");
			for (i = 0; i < sw.ncand; i++)
				if (c[i].status == SWEEP_OK && strcmp(sw.cands[i].strat, sw.cands[best].strat))
					cr_expect_geq(c[ru].tokens_per_s, c[i].tokens_per_s);
		}
	}
	free(r);
	sweep_free(&sw);
}

Test(sweep, what_does_not_fit_or_apply)
{
	struct sweep sw;
	struct sweep_result *r;
	int best, ru, i;

	/* Llama-2-70B with DDP: mixed-precision Adam keeps 16 bytes per parameter
	 * on every GPU (ZeRO, Rajbhandari et al. 2020, Table 1): 1.1 TB > 80 GB */
	load_text(&sw, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = llama-2-70b\n"
		   "global_batch = 8\nstrategies = ddp\nprecision = bf16\n");
	r = eval_all(&sw);
	cr_expect_eq(r[0].status, SWEEP_NOFIT);
	cr_expect_gt(r[0].peak, 16.0 * 6.9e10, "16 bytes x 69B parameters");
	sweep_cell_best(&sw, r, &best, &ru);
	cr_expect_eq(best, -1);
	free(r);
	sweep_free(&sw);

	/* gpt2's 1024 learned positions; offload needs a sharded strategy; a global
	 * batch of 12 on 8 GPUs */
	load_text(&sw, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = gpt2\n"
		   "global_batch = 12, 16\nseq_len = 1024, 2048\nstrategies = ddp, zero2\noffload = none, optimizer\n");
	r = eval_all(&sw);
	i = cand_index(&sw, "ddp offload=optimizer");
	cr_expect_eq(r[i].status, SWEEP_INVALID);
	cr_expect(strstr(r[i].note, "offload") != NULL, "%s", r[i].note);
	cr_expect_eq(r[cand_index(&sw, "zero2 offload=none")].status, SWEEP_INDIVISIBLE, "12 samples on 8 GPUs");
	cr_expect_eq(r[sw.ncand + cand_index(&sw, "zero2 offload=none")].status, SWEEP_OK, "16 on 8");
	cr_expect_eq(r[sw.ncand + cand_index(&sw, "zero2 offload=optimizer")].status, SWEEP_OK);
	for (i = 0; i < sw.ncand; i++) {  /* cell (gpt2, 2048, 12) */
		cr_expect_eq(r[2 * sw.ncand + i].status, SWEEP_INVALID);
		cr_expect(strstr(r[2 * sw.ncand + i].note, "1024 learned positions") != NULL, "%s", r[2 * sw.ncand + i].note);
	}
	free(r);
	sweep_free(&sw);
}

Test(sweep, micro_batch_and_auto_modes)
{
	struct sweep sw;
	struct sweep_result *r;
	struct prediction p;

	load_text(&sw, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = gpt2-xl\n"
		   "micro_batch = auto\nstrategies = fsdp\nprecision = bf16\n");
	r = eval_all(&sw);
	cr_assert_eq(r[0].status, SWEEP_OK);
	cr_expect_eq(r[0].micro_batch, r[0].max_micro_batch);
	cr_expect_eq(r[0].grad_accum, 1);
	/* simulate's own max-batch search agrees */
	predict_text("[model]\nname = gpt2-xl\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n"
		     "[training]\nstrategy = fsdp\nprecision = bf16\n", &p);
	cr_expect_eq(r[0].max_micro_batch, p.max_micro_batch);
	free(r);
	sweep_free(&sw);

	load_text(&sw, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = gpt2-xl\n"
		   "micro_batch = 1, 1000\nstrategies = fsdp\nprecision = bf16\n");
	r = eval_all(&sw);
	cr_expect_eq(r[0].status, SWEEP_OK);
	cr_expect_eq(r[0].global_batch, 8, "micro-batch 1 on 8 GPUs, no accumulation");
	cr_expect_eq(r[1].status, SWEEP_NOFIT, "1000 samples of 1024 tokens per GPU");
	free(r);
	sweep_free(&sw);
}

/* The emulated caching allocator's fit is not monotone in the micro-batch:
 * its cache fragments differently at each size. Llama 3 8B under ZeRO-2 with
 * TP 8 on one H100 node: simulate finds 63 the largest micro-batch that fits,
 * and at 57 a peak of 80.14 GiB of 80 (56 and 60 fit); measured with
 * `simulate --set training.micro_batch=N`, the figures bench/sweep-1m.ini's
 * cells had shown as fitting. A sweep shows a micro-batch as fitting only
 * where simulate does, in both of recommend's modes. */
static const char nonmonotone[] =
	"[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\nintra_node = nvlink4\ninter_node = ib-ndr\n"
	"nics_per_node = 8\n[sweep]\nmodels = llama-3-8b\nseq_len = 2048\nmicro_batch = 56, 57, 60, 63\n"
	"strategies = zero2, fsdp:full_shard\nprecision = bf16\nactivation_checkpointing = full\n"
	"tensor_parallel = 8\n";

Test(sweep, a_micro_batch_below_the_largest_may_not_fit, .timeout = 120)
{
	struct sweep sw;
	struct sweep_result *r;
	struct prediction p;
	struct sweep_ctx *c;
	struct err e = {0};
	char text[1024];
	int cell, i, nofit = 0;

	load_text(&sw, nonmonotone);
	r = eval_all(&sw);
	i = cand_index(&sw, "zero2");
	cr_assert_eq(r[i].max_micro_batch, 63);
	for (cell = 0; cell < sw.ncell; cell++) {
		const struct sweep_result *x = &r[cell * sw.ncand + i];
		int64_t mb = sw.batches[cell];
		snprintf(text, sizeof text, "[model]\nname = llama-3-8b\nseq_len = 2048\n[cluster]\n"
			 "gpu = h100-sxm5-80gb\ngpus_per_node = 8\nintra_node = nvlink4\n[training]\n"
			 "strategy = zero2\nprecision = bf16\nactivation_checkpointing = full\n"
			 "tensor_parallel = 8\nmicro_batch = %lld\n", (long long)mb);
		predict_text(text, &p);
		cr_expect_eq(x->status == SWEEP_OK, p.mem.fits, "micro-batch %lld: sweep %d, simulate fits %d",
			     (long long)mb, x->status, p.mem.fits);
		cr_expect_eq(x->peak, p.mem.peak, "micro-batch %lld", (long long)mb);
		if (x->status == SWEEP_NOFIT) {
			nofit++;
			cr_expect(strstr(x->note, "micro-batch 57 needs 80.1 GiB though 63 fits") != NULL, "%s", x->note);
		}
	}
	cr_expect_eq(nofit, 1, "57 alone of 56, 57, 60, 63");
	/* recommend's tables check what they may show: of two strategies neither
	 * rules the other out, so ZeRO-2 at 57 is checked and does not fit */
	c = sweep_ctx_create(&sw);
	cr_assert(c);
	sweep_ctx_detail(c, SWEEP_TABLES);
	cr_assert_eq(sweep_eval_cell(c, 1, r, &e), 0, "%s", e.msg);
	cr_expect_eq(r[i].status, SWEEP_NOFIT);
	cr_expect(strstr(r[i].note, "micro-batch 57 does not fit though 63 fits") != NULL, "%s", r[i].note);
	sweep_ctx_delete(c);
	free(r);
	sweep_free(&sw);
	/* and pick the best and runner-up every candidate's figures give */
	best_only_same_tables(nonmonotone, &nofit);

	/* a global batch of 57 on its one data-parallel rank: 57 at once would
	 * be taken (<= 63) and does not fit, so it accumulates: 19 x 3, the next
	 * divisor, which simulate finds fitting */
	load_text(&sw, "[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\nintra_node = nvlink4\n[sweep]\n"
		   "models = llama-3-8b\nseq_len = 2048\nglobal_batch = 57\nstrategies = zero2\n"
		   "precision = bf16\nactivation_checkpointing = full\ntensor_parallel = 8\n");
	r = eval_all(&sw);
	cr_assert_eq(r[0].status, SWEEP_OK, "%s", r[0].note);
	cr_expect_eq(r[0].micro_batch, 19);
	cr_expect_eq(r[0].grad_accum, 3);
	predict_text("[model]\nname = llama-3-8b\nseq_len = 2048\n[cluster]\ngpu = h100-sxm5-80gb\n"
		     "gpus_per_node = 8\nintra_node = nvlink4\n[training]\nstrategy = zero2\nprecision = bf16\n"
		     "activation_checkpointing = full\ntensor_parallel = 8\nmicro_batch = 19\ngrad_accum = 3\n", &p);
	cr_expect(p.mem.fits);
	cr_expect_eq(r[0].peak, p.mem.peak);
	free(r);
	sweep_free(&sw);
}

/* objective = time_to_train with [failures]: each fitting candidate's time is
 * the job model's mean wall time at its step time, what simulate reports for
 * the same scenario (jobrun.h); more GPUs fail more often, so the ETTR falls
 * with the node count. */
Test(sweep, time_to_train_runs_the_job_model, .timeout = 60)
{
	static const char common[] =
		"[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\nintra_node = nvlink4\ninter_node = ib-ndr\n"
		"nics_per_node = 8\n%s"
		"[failures]\ncatalog = llama3-h100\ntrials = 20\n[checkpoint]\ninterval_minutes = auto\n"
		"storage_bandwidth = 100GB/s\n[job]\ntrain_tokens = 1e12\n";
	struct sweep sw;
	struct sweep_result *r;
	struct prediction p;
	char text[2048], train[256];
	int i;

	snprintf(text, sizeof text, common, "");
	strcat(text, "[sweep]\nmodels = llama-2-7b\nglobal_batch = 1024\nseq_len = 2048\nstrategies = fsdp\n"
	       "precision = bf16\nnodes = 4, 64\nobjective = time_to_train\n");
	load_text(&sw, text);
	r = eval_all(&sw);
	cr_assert_eq(r[0].status, SWEEP_OK);
	cr_assert_eq(r[1].status, SWEEP_OK);
	for (i = 0; i < 2; i++) {
		cr_expect_gt(r[i].train_days, 1e12 / r[i].tokens_per_s / 86400, "failures cost time");
		cr_expect(r[i].ettr > 0 && r[i].ettr < 1);
		cr_expect_eq(r[i].score, -r[i].train_days);
	}
	cr_expect_lt(r[1].ettr, r[0].ettr, "512 GPUs fail more often than 32");
	snprintf(train, sizeof train, "[model]\nname = llama-2-7b\nseq_len = 2048\n[training]\nstrategy = fsdp\n"
		 "precision = bf16\nmicro_batch = %lld\ngrad_accum = %lld\n",
		 (long long)r[1].micro_batch, (long long)r[1].grad_accum);
	snprintf(text, sizeof text, common, "nodes = 64\n");
	strcat(text, train);
	predict_text(text, &p);
	cr_expect(fabs(r[1].train_days / p.job.wall_days - 1) < 1e-9, "%.6f vs simulate %.6f days",
		  r[1].train_days, p.job.wall_days);
	cr_expect(fabs(r[1].ettr - p.job.ettr) < 1e-12);
	free(r);
	sweep_free(&sw);
}

/* What the sweep assumes to skip hopeless candidates: gradient accumulation
 * never lowers the peak (the tape with it is the step without it plus a
 * micro-step before the last, holding the accumulated gradients), to within
 * what the emulated caching allocator's reuse of other blocks can change in
 * its reserved bytes: one 20 MiB segment (kLargeBuffer). */
Test(sweep, accumulation_never_lowers_the_peak)
{
	static const char *const strat[] = {"dp", "ddp", "zero1", "zero2", "zero3", "fsdp"};
	struct prediction p1, p2;
	char text[512];
	size_t i;
	int ckpt;

	for (i = 0; i < sizeof strat / sizeof strat[0]; i++)
		for (ckpt = 0; ckpt < 2; ckpt++) {
			snprintf(text, sizeof text, "[model]\nname = gpt2-xl\n[cluster]\ngpu = a100-sxm4-80gb\n"
				 "gpus_per_node = 8\n[training]\nstrategy = %s\nframework = %s\nprecision = bf16\n"
				 "activation_checkpointing = %s\nmicro_batch = 2\ngrad_accum = 1\n", strat[i],
				 i >= 2 && i <= 4 ? "deepspeed" : "pytorch", ckpt ? "full" : "none");
			predict_text(text, &p1);
			strstr(text, "grad_accum = 1")[13] = '4';
			predict_text(text, &p2);
			cr_expect_geq(p2.mem.peak + 20971520, p1.mem.peak, "%s ckpt %d: %.0f with accumulation < %.0f without",
				      strat[i], ckpt, p2.mem.peak, p1.mem.peak);
		}
}

/* Writes text to file (replacing it). */
static void write_file(const char *file, const char *text)
{
	FILE *f = fopen(file, "w");

	cr_assert(f, "%s", file);
	fputs(text, f);
	fclose(f);
}

/* Copies the file from (a path from the repository root) to dir/to. */
static void copy_into(const char *dir, const char *to, const char *from)
{
	char cmd[512];

	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s/%s')\" && cp '%s' '%s/%s'", dir, to, from, dir, to);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A team's own model as a Hugging Face config.json, and a model file, both
 * named relative to the sweep file (which lives in another folder than the
 * working directory): GPT-2's config gives exactly the catalog's gpt2
 * (124,439,808 parameters, README "Hugging Face config.json"), so every
 * candidate of its cells predicts exactly what the catalog entry's do. */
Test(sweep, hf_configs_and_model_files_relative_to_the_sweep_file)
{
	char dir[64], file[128], cmd[128];
	struct sweep_result *r;
	struct sweep sw;
	struct err e = {0};
	int i;

	snprintf(dir, sizeof dir, "/tmp/shardcast-sweep-hf-%d", (int)getpid());
	copy_into(dir, "own/gpt2/config.json", "tests/data/hf/gpt2/config.json");
	copy_into(dir, "own/medium.ini", "models/nn/gpt2-medium.ini");
	snprintf(file, sizeof file, "%s/sweeps/s.ini", dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s/sweeps'", dir);
	cr_assert_eq(system(cmd), 0);
	write_file(file, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = gpt2, ../own/medium.ini\n"
		   "hf_configs = ../own/gpt2\nglobal_batch = 8, 512\nstrategies = ddp, zero3, fsdp\nprecision = bf16\n");
	cr_assert_eq(sweep_load(&sw, file, &e), 0, "%s", e.msg);
	cr_assert_eq(sw.nmodels, 3);
	cr_expect_str_eq(sw.models[1].name, "../own/medium.ini", "named as listed");
	cr_expect_str_eq(sw.models[2].name, "../own/gpt2");
	cr_expect_eq(sw.model_params[2], 124439808.0);
	cr_expect_eq(sw.model_params[1], 354823168.0, "gpt2-medium (Hugging Face: 354,823,168)");
	r = eval_all(&sw);
	for (i = 0; i < 2 * sw.ncand; i++) {  /* model 0's cells against model 2's */
		const struct sweep_result *a = &r[i], *b = &r[(size_t)4 * sw.ncand + i];
		cr_expect_eq(a->status, b->status, "%d", i);
		cr_expect_eq(a->micro_batch, b->micro_batch, "%d", i);
		cr_expect_eq(a->peak, b->peak, "%d", i);
		cr_expect_eq(a->tokens_per_s, b->tokens_per_s, "%d", i);
	}
	cr_expect_eq(r[0].status, SWEEP_OK);
	free(r);
	sweep_free(&sw);

	/* only a config: the sweep's base scenario loads it as [model] hf_config */
	write_file(file, "[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nhf_configs = ../own/gpt2/config.json\n"
		   "global_batch = 8\nstrategies = ddp\nprecision = bf16\n");
	cr_assert_eq(sweep_load(&sw, file, &e), 0, "%s", e.msg);
	cr_expect_eq(sw.nmodels, 1);
	cr_expect_eq(sw.base.model.layers, 12);
	sweep_free(&sw);

	/* neither models nor hf_configs; a config that is not there */
	write_file(file, "[cluster]\ngpu = a100-sxm4-80gb\n[sweep]\nglobal_batch = 8\nhf_configs = own/gpt2\n");
	cr_expect_eq(sweep_load(&sw, file, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "s.ini:5: [sweep] hf_configs: ") && strstr(e.msg, "sweeps/own/gpt2: no such file"),
		  "%s", e.msg);
	sweep_free(&sw);
	err_clear(&e);
	write_file(file, "[cluster]\ngpu = a100-sxm4-80gb\n[sweep]\nglobal_batch = 8\n");
	cr_expect_eq(sweep_load(&sw, file, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "give models") && strstr(e.msg, "or hf_configs"), "%s", e.msg);
	sweep_free(&sw);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

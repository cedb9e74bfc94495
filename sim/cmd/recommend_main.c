/*
 * recommend_main.c — `recommend SWEEP.ini`: which strategy to use for each
 * model and batch size on a cluster (see sweep.h for the sweep file).
 *
 * Under `mpirun -np N` the cells are split in contiguous blocks across the
 * ranks (a block keeps a model's cells together, so each rank builds a model's
 * graphs and tapes once), each rank evaluates its block, and rank 0 gathers
 * the fixed-size results (MPI_Gatherv) in cell order and writes every output.
 * Without mpirun the process is a world of one. The outputs depend only on the
 * results, so they are the same bytes whatever the number of ranks.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calib.h"
#include "progress.h"
#include "store.h"
#include "sweep.h"

#include "heatmap_gp.h"  /* generated from results/plots/heatmap.gp: heatmap_gp[] */
#include "heap.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: recommend SWEEP.ini [options]\n"
		"       mpirun -np N recommend SWEEP.ini [options]\n"
		"\n"
		"For each cell of the sweep (model x sequence length x batch) runs the memory and\n"
		"step models for every candidate (strategies x precision x checkpointing x offload\n"
		"x tensor_parallel x nodes), drops those that do not fit, ranks the rest and prints\n"
		"a Markdown table: the best strategy per cell, its throughput, the runner-up (best\n"
		"other strategy) and the margin, or 'none fits'. Under PyTorch's caching allocator a\n"
		"micro-batch below the largest that fits may not fit (its cache fragments differently\n"
		"at each size), so the micro-batch a candidate is shown at is replayed to check it.\n"
		"\n"
		"A sweep file is a scenario's [cluster] (and fixed [training] keys such as optimizer\n"
		"or framework; [job] train_tokens for time_to_train) plus a [sweep] section:\n"
		"  [sweep]\n"
		"  models = gpt2, gpt2-xl, llama-2-*:5B..15B   ; names, paths, GLOB:MIN..MAX params\n"
		"  hf_configs = my-model/config.json           ; Hugging Face configs (a team's own models)\n"
		"  global_batch = 8, 32, 128                   ; or micro_batch = 1, 4 | auto\n"
		"  seq_len = 1024\n"
		"  strategies = ddp, zero1, zero2, zero3, fsdp:full_shard, fsdp:shard_grad_op\n"
		"  precision = bf16\n"
		"  activation_checkpointing = none, full\n"
		"  offload = none\n"
		"  tensor_parallel = 1\n"
		"  nodes = 1, 2, 4                             ; default: [cluster] nodes\n"
		"  objective = throughput                      ; | cost | time_to_train\n"
		"A file with [cluster] and no [sweep] gets a default sweep of that cluster. Paths in\n"
		"the file (models, hf_configs, [cluster] entries given as files) are relative to its\n"
		"folder.\n"
		"\n"
		"options:\n"
		"  --md FILE      write the Markdown table to FILE too\n"
		"  --csv FILE     every candidate of every cell as CSV\n"
		"  --json FILE    every candidate of every cell as JSON\n"
		"  --plot F.png   a heatmap of the winner per cell: F.png and F.svg (gnuplot)\n"
		"  --db FILE      record the run and its candidates in this SQLite database, and use the\n"
		"                 device's latest calibration in it (the header names it); without --db no\n"
		"                 database is read\n"
		"  --no-calibration  with --db, keep the catalog's efficiencies\n"
		"  --quiet        do not print the table on stdout\n"
		"  --stats        print cells, candidates, step simulations, task graphs bounded\n"
		"                 and candidates bounded by their kernels alone, those ruled out\n"
		"                 before their memory was searched, tapes built (and those\n"
		"                 cut short: not one sample fits), tapes restored from a\n"
		"                 copy kept instead of built again, the rate and what the\n"
		"                 allocator's emulation did (max-batch searches, replays, events\n"
		"                 replayed and copies of periodic runs made at once instead,\n"
		"                 peaks) on stderr\n"
		"  --no-progress  no progress bar (shown on stderr when it is a terminal)\n"
		"  --version      print the version and exit\n"
		"  -h, --help     this help\n"
		"\n"
		"Every candidate's figures are computed only for --csv, --json and --db. The tables\n"
		"show each cell's best and runner-up: without those options only the best gets its\n"
		"memory breakdown (a replay of its allocation tape), and a candidate's step is\n"
		"simulated only when a lower bound on its time (each stream's least busy time) does\n"
		"not already put it behind the best and the runner-up (the same tables).\n"
		"\n"
		"exit status: 0 success, 2 bad input (the message names file:line and the key), 1 internal error\n");
}

struct opts {
	const char *sweep, *md, *csv, *json, *plot, *db;
	int quiet, stats, progress, no_calib;
};

/* Whether an output path's folder exists and can be written to: checked before
 * the sweep runs rather than after. */
static int writable(const char *path, int verbose)
{
	char dir[PATH_MAX];
	const char *slash;

	if (!path)
		return 1;
	slash = strrchr(path, '/');
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	if (access(dir, W_OK) == 0)
		return 1;
	if (verbose)
		fprintf(stderr, "recommend: error: %s: cannot write: %s\n", path, strerror(errno));
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o, int verbose)
{
	static const struct option longs[] = {
		{"md", required_argument, NULL, 'm'}, {"csv", required_argument, NULL, 'c'},
		{"json", required_argument, NULL, 'j'}, {"plot", required_argument, NULL, 'p'},
		{"db", required_argument, NULL, 'd'}, {"quiet", no_argument, NULL, 'q'},
		{"stats", no_argument, NULL, 's'}, {"no-progress", no_argument, NULL, 'n'},
		{"no-calibration", no_argument, NULL, 'N'},
		{"version", no_argument, NULL, 'V'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	int c;

	o->progress = 1;
	opterr = verbose;
	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'm': o->md = optarg; break;
		case 'c': o->csv = optarg; break;
		case 'j': o->json = optarg; break;
		case 'p': o->plot = optarg; break;
		case 'd': o->db = optarg; break;
		case 'q': o->quiet = 1; break;
		case 's': o->stats = 1; break;
		case 'n': o->progress = 0; break;
		case 'N': o->no_calib = 1; break;
		case 'V': if (verbose) printf("shardcast recommend %s\n", store_version()); return -1;
		case 'h': if (verbose) usage(stdout); return -1;
		default: if (verbose) usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		if (verbose) {
			fprintf(stderr, "recommend: expected one sweep file%s\n\n", optind < argc - 1 ? ", got several" : "");
			usage(stderr);
		}
		return 2;
	}
	o->sweep = argv[optind];
	if (!writable(o->md, verbose) || !writable(o->csv, verbose) || !writable(o->json, verbose) ||
	    !writable(o->plot, verbose))
		return 2;
	if (o->plot) {
		size_t l = strlen(o->plot);
		if (l < 5 || strcmp(o->plot + l - 4, ".png")) {
			if (verbose)
				fprintf(stderr, "recommend: --plot %s: expected a file name ending in .png (the SVG goes beside it)\n", o->plot);
			return 2;
		}
	}
	return 0;
}

/* ---- outputs ---------------------------------------------------------------------------- */

typedef int (*writer)(const struct sweep *, const struct sweep_result *, FILE *);

/* Writes path through path.tmp and a rename: never half a file. */
static int write_file(const char *path, writer w, const struct sweep *sw, const struct sweep_result *r,
		      const char *text, struct err *e)
{
	char tmp[PATH_MAX];
	FILE *f;
	int ok;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return err_set(e, ERR_INPUT, path, 0, "cannot write: %s", strerror(errno));
	ok = w ? w(sw, r, f) == 0 : fputs(text, f) >= 0;
	if (!w && ok && text[0] && text[strlen(text) - 1] != '\n')
		ok = fputc('\n', f) != EOF;  /* JSON: end with a newline like the Markdown */
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path)) {
		int rc = err_set(e, ERR_SYSTEM, path, 0, "writing failed: %s", strerror(errno));
		remove(tmp);
		return rc;
	}
	return 0;
}

/* The heatmap: the data to a temporary file, the script (heatmap.gp, compiled in)
 * with its variables to gnuplot's stdin. */
static int plot(const struct opts *o, const struct sweep *sw, const struct sweep_result *r, struct err *e)
{
	char data[] = "/tmp/shardcast-heatmap-XXXXXX", base[PATH_MAX], title[1600], nodes[CFG_STR_MAX + 8];
	const struct scenario *b = &sw->base;
	FILE *f, *g;
	int fd, st, rc = 0;

	fd = mkstemp(data);
	if (fd < 0 || !(f = fdopen(fd, "w")))
		return err_set(e, ERR_SYSTEM, NULL, 0, "cannot create a temporary file for the plot: %s", strerror(errno));
	sweep_write_heatmap_data(sw, r, f);
	if (fclose(f)) {
		remove(data);
		return err_set(e, ERR_SYSTEM, data, 0, "writing the plot data failed: %s", strerror(errno));
	}
	snprintf(base, sizeof base, "%.*s", (int)(strlen(o->plot) - 4), o->plot);
	if (sw->set.nodes[0])
		snprintf(nodes, sizeof nodes, "%s nodes", sw->set.nodes);
	else
		snprintf(nodes, sizeof nodes, "%lld node%s", (long long)b->s.cluster.nodes, b->s.cluster.nodes > 1 ? "s" : "");
	snprintf(title, sizeof title, "Best strategy by %s: %s x %lld %s, %s%s%s", sweep_objective_name(sw->set.objective),
		 nodes, (long long)b->s.cluster.gpus_per_node, b->gpu.name, b->intra.name,
		 b->s.cluster.nodes > 1 || sw->set.nodes[0] ? ", " : "",
		 b->s.cluster.nodes > 1 || sw->set.nodes[0] ? b->inter.name : "");
	g = popen("gnuplot 2>&1", "w");
	if (!g) {
		remove(data);
		return err_set(e, ERR_SYSTEM, NULL, 0, "cannot run gnuplot: %s (make deps installs gnuplot-nox)", strerror(errno));
	}
	fprintf(g, "datafile = '%s'\noutbase = '%s'\nplottitle = '%s'\nncols = %d\nnrows = %d\n%s", data, base,
		title, sw->nbatch, sw->nmodels * sw->nseq, heatmap_gp);
	st = pclose(g);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = err_set(e, ERR_SYSTEM, o->plot, 0, "gnuplot failed (exit %d); is gnuplot installed? (make deps)",
			     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	remove(data);
	return rc;
}

/* ---- the results store ---------------------------------------------------------------------- */

struct record_ctx {
	const struct sweep *sw;
	const struct sweep_result *r;
	const char *md, *heat;
};

static void bind_double_or_null(sqlite3_stmt *q, int i, int have, double v)
{
	if (have)
		sqlite3_bind_double(q, i, v);
	else
		sqlite3_bind_null(q, i);
}

static int add_output(sqlite3 *db, long long id, const char *format, const char *body)
{
	sqlite3_stmt *q;
	int rc;

	if (!body)
		return 0;
	if (sqlite3_prepare_v2(db, "INSERT INTO outputs(run_id, format, body) VALUES (?, ?, ?)", -1, &q,
			       NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_text(q, 2, format, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, body, -1, SQLITE_STATIC);
	rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -1;
	sqlite3_finalize(q);
	return rc;
}

/* The candidates rows, the Markdown and the heatmap data (for make plots),
 * inside the run's transaction. */
static int record_candidates(sqlite3 *db, long long id, void *vctx)
{
	const struct record_ctx *c = vctx;
	const struct sweep *sw = c->sw;
	sqlite3_stmt *q = NULL;
	int cell, i, model, seq, batch, n, rc = 0;

	if (sqlite3_prepare_v2(db, "INSERT INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
			       "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &q, NULL) != SQLITE_OK)
		return -1;
	for (cell = 0; !rc && cell < sw->ncell; cell++) {
		sweep_cell_axes(sw, cell, &model, &seq, &batch);
		for (i = 0; !rc && i < sw->ncand; i++) {
			const struct sweep_result *x = &c->r[(size_t)cell * sw->ncand + i];
			const struct sweep_cand *k = &sw->cands[i];
			int mem = sweep_has(x, SWEEP_HAS_MEMORY, 0), ok = sweep_has(x, SWEEP_HAS_STEP, 0);
			n = 1;
			sqlite3_reset(q);
			sqlite3_bind_int64(q, n++, id);
			sqlite3_bind_int(q, n++, cell);
			sqlite3_bind_int(q, n++, i);
			sqlite3_bind_text(q, n++, sw->models[model].name, -1, SQLITE_STATIC);
			sqlite3_bind_double(q, n++, sw->model_params[model]);
			sqlite3_bind_int64(q, n++, sw->seqs[seq]);
			sqlite3_bind_int64(q, n++, sw->batches[batch]);
			sqlite3_bind_text(q, n++, k->strat, -1, SQLITE_STATIC);
			sqlite3_bind_text(q, n++, k->label, -1, SQLITE_STATIC);
			sqlite3_bind_text(q, n++, scenario_precision_name(k->precision), -1, SQLITE_STATIC);
			sqlite3_bind_text(q, n++, scenario_enum_name("training", "activation_checkpointing", k->recompute), -1, SQLITE_STATIC);
			sqlite3_bind_text(q, n++, scenario_enum_name("training", "offload", k->offload), -1, SQLITE_STATIC);
			sqlite3_bind_int64(q, n++, k->tp);
			sqlite3_bind_int64(q, n++, k->nodes);
			sqlite3_bind_int64(q, n++, x->world);
			sqlite3_bind_text(q, n++, sweep_status_name(x->status), -1, SQLITE_STATIC);
			bind_double_or_null(q, n++, sweep_has(x, SWEEP_HAS_SET, x->rank), x->rank);
			bind_double_or_null(q, n++, ok, (double)x->micro_batch);
			bind_double_or_null(q, n++, ok, (double)x->grad_accum);
			bind_double_or_null(q, n++, ok, (double)x->global_batch);
			bind_double_or_null(q, n++, mem, (double)x->max_micro_batch);
			bind_double_or_null(q, n++, mem, x->peak);
			bind_double_or_null(q, n++, mem, x->capacity);
			bind_double_or_null(q, n++, mem, x->params);
			bind_double_or_null(q, n++, mem, x->grads);
			bind_double_or_null(q, n++, mem, x->optimizer);
			bind_double_or_null(q, n++, mem, x->activations);
			bind_double_or_null(q, n++, mem, x->buffers);
			bind_double_or_null(q, n++, mem, x->overhead);
			bind_double_or_null(q, n++, ok, x->step_time);
			bind_double_or_null(q, n++, ok, x->tokens_per_s);
			bind_double_or_null(q, n++, ok, x->mfu);
			bind_double_or_null(q, n++, ok, x->exposed_comm);
			bind_double_or_null(q, n++, ok, x->gpu_hours_per_mtok);
			bind_double_or_null(q, n++, sweep_has(x, SWEEP_HAS_SET, x->train_days), x->train_days);
			bind_double_or_null(q, n++, sweep_has(x, SWEEP_HAS_SET, x->ettr), x->ettr);
			bind_double_or_null(q, n++, ok, x->score);
			sqlite3_bind_text(q, n++, x->note, -1, SQLITE_STATIC);
			rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -1;
		}
	}
	sqlite3_finalize(q);
	if (!rc)
		rc = add_output(db, id, "markdown", c->md);
	if (!rc)
		rc = add_output(db, id, "heatmap", c->heat);
	return rc;
}

static int record(const struct opts *o, const struct sweep *sw, const struct sweep_result *r, const char *json,
		  const char *md, struct err *e)
{
	struct record_ctx ctx = {sw, r, md, NULL};
	struct store_run run = {0};
	struct store st;
	char summary[256], *heat = NULL;
	size_t hlen = 0;
	FILE *hf = open_memstream(&heat, &hlen);
	int cell, i, fit = 0, rc;

	if (!hf)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	sweep_write_heatmap_data(sw, r, hf);
	fclose(hf);
	ctx.heat = heat;

	for (cell = 0; cell < sw->ncell; cell++)
		for (i = 0; i < sw->ncand; i++)
			fit += r[(size_t)cell * sw->ncand + i].rank == 1;
	snprintf(summary, sizeof summary, "{\"sweep\": {\"cells\": %d, \"candidates\": %d, \"cells_with_a_fit\": %d}}",
		 sw->ncell, sw->ncand, fit);
	run.command = "recommend";
	run.scenario_path = sw->file;
	run.scenario_text = sw->text;
	run.scenario_hash = sw->hash;
	run.device = sw->base.gpu.name;
	run.predicted_json = summary;
	run.output_json = json;
	run.extra = record_candidates;
	run.extra_ctx = &ctx;
	rc = store_open(&st, o->db, e);
	if (!rc)
		rc = store_add_run(&st, &run, NULL, e);
	store_close(&st);
	free(heat);
	return rc;
}

/* Rank 0's outputs of the gathered results. */
static int outputs(const struct opts *o, const struct sweep *sw, const struct sweep_result *r, struct err *e)
{
	char *json = o->json || o->db ? sweep_json(sw, r) : NULL, *md = NULL;
	size_t mdlen = 0;
	FILE *mf = open_memstream(&md, &mdlen);
	int rc = 0;

	if ((!json && (o->json || o->db)) || !mf)
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory writing the outputs");
	if (mf) {
		sweep_write_markdown(sw, r, mf);
		fclose(mf);
	}
	if (!rc && !o->quiet)
		fputs(md, stdout);
	if (!rc && o->md)
		rc = write_file(o->md, NULL, sw, r, md, e);
	if (!rc && o->csv)
		rc = write_file(o->csv, sweep_write_csv, sw, r, NULL, e);
	if (!rc && o->json)
		rc = write_file(o->json, NULL, sw, r, json, e);
	if (!rc && o->plot)
		rc = plot(o, sw, r, e);
	if (!rc && o->db)
		rc = record(o, sw, r, json, md, e);
	free(json);
	free(md);
	return rc;
}

/* ---- the sweep over ranks ------------------------------------------------------------------- */

/* Applies the device's latest calibration in db to the sweep's cluster (every
 * candidate copies it); sw->calibrated says whether there was one. */
static int calibrate(struct sweep *sw, const char *db, struct err *e)
{
	struct calib before, after;
	int rc;

	calib_get(&sw->base, &before);
	rc = calib_apply_latest(db, &sw->base, e);
	calib_get(&sw->base, &after);
	sw->calibrated = memcmp(&before, &after, sizeof before) != 0;
	return rc;
}

/* Evaluates cells [lo, hi) into out; counts into k. */
static int evaluate(const struct opts *o, const struct sweep *sw, int lo, int hi, struct sweep_result *out,
		    struct progress *p, const char *note, struct sweep_counts *k, struct err *e)
{
	struct sweep_ctx *c = sweep_ctx_create(sw);
	int cell, rc = 0;

	if (!c)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
	sweep_ctx_cells(c, lo, hi);
	/* every candidate's breakdown only for the outputs that export it */
	sweep_ctx_detail(c, o->csv || o->json || o->db ? SWEEP_ALL : SWEEP_TABLES);
	for (cell = lo; !rc && cell < hi; cell++) {
		rc = sweep_eval_cell(c, cell, out + (size_t)(cell - lo) * sw->ncand, e);
		progress_show(p, cell - lo + 1, hi - lo, "cells", note);
	}
	progress_end(p);
	sweep_ctx_counts(c, k);
	sweep_ctx_delete(c);
	return rc;
}

static int run(const struct opts *o, int me, int nranks, struct err *e)
{
	struct sweep sw;
	struct sweep_result *mine = NULL, *all = NULL;
	struct sweep_counts k = {0}, sum;
	struct progress p = {0};
	int rc, worst, lo, hi, i, *counts = NULL, *displs = NULL;
	size_t rec = sizeof(struct sweep_result);
	double t0 = progress_now();

	rc = sweep_load(&sw, o->sweep, e);
	if (!rc)  /* the device's latest calibration (validate --calibrate), as simulate */
		rc = calibrate(&sw, o->no_calib ? NULL : o->db, e);
	if (rc)
		goto out;  /* every rank reads the same files and fails alike */
	lo = (int)((long long)sw.ncell * me / nranks);
	hi = (int)((long long)sw.ncell * (me + 1) / nranks);
	if ((double)sw.ncell * sw.ncand * rec > INT_MAX) {
		rc = err_set(e, ERR_INPUT, sw.file, 0, "%d cells x %d candidates is more than one gather can hold; "
			     "split the sweep", sw.ncell, sw.ncand);
		goto out;
	}
	mine = calloc((size_t)(hi - lo) * sw.ncand + 1, rec);
	if (!mine) {
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
		goto out;
	}
	progress_start(&p, me == 0 && o->progress, 0);
	rc = evaluate(o, &sw, lo, hi, mine, &p, nranks > 1 ? "(rank 0's share)" : NULL, &k, e);
	if (rc)
		fprintf(stderr, "recommend: %s%d: error: %s\n", nranks > 1 ? "rank " : "", me, e->msg);
	MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (worst) {
		rc = worst;
		e->msg[0] = 0;  /* printed by the rank that failed */
		goto out;
	}
	if (nranks == 1) {  /* the results are all here: no copy (1M candidates: 363 MB, faulted in twice) */
		all = mine;
		mine = NULL;
	} else if (me == 0) {
		all = malloc((size_t)sw.ncell * sw.ncand * rec + 1);
		counts = malloc((size_t)nranks * sizeof *counts);
		displs = malloc((size_t)nranks * sizeof *displs);
		if (!all || !counts || !displs) {
			fprintf(stderr, "recommend: out of memory gathering the results\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		for (i = 0; i < nranks; i++) {
			int a = (int)((long long)sw.ncell * i / nranks), b = (int)((long long)sw.ncell * (i + 1) / nranks);
			displs[i] = (int)((size_t)a * sw.ncand * rec);
			counts[i] = (int)((size_t)(b - a) * sw.ncand * rec);
		}
	}
	if (nranks > 1)
		MPI_Gatherv(mine, (int)((size_t)(hi - lo) * sw.ncand * rec), MPI_BYTE, all, counts, displs, MPI_BYTE,
			    0, MPI_COMM_WORLD);
	/* every count (the struct is longs only: the first five alone were summed,
	 * and graphs showed 0) */
	_Static_assert(sizeof k % sizeof(long) == 0, "sweep_counts holds longs");
	MPI_Reduce(&k, &sum, (int)(sizeof k / sizeof(long)), MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (me == 0) {
		rc = outputs(o, &sw, all, e);
		if (o->stats)
			fprintf(stderr, "recommend: %d cells x %d candidates on %d rank%s: %ld evaluated against memory, "
				"%ld step simulations (%ld task graphs bounded instead, %ld candidates by their kernels "
				"alone, %ld ruled out before their memory was searched), %ld tapes (%ld cut short: not "
				"one sample fits; %ld more restored from a copy kept), %ld graphs in %.2f s "
				"(%.0f candidates/s)\n", sw.ncell, sw.ncand, nranks,
				nranks > 1 ? "s" : "", sum.candidates, sum.steps, sum.bounds, sum.kernel_bounds,
				sum.unsearched, sum.tapes, sum.tapes_cut, sum.tapes_kept, sum.graphs, progress_now() - t0,
				sum.candidates / (progress_now() - t0));
		if (o->stats) {
			char line[400];
			sweep_emu_text(line, sizeof line, &sum.emu);
			fprintf(stderr, "recommend: allocator emulation: %s\n", line);
		}
	}
	MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
out:
	free(mine);
	free(all);
	free(counts);
	free(displs);
	sweep_free(&sw);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = {0};
	struct err e = {0};
	int me = 0, nranks = 1, rc;

	heap_keep();  /* every candidate's evaluation reuses one heap (heap.h) */
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	rc = parse_args(argc, argv, &o, me == 0);
	if (!rc)
		rc = run(&o, me, nranks, &e);
	if (rc > 0 && me == 0 && e.msg[0])
		fprintf(stderr, "recommend: error: %s\n", e.msg);
	fflush(stdout);
	MPI_Finalize();
	return rc < 0 ? 0 : rc;
}

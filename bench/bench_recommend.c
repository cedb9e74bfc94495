/*
 * bench_recommend.c — speed of recommend (`make bench`): a sweep's candidate
 * configurations, each with its memory timeline (the allocation tape replayed
 * through the emulated caching allocator at the batches the max-batch search
 * tries) and, when it fits, a step simulation. Timed twice: with every
 * candidate's memory figures (the breakdown at its peak: what --csv, --json and
 * --db export) and with the best's only (what recommend's tables show,
 * sweep_ctx_detail). Target (issue 16): >= 200,000 candidates per second on
 * one core.
 *
 * Usage: bench_recommend SWEEP.ini [RUNS] (run from the repository root; RUNS
 * defaults to 3, 1 under valgrind --tool=callgrind). Loading the
 * sweep (reading the catalogs) is outside the timing; building graphs and tapes
 * is inside. CPU time of this process, one core; the best of RUNS runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sweep.h"
#include "heap.h"

#define TARGET 200000  /* candidates per CPU-second (issue 16) */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The best of runs sweeps of sw with memory figures for which (enum
 * sweep_memory), each with a fresh context (graphs and tapes built again): the
 * machines are shared, and the best run is the one the neighbours disturbed
 * least. *t = its CPU seconds; k and fits of the last run. Returns 0 or fills e. */
static int timed(const struct sweep *sw, int which, int runs, struct sweep_result *r, double *t,
		 struct sweep_counts *k, int *fits, struct err *e)
{
	struct sweep_ctx *c;
	double t0;
	int cell, rc = 0, i, run;

	for (run = 0; run < runs && !rc; run++) {
		c = sweep_ctx_create(sw);
		if (!c)
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of memory");
		sweep_ctx_detail(c, which);
		*fits = 0;
		t0 = now();
		for (cell = 0; cell < sw->ncell && !rc; cell++) {
			rc = sweep_eval_cell(c, cell, r, e);
			for (i = 0; i < sw->ncand; i++)
				*fits += r[i].rank == 1;
		}
		t0 = now() - t0;
		if (run == 0 || t0 < *t)
			*t = t0;
		sweep_ctx_counts(c, k);
		sweep_ctx_delete(c);
	}
	return rc;
}

/* What the allocator's emulation did in one sweep (sweep.h sweep_emu_text). */
static void emu_line(const char *what, const struct mem_emu_counts *e)
{
	char line[400];

	sweep_emu_text(line, sizeof line, e);
	printf("bench recommend:   allocator emulation, %s: %s\n", what, line);
}

int main(int argc, char **argv)
{
	struct sweep sw;
	struct sweep_result *r;
	struct sweep_counts k, kb;
	struct err e = {0};
	double t = 0, tb = 0;
	int rc, fits = 0, runs = 3;

	heap_keep();  /* as bin/recommend does (heap.h) */
	if (argc == 3)
		runs = atoi(argv[2]);
	if ((argc != 2 && argc != 3) || runs < 1) {
		fprintf(stderr, "usage: bench_recommend SWEEP.ini [RUNS]\n");
		return 2;
	}
	rc = sweep_load(&sw, argv[1], &e);
	if (rc) {
		fprintf(stderr, "bench_recommend: %s\n", e.msg);
		sweep_free(&sw);
		return rc;
	}
	r = calloc((size_t)sw.ncand, sizeof *r);
	if (!r)
		return 1;
	rc = timed(&sw, SWEEP_ALL, runs, r, &t, &k, &fits, &e);
	if (!rc)
		rc = timed(&sw, SWEEP_TABLES, runs, r, &tb, &kb, &fits, &e);
	if (rc) {
		fprintf(stderr, "bench_recommend: %s\n", e.msg);
		return rc;
	}
	printf("bench recommend: %s: %d cells x %d candidates, %ld evaluated (memory), %ld step simulations "
	       "(%ld task graphs built, the others re-timed at another micro-batch)\n",
	       argv[1], sw.ncell, sw.ncand, k.candidates, k.steps, k.step_graphs);
	printf("bench recommend:   %ld allocation tapes (%ld of them replayed from a recorded walk) and %ld graphs built; "
	       "%d cells with a fit; %.0f events per step simulation; the tables: %ld tapes, %ld cut short (not one "
	       "sample fits), %ld restored from a copy kept\n",
	       k.tapes, k.tapes_replayed, k.graphs, fits, (double)k.events / (double)k.steps, kb.tapes, kb.tapes_cut,
	       kb.tapes_kept);
	emu_line("every figure", &k.emu);
	emu_line("the tables", &kb.emu);
	printf("bench recommend: sweep of %ld candidates, every one's memory figures (--csv, --json, --db): "
	       "%.3f s %8.0f candidates/s\n", k.candidates, t, k.candidates / t);
	printf("bench recommend: sweep of %ld candidates, what recommend's tables show (the best's memory figures, "
	       "the steps their bounds do not rule out: %ld simulated, %ld task graphs bounded, %ld candidates "
	       "by their kernels alone, %ld ruled out before their memory was searched): %.3f s %8.0f "
	       "candidates/s   (target >= %d/s, issue 16) %s\n",
	       kb.candidates, kb.steps, kb.bounds, kb.kernel_bounds, kb.unsearched,
	       tb, kb.candidates / tb, TARGET, kb.candidates / tb >= TARGET ? "ok" : "MISSED");
	free(r);
	sweep_free(&sw);
	return 0;
}

/*
 * bench_recommend.c — speed target of recommend (`make bench`): a sweep of at
 * least 10,000 candidate configurations, each with its memory timeline (the
 * allocation tape evaluated at the batches tried) and, when it fits, a step
 * simulation, in under 1 s on one core: >= 10,000 candidates/s.
 *
 * Usage: bench_recommend SWEEP.ini [RUNS] (run from the repository root; RUNS
 * defaults to 3, 1 under valgrind --tool=callgrind). Loading the
 * sweep (reading the catalogs) is outside the timing; building graphs and tapes
 * is inside. CPU time of this process, one core; the best of three runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sweep.h"
#include "heap.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sweep sw;
	struct sweep_ctx *c;
	struct sweep_result *r;
	struct sweep_counts k;
	struct err e = {0};
	double t0, t = 0;
	int cell, rc, fits = 0, i, run, runs = 3;

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
	/* the best of three runs (RUNS), each with a fresh context (graphs and tapes
	 * built again): the machines are shared, and the best run is the one the
	 * neighbours disturbed least */
	for (run = 0; run < runs && !rc; run++) {
		c = sweep_ctx_create(&sw);
		if (!c)
			return 1;
		fits = 0;
		t0 = now();
		for (cell = 0; cell < sw.ncell && !rc; cell++) {
			rc = sweep_eval_cell(c, cell, r, &e);
			for (i = 0; i < sw.ncand; i++)
				fits += r[i].rank == 1;
		}
		t0 = now() - t0;
		if (run == 0 || t0 < t)
			t = t0;
		sweep_ctx_counts(c, &k);
		sweep_ctx_delete(c);
	}
	if (rc) {
		fprintf(stderr, "bench_recommend: %s\n", e.msg);
		return rc;
	}
	printf("bench recommend: %s: %d cells x %d candidates, %ld evaluated (memory), %ld step simulations "
	       "(%ld task graphs built, the others re-timed at another micro-batch)\n",
	       argv[1], sw.ncell, sw.ncand, k.candidates, k.steps, k.step_graphs);
	printf("bench recommend:   %ld allocation tapes (%ld of them replayed from a recorded walk) and %ld graphs built; "
	       "%d cells with a fit; %.0f events per step simulation\n",
	       k.tapes, k.tapes_replayed, k.graphs, fits, (double)k.events / (double)k.steps);
	printf("bench recommend: sweep of %ld candidates in %.3f s   %8.0f candidates/s   (target >= 10000/s, "
	       ">= 10000 candidates in < 1 s) %s\n", k.candidates, t, k.candidates / t,
	       k.candidates >= 10000 && t < 1.0 ? "ok" : "MISSED");
	free(r);
	sweep_free(&sw);
	return 0;
}

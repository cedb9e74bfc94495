/*
 * bench_simulate.c — speed target of one simulate (`make bench`): GPT-3 175B
 * on 3,072 GPUs (bench/gpt3-175b-3072.ini: FSDP, full checkpointing, the
 * largest micro-batch that fits), predict_run in this process — the graph, the
 * memory timeline, the max-batch search, the breakdown at the peak and the step
 * simulation — with the scenario loaded once outside the timing. Target
 * <= 0.15 ms on one core (issue 16). CPU time of this process (the machines
 * are shared), the best of RUNS batches of REPS runs each; wall time beside it.
 *
 * Usage: bench_simulate [SCENARIO.ini] [REPS] (run from the repository root).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "predict.h"
#include "heap.h"
#include "scenario.h"

#define TARGET_MS 0.15

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "bench/gpt3-175b-3072.ini";
	int reps = argc > 2 ? atoi(argv[2]) : 200, runs = 5, run, i;
	struct scenario s;
	struct prediction p;
	struct err e = {0};
	double c0, w0, cpu = 1e9, wall = 1e9, c, w;

	heap_keep();  /* as bin/simulate does (heap.h) */
	if (reps < 1 || scenario_load(&s, path, NULL, 0, &e)) {
		fprintf(stderr, "bench_simulate: %s\n", reps < 1 ? "REPS must be >= 1" : e.msg);
		return 2;
	}
	for (run = 0; run < runs; run++) {
		c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
		w0 = clock_s(CLOCK_MONOTONIC);
		for (i = 0; i < reps; i++)
			if (predict_run(&s, &p, &e)) {
				fprintf(stderr, "bench_simulate: %s\n", e.msg);
				return 1;
			}
		c = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
		w = (clock_s(CLOCK_MONOTONIC) - w0) / reps;
		cpu = c < cpu ? c : cpu;
		wall = w < wall ? w : wall;
	}
	printf("bench simulate: %s (%s, %lld GPUs): max micro-batch %lld, step %.6g s, %llu events\n",
	       path, s.model.name, (long long)s.world, (long long)p.max_micro_batch, p.step.time,
	       (unsigned long long)p.step.events);
	printf("bench simulate: one in-process simulate %8.3f ms CPU (%.3f ms wall), best of %d x %d "
	       "(target <= %.2f ms) %s\n", cpu * 1e3, wall * 1e3, runs, reps, TARGET_MS,
	       cpu * 1e3 <= TARGET_MS ? "ok" : "MISSED");
	scenario_free(&s);
	return 0;
}

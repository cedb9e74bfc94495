/*
 * bench_memory.c — how long one max-batch search takes (make bench).
 *
 * The search runs per configuration in a sweep, so it must be cheap: the tape is
 * built once per scenario, and the search evaluates it a few times without
 * allocating. Target: under 10 ms for GPT-3 175B under ZeRO-3 on 1,024 GPUs.
 */
#include <stdio.h>
#include <time.h>

#include "memory.h"
#include "predict.h"
#include "profile.h"

#define TARGET_MS 10.0

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "scenarios/gpt3-175b-zero3.ini";
	struct scenario s;
	struct graph g;
	struct graph_opts o;
	struct fw_profile pf;
	struct mem_plan p;
	struct err e = {0};
	double t0, t_build, t_search, best = 1e9;
	int64_t m = 0;
	int bind, i, reps = 20, rc;

	if (scenario_load(&s, path, NULL, 0, &e) ||
	    profile_load(plan_profile_name(&s.plan), &pf, NULL, 0, &e)) {
		fprintf(stderr, "bench_memory: %s\n", e.msg);
		return 2;
	}
	predict_graph_opts(&s, &o);
	t0 = now();
	rc = graph_build(&g, &s.model, &o, &e);
	if (!rc)
		rc = mem_plan_build(&p, &s, &g, &pf, &e);
	t_build = now() - t0;
	if (rc) {
		fprintf(stderr, "bench_memory: %s\n", e.msg);
		return 1;
	}
	for (i = 0; i < reps; i++) {
		t0 = now();
		m = mem_max_batch(&p, &bind);
		t_search = now() - t0;
		if (t_search < best)
			best = t_search;
	}
	printf("bench memory: %s (%s, %lld GPUs), %d events on the tape\n", s.model.name,
	       scenario_strategy_name(s.plan.strategy), (long long)s.world, p.tape[0].n);
	printf("  max micro-batch %lld; one search %.3f ms (best of %d), target < %.0f ms: %s\n",
	       (long long)m, 1e3 * best, reps, TARGET_MS, 1e3 * best < TARGET_MS ? "met" : "MISSED");
	printf("  building the graph and the tape once: %.1f ms\n", 1e3 * t_build);
	mem_plan_free(&p);
	graph_free(&g);
	scenario_free(&s);
	return 0;
}

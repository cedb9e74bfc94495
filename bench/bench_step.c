/*
 * bench_step.c — speed targets of the step simulator (`make bench`):
 *  - the event queue alone: events per second of a hold model (pop the
 *    earliest, push one later) with 4,096 pending events; target >= 10 M/s;
 *    for information also with 65,536 pending (a heap that leaves the caches);
 *  - one step of gpt3-175b under FSDP on 1,024 GPUs
 *    (scenarios/gpt3-175b-fsdp-1024.ini): milliseconds to simulate it, with the
 *    graph built (what a sweep repeats) and end to end through predict_run;
 *    target < 50 ms;
 *  - a step of 10^6 micro-steps (grad_accum, the key's largest value) of
 *    gpt3-175b on 1,024 GPUs through predict_run: extended by its period
 *    (step.h), so it costs a few micro-steps; targets < 1 s and < 256 MiB of
 *    peak memory (a full simulation grew by ~100 KB per micro-step).
 * Run from the repository root.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "evq.h"
#include "predict.h"
#include "scenario.h"
#include "step.h"

/* CPU time of this process: the targets are per core, and the test machines
 * are shared, so wall time would measure the neighbours too. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double hold_rate(int pending, int events)
{
	struct evq q;
	struct evq_event ev = {0};
	uint64_t seed = 88172645463325252ull;
	double t0, sink = 0;
	int i;

	if (evq_create(&q, (size_t)pending))
		return 0;
	for (i = 0; i < pending; i++)
		evq_push(&q, (double)(xorshift(&seed) % 1000000) * 1e-9, 0, (uint32_t)i);
	t0 = now();
	for (i = 0; i < events; i++) {
		evq_pop(&q, &ev);
		sink += ev.time;
		evq_push(&q, ev.time + (double)(xorshift(&seed) % 1000000) * 1e-9, ev.kind, ev.id);
	}
	t0 = now() - t0;
	evq_delete(&q);
	return sink >= 0 ? events / t0 : 0;
}

static int bench_evq(void)
{
	double rate = hold_rate(4096, 20000000), big = hold_rate(65536, 5000000);

	printf("bench step: event queue (hold model, 4096 pending)   %8.1f M events/s   (target >= 10 M/s) %s\n",
	       rate / 1e6, rate >= 10e6 ? "ok" : "MISSED");
	printf("bench step:   with 65536 pending %.1f M events/s (CPU time, one core)\n", big / 1e6);
	return 0;
}

static int bench_175b(void)
{
	const char *path = "scenarios/gpt3-175b-fsdp-1024.ini";
	enum { RUNS = 20 };
	struct scenario s;
	struct prediction p;
	struct graph g;
	struct graph_opts o;
	struct step_sim ss;
	struct step_result r;
	struct err e = {0};
	double t0, sim_ms, e2e_ms;
	int i;

	if (scenario_load(&s, path, NULL, 0, &e)) {
		fprintf(stderr, "bench step: %s\n", e.msg);
		return 1;
	}
	predict_graph_opts(&s, &o);
	if (graph_build(&g, &s.model, &o, &e) || step_sim_create(&ss)) {
		fprintf(stderr, "bench step: %s\n", e.msg);
		return 1;
	}
	step_simulate(&ss, &s, &g, 1, &r, &e);  /* warm the arrays */
	t0 = now();
	for (i = 0; i < RUNS; i++)
		if (step_simulate(&ss, &s, &g, 1, &r, &e)) {
			fprintf(stderr, "bench step: %s\n", e.msg);
			return 1;
		}
	sim_ms = (now() - t0) / RUNS * 1e3;
	t0 = now();
	for (i = 0; i < RUNS; i++)
		if (predict_run(&s, &p, &e)) {
			fprintf(stderr, "bench step: %s\n", e.msg);
			return 1;
		}
	e2e_ms = (now() - t0) / RUNS * 1e3;
	printf("bench step: gpt3-175b fsdp 1024 GPUs, one step     %8.2f ms simulated  (target < 50 ms) %s\n",
	       sim_ms, sim_ms < 50 ? "ok" : "MISSED");
	printf("bench step:   %d tasks, %llu events (%.1f M events/s in the step engine); "
	       "predict_run end to end %.2f ms; predicted step %.3f s, MFU %.1f %%\n",
	       ss.d.ntasks, (unsigned long long)r.events, r.events / (sim_ms * 1e-3) / 1e6, e2e_ms,
	       r.time, 100 * r.mfu);
	step_sim_delete(&ss);
	graph_free(&g);
	scenario_free(&s);
	return 0;
}

static int bench_accum(void)
{
	const char *path = "scenarios/gpt3-175b-fsdp-1024.ini", *set = "training.grad_accum=1000000";
	struct scenario s;
	struct prediction p;
	struct rusage ru;
	struct err e = {0};
	double t0, sec, mib;

	if (scenario_load(&s, path, &set, 1, &e)) {
		fprintf(stderr, "bench step: %s\n", e.msg);
		return 1;
	}
	t0 = now();
	if (predict_run(&s, &p, &e)) {
		fprintf(stderr, "bench step: %s\n", e.msg);
		return 1;
	}
	sec = now() - t0;
	getrusage(RUSAGE_SELF, &ru);
	mib = (double)ru.ru_maxrss / 1024;  /* KiB on Linux */
	printf("bench step: gpt3-175b fsdp 1024 GPUs, grad_accum 10^6 %8.2f ms end to end, peak memory %.0f MiB "
	       "(targets < 1 s, < 256 MiB) %s\n", sec * 1e3, mib, sec < 1 && mib < 256 ? "ok" : "MISSED");
	printf("bench step:   %lld of %lld micro-steps simulated, %llu events; predicted step %.1f h\n",
	       (long long)p.step.simulated_accum, (long long)p.step.grad_accum,
	       (unsigned long long)p.step.events, p.step.time / 3600);
	scenario_free(&s);
	return 0;
}

int main(void)
{
	int rc = bench_evq();

	rc = bench_175b() || rc;
	return bench_accum() || rc;
}

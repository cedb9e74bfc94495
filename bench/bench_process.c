/*
 * bench_process.c — speed target of a whole `bin/simulate` process (`make
 * bench`): start-up and dynamic linking, loading the scenario and the catalogs
 * it names, the simulation, the report and exit, as a user pays for one
 * answer. Target <= 2 ms wall on one core (issue 16). Each run is a fresh
 * process (posix_spawn, stdout to /dev/null); the figure is the best of RUNS
 * batches of REPS processes, wall time per process, with the children's CPU
 * time (user + system, getrusage) beside it, and the largest resident set of
 * the last process (a heap that outgrows one 2 MiB huge page costs another
 * page's fault: heap.h).
 *
 * Usage: bench_process [SIMULATE [SCENARIO.ini [REPS]]] (from the repository
 * root; defaults bin/simulate, bench/gpt3-175b-3072.ini, 100).
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TARGET_MS 2.0

extern char **environ;

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds (user + system) of the waited-for children so far */
static double children_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* one process of ARGV with stdout and stderr on /dev/null; 0 when it exited 0;
 * *rss_kib: its largest resident set (wait4's ru_maxrss, KiB) */
static int spawn_once(char **argv, long *rss_kib)
{
	struct rusage ru;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc, status;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		fprintf(stderr, "bench_process: cannot start %s: %s\n", argv[0], strerror(rc));
		return 1;
	}
	if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "bench_process: %s %s failed (status %d)\n", argv[0], argv[1], status);
		return 1;
	}
	*rss_kib = ru.ru_maxrss;
	return 0;
}

int main(int argc, char **argv)
{
	char *child[3] = {argc > 1 ? argv[1] : "bin/simulate",
			  argc > 2 ? argv[2] : "bench/gpt3-175b-3072.ini", NULL};
	int reps = argc > 3 ? atoi(argv[3]) : 100, runs = 5, run, i;
	double w0, c0, w, c, wall = 1e9, cpu = 1e9;
	long rss = 0;

	if (reps < 1) {
		fprintf(stderr, "bench_process: REPS must be >= 1\n");
		return 2;
	}
	if (spawn_once(child, &rss))  /* warm the page cache; fail early */
		return 1;
	for (run = 0; run < runs; run++) {
		w0 = wall_s();
		c0 = children_cpu_s();
		for (i = 0; i < reps; i++)
			if (spawn_once(child, &rss))
				return 1;
		w = (wall_s() - w0) / reps;
		c = (children_cpu_s() - c0) / reps;
		wall = w < wall ? w : wall;
		cpu = c < cpu ? c : cpu;
	}
	printf("bench process: one whole `%s %s` %8.3f ms wall (%.3f ms CPU), best of %d x %d "
	       "(target <= %.1f ms) %s; its largest resident set %.1f MiB\n", child[0], child[1], wall * 1e3,
	       cpu * 1e3, runs, reps, TARGET_MS, wall * 1e3 <= TARGET_MS ? "ok" : "MISSED", (double)rss / 1024);
	return 0;
}

/*
 * progress.c — the progress line (see progress.h).
 */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double progress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(struct progress *p, int want, double delay)
{
	p->on = want && isatty(STDERR_FILENO);
	p->shown = 0;
	p->t0 = p->last = progress_now();
	p->delay = delay;
}

void progress_show(struct progress *p, double done, double total, const char *what, const char *note)
{
	enum { W = 30 };
	double t, el, rate;
	char bar[W + 1];
	int fill, i;

	if (!p->on)
		return;
	t = progress_now();
	el = t - p->t0;
	if (el < p->delay || (p->shown && t - p->last < 0.1))
		return;
	p->last = t;
	p->shown = 1;
	rate = el > 0 ? done / el : 0;
	fill = total > 0 ? (int)(W * (done < total ? done : total) / total) : W;
	for (i = 0; i < W; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[W] = 0;
	fprintf(stderr, "\r[%s] %.0f/%.0f %s%s%s, %.3g %s/s, %.0f s left   ", bar, done, total, what,
		note ? " " : "", note ? note : "", rate, what, rate > 0 && total > done ? (total - done) / rate : 0.0);
	fflush(stderr);
}

void progress_end(struct progress *p)
{
	if (p->on && p->shown)
		fprintf(stderr, "\r%*s\r", 100, "");
	fflush(stderr);
	p->shown = 0;
}

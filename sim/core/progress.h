/*
 * progress.h — a progress line on stderr for long runs (recommend's cells,
 * the job model's trials): "[#####.........] 120/400 cells, 3.1 cells/s, 90 s left",
 * redrawn in place at most every 0.1 s, only when stderr is a terminal (logs
 * and pipes get nothing), and only once the run has lasted `delay` seconds.
 */
#ifndef SHARDCAST_PROGRESS_H
#define SHARDCAST_PROGRESS_H

struct progress {
	int on;              /* stderr is a terminal and the caller wants a line */
	int shown;           /* a line is on the screen */
	double t0, last;     /* s, monotonic: the start, the last line */
	double delay;        /* s before the first line */
};

/* Starts timing; on = want && stderr is a terminal. */
void progress_start(struct progress *p, int want, double delay);

/* Shows done of total, what names the unit ("cells", "trials"); note (or
 * NULL) follows it, e.g. "(rank 0's share)". */
void progress_show(struct progress *p, double done, double total, const char *what, const char *note);

/* Clears the line if one was shown. */
void progress_end(struct progress *p);

/* s on the monotonic clock. */
double progress_now(void);

#endif

/*
 * err.h — the one error type of shardcast.
 *
 * Every function that can fail on bad input or I/O returns an int rc and fills a
 * struct err: a message that starts with "file:line: " when a place is known.
 * rc follows the CLI's exit codes: ERR_INPUT (2) for bad input, ERR_SYSTEM (1)
 * for an internal or system failure. 0 is success.
 */
#ifndef SHARDCAST_ERR_H
#define SHARDCAST_ERR_H

#include <stddef.h>

enum { ERR_OK = 0, ERR_SYSTEM = 1, ERR_INPUT = 2 };

struct err {
	int code;        /* ERR_* of the first error recorded */
	char msg[1024];  /* "file:line: what; expected ..." */
};

/* Records an error at file:line (line 0: no line; file NULL: no place) unless one
 * is already recorded (the first error wins). Returns code. */
int err_set(struct err *e, int code, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Clears e. */
void err_clear(struct err *e);

/* Levenshtein distance of a and b (case-sensitive), capped at 99. */
int err_distance(const char *a, const char *b);

/* Of the n names, the nearest to word if it is close enough to be a plausible
 * typo (distance <= 1/3 of the length, at least 2), else NULL. */
const char *err_nearest(const char *word, const char *const *names, size_t n);

#endif

/*
 * err.c — recording located errors and suggesting the nearest valid name.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_clear(struct err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}

int err_set(struct err *e, int code, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!e || e->code)
		return e ? e->code : code;
	e->code = code;
	if (file && line > 0)
		n = snprintf(e->msg, sizeof e->msg, "%s:%d: ", file, line);
	else if (file)
		n = snprintf(e->msg, sizeof e->msg, "%s: ", file);
	if (n < 0 || (size_t)n >= sizeof e->msg)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

/* Optimal string alignment distance: insertions, deletions, substitutions and
 * transpositions of neighbours each cost 1 ("fdsp" is 1 from "fsdp"). */
int err_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	int d[64][64];

	if (la > 62 || lb > 62)
		return 99;
	for (i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb] > 99 ? 99 : d[la][lb];
}

const char *err_nearest(const char *word, const char *const *names, size_t n)
{
	const char *best = NULL;
	int bestd = 99, limit;
	size_t i;

	for (i = 0; i < n; i++) {
		int d = err_distance(word, names[i]);
		if (d < bestd) {
			bestd = d;
			best = names[i];
		}
	}
	limit = (int)strlen(word) / 3;
	if (limit < 2)
		limit = 2;
	return bestd <= limit ? best : NULL;
}

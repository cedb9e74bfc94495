/*
 * evq.c — binary min-heap keyed by (time, insertion count) (see evq.h; push
 * and pop are inline there).
 */
#include "evq.h"

#include <stdlib.h>
#include <string.h>

int evq_create(struct evq *q, size_t cap)
{
	memset(q, 0, sizeof *q);
	if (cap < 16)
		cap = 16;
	q->h = malloc(cap * sizeof *q->h);
	if (!q->h)
		return -1;
	q->cap = cap;
	return 0;
}

void evq_clear(struct evq *q)
{
	q->n = 0;
	q->seq = 0;
	q->has_slot = 0;
}

int evq_grow(struct evq *q)
{
	struct evq_node *nh = realloc(q->h, 2 * q->cap * sizeof *q->h);

	if (!nh)
		return -1;
	q->h = nh;
	q->cap *= 2;
	return 0;
}

void evq_delete(struct evq *q)
{
	free(q->h);
	memset(q, 0, sizeof *q);
}

/*
 * evq.c — binary min-heap keyed by (time, insertion count) (see evq.h).
 */
#include "evq.h"

#include <stdlib.h>
#include <string.h>

static inline int before(const struct evq_event *a, const struct evq_event *b)
{
	return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

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
}

int evq_push(struct evq *q, double time, uint32_t kind, uint32_t id)
{
	struct evq_event ev = {time, q->seq++, kind, id};
	size_t i, parent;

	if (q->n == q->cap) {
		struct evq_event *nh = realloc(q->h, 2 * q->cap * sizeof *q->h);
		if (!nh)
			return -1;
		q->h = nh;
		q->cap *= 2;
	}
	/* sift up: move parents down until ev's place is found */
	for (i = q->n++; i > 0; i = parent) {
		parent = (i - 1) / 2;
		if (!before(&ev, &q->h[parent]))
			break;
		q->h[i] = q->h[parent];
	}
	q->h[i] = ev;
	return 0;
}

int evq_pop(struct evq *q, struct evq_event *ev)
{
	struct evq_event last;
	size_t i, child, n;

	if (q->n == 0)
		return 0;
	*ev = q->h[0];
	n = --q->n;
	if (n == 0)
		return 1;
	last = q->h[n];
	/* sift down the former last element from the root */
	for (i = 0; (child = 2 * i + 1) < n; i = child) {
		if (child + 1 < n && before(&q->h[child + 1], &q->h[child]))
			child++;
		if (!before(&q->h[child], &last))
			break;
		q->h[i] = q->h[child];
	}
	q->h[i] = last;
	return 1;
}

void evq_delete(struct evq *q)
{
	free(q->h);
	memset(q, 0, sizeof *q);
}

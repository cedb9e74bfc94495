/*
 * evq.c — binary min-heap keyed by (time, insertion count) (see evq.h).
 */
#include "evq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline int before(const struct evq_node *a, const struct evq_node *b)
{
	return (a->t < b->t) | ((a->t == b->t) & (a->seq < b->seq));
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
	struct evq_node ev = {0, q->seq++, kind, id};
	size_t i, parent;

	if (!(time >= 0) || isinf(time))
		return -1;
	memcpy(&ev.t, &time, sizeof ev.t);
	if (q->n == q->cap) {
		struct evq_node *nh = realloc(q->h, 2 * q->cap * sizeof *q->h);
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

/* Floyd's bottom-up deletion: the hole left at the root walks down to a leaf
 * along the smaller children (one comparison per level, done without a branch),
 * then the former last element is sifted up from there; it came from the
 * bottom, so it rarely climbs. About half the comparisons of the textbook pop. */
int evq_pop(struct evq *q, struct evq_event *ev)
{
	struct evq_node *h = q->h, last;
	size_t hole = 0, child, parent, n;

	if (q->n == 0)
		return 0;
	memcpy(&ev->time, &h[0].t, sizeof ev->time);
	ev->seq = h[0].seq;
	ev->kind = h[0].kind;
	ev->id = h[0].id;
	n = --q->n;
	if (n == 0)
		return 1;
	last = h[n];
	while ((child = 2 * hole + 1) + 1 < n) {
		child += (size_t)before(&h[child + 1], &h[child]);
		h[hole] = h[child];
		hole = child;
	}
	if (child < n) {  /* a lone last child */
		h[hole] = h[child];
		hole = child;
	}
	for (; hole > 0; hole = parent) {
		parent = (hole - 1) / 2;
		if (!before(&last, &h[parent]))
			break;
		h[hole] = h[parent];
	}
	h[hole] = last;
	return 1;
}

void evq_delete(struct evq *q)
{
	free(q->h);
	memset(q, 0, sizeof *q);
}

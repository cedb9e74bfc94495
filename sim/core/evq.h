/*
 * evq.h — the event queue of shardcast's discrete-event simulations.
 *
 * A binary min-heap of events ordered by (time, seq), where seq is the order of
 * insertion: two events at the same time come out in the order they went in, so
 * a simulation repeats bit for bit (SimGrid's and ns-3's rule). The heap lives in
 * one array that grows by doubling only when full; pushing and popping never
 * allocate otherwise. No state outside struct evq: many queues can live in one
 * process (a sweep runs one simulation per configuration).
 *
 * Times must be finite and >= 0: the heap compares their IEEE-754 bit patterns
 * as unsigned integers, which order exactly like the values for non-negative
 * doubles, so a comparison is two integer compares without branches.
 */
#ifndef SHARDCAST_EVQ_H
#define SHARDCAST_EVQ_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct evq_event {
	double time;      /* s */
	uint64_t seq;     /* insertion count: breaks ties in time */
	uint32_t kind;    /* the caller's event type */
	uint32_t id;      /* the caller's object (task, flow, ...) */
};

struct evq_node {
	uint64_t t;       /* bits of the time (s) */
	uint64_t seq;
	uint32_t kind, id;
};

struct evq {
	struct evq_node *h;   /* (cap) heap array, h[0] the earliest */
	size_t n, cap;
	uint64_t seq;         /* next insertion count */
	struct evq_node slot; /* one event kept outside the heap: the earliest of those */
	int has_slot;         /* pushed since the slot was last popped */
};

/* Creates an empty queue with room for cap events. Returns 0, or -1 when out of memory. */
int evq_create(struct evq *q, size_t cap);

/* Empties the queue (keeps its memory) and restarts the insertion count. */
void evq_clear(struct evq *q);

/* Frees the queue's memory. */
void evq_delete(struct evq *q);

/* Doubles the array (evq_push's slow path). Returns 0, or -1 when out of memory. */
int evq_grow(struct evq *q);

static inline int evq_before(const struct evq_node *a, const struct evq_node *b)
{
	return (a->t < b->t) | ((a->t == b->t) & (a->seq < b->seq));
}

/* Inserts node ev into the heap (not the slot). Returns 0, or -1 when the
 * array had to grow and could not. */
static inline int evq_heap_push(struct evq *q, struct evq_node ev)
{
	size_t i, parent;

	if (q->n == q->cap && evq_grow(q))
		return -1;
	/* sift up: move parents down until ev's place is found */
	for (i = q->n++; i > 0; i = parent) {
		parent = (i - 1) / 2;
		if (!evq_before(&ev, &q->h[parent]))
			break;
		q->h[i] = q->h[parent];
	}
	q->h[i] = ev;
	return 0;
}

/* Removes the heap's earliest node (the heap must not be empty). Floyd's
 * bottom-up deletion: the hole left at the root walks down to a leaf along the
 * smaller children (one comparison per level, done without a branch), then
 * the former last element is sifted up from there; it came from the bottom,
 * so it rarely climbs. About half the comparisons of the textbook pop. */
static inline struct evq_node evq_heap_pop(struct evq *q)
{
	struct evq_node *h = q->h, top = h[0], last;
	size_t hole = 0, child, parent, n = --q->n;

	if (n == 0)
		return top;
	last = h[n];
	while ((child = 2 * hole + 1) + 1 < n) {
		child += (size_t)evq_before(&h[child + 1], &h[child]);
		h[hole] = h[child];
		hole = child;
	}
	if (child < n) {  /* a lone last child */
		h[hole] = h[child];
		hole = child;
	}
	for (; hole > 0; hole = parent) {
		parent = (hole - 1) / 2;
		if (!evq_before(&last, &h[parent]))
			break;
		h[hole] = h[parent];
	}
	h[hole] = last;
	return top;
}

/* Inserts an event. Returns 0, or -1 when time is negative or not finite, or
 * when the array had to grow and could not. Inline: a simulation pushes and
 * pops an event per task. The earliest event pushed since the slot was last
 * popped waits in the slot, outside the heap: in a task graph the event just
 * pushed (the next task of a stream) is most often the next to come out (95%
 * of a sweep's), and then neither push nor pop walks the heap. Pops come in
 * (time, seq) order all the same. */
static inline int evq_push(struct evq *q, double time, uint32_t kind, uint32_t id)
{
	struct evq_node ev = {0, q->seq++, kind, id}, later;

	if (!(time >= 0) || time > DBL_MAX)  /* negative, NaN or infinite */
		return -1;
	memcpy(&ev.t, &time, sizeof ev.t);
	if (!q->has_slot) {
		q->slot = ev;
		q->has_slot = 1;
		return 0;
	}
	if (evq_before(&ev, &q->slot)) {  /* the slot keeps the earlier one */
		later = q->slot;
		q->slot = ev;
		ev = later;
	}
	return evq_heap_push(q, ev);
}

/* Removes the earliest event into *ev. Returns 1, or 0 when the queue is empty. */
static inline int evq_pop(struct evq *q, struct evq_event *ev)
{
	struct evq_node x;

	if (q->has_slot && (q->n == 0 || evq_before(&q->slot, &q->h[0]))) {
		x = q->slot;
		q->has_slot = 0;
	} else if (q->n > 0) {
		x = evq_heap_pop(q);
	} else {
		return 0;
	}
	memcpy(&ev->time, &x.t, sizeof ev->time);
	ev->seq = x.seq;
	ev->kind = x.kind;
	ev->id = x.id;
	return 1;
}

static inline size_t evq_size(const struct evq *q)
{
	return q->n + (size_t)q->has_slot;
}

#endif

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

#include <stddef.h>
#include <stdint.h>

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
};

/* Creates an empty queue with room for cap events. Returns 0, or -1 when out of memory. */
int evq_create(struct evq *q, size_t cap);

/* Empties the queue (keeps its memory) and restarts the insertion count. */
void evq_clear(struct evq *q);

/* Inserts an event. Returns 0, or -1 when time is negative or not finite, or
 * when the array had to grow and could not. */
int evq_push(struct evq *q, double time, uint32_t kind, uint32_t id);

/* Removes the earliest event into *ev. Returns 1, or 0 when the queue is empty. */
int evq_pop(struct evq *q, struct evq_event *ev);

/* Frees the queue's memory. */
void evq_delete(struct evq *q);

static inline size_t evq_size(const struct evq *q)
{
	return q->n;
}

#endif

/*
 * des.c — task-graph simulation with shared links (see des.h).
 *
 * Events: a work task's end (EV_DONE), the end of a collective's latency
 * (EV_LAT), the end of a collective's bandwidth phase (EV_FLOW, carrying the
 * collective's version so that reschedules make older events stale). Whenever
 * the set of collectives in a bandwidth phase changes, each one's progress is
 * brought up to now at its old rate, the rates are recomputed from how many
 * collectives share each link, and their ends are rescheduled.
 *
 * Interference: from the moment a collective enters a bandwidth phase until no
 * collective is in flight any more (a next one on the same NCCL stream starts
 * as the previous ends, so back-to-back collectives keep it on), compute tasks
 * run slow times longer: one starting then takes slow x its duration, and
 * those running when it begins or ends have their remaining time stretched by
 * slow or shrunk by it, their end rescheduled (EV_DONE carrying the task's
 * version, as EV_FLOW does).
 */
#include "des.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

enum { EV_DONE, EV_LAT, EV_FLOW };
#define EV_KIND(k) ((k) & 3u)
#define EV_VER(k) ((k) >> 2)

int des_create(struct des *d)
{
	memset(d, 0, sizeof *d);
	d->first_n = -1;
	d->slow = 1;
	return evq_create(&d->q, 256);
}

void des_reset(struct des *d)
{
	d->first_n = -1;
	d->nstreams = 0;
	d->ntasks = 0;
	d->nedges = 0;
	d->ncolls = 0;
	d->nactive = 0;
	d->expose_rank = 0;
	d->nmark = 0;
	d->slow = 1;
	memset(&d->tot, 0, sizeof d->tot);
	evq_clear(&d->q);
}

void des_delete(struct des *d)
{
	free(d->tasks);
	free(d->edges);
	free(d->colls);
	free(d->first);
	free(d->succ);
	free(d->roots);
	free(d->active);
	free(d->mark);
	free(d->mark_exposed);
	free(d->mark_events);
	evq_delete(&d->q);
	memset(d, 0, sizeof *d);
}

int des_stream(struct des *d, int rank, int cls, const char *name)
{
	struct des_stream *s;

	if (d->nstreams == DES_MAX_STREAMS)
		return -1;
	s = &d->streams[d->nstreams];
	s->rank = rank;
	s->cls = cls;
	snprintf(s->name, sizeof s->name, "%s", name);
	s->last = -1;
	return d->nstreams++;
}

int des_grow_tasks(struct des *d)
{
	return vec_grow((void **)&d->tasks, &d->captasks, d->ntasks + 1, sizeof *d->tasks);
}

int des_grow_edges(struct des *d)
{
	return vec_grow((void **)&d->edges, &d->capedges, d->nedges + 1, sizeof *d->edges);
}

int des_coll(struct des *d, int stream, const struct coll_cost *c, int label, int tag)
{
	struct des_coll *k;

	if (vec_grow((void **)&d->colls, &d->capcolls, d->ncolls + 1, sizeof *d->colls))
		return -1;
	k = &d->colls[d->ncolls];
	memset(k, 0, sizeof *k);
	k->c = *c;
	k->phase = -1;
	k->task = d->ntasks;
	return des_issue(d, stream, 0, d->ncolls++, label, tag);
}

/* ---- running ---------------------------------------------------------------- */

struct run {
	struct des *d;
	double now;              /* s: current event time */
	int compute_busy;        /* tasks running on the exposure rank's compute streams */
	int comm_busy;           /* collectives in flight on the exposure rank */
	int nleft;               /* tasks not finished */
	double flow_t;           /* s: when the active collectives' rates were last set */
	int oom;
	double exposed;          /* s so far (the loop's, for marks) */
	uint64_t events;         /* popped so far (the loop's, for marks) */
};


int des_mark(struct des *d, int task)
{
	if (vec_grow((void **)&d->mark, &d->capmark, d->nmark + 1, sizeof *d->mark))
		return -1;
	if (d->nmark + 1 > d->capmarkv) {
		int cap = d->capmark;
		double *x = realloc(d->mark_exposed, (size_t)cap * sizeof *x);
		uint64_t *y;
		if (!x)
			return -1;
		d->mark_exposed = x;
		y = realloc(d->mark_events, (size_t)cap * sizeof *y);
		if (!y)
			return -1;
		d->mark_events = y;
		d->capmarkv = cap;
	}
	d->mark[d->nmark] = task;
	d->first_n = -1;  /* the flags are set again (prepare) */
	return d->nmark++;
}

/* Task i, marked, starts with exposed s and events so far. */
static void mark_start(struct des *d, int i, double exposed, uint64_t events)
{
	int k;

	for (k = 0; k < d->nmark; k++)
		if (d->mark[k] == i) {
			d->mark_exposed[k] = exposed;
			d->mark_events[k] = events;
		}
}

static int on_rank(const struct des *d, const struct des_task *t, int cls)
{
	const struct des_stream *s = &d->streams[t->stream];
	const struct des_stream *s2 = t->stream2 >= 0 ? &d->streams[t->stream2] : NULL;

	return (s->cls == cls && s->rank == d->expose_rank) ||
		(s2 && s2->cls == cls && s2->rank == d->expose_rank);
}

static inline void push(struct run *r, double t, uint32_t kind, int id)
{
	if (evq_push(&r->d->q, t, kind, (uint32_t)id))
		r->oom = 1;
}

/* Task i starts now: its first event is its end (work) or the end of its
 * latency (collective); prepare put the delay and the kind in d->first. */
static inline void start(struct run *r, int i)
{
	struct des *d = r->d;
	const struct des_first *f = &d->first[i];
	double t = r->now + f->delay;

	d->tasks[i].start = r->now;
	if (f->flag & DES_MARK)
		mark_start(d, i, r->exposed, r->events);
	r->compute_busy += f->flag & DES_ON_COMPUTE;
	r->comm_busy += (f->flag & DES_ON_COMM) != 0;
	if (f->cls == DES_COMPUTE) {
		if (d->slowed)
			t = r->now + f->delay * d->slow;
		d->run_task[d->tasks[i].stream] = i;
		d->run_end[d->tasks[i].stream] = t;
	}
	push(r, t, f->kind, i);
}

/* Successor to of a task that ended: it starts if that was the last it waited for. */
static inline void release(struct run *r, int to)
{
	if (--r->d->first[to].waiting == 0)
		start(r, to);
}

/* Task i ends now; its successors, in the order of its edge list, start if it
 * was the last they waited for. */
static inline void finish(struct run *r, int i)
{
	struct des *d = r->d;
	const struct des_first *f = &d->first[i];
	int k, n = f->nsucc;

	d->tasks[i].end = r->now;
	r->compute_busy -= f->flag & DES_ON_COMPUTE;
	r->comm_busy -= (f->flag & DES_ON_COMM) != 0;
	r->nleft--;
	if (n == 0)
		return;
	release(r, f->s0);
	if (n == 1)
		return;
	release(r, f->s1);
	for (k = 0; k < n - 2; k++)
		release(r, d->succ[f->soff + k]);
}

/* Brings every active collective's progress up to now at its current rate. */
static void advance(struct run *r)
{
	struct des *d = r->d;
	double dt = r->now - r->flow_t;
	int i;

	for (i = 0; dt > 0 && i < d->nactive; i++) {
		struct des_coll *k = &d->colls[d->active[i]];
		k->left -= k->rate * dt;
	}
	r->flow_t = r->now;
}

/* Equal shares: each link is divided among the active collectives using it; a
 * collective progresses at the pace of its most loaded link. */
static void reschedule(struct run *r)
{
	struct des *d = r->d;
	int users[COLL_NLINKS] = {0}, i, l;

	for (i = 0; i < d->nactive; i++) {
		const struct coll_phase *p = &d->colls[d->active[i]].c.ph[d->colls[d->active[i]].phase];
		for (l = 0; l < COLL_NLINKS; l++)
			users[l] += p->work[l] > 0;
	}
	for (i = 0; i < d->nactive; i++) {
		struct des_coll *k = &d->colls[d->active[i]];
		const struct coll_phase *p = &k->c.ph[k->phase];
		double slowest = 0, left = k->left > 0 ? k->left : 0;
		for (l = 0; l < COLL_NLINKS; l++) {
			double w = p->work[l] * users[l];
			slowest = w > slowest ? w : slowest;  /* fmax: work is never NaN */
		}
		k->rate = 1 / slowest;
		k->ver++;
		push(r, r->now + left * slowest, EV_FLOW | (k->ver << 2), k->task);
	}
}

/* Puts collective k into its next phase with work, or finishes it. */
static void next_phase(struct des_coll *k)
{
	while (++k->phase < k->c.nphase) {
		const struct coll_phase *p = &k->c.ph[k->phase];
		if (p->work[COLL_INTRA] > 0 || p->work[COLL_INTER] > 0) {
			k->left = 1;
			return;
		}
	}
	k->phase = -2;
}

static int add_active(struct des *d, int c)
{
	if (vec_grow((void **)&d->active, &d->capactive, d->nactive + 1, sizeof *d->active))
		return -1;
	d->active[d->nactive++] = c;
	return 0;
}

static void remove_active(struct des *d, int c)
{
	int i;

	for (i = 0; i < d->nactive; i++)
		if (d->active[i] == c) {
			memmove(d->active + i, d->active + i + 1, (size_t)(d->nactive - i - 1) * sizeof *d->active);
			d->nactive--;
			return;
		}
}

/* The first collective entered a bandwidth phase (f = slow) or the last one
 * left it (f = 1/slow): the compute tasks running now have the rest of their
 * time scaled by f; their old end events become stale. */
static void restretch(struct run *r, double f)
{
	struct des *d = r->d;
	int s, i;

	d->slowed = f > 1;
	for (s = 0; s < d->nstreams; s++) {
		if (d->streams[s].cls != DES_COMPUTE || (i = d->run_task[s]) < 0 || d->tasks[i].end >= 0)
			continue;
		d->run_end[s] = r->now + (d->run_end[s] - r->now) * f;
		d->tasks[i].ver = (d->tasks[i].ver + 1) & 0x3fffffffu;
		push(r, d->run_end[s], EV_DONE | (d->tasks[i].ver << 2), i);
	}
}

/* After a collective ended (and its successors started): interference ends
 * when no collective is in flight. */
static void calm(struct run *r)
{
	if (r->d->slowed && r->comm_busy == 0 && r->d->nactive == 0)
		restretch(r, 1 / r->d->slow);
}

static void on_latency(struct run *r, int i)
{
	struct des *d = r->d;
	struct des_coll *k = &d->colls[d->tasks[i].coll];

	advance(r);
	next_phase(k);
	if (k->phase < 0) {
		finish(r, i);
		calm(r);
		return;
	}
	if (add_active(d, d->tasks[i].coll)) {
		r->oom = 1;
		return;
	}
	if (!d->slowed && d->slow != 1)
		restretch(r, d->slow);
	reschedule(r);
}

static void on_flow(struct run *r, int i, uint32_t ver)
{
	struct des *d = r->d;
	struct des_coll *k = &d->colls[d->tasks[i].coll];

	if (k->phase < 0 || (k->ver & 0x3fffffffu) != ver)
		return;  /* stale: rescheduled since */
	advance(r);
	next_phase(k);
	if (k->phase < 0) {
		remove_active(d, d->tasks[i].coll);
		finish(r, i);
		calm(r);
	}
	reschedule(r);
}

/* What des_run derives from the graph's structure, kept while the graph is
 * (des_reset, new tasks, a task shown on another stream or a new expose_rank
 * redo it): where each task counts, how its first event comes, and its
 * successors in the order of its edge list (the first two in its record). */
static int structure(struct des *d)
{
	int i, e, k, n = 0;

	if (vec_grow((void **)&d->succ, &d->capsucc, d->nedges, sizeof *d->succ) ||
	    vec_grow((void **)&d->roots, &d->caproots, d->ntasks, sizeof *d->roots))
		return -1;
	d->nroots = 0;
	for (i = 0; i < d->ntasks; i++) {
		const struct des_task *t = &d->tasks[i];
		struct des_first *f = &d->first[i];
		f->flag = (uint8_t)((on_rank(d, t, DES_COMPUTE) ? DES_ON_COMPUTE : 0) |
			(t->coll >= 0 && on_rank(d, t, DES_COMM) ? DES_ON_COMM : 0) |
			(d->streams[t->stream].rank == d->expose_rank ||
			 (t->stream2 >= 0 && d->streams[t->stream2].rank == d->expose_rank) ? DES_ON_RANK : 0));
		f->kind = t->coll < 0 ? EV_DONE : EV_LAT;
		f->cls = (uint8_t)d->streams[t->stream].cls;
		f->s0 = f->s1 = -1;
		f->soff = n;
		for (k = 0, e = t->edge; e >= 0; e = d->edges[e].next, k++) {
			if (k == 0)
				f->s0 = d->edges[e].to;
			else if (k == 1)
				f->s1 = d->edges[e].to;
			else
				d->succ[n++] = d->edges[e].to;
		}
		f->nsucc = k;
		if (t->npred == 0)
			d->roots[d->nroots++] = i;
	}
	d->first_n = d->ntasks;
	d->first_rank = d->expose_rank;
	return 0;
}

static int prepare(struct des *d)
{
	int i;

	if (vec_grow((void **)&d->first, &d->capfirst, d->ntasks, sizeof *d->first))
		return -1;
	if ((d->first_n != d->ntasks || d->first_rank != d->expose_rank) && structure(d))
		return -1;
	for (i = 0; i < d->ntasks; i++) {  /* durations and latencies may have changed */
		struct des_task *t = &d->tasks[i];
		d->first[i].waiting = t->npred;
		d->first[i].delay = t->coll < 0 ? t->dur : d->colls[t->coll].c.latency;
		t->end = -1;  /* not finished (restretch) */
		t->ver = 0;
	}
	for (i = 0; i < DES_MAX_STREAMS; i++)
		d->run_task[i] = -1;
	d->slowed = 0;
	for (i = 0; i < d->ncolls; i++) {
		d->colls[i].phase = -1;
		d->colls[i].ver = 0;
	}
	for (i = 0; i < d->nmark; i++)
		d->first[d->mark[i]].flag |= DES_MARK;
	d->nactive = 0;
	memset(&d->tot, 0, sizeof d->tot);
	evq_clear(&d->q);
	return 0;
}

/* Makespan, and busy and collective time on the exposure rank, summed in task
 * order. The sums stay in registers: each class's sum gets dt or +0.0 (x + 0.0
 * is x for these sums of durations, which are never -0.0), so each receives
 * the same additions in the same order as with busy[cls] += dt. */
static void totals(struct des *d)
{
	double b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, comm = 0, makespan = 0, dt;
	int i, c;

	_Static_assert(DES_CLASS_COUNT == 5, "one sum per class");
	for (i = 0; i < d->ntasks; i++) {
		const struct des_task *t = &d->tasks[i];
		if (t->end > makespan)  /* fmax: times are never NaN */
			makespan = t->end;
		if (!(d->first[i].flag & DES_ON_RANK))
			continue;
		dt = t->end - t->start;
		c = d->first[i].cls;
		b0 += c == 0 ? dt : 0.0;
		b1 += c == 1 ? dt : 0.0;
		b2 += c == 2 ? dt : 0.0;
		b3 += c == 3 ? dt : 0.0;
		b4 += c == 4 ? dt : 0.0;
		comm += t->coll >= 0 ? dt : 0.0;
	}
	d->tot.makespan = makespan;
	d->tot.busy[0] = b0;
	d->tot.busy[1] = b1;
	d->tot.busy[2] = b2;
	d->tot.busy[3] = b3;
	d->tot.busy[4] = b4;
	d->tot.comm = comm;
}

/* Pushes ev into the queue whose earliest event loop() keeps in a local slot:
 * ev takes the slot when it is empty or ev comes first (the slot's event then
 * goes to the heap). Returns nonzero when the heap cannot grow. */
static inline int push_slot(struct evq *q, struct evq_node ev, struct evq_node *slot, int *has)
{
	int rc = 0;

	if (!*has) {
		*has = 1;
	} else if (evq_before(&ev, slot)) {
		rc = evq_heap_push(q, *slot);
	} else {
		return evq_heap_push(q, ev);
	}
	*slot = ev;
	return rc;
}

/* The run's event loop. Task ends (most events) are handled here with the
 * queue's slot (evq.h) and the counters in locals, so that one event leads to
 * the next without a trip through memory; the rest (collectives) go through
 * the run struct and the queue, the slot put back in it meanwhile. The events,
 * their insertion counts and their order are those of evq_push / evq_pop. */
static void loop(struct run *r)
{
	struct des *d = r->d;
	struct evq *q = &d->q;
	struct des_first *first = d->first;
	struct des_task *tasks = d->tasks;
	const int *succ = d->succ;
	struct evq_node slot = q->slot, x, ev;
	int has = q->has_slot, compute_busy = r->compute_busy, comm_busy = r->comm_busy;
	int nleft = r->nleft, oom = 0, i, k, n, to;
	uint64_t seq = q->seq, events = 0;
	double now = 0, last = 0, exposed = 0, dt, t;
	double slow = d->slowed ? d->slow : 1;  /* on compute tasks starting now */

	q->has_slot = 0;
	while (!oom) {
		if (has && (q->n == 0 || evq_before(&slot, &q->h[0]))) {
			x = slot;
			has = 0;
		} else if (q->n > 0) {
			x = evq_heap_pop(q);
		} else {
			break;
		}
		events++;
		memcpy(&now, &x.t, sizeof now);
		dt = now - last;  /* exposure since the last event (account()) */
		exposed += ((dt > 0) & (comm_busy > 0) & (compute_busy == 0)) ? dt : 0.0;
		last = now;
		if (EV_KIND(x.kind) != EV_DONE) {
			q->slot = slot;
			q->has_slot = has;
			q->seq = seq;
			r->now = now;
			r->compute_busy = compute_busy;
			r->comm_busy = comm_busy;
			r->nleft = nleft;
			r->exposed = exposed;
			r->events = events;
			if (EV_KIND(x.kind) == EV_LAT)
				on_latency(r, (int)x.id);
			else
				on_flow(r, (int)x.id, EV_VER(x.kind));
			oom = r->oom;
			slot = q->slot;
			has = q->has_slot;
			q->has_slot = 0;
			seq = q->seq;
			compute_busy = r->compute_busy;
			comm_busy = r->comm_busy;
			nleft = r->nleft;
			slow = d->slowed ? d->slow : 1;
			continue;
		}
		/* finish(x.id), unless rescheduled since (restretch) */
		i = (int)x.id;
		if (EV_VER(x.kind) != tasks[i].ver)
			continue;
		tasks[i].end = now;
		compute_busy -= first[i].flag & DES_ON_COMPUTE;
		comm_busy -= (first[i].flag & DES_ON_COMM) != 0;
		nleft--;
		n = first[i].nsucc;
		for (k = 0; k < n; k++) {
			to = k == 0 ? first[i].s0 : k == 1 ? first[i].s1 : succ[first[i].soff + k - 2];
			if (--first[to].waiting != 0)
				continue;
			/* start(to): its first event, pushed */
			tasks[to].start = now;
			if (first[to].flag & DES_MARK)
				mark_start(d, to, exposed, events);
			compute_busy += first[to].flag & DES_ON_COMPUTE;
			comm_busy += (first[to].flag & DES_ON_COMM) != 0;
			t = now + first[to].delay;
			if (first[to].cls == DES_COMPUTE) {
				t = now + first[to].delay * slow;
				d->run_task[tasks[to].stream] = to;
				d->run_end[tasks[to].stream] = t;
			}
			ev.seq = seq++;
			ev.kind = first[to].kind;
			ev.id = (uint32_t)to;
			if (!(t >= 0) || t > DBL_MAX) {
				oom = 1;  /* as evq_push refuses it */
				continue;
			}
			memcpy(&ev.t, &t, sizeof ev.t);
			oom |= push_slot(q, ev, &slot, &has);
		}
	}
	q->slot = slot;
	q->has_slot = has;
	q->seq = seq;
	r->oom |= oom;
	r->nleft = nleft;
	d->tot.events = events;
	d->tot.exposed = exposed;
}

int des_run(struct des *d)
{
	struct run r = {d, 0, 0, 0, d->ntasks, 0, 0, 0, 0};
	int i;

	if (prepare(d))
		return -1;
	for (i = 0; i < d->nroots; i++)  /* those that wait for nothing, in task order */
		start(&r, d->roots[i]);
	loop(&r);
	if (r.oom || r.nleft != 0)
		return -1;
	totals(d);
	return 0;
}

void des_stream_bounds(const struct des *d, double *lb, int max, int *n)
{
	int i, s;

	*n = d->nstreams < max ? d->nstreams : max;
	for (i = 0; i < *n; i++)
		lb[i] = 0;
	for (i = 0; i < d->ntasks; i++) {
		const struct des_task *t = &d->tasks[i];
		if ((s = t->stream) >= *n)
			continue;
		lb[s] += t->coll >= 0 ? coll_time(&d->colls[t->coll].c) : des_work_least(d, s, t->dur);
	}
}

double des_path_bound(const struct des *d, double *start)
{
	double end, span = 0;
	int i, e;

	for (i = 0; i < d->ntasks; i++)
		start[i] = 0;
	for (i = 0; i < d->ntasks; i++) {  /* an edge goes from a task to a later one (des_dep) */
		const struct des_task *t = &d->tasks[i];
		end = start[i] + (t->coll >= 0 ? coll_time(&d->colls[t->coll].c) : des_work_least(d, t->stream, t->dur));
		span = end > span ? end : span;
		for (e = t->edge; e >= 0; e = d->edges[e].next)
			if (end > start[d->edges[e].to])
				start[d->edges[e].to] = end;
	}
	return span;
}

void des_trace_events(const struct des *d, FILE *f, int *first,
		      const char *(*name)(void *ctx, const struct des_task *t, char *buf, size_t n),
		      void *ctx)
{
	char buf[96];
	int i, k;

	for (i = 0; i < d->nstreams; i++) {
		const struct des_stream *s = &d->streams[i];
		fprintf(f, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
			*first ? "" : ",", s->rank, i, s->name);
		fprintf(f, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
			s->rank, i, i);
		*first = 0;
	}
	for (i = 0; i < d->ntasks; i++) {
		const struct des_task *t = &d->tasks[i];
		int streams[2] = {t->stream, t->stream2};
		if (t->end <= t->start)
			continue;  /* zero-length waits and empty collectives */
		name(ctx, t, buf, sizeof buf);
		for (k = 0; k < 2 && streams[k] >= 0; k++)
			fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d}",
				*first ? "" : ",", buf, t->start * 1e6, (t->end - t->start) * 1e6,
				d->streams[streams[k]].rank, streams[k]), *first = 0;
	}
}

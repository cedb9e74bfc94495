/*
 * des.h — discrete-event simulation of a task graph on streams and shared links.
 *
 * The model is CUDA's: a task runs on a stream (a GPU's compute stream, an NCCL
 * stream, a copy engine, the host thread that issues kernels, the host CPU's
 * optimizer); tasks on one stream run one after the other in the order they
 * were issued; a task may also wait for tasks on other streams (events). A task
 * starts when all it waits for is done. Work tasks take a fixed duration.
 * Collective tasks take their latency, then their phases (coll.h): while several
 * collectives are in a bandwidth phase at once, each link is shared equally
 * among those using it (processor sharing, SimGrid's fluid network model in its
 * simplest form), so overlapping collectives slow each other where they really
 * share a link. A rank's compute kernels also slow down while a collective
 * is moving data: NCCL's kernels hold SMs (one thread block per channel) and
 * memory bandwidth that the compute kernels then lack, so a compute task's
 * remaining work runs `slow` times longer from the moment a collective enters
 * its bandwidth phase until none is in flight (des.c; the factor is the
 * caller's, from measurements of overlapped compute: compute.h). The run pops events from an evq ordered by
 * (time, insertion count): the same graph always gives the same times, bit for
 * bit.
 *
 * All state is in struct des. Its arrays grow while a graph is built and are
 * kept by des_reset, so a sweep reuses one struct des without allocating.
 */
#ifndef SHARDCAST_DES_H
#define SHARDCAST_DES_H

#include <stdint.h>
#include <stdio.h>

#include "coll.h"
#include "evq.h"

enum des_class {
	DES_CPU,       /* the host thread that issues work (Python, autograd, our runtime) */
	DES_COMPUTE,   /* a GPU's compute stream */
	DES_COMM,      /* an NCCL stream (one per process group) */
	DES_COPY,      /* a host<->device copy engine */
	DES_HOST,      /* host CPU compute (offloaded optimizer) */
	DES_CLASS_COUNT
};

enum { DES_MAX_STREAMS = 32 };

struct des_stream {
	int rank;          /* the rank (trace pid) */
	int cls;           /* enum des_class */
	char name[32];     /* trace thread name */
	int last;          /* the last task issued on it, -1 none */
};

struct des_task {
	double dur;        /* s of work (work tasks) */
	double start, end; /* s, filled by des_run */
	int stream;
	int stream2;       /* another stream showing the same collective (another rank), -1 */
	int coll;          /* index into colls, -1 for work tasks */
	int npred;         /* tasks it waits for */
	int edge;          /* first outgoing edge, -1 none */
	int label;         /* caller's (e.g. the graph op) */
	int tag;           /* caller's (what kind of task) */
	uint32_t ver;      /* compute tasks: bumped when their end is rescheduled */
};

struct des_edge {
	int to, next;
};

/* Where a task counts (des_first.flag; des_run sets them from the streams,
 * expose_rank and the marks). */
enum {
	DES_ON_COMPUTE = 1,  /* on a compute stream of the exposure rank */
	DES_ON_COMM = 2,     /* a collective on a comm stream of the exposure rank */
	DES_ON_RANK = 4,     /* on a stream of the exposure rank (totals) */
	DES_MARK = 8         /* marked (des_mark) */
};

/* What des_run reads of a task as it ends and its successors start, in one
 * record: an event leads to the next through one load per task. */
struct des_first {
	double delay;      /* s: its duration (work) or latency (collective): its first event */
	int32_t waiting;   /* predecessors not finished */
	int32_t nsucc;     /* successors, in the order of its edge list: */
	int32_t s0, s1;    /* the first two, */
	int32_t soff;      /* the others at succ[soff ..] */
	uint8_t kind;      /* the first event: its end or the end of its latency */
	uint8_t flag;      /* where it counts: compute or comm of the exposure rank, the rank */
	uint8_t cls;       /* its stream's enum des_class */
};

struct des_coll {
	struct coll_cost c;
	int phase;         /* current phase, -1 in the latency */
	double left;       /* fraction of the phase's work left */
	double rate;       /* fraction per s at the last update */
	uint32_t ver;      /* bumped at each reschedule: stale events are dropped */
	int task;
};

struct des_totals {
	double makespan;             /* s: the last task's end */
	double busy[DES_CLASS_COUNT];/* s of task time per class, on the exposure rank */
	double comm;                 /* s of collective time (start to end), all comm streams of the rank */
	double exposed;              /* s during which a collective was in flight and the rank's compute stream idle */
	uint64_t events;             /* events popped */
};

struct des {
	struct des_stream streams[DES_MAX_STREAMS];
	int nstreams;
	struct des_task *tasks;
	int ntasks, captasks;
	struct des_edge *edges;
	int nedges, capedges;
	struct des_coll *colls;
	int ncolls, capcolls;
	struct des_first *first; /* (ntasks) run-time record of each task */
	int capfirst;
	int first_n;       /* tasks whose structure (first[] but delay and waiting, succ) is
			      set (-1 none) */
	int first_rank;    /* the expose_rank it was set for */
	int *succ;         /* successors after each task's first two */
	int capsucc;
	int *roots, nroots, caproots; /* the tasks that wait for nothing, in task order */
	int *active;       /* collectives in a bandwidth phase */
	int nactive, capactive;
	struct evq q;
	double slow;       /* >= 1: factor on a compute task's remaining time while
			      collectives run (1 = no interference) */
	int slowed;        /* the factor applies now (des_run) */
	int run_task[DES_MAX_STREAMS]; /* compute streams: the task started last */
	double run_end[DES_MAX_STREAMS];/* s: its scheduled end */
	int expose_rank;   /* the rank whose exposure and busy times are totalled */
	struct des_totals tot;
	/* marked tasks: when one starts, the run's exposure and events so far are
	 * recorded (des_mark; the step model measures a period of its blocks) */
	int *mark, nmark, capmark;
	double *mark_exposed;  /* (nmark) s of exposed communication when it started */
	uint64_t *mark_events; /* (nmark) events popped when it started */
	int capmarkv;
};

/* Creates an empty simulation. Returns 0, or -1 when out of memory. */
int des_create(struct des *d);

/* Forgets the graph (keeps the memory). */
void des_reset(struct des *d);

void des_delete(struct des *d);

/* Adds a stream; returns its index or -1 when there are DES_MAX_STREAMS already. */
int des_stream(struct des *d, int rank, int cls, const char *name);

/* Grow the task and edge arrays by doubling (the slow paths of the inline
 * functions below). Return 0, or -1 when out of memory. */
int des_grow_tasks(struct des *d);
int des_grow_edges(struct des *d);

/* Makes task to wait for task from (from < to; from = -1 is ignored).
 * Returns 0, or -1 when out of memory or from >= to. Inline, as des_work: a
 * step's graph has thousands of tasks, built once per simulation. */
static inline int des_dep(struct des *d, int from, int to)
{
	struct des_edge *e;

	if (from < 0)
		return 0;
	if (from >= to || (d->nedges >= d->capedges && des_grow_edges(d)))
		return -1;
	e = &d->edges[d->nedges];
	e->to = to;
	e->next = d->tasks[from].edge;
	d->tasks[from].edge = d->nedges++;
	d->tasks[to].npred++;
	return 0;
}

/* Issues a task on stream after the stream's previous task: work of dur
 * seconds (coll = -1) or collective coll. Returns its index, or -1 when out of
 * memory. */
static inline int des_issue(struct des *d, int stream, double dur, int coll, int label, int tag)
{
	struct des_task *t;
	int i;

	if (d->ntasks >= d->captasks && des_grow_tasks(d))
		return -1;
	i = d->ntasks++;
	t = &d->tasks[i];
	t->dur = dur > 0 ? dur : 0;
	t->start = t->end = 0;
	t->stream = stream;
	t->stream2 = -1;
	t->coll = coll;
	t->npred = 0;
	t->edge = -1;
	t->label = label;
	t->tag = tag;
	t->ver = 0;
	if (des_dep(d, d->streams[stream].last, i))
		return -1;
	d->streams[stream].last = i;
	return i;
}

/* Issues a work task of dur seconds on stream, after the stream's previous task.
 * Returns its index, or -1 when out of memory. */
static inline int des_work(struct des *d, int stream, double dur, int label, int tag)
{
	return des_issue(d, stream, dur, -1, label, tag);
}

/* Issues a collective of cost c on stream (after the stream's previous task).
 * Returns its index, or -1 when out of memory. */
int des_coll(struct des *d, int stream, const struct coll_cost *c, int label, int tag);

/* Shows task on stream too (another rank's view of the same collective). */
static inline void des_also_on(struct des *d, int task, int stream)
{
	d->tasks[task].stream2 = stream;
	d->first_n = -1;  /* where it counts changes */
}

/* Marks task: des_run records d->tot.exposed and d->tot.events as they are
 * when it starts into mark_exposed[k] and mark_events[k], k the value
 * returned (-1 when out of memory). des_reset forgets the marks. */
int des_mark(struct des *d, int task);

/* Runs the graph from time 0. Fills each task's start and end and d->tot.
 * Returns 0, or -1 when out of memory or when tasks never ran (a cycle). */
int des_run(struct des *d);

/* Writes the run as Chrome trace events (one "X" event per task, pid = rank,
 * tid = stream) into f, comma-separated, after the first if *first is 0.
 * name(ctx, task, buf, n) gives each task's name. */
void des_trace_events(const struct des *d, FILE *f, int *first,
		      const char *(*name)(void *ctx, const struct des_task *t, char *buf, size_t n),
		      void *ctx);

/* The least time the tasks of each stream take, summed per stream into
 * lb[0 .. *n - 1] (*n = nstreams, at most max): a work task its duration, a
 * collective its latency plus each phase's work on its busiest link alone.
 * Tasks on a stream run one after the other and interference and link sharing
 * only stretch them, so des_run's makespan is at least the largest sum. */
void des_stream_bounds(const struct des *d, double *lb, int max, int *n);

/* The least makespan of d's task graph: every task at its least time (as
 * des_stream_bounds takes it), started when the last task it waits for ends
 * (the tasks before it on its stream among them). des_run starts a task at
 * that moment too and only stretches tasks, and a task's end is a max-plus
 * function of the times before it, nondecreasing in each, so des_run's
 * makespan is at least this. start: scratch of ntasks. */
double des_path_bound(const struct des *d, double *start);

/* What des_work_least multiplies a work task's time by on a stream of class
 * cls of a DES whose slow is slow: a compute task runs slow times longer under
 * interference, so never shorter, unless a caller's factor were below 1 (then
 * slow); else 1, which leaves every time as it is, bit for bit. */
static inline double des_least_factor(double slow, int cls)
{
	return slow < 1 && cls == DES_COMPUTE ? slow : 1.0;
}

/* des_least_factor of d's slow and stream st's class. */
static inline double des_work_factor(const struct des *d, int st)
{
	return des_least_factor(d->slow, d->streams[st].cls);
}

/* The least time of a work task of dur seconds on stream st of d, as
 * des_stream_bounds takes it. */
static inline double des_work_least(const struct des *d, int st, double dur)
{
	return dur * des_work_factor(d, st);
}

#endif

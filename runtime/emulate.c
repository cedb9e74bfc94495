/*
 * emulate.c — rank 0 of an N-rank job on one device (see emulate.h).
 */
#include "emulate.h"

#include <stdlib.h>

struct emu_comm {              /* an emulated rt_comm's impl */
	struct backend *inner;
	int group;                 /* ranks per node, for comm_split */
	int nsplit;                /* splits made from this communicator */
};

static struct emu_comm *ec(struct rt_comm *c)
{
	return (struct emu_comm *)c->impl;
}

static void scale_by_size(struct rt_comm *c, float *buf, size_t n)
{
	if (c->size > 1 && n)
		ec(c)->inner->scale(buf, (float)c->size, n);
}

static int e_allreduce(struct rt_comm *c, float *buf, size_t n, struct err *e)
{
	(void)e;
	scale_by_size(c, buf, n);
	return 0;
}

static int e_allreduce_start(struct rt_comm *c, float *buf, size_t n, struct rt_req *r, struct err *e)
{
	r->active = 0;
	r->impl = NULL;
	return e_allreduce(c, buf, n, e);
}

static int e_wait(struct rt_req *r, struct err *e)
{
	(void)e;
	r->active = 0;
	return 0;
}

static int e_reduce_scatter(struct rt_comm *c, float *send, float *recv, size_t count, struct err *e)
{
	(void)e;
	if (recv != send)  /* rank 0's slice starts at send */
		ec(c)->inner->copy(recv, send, count * sizeof *send, COPY_D2D);
	scale_by_size(c, recv, count);
	return 0;
}

static int e_allgather(struct rt_comm *c, float *send, float *recv, size_t count, struct err *e)
{
	int r;

	(void)e;
	for (r = 0; r < c->size; r++)
		if (recv + (size_t)r * count != send)
			ec(c)->inner->copy(recv + (size_t)r * count, send, count * sizeof *send, COPY_D2D);
	return 0;
}

/* rank 0's shard [0, sh) copied into every other rank's part of the flat buffer */
static int e_allgather_flat(struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	int r;

	(void)e;
	for (r = 1; r < c->size && (size_t)r * sh < n; r++) {
		size_t lo = (size_t)r * sh, len = n - lo < sh ? n - lo : sh;
		ec(c)->inner->copy(buf + lo, buf, len * sizeof *buf, COPY_D2D);
	}
	return 0;
}

/* rank 0's shard of the sum of N equal buffers, left at buf[0 ..) where it is */
static int e_reduce_scatter_flat(struct rt_comm *c, float *buf, size_t n, size_t sh, struct err *e)
{
	(void)e;
	scale_by_size(c, buf, sh < n ? sh : n);
	return 0;
}

static int e_broadcast(struct rt_comm *c, float *buf, size_t n, int root, struct err *e)
{
	(void)c, (void)buf, (void)n, (void)root, (void)e;
	return 0;
}

static int e_barrier(struct rt_comm *c, struct err *e)
{
	(void)e;
	ec(c)->inner->sync();
	return 0;
}

static int e_allreduce_host(struct rt_comm *c, double *v, int n, int op_max, struct err *e)
{
	int i;

	(void)e;
	if (!op_max)
		for (i = 0; i < n; i++)
			v[i] *= c->size;
	return 0;
}

static int make(struct backend *inner, int rank, int size, int group, struct rt_comm *out, struct err *e)
{
	struct emu_comm *m = calloc(1, sizeof *m);

	if (!m)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	m->inner = inner;
	m->group = group;
	*out = (struct rt_comm){rank, size, m};
	return 0;
}

static int e_comm_split(struct rt_comm *c, int color, int key, struct rt_comm *out, struct err *e)
{
	struct emu_comm *m = ec(c);
	int g = m->group, size;

	(void)color, (void)key;
	if (g < 1 || c->size % g)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "emulated world of %d ranks: %d ranks per node do not divide it", c->size, g);
	size = m->nsplit++ % 2 == 0 ? g : c->size / g;
	return make(m->inner, 0, size, size, out, e);
}

static void e_comm_free(struct rt_comm *c)
{
	free(c->impl);
	c->impl = NULL;
}

int emu_open(struct backend *inner, int N, int group, struct backend *out, struct rt_comm *world,
	     struct err *e)
{
	if (N < 1)
		return err_set(e, ERR_INPUT, NULL, 0, "--emulate-world %d: expected a number of ranks >= 1", N);
	if (group < 1 || N % group)
		group = N;  /* one node holds them all */
	*out = *inner;
	out->allreduce = e_allreduce;
	out->allreduce_start = e_allreduce_start;
	out->wait = e_wait;
	out->reduce_scatter = e_reduce_scatter;
	out->allgather = e_allgather;
	out->allgather_flat = e_allgather_flat;
	out->reduce_scatter_flat = e_reduce_scatter_flat;
	out->broadcast = e_broadcast;
	out->barrier = e_barrier;
	out->allreduce_host = e_allreduce_host;
	out->comm_split = e_comm_split;
	out->comm_free = e_comm_free;
	return make(inner, 0, N, group, world, e);
}

void emu_close(struct rt_comm *world)
{
	e_comm_free(world);
}

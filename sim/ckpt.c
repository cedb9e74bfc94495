/*
 * ckpt.c — checkpoint size and time (see ckpt.h for the model).
 */
#include "ckpt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

__attribute__((format(printf, 2, 3)))
static void warn(struct ckpt_cost *c, const char *fmt, ...)
{
	va_list ap;

	if (c->nwarn == CKPT_MAX_WARN)
		return;
	va_start(ap, fmt);
	vsnprintf(c->warn[c->nwarn++], sizeof c->warn[0], fmt, ap);
	va_end(ap);
}

static double min2(double a, double b)
{
	return a < b ? a : b;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

static void check(const struct scenario *s, int mode, struct ckpt_cost *c)
{
	const struct scn_checkpoint *k = &s->s.checkpoint;
	double timeout = k->collective_timeout_minutes * 60;
	char b[2][32];

	if (c->block > timeout)
		warn(c, "a checkpoint blocks training for %s, longer than the collective timeout (%s): "
		     "ranks waiting in a collective meanwhile hit the NCCL watchdog; raise the timeout or use %s",
		     units_format(b[0], 32, c->block, UNIT_TIME), units_format(b[1], 32, timeout, UNIT_TIME),
		     k->state_dict == CKPT_FULL ? "state_dict = sharded" : "mode = async");
	if (k->host_memory > 0 && (mode == CKPT_ASYNC || k->state_dict == CKPT_FULL) && c->host > k->host_memory)
		warn(c, "the checkpoint needs %s of host memory on %s, more than its %s",
		     units_format(b[0], 32, c->host, UNIT_BYTES),
		     k->state_dict == CKPT_FULL ? "rank 0's node" : "each node",
		     units_format(b[1], 32, k->host_memory, UNIT_BYTES));
}

void ckpt_cost(const struct scenario *s, double params, int mode, struct ckpt_cost *c)
{
	const struct scn_checkpoint *k = &s->s.checkpoint;
	double nodes = (double)s->s.cluster.nodes;
	double d2h;

	memset(c, 0, sizeof *c);
	c->bytes_per_param = s->plan.ckpt_bytes_per_param;  /* what it holds: plan.h */
	c->bytes = c->bytes_per_param * params;
	c->node_bw = k->node_bandwidth > 0 ? k->node_bandwidth
		: (double)s->s.cluster.nics_per_node * s->inter.bandwidth * s->inter.efficiency;
	if (k->state_dict == CKPT_SHARDED) {
		c->shard = c->bytes / (double)s->plan.ckpt_ranks;
		c->write_bw = min2(k->storage_bandwidth, nodes * c->node_bw);
		c->write = c->bytes / c->write_bw;
		c->load = c->write;
		d2h = c->shard / k->host_copy_bandwidth;
		c->host = c->bytes / nodes;
	} else {
		/* rank 0's node receives what the other nodes hold; inside a node the
		 * gather runs over the intra-node link */
		c->shard = c->bytes;
		c->gather = nodes > 1 ? c->bytes * (nodes - 1) / nodes / c->node_bw
			: c->bytes / (s->intra.bandwidth * s->intra.efficiency);
		c->write_bw = min2(k->storage_bandwidth, c->node_bw);
		c->write = c->bytes / c->write_bw;
		c->load = c->write + c->gather;
		d2h = max2(c->gather, c->bytes / k->host_copy_bandwidth);
		c->host = c->bytes;
	}
	c->block_sync = c->gather + c->write;
	if (mode == CKPT_SYNC) {
		c->block = c->block_sync;
	} else {
		c->copy = d2h;
		c->block = d2h;
		c->background = c->write;
	}
	check(s, mode, c);
}

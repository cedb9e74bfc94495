/*
 * coll.c — collective cost models (see coll.h for the models and sources).
 */
#include "coll.h"

#include <math.h>
#include <string.h>

void coll_group_make(struct coll_group *g, int n, int nodes, const struct link *intra,
		     const struct link *inter, int nics, int sharing)
{
	memset(g, 0, sizeof *g);
	g->n = n < 1 ? 1 : n;
	g->nodes = nodes < 1 ? 1 : nodes;
	g->intra_bw = intra->bandwidth * intra->efficiency;
	g->inter_bw = inter->bandwidth * inter->efficiency * nics / (sharing < 1 ? 1 : sharing);
	g->intra_lat = intra->latency;
	g->inter_lat = inter->latency;
}

/* One phase moving f·S through every GPU's intra link and f·S through the node's NICs. */
static void phase(struct coll_cost *c, double intra_bytes, double inter_bytes,
		  const struct coll_group *g)
{
	struct coll_phase *p = &c->ph[c->nphase++];

	p->work[COLL_INTRA] = intra_bytes > 0 ? intra_bytes / g->intra_bw : 0;
	p->work[COLL_INTER] = inter_bytes > 0 ? inter_bytes / g->inter_bw : 0;
}

/* Ring over all n ranks: every link of the ring carries f·S; the intra-node links
 * are used when a node holds more than one rank, the NICs when there are nodes. */
static void ring(struct coll_cost *c, double f, int steps, int inter_steps,
		 const struct coll_group *g)
{
	int r = g->n / g->nodes;
	double moved = f * c->bytes;

	phase(c, r > 1 ? moved : 0, g->nodes > 1 ? moved : 0, g);
	c->latency += COLL_BASE_LATENCY + (steps - inter_steps) * g->intra_lat +
		inter_steps * g->inter_lat;
}

static int log2_ceil(int n)
{
	int l = 0;

	while ((1 << l) < n)
		l++;
	return l;
}

static void tree(struct coll_cost *c, const struct coll_group *g)
{
	int r = g->n / g->nodes;
	double moved = c->bytes / (0.5 * COLL_TREE_DERATE);

	phase(c, r > 1 ? moved : 0, g->nodes > 1 ? moved : 0, g);
	c->latency += COLL_BASE_LATENCY +
		2 * ((r - 1) * g->intra_lat + log2_ceil(g->nodes) * g->inter_lat);
}

/* Two-level: intra reduce-scatter / inter op on 1/r of the data per GPU (the r
 * GPUs of a node run their inter-node rings at once over the node's NICs, so
 * the node moves f·S) / intra all-gather. */
static void hier(struct coll_cost *c, const struct coll_group *g)
{
	int r = g->n / g->nodes, N = g->nodes;
	double S = c->bytes, fi = (double)(r - 1) / r, fn = (double)(N - 1) / N;
	int first = c->op != COLL_ALLGATHER, last = c->op != COLL_REDUCE_SCATTER;
	double inter = c->op == COLL_ALLREDUCE ? 2 * fn * S : fn * S;
	int inter_steps = c->op == COLL_ALLREDUCE ? 2 * (N - 1) : N - 1;

	if (first) {
		phase(c, fi * S, 0, g);
		c->latency += COLL_BASE_LATENCY + (r - 1) * g->intra_lat;
	}
	phase(c, 0, inter, g);
	c->latency += COLL_BASE_LATENCY + inter_steps * g->inter_lat;
	if (last) {
		phase(c, fi * S, 0, g);
		c->latency += COLL_BASE_LATENCY + (r - 1) * g->intra_lat;
	}
}

static void cost_algo(int op, int algo, double bytes, const struct coll_group *g,
		      struct coll_cost *c)
{
	int n = g->n, N = g->nodes, r = n / N;

	memset(c, 0, sizeof *c);
	c->op = op;
	c->algo = algo;
	c->bytes = bytes;
	if (n <= 1 || bytes <= 0)
		return;
	if (algo == COLL_HIER && (r == 1 || N == 1 || op == COLL_BROADCAST || op == COLL_REDUCE ||
				  op == COLL_GATHER || op == COLL_ALLTOALL))
		algo = c->algo = COLL_RING;
	if (algo == COLL_TREE && op != COLL_ALLREDUCE)
		algo = c->algo = COLL_RING;
	if (algo == COLL_TREE) {
		tree(c, g);
		return;
	}
	if (algo == COLL_HIER) {
		hier(c, g);
		return;
	}
	switch (op) {
	case COLL_ALLREDUCE:
		ring(c, 2.0 * (n - 1) / n, 2 * (n - 1), 2 * (N - 1), g);
		break;
	case COLL_REDUCE_SCATTER:
	case COLL_ALLGATHER:
		ring(c, (double)(n - 1) / n, n - 1, N - 1, g);
		break;
	case COLL_BROADCAST:
	case COLL_REDUCE:
		/* pipelined chain: every link carries the whole buffer once */
		ring(c, 1.0, n - 1, N - 1, g);
		break;
	case COLL_GATHER:
		/* point-to-point copies into the root: its ingress carries (n-1)/n of the total */
		phase(c, r > 1 ? (double)(n - 1) / n * bytes : 0, N > 1 ? (double)(n - r) / n * bytes : 0, g);
		c->latency += COLL_BASE_LATENCY + (N > 1 ? g->inter_lat : g->intra_lat);
		break;
	case COLL_ALLTOALL:
		/* each rank keeps 1/n, sends (r-1)/n inside its node and (n-r)/n out of
		 * it; the node's NICs carry r·(n-r)/n·S */
		phase(c, (double)(r - 1) / n * bytes, (double)r * (n - r) / n * bytes, g);
		c->latency += COLL_BASE_LATENCY + (N > 1 ? g->inter_lat : g->intra_lat);
		break;
	}
}

void coll_cost(int op, int algo, double bytes, const struct coll_group *g, struct coll_cost *c)
{
	if (algo == COLL_AUTO) {
		struct coll_cost t;
		cost_algo(op, COLL_RING, bytes, g, c);
		if (op != COLL_ALLREDUCE)
			return;
		cost_algo(op, COLL_TREE, bytes, g, &t);
		if (coll_time(&t) < coll_time(c))
			*c = t;
		return;
	}
	cost_algo(op, algo, bytes, g, c);
}

const char *coll_op_name(int op)
{
	static const char *const names[] = {"all-reduce", "reduce-scatter", "all-gather",
		"broadcast", "reduce", "gather", "all-to-all"};
	return op >= 0 && op < COLL_OP_COUNT ? names[op] : "?";
}

const char *coll_algo_name(int algo)
{
	static const char *const names[] = {"auto", "ring", "tree", "hierarchical"};
	return algo >= 0 && algo < COLL_ALGO_COUNT ? names[algo] : "?";
}

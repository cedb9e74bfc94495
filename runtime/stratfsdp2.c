/*
 * stratfsdp2.c — the runtime's FSDP2 units (strategy.h fsdp2; plan.h
 * LAYOUT_PER_PARAM), the algorithm of PyTorch's fully_shard
 * (torch/distributed/fsdp/_fully_shard/) on the runtime's buffers:
 *
 *  - every parameter is chunked on dim 0 over the shard group; rank r holds
 *    rows [r c, (r + 1) c) of c = ceil(rows / N), zero past the last row
 *    (_fsdp_param.py _init_sharded_param); a unit's shard is its
 *    parameters' shards in order, the units' shards one flat buffer
 *    (memory.h S3);
 *  - a gather all-gathers the unit's shard into a flat buffer (N x shard:
 *    rank-major), then copies each parameter's N chunks out into its padded
 *    unsharded tensor (foreach_all_gather, foreach_all_gather_copy_out);
 *    in forward the buffer is kept until the next unit's copy-out, the last
 *    until forward ends (the stream handoff, wait_for_unshard); in backward
 *    it is freed after the copy-out. Backward gathers a unit before its last
 *    op and all-gathers the unit before it in forward order
 *    (_backward_prefetch); forward_prefetch all-gathers the next unit;
 *  - after a unit's backward its unsharded tensors are freed, the previous
 *    unit's reduce-scatter input released, its gradient copied (rank-major,
 *    padding included) into a new input and freed, reduce-scattered into an
 *    output of the shard's size (all-reduced across replicas for hybrid),
 *    added to the gradient shard and freed; the input is kept until the next
 *    reduction or the end of the micro-step (foreach_reduce,
 *    reduce_scatter_states).
 *
 * sim/models/memfsdp2.c walks the same schedule for framework = shardcast.
 */
#include "strategy_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- layout ------------------------------------------------------------------ */

int stratfsdp2_layout(struct strat *s, struct err *e)
{
	struct rtm *m = &s->m;
	size_t N = (size_t)s->N;
	int p, u;

	s->prow = calloc((size_t)m->np + 1, sizeof *s->prow);
	s->pcol = calloc((size_t)m->np + 1, sizeof *s->pcol);
	s->psh = calloc((size_t)m->np + 1, sizeof *s->psh);
	s->psoff = calloc((size_t)m->np + 1, sizeof *s->psoff);
	if (!s->prow || !s->pcol || !s->psh || !s->psoff)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	for (u = 0; u < s->nu; u++)
		s->u[u].sh = 0;
	for (p = 0; p < m->np; p++) {
		const struct rt_param *q = &m->p[p];
		size_t r = (size_t)graph_param_rows(&m->g, q->op, m->op_b[q->op] == p, (double)q->n);
		s->prow[p] = r;
		s->pcol[p] = q->n / r;
		s->psh[p] = (r + N - 1) / N * s->pcol[p];
		u = s->punit[p];
		s->psoff[p] = s->u[u].sh;
		s->u[u].sh += s->psh[p];
	}
	s->S = 0;
	for (u = 0; u < s->nu; u++) {
		s->u[u].soff = s->S;
		s->S += s->u[u].sh;
	}
	s->agheld = s->rsheld = -1;
	return 0;
}

/* This rank's rows of every parameter, zero past the last (its shard). */
void stratfsdp2_init(struct strat *s)
{
	struct rtm *m = &s->m;
	size_t rank = s->N > 1 ? (size_t)s->shard.rank : 0, i, row, c;
	float *h = calloc(s->S + 1, sizeof *h);
	int p;

	if (!h)
		return;
	for (p = 0; p < m->np; p++) {
		const struct rt_param *q = &m->p[p];
		size_t base = s->u[s->punit[p]].soff + s->psoff[p], r0 = rank * (s->psh[p] / s->pcol[p]);
		for (i = 0; i < s->psh[p]; i++) {
			row = r0 + i / s->pcol[p];
			c = i % s->pcol[p];
			if (row < s->prow[p])
				h[base + i] = rtm_init_value(s->o.seed, q->goff + row * s->pcol[p] + c, q->kind);
		}
	}
	s->be->copy(s->be, s->params, h, s->S * sizeof *h, COPY_H2D);
	free(h);
}

/* Parameter p and its gradient: in its unit's padded unsharded tensors. */
float *stratfsdp2_param(struct strat *s, int p)
{
	return s->u[s->punit[p]].pg + s->psoff[p] * (size_t)s->N;
}

float *stratfsdp2_grad(struct strat *s, int p)
{
	return s->u[s->punit[p]].ug + s->psoff[p] * (size_t)s->N;
}

/* Chunk r of parameter p: in the rank-major flat buffer and in its
 * unsharded tensor. */
static void chunks(struct strat *s, int u, float *flat, float *full, int out)
{
	size_t N = (size_t)s->N, r, sh = s->u[u].sh;
	int p;

	for (r = 0; r < N; r++)
		for (p = 0; p < s->m.np; p++) {
			float *a, *b;
			if (s->punit[p] != u)
				continue;
			a = flat + r * sh + s->psoff[p];
			b = full + s->psoff[p] * N + r * s->psh[p];
			if (out)  /* split_with_sizes_copy: the all-gather buffer to the tensors */
				s->be->copy(s->be, b, a, s->psh[p] * sizeof(float), COPY_D2D);
			else      /* chunk_cat: the gradients into the reduce-scatter input */
				s->be->copy(s->be, a, b, s->psh[p] * sizeof(float), COPY_D2D);
		}
}

/* ---- gathers ----------------------------------------------------------------- */

static int unshard(struct strat *s, int u, struct err *e)
{
	struct sunit *un;
	int rc;

	if (u < 0 || s->u[u].pg || s->u[u].ag || s->u[u].n == 0)
		return 0;
	un = &s->u[u];
	rc = strat_buf(s, &un->ag, un->sh * (size_t)s->N, s->wp, "all-gather buffer", e);
	if (!rc)
		rc = strat_agree(s, e);
	if (!rc)
		rc = s->be->allgather(s->be, &s->shard, s->params + un->soff, un->ag, un->sh, e);
	return rc;
}

static void ag_free(struct strat *s, int u)
{
	if (u >= 0)
		strat_unbuf(s, &s->u[u].ag);
}

/* unshard, the handoff (forward: the buffer kept before is freed), the
 * copy-out; the buffer kept in forward, freed in backward */
static int gather(struct strat *s, int u, int fwd, struct err *e)
{
	struct sunit *un;
	int rc;

	if (u < 0 || s->u[u].pg || s->u[u].n == 0)
		return 0;
	un = &s->u[u];
	rc = unshard(s, u, e);
	if (!rc && fwd && s->agheld >= 0 && s->agheld != u) {
		ag_free(s, s->agheld);
		s->agheld = -1;
	}
	if (!rc)
		rc = strat_buf(s, &un->pg, un->sh * (size_t)s->N, s->wp, "gathered unit", e);
	if (rc)
		return rc;
	chunks(s, u, un->ag, un->pg, 1);
	if (fwd)
		s->agheld = u;
	else
		ag_free(s, u);
	return 0;
}

/* the next unit in forward (fwd = 1) or backward order; the root is never next */
static int next_unit(const struct strat *s, int u, int fwd)
{
	int v = fwd ? u + 1 : (u == 0 ? s->nu - 1 : u - 1);
	return v >= 1 && v < s->nu ? v : -1;
}

int stratfsdp2_fwd_pre(struct strat *s, int op, struct err *e)
{
	int u, rc = 0;

	for (u = 0; u < s->nu && !rc; u++)
		if (s->u[u].first == op) {
			rc = gather(s, u, 1, e);
			if (!rc && s->o.plan.fwd_prefetch)
				rc = unshard(s, next_unit(s, u, 1), e);
		}
	return rc;
}

/* reshard after forward (the root only when asked); the forward's end frees
 * the kept all-gather buffer */
int stratfsdp2_fwd_post(struct strat *s, int op, struct err *e)
{
	int u;

	(void)e;
	for (u = s->nu - 1; u >= 0; u--)
		if (s->u[u].last == op && (u == 0 ? s->o.plan.reshard_root : s->reshard_fwd))
			strat_unbuf(s, &s->u[u].pg);
	if (op == s->m.g.nops - 1) {
		ag_free(s, s->agheld);
		s->agheld = -1;
	}
	return 0;
}

int stratfsdp2_bwd_pre(struct strat *s, int op, struct err *e)
{
	int u, rc = 0;

	for (u = 0; u < s->nu && !rc; u++)
		if (s->u[u].last == op) {
			rc = gather(s, u, 0, e);
			if (!rc)
				rc = unshard(s, next_unit(s, u, 0), e);
		}
	return rc;
}

/* ---- reduction --------------------------------------------------------------- */

static void rs_release(struct strat *s)
{
	if (s->rsheld >= 0)
		strat_unbuf(s, &s->u[s->rsheld].rs);
	s->rsheld = -1;
}

/* foreach_reduce of unit u: copy-in, reduce-scatter, the shard added */
static int reduce(struct strat *s, int u, struct err *e)
{
	struct sunit *un = &s->u[u];
	float *out = NULL;
	size_t sh = un->sh;
	int rc;

	rs_release(s);
	rc = strat_buf(s, &un->rs, sh * (size_t)s->N, s->wg, "reduce-scatter input", e);
	if (rc)
		return rc;
	chunks(s, u, un->rs, un->ug, 0);
	strat_unbuf(s, &un->ug);
	s->rsheld = u;
	rc = strat_buf(s, &out, sh, s->wg, "reduce-scatter output", e);
	if (!rc)
		rc = strat_agree(s, e);
	if (!rc)
		rc = s->be->reduce_scatter(s->be, &s->shard, un->rs, out, sh, e);
	if (!rc && s->repl.size > 1)
		rc = s->be->allreduce(s->be, &s->repl, out, sh, e);
	if (!rc) {
		strat_round(s, out, sh);
		s->be->axpy(s->be, s->grads + un->soff, out, 1.0f, sh);
		strat_round(s, s->grads + un->soff, sh);
	}
	strat_unbuf(s, &out);
	return rc;
}

/* after the units starting at op i: resharded, their gradients reduced */
int stratfsdp2_bwd_post(struct strat *s, int op, struct err *e)
{
	int u, rc = 0;

	for (u = s->nu - 1; u >= 0 && !rc; u--) {
		if (s->u[u].first != op)
			continue;
		strat_unbuf(s, &s->u[u].pg);
		if (s->u[u].ug)
			rc = reduce(s, u, e);
	}
	return rc;
}

/* the micro-step's backward is over: the last input released */
void stratfsdp2_bwd_end(struct strat *s)
{
	rs_release(s);
}

/* ---- inspection and cleanup -------------------------------------------------- */

/* The whole model on the host: every unit's shards gathered, each
 * parameter's chunks put back in its rows (tests; host memory is device
 * memory on cpu). */
int stratfsdp2_gather_params(struct strat *s, float *host, struct err *e)
{
	size_t N = (size_t)s->N, r, rows;
	int u, p, rc = 0;

	for (u = 0; u < s->nu && !rc; u++) {
		float *full = malloc(s->u[u].sh * N * sizeof *full + 1);
		if (!full)
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
		rc = s->be->allgather(s->be, &s->shard, s->params + s->u[u].soff, full, s->u[u].sh, e);
		for (p = 0; p < s->m.np && !rc; p++) {
			if (s->punit[p] != u)
				continue;
			for (r = 0; r < N; r++) {
				size_t r0 = r * (s->psh[p] / s->pcol[p]);
				rows = r0 >= s->prow[p] ? 0 : s->prow[p] - r0 < s->psh[p] / s->pcol[p] ? s->prow[p] - r0
					: s->psh[p] / s->pcol[p];
				memcpy(host + s->m.p[p].goff + r0 * s->pcol[p], full + r * s->u[u].sh + s->psoff[p],
				       rows * s->pcol[p] * sizeof *host);
			}
		}
		free(full);
	}
	return rc;
}

void stratfsdp2_free(struct strat *s)
{
	free(s->prow);
	free(s->pcol);
	free(s->psh);
	free(s->psoff);
}

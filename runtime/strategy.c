/*
 * strategy.c — data-parallel strategies over any backend (see strategy.h).
 */
#include "strategy_int.h"

#include <stdlib.h>
#include <string.h>

#include "wrap.h"

void strat_opts_from(struct strat_opts *o, const struct scenario *s)
{
	const struct scn_training *t = &s->s.training;

	memset(o, 0, sizeof *o);
	o->plan = s->plan;
	o->recompute = t->recompute;
	o->optimizer = s->plan.optimizer;
	o->micro_batch = t->micro_batch > 0 ? (int)t->micro_batch : 1;
	o->grad_accum = (int)t->grad_accum;
	o->group = (int)s->plan.shard_n;
	o->devices = s->plan.mech == MECH_DP ? (int)s->world : 1;
	o->bucket_mb = t->ddp_bucket_mb;
	o->zero_bucket = t->zero_reduce_bucket_size;
	o->capacity = s->capacity;
	o->lr = 1e-3;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->weight_decay = t->optimizer == OPT_ADAMW ? 0.01 : 0;
	o->momentum = 0.9;
	o->seed = 1234;
}

int strat_parse(const char *spec, struct strat_opts *o)
{
	if (strncmp(spec, "dp:", 3) == 0) {
		o->devices = atoi(spec + 3);
		return o->devices >= 1 && o->devices <= STRAT_MAX_DEV ? plan_from_spec(&o->plan, "dp", PREC_FP32) : -1;
	}
	return plan_from_spec(&o->plan, spec, PREC_FP32);
}

/* ---- small helpers ------------------------------------------------------- */

static struct arena *A(struct strat *s)
{
	return &s->ar[s->cur];
}

/* n elements of w bytes each as the arena counts them (a 16-bit buffer is
 * held in fp32: arena_alloc_as), zeroed. */
static int alloc_w(struct strat *s, float **p, size_t n, size_t w, const char *tag, struct err *e)
{
	int rc = arena_alloc_as(A(s), (void **)p, n * w, n * sizeof(float), tag, e);
	if (!rc)
		s->be->zero(s->be, *p, n * sizeof(float));
	return rc;
}

static int alloc_zero(struct strat *s, float **p, size_t n, const char *tag, struct err *e)
{
	return alloc_w(s, p, n, sizeof(float), tag, e);
}

/* A 16-bit buffer's values, rounded to its type after they were written. */
static void rnd(struct strat *s, float *p, size_t n)
{
	if (s->dt != RT_F32 && p && n)
		s->be->round(s->be, p, n, s->dt);
}

/* The optimizer's fp32 values written back into the 16-bit working copy. */
static void write_back(struct strat *s, float *params, const float *master, size_t n)
{
	if (!master || !n)
		return;
	s->be->copy(s->be, params, master, n * sizeof(float), COPY_D2D);
	rnd(s, params, n);
}

static void release(struct strat *s, float **p)
{
	arena_free(A(s), *p);
	*p = NULL;
}

static int is_adam(const struct strat *s)
{
	return s->o.optimizer == OPT_ADAM || s->o.optimizer == OPT_ADAMW;
}

/* optimizer state copies per parameter: sgd 0, momentum 1, adam 2 */
static int opt_copies(const struct strat *s)
{
	return is_adam(s) ? 2 : s->o.optimizer == OPT_SGD_MOMENTUM;
}

/* Before a collective during a trial: do all ranks still run? A rank that
 * failed (out of memory) skips ahead to strat_step's final agreement, which
 * meets the others here, so no rank waits in a collective that one never
 * enters. Off for timed steps (o.agree = 0). */
static int agree(struct strat *s, struct err *e)
{
	double v[2] = {0, 0};
	int rc;

	if (!s->o.agree || s->world.size == 1)
		return 0;
	rc = s->be->allreduce_host(s->be, &s->world, v, 2, 1, e);
	if (rc || !(v[0] || v[1]))
		return rc;
	s->agreed = 1;
	return err_set(e, v[0] ? RT_EOOM : ERR_SYSTEM, NULL, 0, "another rank failed (%s)",
		       v[0] ? "out of memory" : "error");
}

/* ---- shared with stratfsdp2.c (strategy_int.h) ------------------------------- */

int strat_buf(struct strat *s, float **p, size_t n, size_t w, const char *tag, struct err *e)
{
	return alloc_w(s, p, n, w, tag, e);
}

void strat_unbuf(struct strat *s, float **p)
{
	release(s, p);
}

void strat_round(struct strat *s, float *p, size_t n)
{
	rnd(s, p, n);
}

int strat_agree(struct strat *s, struct err *e)
{
	return agree(s, e);
}

static int fsdp2(const struct strat *s)
{
	return s->mech == MECH_UNITS && s->layout == LAYOUT_PER_PARAM;
}

/* ---- hooks: where parameters and gradients are ---------------------------- */

static float *h_param(void *ctx, int p)
{
	struct strat *s = ctx;
	const struct rt_param *q = &s->m.p[p];
	struct sunit *u;

	switch (s->mech) {
	case MECH_DP:
		return s->dpp[s->cur][p];
	case MECH_UNITS:
		if (fsdp2(s))
			return stratfsdp2_param(s, p);
		u = &s->u[s->punit[p]];
		return (s->gathers ? u->pg : s->params + u->soff) + (q->goff - u->cstart);
	default:
		return s->params + q->goff;
	}
}

static float *h_grad(void *ctx, int p)
{
	struct strat *s = ctx;
	const struct rt_param *q = &s->m.p[p];
	struct sunit *u;

	switch (s->mech) {
	case MECH_DP:
		return s->tmp && s->tmp_p == p ? s->tmp : s->dpg[s->cur][p];
	case MECH_UNITS:
		if (fsdp2(s))
			return stratfsdp2_grad(s, p);
		u = &s->u[s->punit[p]];
		return (s->gathers ? u->ug : s->grads + u->soff) + (q->goff - u->cstart);
	default:
		return (s->zstage == 2 ? s->bucket : s->grads) + q->goff;
	}
}

/* ---- units ---------------------------------------------------------------- */

static int gather(struct strat *s, int u, struct err *e)
{
	struct sunit *un;
	int rc;

	if (u < 0 || !s->gathers || s->u[u].pg || s->u[u].n == 0)
		return 0;
	un = &s->u[u];
	rc = alloc_w(s, &un->pg, un->sh * (size_t)s->N, s->wp, "gathered unit", e);
	if (!rc)
		rc = agree(s, e);
	if (!rc)
		rc = s->be->allgather(s->be, &s->shard, s->params + un->soff, un->pg, un->sh, e);
	return rc;
}

/* the next unit in forward (fwd = 1) or backward order; the root is never next */
static int next_unit(const struct strat *s, int u, int fwd)
{
	int v = fwd ? u + 1 : (u == 0 ? s->nu - 1 : u - 1);
	return v >= 1 && v < s->nu ? v : -1;
}

static int h_fwd_pre(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	int u, rc = 0;

	if (fsdp2(s))
		return stratfsdp2_fwd_pre(s, op, e);
	if (s->mech != MECH_UNITS)
		return 0;
	for (u = 0; u < s->nu && !rc; u++)
		if (s->u[u].first == op) {
			rc = gather(s, u, e);
			if (!rc && s->o.plan.fwd_prefetch)
				rc = gather(s, next_unit(s, u, 1), e);
		}
	return rc;
}

static int h_fwd_post(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	int u;

	if (fsdp2(s))
		return stratfsdp2_fwd_post(s, op, e);
	if (s->mech != MECH_UNITS || !s->reshard_fwd)
		return 0;
	for (u = s->nu - 1; u >= 1; u--)
		if (s->u[u].last == op)
			release(s, &s->u[u].pg);
	return 0;
}

static int h_bwd_pre(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	int u, rc = 0;

	if (fsdp2(s))
		return stratfsdp2_bwd_pre(s, op, e);
	if (s->mech != MECH_UNITS)
		return 0;
	for (u = 0; u < s->nu && !rc; u++)
		if (s->u[u].last == op) {
			rc = gather(s, u, e);
			if (!rc && s->o.plan.bwd_prefetch == PREFETCH_BACKWARD_PRE)
				rc = gather(s, next_unit(s, u, 0), e);
		}
	return rc;
}

/* a DP gradient tensor: made when backward first reaches it, later
 * contributions in a temporary added to it */
static int dp_grad(struct strat *s, int p, struct err *e)
{
	if (p < 0)
		return 0;
	if (!s->dpg[s->cur][p])
		return alloc_w(s, &s->dpg[s->cur][p], s->m.p[p].n, s->wg, "replica grads", e);
	s->tmp_p = p;
	return alloc_w(s, &s->tmp, s->m.p[p].n, s->wg, "grad temp", e);
}

static int h_pgrad_begin(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	struct rtm *m = &s->m;
	int rc = 0, w = m->op_w[op], u;

	if (s->mech == MECH_DP) {
		/* the op's own tensors (weight, bias), then a tied table */
		if (w >= 0 && m->p[w].op == op)
			rc = dp_grad(s, w, e);
		if (!rc)
			rc = dp_grad(s, m->op_b[op], e);
		if (!rc && w >= 0 && m->p[w].op != op)
			rc = dp_grad(s, w, e);
		return rc;
	}
	if (s->mech != MECH_UNITS || !s->gathers)
		return 0;
	u = s->punit[w >= 0 ? w : m->op_b[op]];
	if (!s->u[u].ug)
		rc = alloc_w(s, &s->u[u].ug, s->u[u].sh * (size_t)s->N, s->wg, "unsharded grad", e);
	return rc;
}

static int bucket_ready(struct strat *s, struct ddp_bucket *b, struct err *e)
{
	size_t off = b->off;
	int i, rc = agree(s, e);

	for (i = b->p_hi; !rc && i >= b->p_lo; i--) {
		float *g = s->grads + s->m.p[i].goff;
		if (s->o.plan.ddp_bucket_view) {  /* the gradient is the bucket: reduce it in place */
			rc = s->be->allreduce(s->be, &s->world, g, s->m.p[i].n, e);
			rnd(s, g, s->m.p[i].n);
		} else
			s->be->copy(s->be, s->bucket + off, g, s->m.p[i].n * sizeof(float), COPY_D2D);
		off += s->m.p[i].n;
	}
	if (!rc && !s->o.plan.ddp_bucket_view)
		rc = s->be->allreduce_start(s->be, &s->world, s->bucket + b->off, b->n, &b->req, e);
	return rc;
}

static int h_pgrad_end(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	struct ddp_bucket *b;
	int k, p;

	(void)e;
	if (s->mech == MECH_DP && s->tmp) {
		s->be->axpy(s->be, s->dpg[s->cur][s->tmp_p], s->tmp, 1.0f, s->m.p[s->tmp_p].n);
		rnd(s, s->dpg[s->cur][s->tmp_p], s->m.p[s->tmp_p].n);
		release(s, &s->tmp);
	}
	if (!s->bk || !s->sync)
		return 0;
	for (k = 0; k < 2; k++) {
		p = k ? s->m.op_b[op] : s->m.op_w[op];
		if (p < 0 || s->m.p[p].op != op)  /* a tied table is final at its owner */
			continue;
		for (b = s->bk; b < s->bk + s->nbk; b++)
			if (p <= b->p_hi && p >= b->p_lo && --b->pending == 0) {
				int rc = bucket_ready(s, b, e);
				if (rc)
					return rc;
			}
	}
	return 0;
}

static int h_bwd_post(void *ctx, int op, struct err *e)
{
	struct strat *s = ctx;
	int u, rc = 0;

	if (fsdp2(s))
		return stratfsdp2_bwd_post(s, op, e);
	if (s->mech != MECH_UNITS)
		return 0;
	for (u = s->nu - 1; u >= 0 && !rc; u--) {
		struct sunit *un = &s->u[u];
		if (un->first != op)
			continue;
		if (un->ug) {
			rc = agree(s, e);
			if (!rc)
				rc = s->be->reduce_scatter(s->be, &s->shard, un->ug, un->ug + (size_t)s->shard.rank * un->sh,
							   un->sh, e);
			if (!rc && s->repl.size > 1)
				rc = s->be->allreduce(s->be, &s->repl, un->ug + (size_t)s->shard.rank * un->sh, un->sh, e);
			rnd(s, un->ug + (size_t)s->shard.rank * un->sh, un->sh);
			if (!rc)
				s->be->axpy(s->be, s->grads + un->soff, un->ug + (size_t)s->shard.rank * un->sh, 1.0f, un->sh);
			rnd(s, s->grads + un->soff, un->sh);
			release(s, &un->ug);
		} else if (!s->gathers && s->sync && s->world.size > 1) {  /* no_shard */
			rc = agree(s, e);
			if (!rc)
				rc = s->be->allreduce(s->be, &s->world, s->grads + un->soff, un->n, e);
			rnd(s, s->grads + un->soff, un->n);
		}
		release(s, &un->pg);
		if (!rc && u > 0 && s->o.plan.bwd_prefetch == PREFETCH_BACKWARD_POST)
			rc = gather(s, next_unit(s, u, 0), e);
	}
	return rc;
}

/* ---- setup ---------------------------------------------------------------- */

/* FSDP's units, as wrap.h defines them for every model (the memory walk's and
 * the step's): the root and, under transformer_based_wrap, each block. The
 * canonical layout (model_rt.c) keeps each block's parameters together, so a
 * unit's flat parameter is a contiguous range of it; size_based_wrap's nested
 * units would need a layout of their own and are refused. */
static int make_units(struct strat *s, struct err *e)
{
	struct rtm *m = &s->m;
	struct wrap_units wu;
	int nb = s->o.plan.wrap == WRAP_NONE ? 0 : m->g.nblocks, u, p, i;

	if (s->o.plan.wrap == WRAP_SIZE)
		return err_set(e, ERR_INPUT, NULL, 0,
			       "fsdp_auto_wrap_policy = size_based_wrap is not implemented by the runtime; use "
			       "transformer_based_wrap or no_wrap");
	if (wrap_units_build(&wu, &m->g, s->o.plan.wrap, s->o.plan.wrap_min_params))
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	for (i = 0; i < m->g.nops && wu.n == nb + 1; i++)  /* unit u owns the layout's unit u */
		if (m->g.ops[i].params > 0 && wu.own[i] != (nb ? m->g.ops[i].unit : 0))
			break;
	if (wu.n != nb + 1 || i < m->g.nops) {
		wrap_units_free(&wu);
		return err_set(e, ERR_SYSTEM, NULL, 0, "the wrap units are not the runtime layout's units");
	}
	s->nu = wu.n;
	s->u = calloc((size_t)s->nu, sizeof *s->u);
	s->punit = malloc((size_t)m->np * sizeof *s->punit);
	if (!s->u || !s->punit) {
		wrap_units_free(&wu);
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	}
	for (u = 0; u < s->nu; u++) {
		s->u[u].first = wu.u[u].first;
		s->u[u].last = wu.u[u].last;
		s->u[u].cstart = nb ? m->unit_goff[u] : 0;
		s->u[u].n = nb ? m->unit_n[u] : m->nparams;
		s->u[u].sh = (s->u[u].n + (size_t)s->N - 1) / (size_t)s->N;
		s->u[u].soff = s->S;
		s->S += s->u[u].sh;
	}
	wrap_units_free(&wu);
	for (p = 0; p < m->np; p++)
		s->punit[p] = nb ? m->p[p].unit : 0;
	return 0;
}

/* Fills dst[0 .. n) with the canonical initial values from `from`, zero past `end`. */
static void init_range(struct strat *s, float *dst, size_t from, size_t n, size_t end)
{
	float *h = malloc(n * sizeof *h + 1);
	size_t i;
	int p;

	if (!h)
		return;
	memset(h, 0, n * sizeof *h);
	for (p = 0; p < s->m.np; p++) {
		const struct rt_param *q = &s->m.p[p];
		for (i = q->goff; i < q->goff + q->n; i++)
			if (i >= from && i < from + n && i < end)
				h[i - from] = rtm_init_value(s->o.seed, i, q->kind);
	}
	s->be->copy(s->be, dst, h, n * sizeof *h, COPY_H2D);
	free(h);
}

static int make_buckets(struct strat *s, struct err *e)
{
	double limit = 1024.0 * 1024.0, bytes = 0;
	int p, start = s->m.np - 1;
	size_t off = 0;

	s->bk = calloc((size_t)s->m.np, sizeof *s->bk);
	if (!s->bk)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	/* torch DDP: parameters in reverse order; a bucket closes once it reaches
	 * its limit (1 MiB for the first, bucket_cap_mb after) */
	for (p = s->m.np - 1; p >= 0; p--) {
		bytes += (double)s->m.p[p].n * sizeof(float);
		if (bytes >= limit || p == 0) {
			struct ddp_bucket *b = &s->bk[s->nbk++];
			b->p_hi = start;
			b->p_lo = p;
			b->off = off;
			b->n = (size_t)(bytes / sizeof(float));
			b->pending = start - p + 1;
			off += b->n;
			start = p - 1;
			bytes = 0;
			limit = s->o.bucket_mb * 1024.0 * 1024.0;
		}
	}
	return 0;
}

/* The working parameters' initial values (fp32), copied into the fp32
 * master (mixed precision; nm elements from canonical offset lo of the flat
 * buffer) and then rounded to the working type. */
static void init_params(struct strat *s, size_t np, size_t lo, size_t nm)
{
	int u;

	if (fsdp2(s))
		stratfsdp2_init(s);
	else if (s->mech == MECH_UNITS)
		for (u = 0; u < s->nu; u++)
			init_range(s, s->params + s->u[u].soff, s->u[u].cstart + (size_t)(s->N > 1 ? s->shard.rank : 0) * s->u[u].sh,
				   s->u[u].sh, s->u[u].cstart + s->u[u].n);
	else
		init_range(s, s->params, 0, s->P, s->P);
	if (s->master && lo < np)
		s->be->copy(s->be, s->master, s->params + lo, (np - lo < nm ? np - lo : nm) * sizeof(float), COPY_D2D);
	rnd(s, s->params, np);
}

static int setup_flat(struct strat *s, struct err *e)
{
	size_t P = s->P, np = P, no = P, ng = P, lo = 0;
	int rc;

	if (s->mech == MECH_ZERO12) {
		s->sh = (P + (size_t)s->N - 1) / (size_t)s->N;
		no = s->sh;
		lo = (size_t)s->world.rank * s->sh;
		if (s->zstage == 2)
			ng = s->sh;
	} else if (s->mech == MECH_UNITS) {
		np = no = ng = s->S;
	}
	/* memory.h S3 order: params, master (mixed precision), optimizer states, grads */
	rc = arena_alloc_as(A(s), (void **)&s->params, np * s->wp, np * sizeof(float), "params", e);
	if (!rc && s->dt != RT_F32)
		rc = alloc_zero(s, &s->master, no, "master", e);
	if (!rc)
		init_params(s, np, lo, no);
	if (!rc)
		rc = alloc_zero(s, &s->opt, no * (size_t)opt_copies(s), "optimizer states", e);
	if (!rc)
		rc = alloc_w(s, &s->grads, ng, s->wg, s->zstage == 2 ? "grad shard" : "grads", e);
	if (!rc && s->zstage == 2) {
		if (s->o.zero_bucket < (double)P)
			return err_set(e, ERR_INPUT, NULL, 0,
				       "zero2: the runtime needs zero_reduce_bucket_size >= the %zu parameters "
				       "(smaller buckets are not implemented)", P);
		rc = alloc_w(s, &s->bucket, P, s->wg, "zero bucket", e);
	}
	if (!rc && s->mech == MECH_REPL && s->o.plan.reduce == REDUCE_DDP) {
		rc = make_buckets(s, e);
		if (!rc && !s->o.plan.ddp_bucket_view)
			rc = alloc_w(s, &s->bucket, P, s->wg, "ddp buckets", e);
	}
	return rc;
}

static int setup_dp(struct strat *s, struct err *e)
{
	int p, d, rc = 0, c = opt_copies(s);

	for (d = 0; d < s->ndev; d++) {
		s->dpp[d] = calloc((size_t)s->m.np, sizeof *s->dpp[d]);
		s->dpg[d] = calloc((size_t)s->m.np, sizeof *s->dpg[d]);
		if (!s->dpp[d] || !s->dpg[d])
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	}
	s->dpm = calloc((size_t)s->m.np, sizeof *s->dpm);
	s->dpv = calloc((size_t)s->m.np, sizeof *s->dpv);
	s->dmg = calloc((size_t)s->m.np, sizeof *s->dmg);
	s->dpw = calloc((size_t)s->m.np, sizeof *s->dpw);
	if (!s->dpm || !s->dpv || !s->dmg || !s->dpw)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	s->cur = 0;
	/* per tensor, as the module's parameters and torch.optim's states */
	for (p = 0; p < s->m.np && !rc; p++) {
		rc = alloc_w(s, &s->dpp[0][p], s->m.p[p].n, s->wp, "params", e);
		if (!rc)
			init_range(s, s->dpp[0][p], s->m.p[p].goff, s->m.p[p].n, s->P);
	}
	for (p = 0; p < s->m.np && !rc && s->dt != RT_F32; p++) {  /* fp32 masters, per tensor */
		rc = alloc_zero(s, &s->dpw[p], s->m.p[p].n, "master", e);
		if (!rc) {
			s->be->copy(s->be, s->dpw[p], s->dpp[0][p], s->m.p[p].n * sizeof(float), COPY_D2D);
			rnd(s, s->dpp[0][p], s->m.p[p].n);
		}
	}
	for (p = 0; p < s->m.np && !rc; p++) {
		if (c >= 1)
			rc = alloc_zero(s, &s->dpm[p], s->m.p[p].n, "optimizer m", e);
		if (!rc && c >= 2)
			rc = alloc_zero(s, &s->dpv[p], s->m.p[p].n, "optimizer v", e);
	}
	return rc;
}

int strat_init(struct strat *s, const struct strat_opts *o, const struct model *m, int T,
	       double dropout, struct backend *be, struct rt_comm *world, struct err *e)
{
	const struct plan *p = &o->plan;
	int rc, d;

	memset(s, 0, sizeof *s);
	s->o = *o;
	s->be = be;
	s->world = *world;
	s->tmp_p = -1;
	if (p->engine != FW_SHARDCAST || p->mech == MECH_ZERO3)
		return err_set(e, ERR_INPUT, NULL, 0, "%s: the runtime runs framework = shardcast's plan", p->name);
	s->mech = p->mech;
	s->zstage = p->zero_stage <= 2 ? p->zero_stage : 0;
	s->sharding = p->sharding;
	if (s->o.zero_bucket <= 0)
		s->o.zero_bucket = 5e8;  /* DeepSpeed's reduce_bucket_size default */
	s->gathers = p->gathers;
	s->reshard_fwd = p->reshard_fwd;
	s->layout = p->layout;
	if (p->reshard_group > 1)
		return err_set(e, ERR_INPUT, NULL, 0, "fsdp_reshard_after_forward = %lld: resharding to a smaller group "
			       "is not implemented by the runtime (true, false or default)", (long long)p->reshard_group);
	/* mixed precision: 16-bit params, grads and activations, fp32 masters (plan.h widths) */
	s->dt = !p->mixed ? RT_F32 : p->precision == PREC_FP16 ? RT_F16 : RT_BF16;
	s->wp = (size_t)p->w.params;
	s->wg = (size_t)p->w.grads;
	s->lscale = s->dt == RT_F16 ? 65536.0 : 1.0;
	if (s->dt != RT_F32 && (!be->round || !be->nonfinite))
		return err_set(e, ERR_INPUT, NULL, 0, "precision %s: the %s backend runs fp32 only",
			       scenario_precision_name(p->precision), be->name);
	s->ndev = s->mech == MECH_DP ? o->devices : 1;
	if (p->one_process && world->size != 1)
		return err_set(e, ERR_INPUT, NULL, 0, "strategy %s runs in one process; started with %d ranks",
			       p->name, world->size);
	if (s->ndev < 1 || s->ndev > STRAT_MAX_DEV)
		return err_set(e, ERR_INPUT, NULL, 0, "dp: %d devices; expected 1..%d", s->ndev, STRAT_MAX_DEV);
	s->dp_rank = s->mech == MECH_DP ? 0 : world->rank;
	s->dp_size = s->mech == MECH_DP ? s->ndev : world->size;
	for (d = 0; d < s->ndev; d++)
		arena_init(&s->ar[d], &be->dev, (size_t)o->capacity, d);
	rc = rtm_init(&s->m, m, T, dropout, o->recompute, s->dt, be, e);
	if (rc)
		goto fail;
	s->P = s->m.nparams;
	s->m.h = (struct rtm_hooks){s, h_param, h_grad, h_fwd_pre, h_fwd_post, h_bwd_pre,
				    h_pgrad_begin, h_pgrad_end, h_bwd_post};
	s->m.seed = o->seed;
	s->shard = *world;
	if (s->mech == MECH_UNITS && p->hybrid && o->group >= 1 && o->group < world->size) {
		if (world->size % o->group) {
			rc = err_set(e, ERR_INPUT, NULL, 0, "hybrid sharding: %d ranks do not split into groups of %d",
				     world->size, o->group);
			goto fail;
		}
		if (world->emulated) {
			backend_emulated_world(&s->shard, o->group);
			backend_emulated_world(&s->repl, world->size / o->group);
		} else {
			rc = be->comm_split(be, world, world->rank / o->group, world->rank, &s->shard, e);
			if (!rc)
				rc = be->comm_split(be, world, world->rank % o->group, world->rank, &s->repl, e);
			if (rc)
				goto fail;
			s->have_groups = 1;
		}
	}
	s->N = s->mech == MECH_ZERO12 ? world->size : s->mech == MECH_UNITS && s->gathers ? s->shard.size : 1;
	if (s->mech == MECH_UNITS && (rc = make_units(s, e)))
		goto fail;
	if (fsdp2(s) && (rc = stratfsdp2_layout(s, e)))
		goto fail;
	rc = s->mech == MECH_DP ? setup_dp(s, e) : setup_flat(s, e);
	if (!rc && s->dt == RT_F16)  /* memory.h S2: the loss scale's state */
		rc = arena_alloc(A(s), (void **)&s->lsstate, 8, "loss scale", e);
	if (rc)
		goto fail;
	return 0;
fail:
	strat_free(s);
	return rc;
}

void strat_free(struct strat *s)
{
	int d;

	for (d = 0; d < s->nbk; d++)
		if (s->bk[d].req.active) {
			struct err e = {0};
			s->be->wait(s->be, &s->bk[d].req, &e);
		}
	if (s->have_groups) {
		s->be->comm_free(s->be, &s->shard);
		s->be->comm_free(s->be, &s->repl);
	}
	for (d = 0; d < s->ndev; d++) {
		arena_destroy(&s->ar[d]);
		free(s->dpp[d]);
		free(s->dpg[d]);
	}
	free(s->dpm);
	free(s->dpv);
	free(s->dmg);
	free(s->dpw);
	stratfsdp2_free(s);
	free(s->u);
	free(s->punit);
	free(s->bk);
	rtm_free(&s->m);
	memset(s, 0, sizeof *s);
}

/* ---- the step ------------------------------------------------------------- */

static int ddp_finish(struct strat *s, struct err *e)
{
	struct ddp_bucket *b;
	int rc = 0, i;

	for (b = s->bk; b < s->bk + s->nbk; b++) {
		int r2 = s->be->wait(s->be, &b->req, e);
		size_t off = b->off;
		rc = rc ? rc : r2;
		if (!rc && b->pending == 0 && !s->o.plan.ddp_bucket_view)
			for (i = b->p_hi; i >= b->p_lo; i--) {
				s->be->copy(s->be, s->grads + s->m.p[i].goff, s->bucket + off, s->m.p[i].n * sizeof(float),
					    COPY_D2D);
				rnd(s, s->grads + s->m.p[i].goff, s->m.p[i].n);
				off += s->m.p[i].n;
			}
		b->pending = b->p_hi - b->p_lo + 1;
	}
	return rc;
}

/* zero2 after each micro-step: the bucket's sum, this rank's shard of it, into
 * the gradient shard */
static int zero2_reduce(struct strat *s, struct err *e)
{
	size_t lo = (size_t)s->world.rank * s->sh, cnt = lo < s->P ? (s->P - lo < s->sh ? s->P - lo : s->sh) : 0;
	int rc = agree(s, e);

	if (!rc)
		rc = s->be->reduce_scatter_flat(s->be, &s->world, s->bucket, s->P, s->sh, e);
	if (!rc) {
		s->be->axpy(s->be, s->grads, s->bucket + (s->world.size == 1 ? lo : 0), 1.0f, cnt);
		rnd(s, s->grads, cnt);
	}
	s->be->zero(s->be, s->bucket, s->P * sizeof(float));
	return rc;
}

static int replica_up(struct strat *s, int d, struct err *e)
{
	int p, rc = 0;

	s->cur = d;
	for (p = 0; p < s->m.np && !rc; p++) {  /* replicate(): a broadcast of every tensor */
		rc = alloc_w(s, &s->dpp[d][p], s->m.p[p].n, s->wp, "replica params", e);
		if (!rc)
			s->be->copy(s->be, s->dpp[d][p], s->dpp[0][p], s->m.p[p].n * sizeof(float), COPY_D2D);
	}
	return rc;
}

/* End of backward on every device: device 0 sums the replicas' gradients into
 * its own (made at the first micro-step; later ones add through a temporary),
 * then every replica drops its gradients and parameters. */
static int dp_bwd_end(struct strat *s, int a, struct err *e)
{
	int p, d, rc = 0;

	s->cur = 0;
	for (p = 0; p < s->m.np && !rc; p++) {
		float *dst;
		if (a == 0)
			rc = alloc_w(s, &s->dmg[p], s->m.p[p].n, s->wg, "grads", e);
		else
			rc = alloc_w(s, &s->tmp, s->m.p[p].n, s->wg, "grad temp", e);
		if (rc)
			break;
		dst = a == 0 ? s->dmg[p] : s->tmp;
		for (d = 0; d < s->ndev; d++)
			if (s->dpg[d][p])
				s->be->axpy(s->be, dst, s->dpg[d][p], 1.0f, s->m.p[p].n);
		rnd(s, dst, s->m.p[p].n);
		if (a > 0) {
			s->be->axpy(s->be, s->dmg[p], s->tmp, 1.0f, s->m.p[p].n);
			rnd(s, s->dmg[p], s->m.p[p].n);
			release(s, &s->tmp);
		}
	}
	return rc;
}

static void dp_drop(struct strat *s)
{
	int p, d;

	for (d = 0; d < s->ndev; d++) {
		s->cur = d;
		for (p = s->m.np - 1; p >= 0; p--)
			release(s, &s->dpg[d][p]);
		if (d > 0)
			for (p = s->m.np - 1; p >= 0; p--)
				release(s, &s->dpp[d][p]);
	}
	s->cur = 0;
	if (s->tmp)
		release(s, &s->tmp);
}

static int micro(struct strat *s, int a, int d, int32_t *ids, struct err *e)
{
	int B = s->o.micro_batch, j, rc;
	int rank = s->mech == MECH_DP ? d : s->dp_rank;

	for (j = 0; j < B; j++) {
		uint64_t sample = (((uint64_t)s->step * s->o.grad_accum + a) * s->dp_size + rank) * B + j;
		rtm_sample(&s->m, s->o.seed, sample, ids + (size_t)j * 2 * s->m.T);
	}
	s->cur = d;
	s->m.ar = A(s);
	s->m.rng_step = ((uint64_t)s->step * s->o.grad_accum + a) * s->dp_size + rank;
	rc = d > 0 ? replica_up(s, d, e) : 0;
	s->cur = d;
	if (!rc)
		rc = rtm_micro_step(&s->m, B, ids, e);
	if (!rc && fsdp2(s))
		stratfsdp2_bwd_end(s);
	s->cur = 0;
	s->m.ar = A(s);
	return rc;
}

static int dp_micro(struct strat *s, int a, int32_t *ids, double *loss, float per_token, struct err *e)
{
	float *batch = NULL;
	int d, rc;

	/* the whole batch reaches device 0 before it is scattered */
	s->cur = 0;
	rc = arena_alloc(A(s), (void **)&batch,
			 rtm_tensor_bytes(&s->m, s->m.g.input, s->o.micro_batch) * (size_t)s->ndev, "dp batch", e);
	for (d = 0; d < s->ndev && !rc; d++) {
		rc = micro(s, a, d, ids, e);
		*loss += s->m.loss_sum * per_token;
	}
	if (!rc)
		rc = dp_bwd_end(s, a, e);
	dp_drop(s);
	s->cur = 0;
	arena_free(A(s), batch);
	return rc;
}

static void adam_or_sgd(struct strat *s, float *p, const float *g, float *m, float *v, size_t n)
{
	const struct strat_opts *o = &s->o;

	if (is_adam(s))
		s->be->adamw(s->be, p, g, m, v, n, (float)o->lr, (float)o->beta1, (float)o->beta2, (float)o->eps,
			     (float)o->weight_decay, s->opt_steps + 1);
	else
		s->be->sgd(s->be, p, g, o->optimizer == OPT_SGD_MOMENTUM ? m : NULL, n, (float)o->lr, (float)o->momentum);
}

/* The k-th gradient buffer the optimizer reads (n elements); 0 past the last. */
static size_t grad_buf(struct strat *s, int k, float **g)
{
	if (s->mech == MECH_DP) {
		if (k >= s->m.np)
			return 0;
		*g = s->dmg[k];
		return s->m.p[k].n;
	}
	if (k)
		return 0;
	*g = s->grads;
	return s->mech == MECH_UNITS ? s->S : s->mech == MECH_ZERO12 && s->zstage == 2 ? s->sh : s->P;
}

/* fp16's dynamic loss scaling (torch.amp.GradScaler's defaults: 2^16 at the
 * start, halved on an overflow that skips the step, doubled after 2000 clean
 * steps): *skip when any rank's gradients overflowed; else the gradients are
 * unscaled for the fp32 optimizer. */
static int loss_scaling(struct strat *s, int *skip, struct err *e)
{
	double v[1] = {0};
	float *g;
	size_t n;
	int k, rc;

	*skip = 0;
	if (s->dt != RT_F16)
		return 0;
	for (k = 0; (n = grad_buf(s, k, &g)) > 0; k++)
		v[0] += (double)s->be->nonfinite(s->be, g, n);
	rc = s->be->allreduce_host(s->be, &s->world, v, 1, 1, e);
	if (rc)
		return rc;
	*skip = v[0] > 0;
	for (k = 0; (n = grad_buf(s, k, &g)) > 0; k++)
		if (*skip)
			s->be->zero(s->be, g, n * sizeof(float));
		else
			s->be->scale(s->be, g, (float)(1.0 / s->lscale), n);
	s->good = *skip ? 0 : s->good + 1;
	if (*skip || s->good == 2000)
		s->lscale *= *skip ? 0.5 : 2.0, s->good = 0;
	return 0;
}

static int update_flat(struct strat *s, struct err *e)
{
	float *p = s->master ? s->master : s->params;
	size_t n = s->mech == MECH_UNITS ? s->S : s->P;
	int rc = 0, skip;

	if (s->mech != MECH_ZERO12) {
		rc = loss_scaling(s, &skip, e);
		if (!rc && !skip) {
			adam_or_sgd(s, p, s->grads, s->opt, s->opt + n, n);
			write_back(s, s->params, s->master, n);
			s->opt_steps++;
		}
		s->be->zero(s->be, s->grads, n * sizeof(float));
		return rc;
	}
	size_t lo = (size_t)s->world.rank * s->sh;
	size_t cnt = lo < s->P ? (s->P - lo < s->sh ? s->P - lo : s->sh) : 0;
	if (s->zstage == 1 && s->world.size > 1) {
		rc = s->be->allreduce(s->be, &s->world, s->grads, s->P, e);
		rnd(s, s->grads, s->P);
	}
	if (!rc)
		rc = loss_scaling(s, &skip, e);
	if (rc)
		return rc;
	if (cnt && !skip)
		adam_or_sgd(s, s->master ? s->master : s->params + lo, s->zstage == 1 ? s->grads + lo : s->grads,
			    s->opt, s->opt + s->sh, cnt);
	write_back(s, s->params + lo, skip ? NULL : s->master, cnt);
	s->opt_steps += !skip;
	s->be->zero(s->be, s->grads, (s->zstage == 1 ? s->P : s->sh) * sizeof(float));
	return s->be->allgather_flat(s->be, &s->world, s->params, s->P, s->sh, e);
}

static int update(struct strat *s, struct err *e)
{
	int p, rc, skip;

	s->cur = 0;
	if (s->mech != MECH_DP)
		return update_flat(s, e);
	rc = loss_scaling(s, &skip, e);
	for (p = 0; p < s->m.np; p++) {
		if (!rc && !skip) {
			adam_or_sgd(s, s->dpw[p] ? s->dpw[p] : s->dpp[0][p], s->dmg[p], s->dpm[p], s->dpv[p], s->m.p[p].n);
			write_back(s, s->dpp[0][p], s->dpw[p], s->m.p[p].n);
		}
		release(s, &s->dmg[p]);   /* zero_grad(set_to_none=True) */
	}
	s->opt_steps += !rc && !skip;
	return rc;
}

/* After a step nothing transient may remain (a stale gathered unit would be
 * used by the next forward). */
static int check_released(struct strat *s, struct err *e)
{
	int u;

	for (u = 0; u < s->nu; u++)
		if (s->u[u].pg || s->u[u].ug || s->u[u].ag || s->u[u].rs)
			return err_set(e, ERR_SYSTEM, NULL, 0, "internal: unit %d still gathered after the step", u);
	return 0;
}

int strat_step(struct strat *s, struct err *e)
{
	int32_t *ids = malloc((size_t)s->o.micro_batch * 2 * s->m.T * sizeof *ids);
	double loss = 0, v[2], tokens;
	float per_token;
	int a, rc = 0, r2;

	if (!ids)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	s->agreed = 0;
	tokens = (double)s->m.T * s->o.micro_batch * s->dp_size * s->o.grad_accum;
	per_token = (float)(1.0 / tokens);
	s->m.loss_scale = (float)(s->lscale / tokens);  /* d loss / d token loss, times fp16's scale */
	for (a = 0; a < s->o.grad_accum && !rc; a++) {
		s->sync = a == s->o.grad_accum - 1;
		if (s->mech == MECH_DP) {
			rc = dp_micro(s, a, ids, &loss, per_token, e);
			continue;
		}
		rc = micro(s, a, 0, ids, e);
		loss += s->m.loss_sum * per_token;
		if (!rc && s->zstage == 2)
			rc = zero2_reduce(s, e);
	}
	if (s->bk) {
		r2 = ddp_finish(s, e);
		rc = rc ? rc : r2;
	}
	free(ids);
	if (!rc)
		rc = check_released(s, e);
	if (s->agreed)  /* learnt at a collective: the failed rank met us there */
		return rc;
	/* every rank learns whether any failed, and how: OOM (3) or other (1) */
	v[0] = rc == RT_EOOM;
	v[1] = rc != 0 && rc != RT_EOOM;
	r2 = s->be->allreduce_host(s->be, &s->world, v, 2, 1, e);
	if (r2)
		return r2;
	if (v[0] || v[1]) {
		if (!rc)
			err_set(e, v[0] ? RT_EOOM : ERR_SYSTEM, NULL, 0, "another rank failed (%s)",
				v[0] ? "out of memory" : "error");
		return v[1] && rc != RT_EOOM ? (rc ? rc : ERR_SYSTEM) : RT_EOOM;
	}
	rc = update(s, e);
	if (rc)
		return rc;
	v[0] = loss;
	rc = s->be->allreduce_host(s->be, &s->world, v, 1, 0, e);
	s->loss = v[0];
	s->step++;
	return rc;
}

/* ---- inspection ----------------------------------------------------------- */

int strat_gather_params(struct strat *s, float *host, struct err *e)
{
	int u, p, rc = 0;

	s->cur = 0;
	if (s->mech == MECH_DP) {
		for (p = 0; p < s->m.np; p++)
			s->be->copy(s->be, host + s->m.p[p].goff, s->dpp[0][p], s->m.p[p].n * sizeof(float), COPY_D2H);
		return 0;
	}
	if (fsdp2(s))
		return stratfsdp2_gather_params(s, host, e);
	if (s->mech != MECH_UNITS || !s->gathers) {
		if (s->mech == MECH_UNITS)
			for (u = 0; u < s->nu; u++)
				s->be->copy(s->be, host + s->u[u].cstart, s->params + s->u[u].soff, s->u[u].n * sizeof(float),
					    COPY_D2H);
		else
			s->be->copy(s->be, host, s->params, s->P * sizeof(float), COPY_D2H);
		return 0;
	}
	for (u = 0; u < s->nu && !rc; u++) {
		struct sunit *un = &s->u[u];
		float *full = malloc(un->sh * (size_t)s->N * sizeof *full + 1);
		if (!full)
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
		/* host memory is device memory on cpu; tests only */
		rc = s->be->allgather(s->be, &s->shard, s->params + un->soff, full, un->sh, e);
		if (!rc)
			memcpy(host + un->cstart, full, un->n * sizeof *full);
		free(full);
	}
	return rc;
}

int strat_state(struct strat *s, float **buf, size_t *n, int max)
{
	int k = 0, p, c = opt_copies(s);
	size_t no = s->mech == MECH_UNITS ? s->S : s->mech == MECH_ZERO12 ? s->sh : s->P;

	if (s->mech == MECH_DP) {
		for (p = 0; p < s->m.np && k + 4 <= max; p++) {
			buf[k] = s->dpp[0][p], n[k++] = s->m.p[p].n;
			if (s->dpw[p])
				buf[k] = s->dpw[p], n[k++] = s->m.p[p].n;
			if (c >= 1)
				buf[k] = s->dpm[p], n[k++] = s->m.p[p].n;
			if (c >= 2)
				buf[k] = s->dpv[p], n[k++] = s->m.p[p].n;
		}
		return k;
	}
	buf[k] = s->params;
	n[k++] = s->mech == MECH_UNITS ? s->S : s->P;
	if (s->master && k < max)
		buf[k] = s->master, n[k++] = no;
	if (c && k < max) {
		buf[k] = s->opt;
		n[k++] = (size_t)c * no;
	}
	return k;
}

size_t strat_peak(const struct strat *s, int *dev)
{
	size_t best = 0;
	int d;

	for (d = 0; d < s->ndev; d++)
		if (s->ar[d].peak > best || d == 0) {
			best = s->ar[d].peak;
			if (dev)
				*dev = d;
		}
	return best;
}

void strat_reset_peak(struct strat *s)
{
	int d;

	for (d = 0; d < s->ndev; d++)
		arena_reset_peak(&s->ar[d]);
}

/*
 * strategy.c — data-parallel strategies over any backend (see strategy.h).
 */
#include "strategy.h"

#include <stdlib.h>
#include <string.h>

enum kind { K_SINGLE, K_DP, K_DDP, K_ZERO1, K_ZERO2, K_FULL, K_SGO, K_NOSHARD, K_HYBRID, K_HYBRID2 };

void strat_opts_from(struct strat_opts *o, const struct scenario *s)
{
	const struct scn_training *t = &s->s.training;

	memset(o, 0, sizeof *o);
	o->strategy = t->strategy;
	o->sharding = t->fsdp_sharding;
	o->bwd_prefetch = t->strategy == STRAT_FSDP ? t->fsdp_backward_prefetch : PREFETCH_NONE;
	o->fwd_prefetch = t->strategy == STRAT_FSDP && t->fsdp_forward_prefetch;
	o->recompute = t->recompute;
	o->optimizer = t->optimizer;
	o->micro_batch = t->micro_batch > 0 ? (int)t->micro_batch : 1;
	o->grad_accum = (int)t->grad_accum;
	o->group = (int)s->s.cluster.gpus_per_node;
	o->devices = t->strategy == STRAT_DP ? (int)s->s.cluster.gpus_per_node : 1;
	o->bucket_mb = t->ddp_bucket_mb;
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
	static const struct { const char *name; int strategy, sharding; } t[] = {
		{"single", STRAT_SINGLE, 0}, {"dp", STRAT_DP, 0}, {"ddp", STRAT_DDP, 0},
		{"zero1", STRAT_ZERO1, 0}, {"zero2", STRAT_ZERO2, 0}, {"zero3", STRAT_ZERO3, 0},
		{"fsdp", STRAT_FSDP, SHARD_FULL}, {"fsdp:full_shard", STRAT_FSDP, SHARD_FULL},
		{"fsdp:shard_grad_op", STRAT_FSDP, SHARD_GRAD_OP}, {"fsdp:no_shard", STRAT_FSDP, SHARD_NONE},
		{"fsdp:hybrid_shard", STRAT_FSDP, SHARD_HYBRID},
		{"fsdp:hybrid_shard_zero2", STRAT_FSDP, SHARD_HYBRID_ZERO2}};
	size_t i, n = strcspn(spec, ":");

	if (strncmp(spec, "dp:", 3) == 0) {
		o->strategy = STRAT_DP;
		o->devices = atoi(spec + 3);
		return o->devices >= 1 && o->devices <= STRAT_MAX_DEV ? 0 : -1;
	}
	(void)n;
	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		if (strcmp(spec, t[i].name) == 0) {
			o->strategy = t[i].strategy;
			o->sharding = t[i].sharding;
			return 0;
		}
	return -1;
}

static int kind_of(const struct strat_opts *o)
{
	switch (o->strategy) {
	case STRAT_SINGLE: return K_SINGLE;
	case STRAT_DP: return K_DP;
	case STRAT_DDP: return K_DDP;
	case STRAT_ZERO1: return K_ZERO1;
	case STRAT_ZERO2: return K_ZERO2;
	case STRAT_ZERO3: return K_FULL;
	default:
		switch (o->sharding) {
		case SHARD_GRAD_OP: return K_SGO;
		case SHARD_NONE: return K_NOSHARD;
		case SHARD_HYBRID: return K_HYBRID;
		case SHARD_HYBRID_ZERO2: return K_HYBRID2;
		default: return K_FULL;
		}
	}
}

/* ---- hooks -------------------------------------------------------------- */

static struct unit_state *U(struct strat *s, int u)
{
	return &s->u[s->cur][u];
}

static float *h_params(void *ctx, int u)
{
	struct strat *s = ctx;
	return s->shard_params ? U(s, u)->pg : U(s, u)->p;
}

static float *h_grads(void *ctx, int u)
{
	struct strat *s = ctx;
	return s->shard_grads ? U(s, u)->gfull : U(s, u)->g;
}

static struct arena *A(struct strat *s)
{
	return &s->ar[s->cur];
}

/* Before a collective during a trial: do all ranks still run? A rank that
 * failed (out of memory) skips ahead to strat_step's final agreement, which
 * meets the others here, so no rank waits in a collective that one never
 * enters. Off for timed steps (s->o.agree = 0). */
static int agree(struct strat *s, struct err *e)
{
	double v[2] = {0, 0};
	int rc;

	if (!s->o.agree || s->world.size == 1)
		return 0;
	rc = s->be->allreduce_host(&s->world, v, 2, 1, e);
	if (rc || !(v[0] || v[1]))
		return rc;
	s->agreed = 1;
	return err_set(e, v[0] ? RT_EOOM : ERR_SYSTEM, NULL, 0, "another rank failed (%s)",
		       v[0] ? "out of memory" : "error");
}

static int gather(struct strat *s, int u, struct err *e)
{
	struct unit_state *us = U(s, u);
	int rc;

	if (us->pg)
		return 0;
	rc = arena_alloc(A(s), (void **)&us->pg, us->npad * sizeof(float), "gathered params", e);
	if (!rc)
		rc = agree(s, e);
	if (!rc)
		rc = s->be->allgather(&s->shard, us->p, us->pg, us->nshard, e);
	return rc;
}

static void release(struct strat *s, float **p)
{
	arena_free(A(s), *p);
	*p = NULL;
}

static int h_fwd_enter(void *ctx, int u, struct err *e)
{
	struct strat *s = ctx;
	int rc = 0, next = u + 1;

	if (!s->shard_params)
		return 0;
	rc = gather(s, u, e);
	if (!rc && s->o.fwd_prefetch && next < s->m.nunits)
		rc = gather(s, next, e);
	return rc;
}

static int h_fwd_exit(void *ctx, int u, struct err *e)
{
	struct strat *s = ctx;

	(void)e;
	if ((s->kind == K_FULL || s->kind == K_HYBRID) && u != 0)
		release(s, &U(s, u)->pg);
	return 0;
}

/* the unit after u in backward order: the last block after the root, then down */
static int next_bwd(const struct strat *s, int u)
{
	if (u == 0)
		return s->m.nunits > 1 ? s->m.nunits - 1 : -1;
	return u > 1 ? u - 1 : -1;
}

static int h_bwd_enter(void *ctx, int u, struct err *e)
{
	struct strat *s = ctx;
	struct unit_state *us = U(s, u);
	int rc = 0, next = next_bwd(s, u);

	if (s->shard_params) {
		rc = gather(s, u, e);
		if (!rc && s->o.bwd_prefetch == PREFETCH_BACKWARD_PRE && next >= 0)
			rc = gather(s, next, e);
	}
	if (!rc && s->shard_grads) {
		rc = arena_alloc(A(s), (void **)&us->gfull, us->npad * sizeof(float), "unit grads", e);
		if (!rc)
			s->be->zero(us->gfull, us->npad * sizeof(float));
	}
	return rc;
}

static int h_bwd_exit(void *ctx, int u, struct err *e)
{
	struct strat *s = ctx;
	struct unit_state *us = U(s, u);
	int rc = 0, next = u == 0 ? -1 : next_bwd(s, u);  /* the root's exit ends the backward */

	if (s->shard_params && s->o.bwd_prefetch == PREFETCH_BACKWARD_POST && next >= 0)
		rc = gather(s, next, e);
	if (!rc && s->shard_grads) {
		float *mine = us->gfull + (size_t)s->shard.rank * us->nshard;
		rc = agree(s, e);
		if (!rc)
			rc = s->be->reduce_scatter(&s->shard, us->gfull, mine, us->nshard, e);
		if (!rc && s->have_groups && s->repl.size > 1)
			rc = s->be->allreduce(&s->repl, mine, us->nshard, e);
		if (!rc)
			s->be->axpy(us->g, mine, 1.0f, us->nshard);
		release(s, &us->gfull);
	}
	if (!rc && s->kind == K_NOSHARD && s->sync && !(rc = agree(s, e)))
		rc = s->be->allreduce(&s->world, us->g, us->n, e);
	if (s->shard_params)
		release(s, &us->pg);
	return rc;
}

static float *param_grad(struct strat *s, int p)
{
	const struct rt_param *q = &s->m.p[p];
	return s->u[0][q->unit].g + q->off;
}

static int h_grad_ready(void *ctx, int p, struct err *e)
{
	struct strat *s = ctx;
	struct ddp_bucket *b;
	int i;

	if (s->kind != K_DDP || !s->sync)
		return 0;
	for (b = s->bk; b < s->bk + s->nbk; b++)
		if (p <= b->p_hi && p >= b->p_lo)
			break;
	if (--b->pending > 0)
		return 0;
	{
		size_t off = 0;
		for (i = b->p_hi; i >= b->p_lo; i--) {
			s->be->copy(b->buf + off, param_grad(s, i), s->m.p[i].n * sizeof(float), COPY_D2D);
			off += s->m.p[i].n;
		}
	}
	return agree(s, e) ? e->code : s->be->allreduce_start(&s->world, b->buf, b->n, &b->req, e);
}

static int ddp_finish(struct strat *s, struct err *e)
{
	struct ddp_bucket *b;
	int rc = 0, i;

	for (b = s->bk; b < s->bk + s->nbk; b++) {
		int r2 = s->be->wait(&b->req, e);
		size_t off = 0;
		rc = rc ? rc : r2;
		if (!rc && b->pending == 0)
			for (i = b->p_hi; i >= b->p_lo; i--) {
				s->be->copy(param_grad(s, i), b->buf + off, s->m.p[i].n * sizeof(float), COPY_D2D);
				off += s->m.p[i].n;
			}
		b->pending = b->p_hi - b->p_lo + 1;
	}
	return rc;
}

/* ---- setup -------------------------------------------------------------- */

static int make_buckets(struct strat *s, struct err *e)
{
	double limit = 1024.0 * 1024.0, bytes = 0;
	int p, start = s->m.np - 1;

	s->bk = calloc((size_t)s->m.np, sizeof *s->bk);
	if (!s->bk)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	/* torch DDP: parameters in reverse order; a bucket closes once it reaches
	 * the limit (1 MiB for the first, bucket_cap_mb after) */
	for (p = s->m.np - 1; p >= 0; p--) {
		bytes += (double)s->m.p[p].n * sizeof(float);
		if (bytes >= limit || p == 0) {
			struct ddp_bucket *b = &s->bk[s->nbk++];
			b->p_hi = start;
			b->p_lo = p;
			b->n = (size_t)(bytes / sizeof(float));
			b->pending = start - p + 1;
			start = p - 1;
			bytes = 0;
			limit = s->o.bucket_mb * 1024.0 * 1024.0;
		}
	}
	for (p = 0; p < s->nbk; p++) {
		int rc = arena_alloc(&s->ar[0], (void **)&s->bk[p].buf, s->bk[p].n * sizeof(float),
				     "ddp bucket", e);
		if (rc)
			return rc;
	}
	return 0;
}

static int alloc_zero(struct strat *s, float **p, size_t n, const char *tag, struct err *e)
{
	int rc = arena_alloc(A(s), (void **)p, n * sizeof(float), tag, e);
	if (!rc)
		s->be->zero(*p, n * sizeof(float));
	return rc;
}

static int init_states(struct strat *s, struct err *e)
{
	int u, rc = 0, G = s->shard.size, r = s->shard.rank;
	int shard_any = s->shard_params || s->shard_grads || s->shard_opt;
	float *host = NULL;

	s->cur = 0;
	for (u = 0; u < s->m.nunits && !rc; u++) {
		struct unit_state *us = U(s, u);
		size_t np_, ng, no;
		us->n = s->m.unit_n[u];
		us->npad = shard_any ? (us->n + (size_t)G - 1) / (size_t)G * (size_t)G : us->n;
		us->nshard = shard_any ? us->npad / (size_t)G : us->n;
		np_ = s->shard_params ? us->nshard : us->npad;
		ng = s->shard_grads ? us->nshard : us->npad;
		no = s->shard_opt ? us->nshard : us->npad;
		rc = arena_alloc(A(s), (void **)&us->p, np_ * sizeof(float), "params", e);
		if (!rc) {
			host = malloc(np_ * sizeof(float) + 1);
			if (!host)
				rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
		}
		if (!rc) {
			rtm_init_unit(&s->m, s->o.seed, u, s->shard_params ? (size_t)r * us->nshard : 0, host, np_);
			s->be->copy(us->p, host, np_ * sizeof(float), COPY_H2D);
		}
		free(host);
		host = NULL;
		if (!rc)
			rc = alloc_zero(s, &us->g, ng, "grads", e);
		if (!rc && s->o.optimizer != OPT_SGD)
			rc = alloc_zero(s, &us->m, no, "optimizer m", e);
		if (!rc && (s->o.optimizer == OPT_ADAM || s->o.optimizer == OPT_ADAMW))
			rc = alloc_zero(s, &us->v, no, "optimizer v", e);
	}
	if (!rc && s->kind == K_DDP)
		rc = make_buckets(s, e);
	return rc;
}

int strat_init(struct strat *s, const struct strat_opts *o, const struct model *m, int T,
	       double dropout, struct backend *be, struct rt_comm *world, struct err *e)
{
	int rc, d;

	memset(s, 0, sizeof *s);
	s->o = *o;
	s->be = be;
	s->world = *world;
	s->kind = kind_of(o);
	if (s->kind == K_FULL && o->strategy == STRAT_ZERO3)
		s->o.bwd_prefetch = PREFETCH_NONE, s->o.fwd_prefetch = 0;
	s->shard_params = s->kind == K_FULL || s->kind == K_SGO || s->kind == K_HYBRID || s->kind == K_HYBRID2;
	s->shard_grads = s->shard_params || s->kind == K_ZERO2;
	s->shard_opt = s->shard_grads || s->kind == K_ZERO1;
	s->ndev = s->kind == K_DP ? o->devices : 1;
	if ((s->kind == K_SINGLE || s->kind == K_DP) && world->size != 1)
		return err_set(e, ERR_INPUT, NULL, 0, "strategy %s runs in one process; started with %d ranks",
			       s->kind == K_DP ? "dp" : "single", world->size);
	if (s->ndev < 1 || s->ndev > STRAT_MAX_DEV)
		return err_set(e, ERR_INPUT, NULL, 0, "dp: %d devices; expected 1..%d", s->ndev, STRAT_MAX_DEV);
	s->dp_rank = s->kind == K_DP ? 0 : world->rank;
	s->dp_size = s->kind == K_DP ? s->ndev : world->size;
	for (d = 0; d < s->ndev; d++)
		arena_init(&s->ar[d], &be->dev, (size_t)o->capacity, d);
	rc = rtm_init(&s->m, m, T, dropout, o->recompute, be, e);
	if (rc)
		goto fail;
	s->m.h = (struct rtm_hooks){s, h_params, h_grads, h_fwd_enter, h_fwd_exit, h_bwd_enter,
				    h_bwd_exit, h_grad_ready};
	s->m.seed = o->seed;
	for (d = 0; d < s->ndev; d++) {
		s->u[d] = calloc((size_t)s->m.nunits, sizeof *s->u[d]);
		if (!s->u[d]) {
			rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
			goto fail;
		}
	}
	s->shard = *world;
	if (s->kind == K_HYBRID || s->kind == K_HYBRID2) {
		int g = o->group;
		if (g < 1 || world->size % g) {
			rc = err_set(e, ERR_INPUT, NULL, 0, "hybrid sharding: %d ranks do not split into groups of %d",
				     world->size, g);
			goto fail;
		}
		rc = be->comm_split(world, world->rank / g, world->rank, &s->shard, e);
		if (!rc)
			rc = be->comm_split(world, world->rank % g, world->rank, &s->repl, e);
		if (rc)
			goto fail;
		s->have_groups = 1;
	}
	rc = init_states(s, e);
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
			s->be->wait(&s->bk[d].req, &e);
		}
	if (s->have_groups) {
		s->be->comm_free(&s->shard);
		s->be->comm_free(&s->repl);
	}
	for (d = 0; d < s->ndev; d++) {
		arena_destroy(&s->ar[d]);
		free(s->u[d]);
	}
	free(s->bk);
	rtm_free(&s->m);
	memset(s, 0, sizeof *s);
}

/* ---- the step ------------------------------------------------------------ */

static int replica_up(struct strat *s, int d, struct err *e)
{
	int u, rc = 0;

	s->cur = d;
	for (u = 0; u < s->m.nunits && !rc; u++) {
		struct unit_state *us = U(s, u), *m0 = &s->u[0][u];
		us->n = us->npad = us->nshard = m0->n;
		rc = arena_alloc(A(s), (void **)&us->p, us->n * sizeof(float), "replica params", e);
		if (!rc)
			s->be->copy(us->p, m0->p, us->n * sizeof(float), COPY_D2D);
	}
	for (u = 0; u < s->m.nunits && !rc; u++)
		rc = alloc_zero(s, &U(s, u)->g, U(s, u)->n, "replica grads", e);
	return rc;
}

static void replica_down(struct strat *s, int d, int reduce)
{
	int u;

	s->cur = d;
	for (u = 0; u < s->m.nunits; u++) {
		if (reduce && U(s, u)->g)
			s->be->axpy(s->u[0][u].g, U(s, u)->g, 1.0f, U(s, u)->n);
		release(s, &U(s, u)->g);
	}
	for (u = 0; u < s->m.nunits; u++)
		release(s, &U(s, u)->p);
	s->cur = 0;
}

static int micro(struct strat *s, int a, int d, int32_t *ids, struct err *e)
{
	int B = s->o.micro_batch, j, rc;
	int rank = s->kind == K_DP ? d : s->dp_rank;

	for (j = 0; j < B; j++) {
		uint64_t sample = (((uint64_t)s->step * s->o.grad_accum + a) * s->dp_size + rank) * B + j;
		rtm_sample(&s->m, s->o.seed, sample, ids + (size_t)j * 2 * s->m.T);
	}
	s->cur = d;
	s->m.ar = A(s);
	s->m.rng_step = ((uint64_t)s->step * s->o.grad_accum + a) * s->dp_size + rank;
	if (d > 0 && (rc = replica_up(s, d, e)))
		return rc;
	rc = rtm_micro_step(&s->m, B, ids, e);
	if (d > 0)
		replica_down(s, d, rc == 0);
	s->cur = 0;
	s->m.ar = A(s);
	return rc;
}

static int update(struct strat *s, struct err *e)
{
	const struct strat_opts *o = &s->o;
	int u, rc = 0, t = s->step + 1, r = s->shard.rank;

	s->cur = 0;
	for (u = 0; u < s->m.nunits && !rc; u++) {
		struct unit_state *us = U(s, u);
		float *pp = us->p, *gg = us->g;
		size_t n = us->npad;
		if (s->kind == K_ZERO1 && s->world.size > 1 && s->sync)
			rc = s->be->allreduce(&s->world, us->g, us->npad, e);
		if (s->shard_opt) {
			n = us->nshard;
			if (!s->shard_params)
				pp = us->p + (size_t)r * us->nshard;
			if (!s->shard_grads)
				gg = us->g + (size_t)r * us->nshard;
		}
		if (rc)
			break;
		if (o->optimizer == OPT_ADAM || o->optimizer == OPT_ADAMW)
			s->be->adamw(pp, gg, us->m, us->v, n, (float)o->lr, (float)o->beta1, (float)o->beta2,
				     (float)o->eps, (float)o->weight_decay, t);
		else
			s->be->sgd(pp, gg, us->m, n, (float)o->lr, (float)o->momentum);
		if (s->shard_opt && !s->shard_params)
			rc = s->be->allgather(&s->shard, pp, us->p, us->nshard, e);
		s->be->zero(us->g, (s->shard_grads ? us->nshard : us->npad) * sizeof(float));
	}
	return rc;
}

/* After a micro-step nothing transient may remain: gathered units, unit
 * gradients (a stale gathered unit would be used in the next forward). */
static int check_released(struct strat *s, struct err *e)
{
	int u, d;

	for (d = 0; d < s->ndev; d++)
		for (u = 0; u < s->m.nunits; u++)
			if (s->u[d][u].pg || s->u[d][u].gfull || (d > 0 && s->u[d][u].p))
				return err_set(e, ERR_SYSTEM, NULL, 0, "internal: unit %d still gathered after the step", u);
	return 0;
}

int strat_step(struct strat *s, struct err *e)
{
	int32_t *ids = malloc((size_t)s->o.micro_batch * 2 * s->m.T * sizeof *ids);
	double loss = 0, v[2];
	int a, d, rc = 0, r2;

	if (!ids)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	s->agreed = 0;
	s->m.loss_scale = 1.0f / (float)((double)s->m.T * s->o.micro_batch * s->dp_size * s->o.grad_accum);
	for (a = 0; a < s->o.grad_accum && !rc; a++) {
		s->sync = a == s->o.grad_accum - 1;
		for (d = 0; d < s->ndev && !rc; d++) {
			rc = micro(s, a, d, ids, e);
			loss += s->m.loss_sum * s->m.loss_scale;
		}
	}
	if (s->kind == K_DDP) {
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
	r2 = s->be->allreduce_host(&s->world, v, 2, 1, e);
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
	rc = s->be->allreduce_host(&s->world, v, 1, 0, e);
	s->loss = v[0];
	s->step++;
	return rc;
}

/* ---- inspection ---------------------------------------------------------- */

int strat_gather_params(struct strat *s, float *host, struct err *e)
{
	int u, rc = 0;

	s->cur = 0;
	for (u = 0; u < s->m.nunits && !rc; u++) {
		struct unit_state *us = U(s, u);
		float *full = malloc(us->npad * sizeof *full + 1);
		if (!full)
			return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
		if (s->shard_params)   /* host memory is device memory on cpu; tests only */
			rc = s->be->allgather(&s->shard, us->p, full, us->nshard, e);
		else
			s->be->copy(full, us->p, us->npad * sizeof *full, COPY_D2H);
		if (!rc)
			memcpy(host + s->m.unit_goff[u], full, us->n * sizeof *full);
		free(full);
	}
	return rc;
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

/*
 * cstep.c — a decoder's training step on one GPU in bf16 mixed precision or
 * fp32 (see cstep.h). The op dispatch mirrors model_rt.c's forward_kernel and
 * backward_kernel, with the compute type added.
 */
#include "cstep.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "scenario.h"

static int dalloc(struct cstep *c, void **p, size_t bytes, struct err *e)
{
	*p = NULL;
	if (!bytes)
		return 0;
	CUDA_TRY(cudaMalloc(p, bytes), e);
	c->bytes += bytes;
	return 0;
}

/* tensors the fused attention never materialises */
static int skipped(const struct cstep *c, int t)
{
	int p = c->r.g.t[t].producer;
	return c->flash && p >= 0 && (c->r.g.ops[p].kind == OP_ATTN_SCORE || c->r.g.ops[p].kind == OP_SOFTMAX);
}

static size_t tbytes(const struct cstep *c, int t)
{
	return (size_t)c->B * (size_t)c->g.t[t].elems * (size_t)c->g.t[t].dsize;
}

/* bytes of a parameter gradient: bf16 under CUK_BF16W, else fp32 */
static size_t gsize(const struct cstep *c)
{
	return c->dt == CUK_BF16W ? 2 : 4;
}

static int buffers(struct cstep *c, struct err *e)
{
	struct graph *g = &c->r.g;
	size_t n = c->r.nparams;
	int t, i, k, rc = 0;

	c->val = calloc((size_t)g->nt, sizeof *c->val);
	c->dval = calloc((size_t)g->nt, sizeof *c->dval);
	if (!c->val || !c->dval)
		return err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	rc = dalloc(c, (void **)&c->p, n * 4, e);
	rc = rc ? rc : dalloc(c, &c->grad, n * gsize(c), e);
	rc = rc ? rc : dalloc(c, (void **)&c->m, n * 4, e);
	rc = rc ? rc : dalloc(c, (void **)&c->v, n * 4, e);
	if (!rc && c->dt != CUK_F32)
		rc = dalloc(c, &c->pc, n * 2, e);
	for (t = 0; t < g->nt && !rc; t++)
		if (t != g->input && !skipped(c, t))
			rc = dalloc(c, &c->val[t], tbytes(c, t), e);
	/* a gradient for every tensor some op reads (but the token ids) */
	for (i = 0; i < g->nops && !rc; i++)
		for (k = 0; k < g->ops[i].nin && !rc; k++) {
			t = g->ops[i].in[k];
			if (t != g->input && !c->dval[t] && !skipped(c, t))
				rc = dalloc(c, &c->dval[t], tbytes(c, t), e);
		}
	if (!rc && c->flash)
		rc = dalloc(c, (void **)&c->lse, (size_t)g->nblocks * c->B * c->r.NH * c->T * 4, e);
	if (!rc)
		rc = dalloc(c, (void **)&c->ids, (size_t)c->B * 2 * c->T * 4, e);
	return rc;
}

int cstep_init(struct cstep *c, struct cuk *k, const struct model *m, int B, int T, int dt,
	       double dropout, uint64_t seed, int flash, struct err *e)
{
	struct graph_opts o = {0};
	float *host = NULL;
	int rc, u;

	memset(c, 0, sizeof *c);
	c->k = k, c->dt = dt, c->B = B, c->T = T, c->seed = seed, c->flash = flash;
	/* strat_opts_from's AdamW */
	c->lr = 1e-3f, c->b1 = 0.9f, c->b2 = 0.999f, c->eps = 1e-8f, c->wd = 0.01f;
	if (flash && dropout > 0)
		return err_set(e, ERR_INPUT, NULL, 0, "fused attention has no dropout: use dropout 0");
	rc = rtm_init(&c->r, m, T, dropout, RECOMPUTE_NONE, RT_F32, NULL, e);
	if (rc)
		return rc;
	c->r.seed = seed;
	o.seq_len = o.target_len = T;
	o.dropout = dropout;
	o.tp = 1;
	o.flavor = GRAPH_SHARDCAST;
	o.act_bytes = (int)cuk_dsize(dt);
	rc = graph_build(&c->g, m, &o, e);
	if (!rc && (c->g.nops != c->r.g.nops || c->g.nt != c->r.g.nt))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "the %d-byte graph differs from the runtime's", o.act_bytes);
	if (!rc)
		rc = buffers(c, e);
	c->ids_host = malloc((size_t)B * 2 * T * sizeof *c->ids_host);
	host = malloc(c->r.nparams * sizeof *host + 1);
	if (!rc && (!c->ids_host || !host))
		rc = err_set(e, ERR_SYSTEM, NULL, 0, "out of host memory");
	for (u = 0; u < c->r.nunits && !rc; u++)
		rtm_init_unit(&c->r, seed, u, 0, host + c->r.unit_goff[u], c->r.unit_n[u]);
	if (!rc)
		CUDA_TRY(cudaMemcpy(c->p, host, c->r.nparams * 4, cudaMemcpyHostToDevice), e);
	free(host);
	if (!rc) {
		CUDA_TRY(cudaMemset(c->grad, 0, c->r.nparams * gsize(c)), e);
		CUDA_TRY(cudaMemset(c->m, 0, c->r.nparams * 4), e);
		CUDA_TRY(cudaMemset(c->v, 0, c->r.nparams * 4), e);
		if (dt != CUK_F32)
			cuk_cast(k, CUK_BF16, c->pc, CUK_F32, c->p, c->r.nparams);
		else
			c->pc = c->p;
	}
	if (rc)
		cstep_free(c);
	return rc;
}

void cstep_free(struct cstep *c)
{
	int t;

	if (c->val)
		for (t = 0; t < c->r.g.nt; t++) {
			cudaFree(c->val[t]);
			cudaFree(c->dval[t]);
		}
	if (c->pc != c->p)
		cudaFree(c->pc);
	cudaFree(c->p), cudaFree(c->grad), cudaFree(c->m), cudaFree(c->v), cudaFree(c->lse), cudaFree(c->ids);
	free(c->val), free(c->dval), free(c->ids_host);
	graph_free(&c->g);
	rtm_free(&c->r);
	memset(c, 0, sizeof *c);
}

/* ---- the step ---------------------------------------------------------------- */

/* the parameters the kernels read: the fp32 master, or the bf16 working copy
 * under CUK_BF16W */
static void *P(struct cstep *c, int param)
{
	if (c->dt == CUK_BF16W)
		return (char *)c->pc + c->r.p[param].goff * 2;
	return c->p + c->r.p[param].goff;
}

static void *PC(struct cstep *c, int param)           /* the products' copy */
{
	return param < 0 ? NULL : (char *)c->pc + c->r.p[param].goff * cuk_dsize(c->dt);
}

static void *G(struct cstep *c, int param)
{
	return param < 0 ? NULL : (char *)c->grad + c->r.p[param].goff * gsize(c);
}

static void *V(struct cstep *c, int t)
{
	return t < 0 ? NULL : c->val[t];
}

static size_t elems(struct cstep *c, int t)
{
	return (size_t)c->B * (size_t)c->r.g.t[t].elems;
}

static int forward_op(struct cstep *c, int i, struct err *e)
{
	struct rtm *r = &c->r;
	const struct gop *o = &r->g.ops[i];
	struct cuk *k = c->k;
	int B = c->B, T = c->T, C = r->C, N = B * T, dt = c->dt, w = r->op_w[i], b = r->op_b[i];
	void *y = V(c, o->out), *x = V(c, o->in[0]);
	char name[GRAPH_NAME];

	switch (o->kind) {
	case OP_EMBED:
		cuk_embed_fwd(k, dt, y, c->ids, P(c, w), B, T, C);
		break;
	case OP_ADD:
		if (o->nin == 1)
			cuk_pos_fwd(k, dt, y, x, P(c, w), B, T, C);
		else
			cuk_add_fwd(k, dt, y, x, V(c, o->in[1]), (size_t)N * C);
		break;
	case OP_NORM:
		if (b >= 0)
			cuk_layernorm_fwd(k, dt, y, V(c, o->out + 1), x, P(c, w), P(c, b), N, C);
		else
			cuk_rmsnorm_fwd(k, dt, y, V(c, o->out + 1), x, P(c, w), N, C);
		break;
	case OP_MUL:
		cuk_mul_fwd(k, dt, y, x, V(c, o->in[1]), elems(c, o->out));
		break;
	case OP_MATMUL:
		cuk_matmul_fwd(k, dt, y, x, PC(c, w), PC(c, b), N, (int)o->k, (int)o->n);
		if (r->rope_op[i])
			cuk_rope(k, dt, y, B, T, r->NH, r->NKV, r->hs, r->theta, 1);
		break;
	case OP_ATTN_SCORE:
		if (!c->flash)
			cuk_attn_score_fwd(k, dt, y, x, B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_SOFTMAX:
		if (!c->flash)
			cuk_softmax_fwd(k, dt, y, x, B * r->NH * T, T);
		break;
	case OP_ATTN_CTX:
		if (c->flash)
			return cuk_flash_fwd(k, dt, y, c->lse + (size_t)o->layer * B * r->NH * T, V(c, o->in[1]), B, T,
					     r->NH, r->NKV, r->hs, e);
		cuk_attn_ctx_fwd(k, dt, y, x, V(c, o->in[1]), B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_ACT:
		if (r->m.activation == ACT_SWIGLU)
			cuk_silu_fwd(k, dt, y, x, elems(c, o->out));
		else
			cuk_gelu_fwd(k, dt, y, x, elems(c, o->out));
		break;
	case OP_DROPOUT:
		cuk_dropout_fwd(k, dt, y, V(c, o->out + 1), x, elems(c, o->out), r->dropout,
				c->seed ^ ((uint64_t)c->step * 0x9e3779b97f4a7c15ull), (uint64_t)i << 40);
		break;
	case OP_LOSS:
		cuk_xent_fwd(k, dt, y, &r->loss_sum, x, c->ids, B, T, r->V);
		break;
	default:
		return err_set(e, ERR_INPUT, NULL, 0, "op %s is not implemented", graph_op_name(&r->g, i, name));
	}
	return 0;
}

static int backward_op(struct cstep *c, int i, struct err *e)
{
	struct rtm *r = &c->r;
	const struct gop *o = &r->g.ops[i];
	struct cuk *k = c->k;
	int B = c->B, T = c->T, C = r->C, N = B * T, dt = c->dt, w = r->op_w[i], b = r->op_b[i];
	void *dy = o->out >= 0 ? c->dval[o->out] : NULL, *dx = c->dval[o->in[0]];

	switch (o->kind) {
	case OP_EMBED:
		cuk_embed_bwd(k, dt, G(c, w), dy, c->ids, B, T, C);
		break;
	case OP_ADD:
		if (o->nin == 1)
			cuk_pos_bwd(k, dt, dx, G(c, w), dy, B, T, C);
		else
			cuk_add_bwd(k, dt, dx, c->dval[o->in[1]], dy, (size_t)N * C);
		break;
	case OP_NORM:
		if (b >= 0)
			cuk_layernorm_bwd(k, dt, dx, G(c, w), G(c, b), dy, V(c, o->in[0]), V(c, o->out + 1), P(c, w), N, C);
		else
			cuk_rmsnorm_bwd(k, dt, dx, G(c, w), dy, V(c, o->in[0]), V(c, o->out + 1), P(c, w), N, C);
		break;
	case OP_MUL:
		cuk_mul_bwd(k, dt, dx, c->dval[o->in[1]], dy, V(c, o->in[0]), V(c, o->in[1]), elems(c, o->out));
		break;
	case OP_MATMUL:
		if (r->rope_op[i])  /* back through the rotation, on the gradient */
			cuk_rope(k, dt, dy, B, T, r->NH, r->NKV, r->hs, r->theta, -1);
		cuk_matmul_bwd(k, dt, dx, G(c, w), G(c, b), dy, V(c, o->in[0]), PC(c, w), N, (int)o->k, (int)o->n);
		break;
	case OP_ATTN_SCORE:
		if (!c->flash)
			cuk_attn_score_bwd(k, dt, dx, dy, V(c, o->in[0]), B, T, r->NH, r->NKV, r->hs);
		break;
	case OP_SOFTMAX:
		if (!c->flash)
			cuk_softmax_bwd(k, dt, dx, dy, V(c, o->out), B * r->NH * T, T);
		break;
	case OP_ATTN_CTX:
		if (c->flash)
			return cuk_flash_bwd(k, dt, c->dval[o->in[1]], dy, V(c, o->in[1]), V(c, o->out),
					     c->lse + (size_t)o->layer * B * r->NH * T, B, T, r->NH, r->NKV, r->hs, e);
		cuk_attn_ctx_bwd(k, dt, dx, c->dval[o->in[1]], dy, V(c, o->in[0]), V(c, o->in[1]), B, T, r->NH,
				 r->NKV, r->hs);
		break;
	case OP_ACT:
		if (r->m.activation == ACT_SWIGLU)
			cuk_silu_bwd(k, dt, dx, dy, V(c, o->in[0]), elems(c, o->out));
		else
			cuk_gelu_bwd(k, dt, dx, dy, V(c, o->in[0]), elems(c, o->out));
		break;
	case OP_DROPOUT:
		cuk_dropout_bwd(k, dt, dx, dy, V(c, o->out + 1), elems(c, o->out), r->dropout);
		break;
	case OP_LOSS:
		cuk_xent_bwd(k, dt, dx, V(c, o->out), c->ids, B, T, r->V, r->loss_scale);
		break;
	}
	return 0;
}

int cstep_step(struct cstep *c, struct err *e)
{
	struct rtm *r = &c->r;
	cudaStream_t s = (cudaStream_t)c->k->stream;
	int i, j, t, rc = 0;

	for (j = 0; j < c->B; j++)  /* strategy single's samples of this step */
		rtm_sample(r, c->seed, (uint64_t)c->step * c->B + (uint64_t)j, c->ids_host + (size_t)j * 2 * c->T);
	CUDA_TRY(cudaMemcpyAsync(c->ids, c->ids_host, (size_t)c->B * 2 * c->T * 4, cudaMemcpyHostToDevice, s), e);
	r->loss_sum = 0;
	r->loss_scale = 1.0f / (float)((double)c->T * c->B);
	for (i = 0; i < r->g.nops && !rc; i++)
		rc = forward_op(c, i, e);
	for (t = 0; t < r->g.nt && !rc; t++)
		if (c->dval[t])
			CUDA_TRY(cudaMemsetAsync(c->dval[t], 0, tbytes(c, t), s), e);
	for (i = r->g.nops - 1; i >= 0 && !rc; i--)
		rc = backward_op(c, i, e);
	if (rc)
		return rc;
	/* the master from the gradients; the bf16 copy written back in the same pass */
	cuk_adamw_mp(c->k, c->dt == CUK_BF16W ? CUK_BF16 : CUK_F32, c->dt != CUK_F32 ? c->pc : NULL, c->p, c->grad,
		     c->m, c->v, r->nparams, c->lr, c->b1, c->b2, c->eps, c->wd, c->step + 1);
	CUDA_TRY(cudaMemsetAsync(c->grad, 0, r->nparams * gsize(c), s), e);
	c->loss = r->loss_sum * r->loss_scale;
	c->step++;
	return 0;
}

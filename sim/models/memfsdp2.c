/*
 * memfsdp2.c — FSDP2's units in the memory walk (plan.h layout
 * LAYOUT_PER_PARAM): fully_shard, torch/distributed/fsdp/_fully_shard/.
 *
 * What it allocates, and when (PyTorch 2.15's sources; the shardcast
 * runtime's fsdp2 follows the same schedule with one buffer where PyTorch
 * has one tensor per parameter, memory.h S6):
 *  - sharding (_fsdp_param.py _init_sharded_param): every parameter is
 *    chunked on dim 0 over the shard group; each rank holds ceil(rows / N)
 *    rows (rank 0 the most), padded: one fp32 tensor per parameter, and
 *    torch.optim's states per parameter of the same size.
 *  - all-gather (_fsdp_collectives.py foreach_all_gather): under
 *    MixedPrecisionPolicy a flat param_dtype copy of the unit's shards
 *    (_get_param_all_gather_inputs), then the flat all-gather output of N
 *    times their size, the copy freed once copied in; the copy-out
 *    (foreach_all_gather_copy_out) allocates each parameter's unsharded
 *    tensor, padded rows included (FSDPParam.init_all_gather_outputs,
 *    alloc_storage).
 *  - the handoff (_fsdp_param_group.py wait_for_unshard): in forward a
 *    unit's all-gather output is kept (AllGatherState) until the next
 *    unit's copy-out, the last one until the root's forward ends
 *    (_fsdp_state.py _post_forward); in backward it is freed after the
 *    copy-out.
 *  - reshard (reshard, to_sharded_post_forward): after forward the blocks
 *    (default) or every unit (true, N) free their unsharded tensors; with N
 *    each parameter first keeps a clone of its slice over N ranks, which
 *    the next all-gather gathers from and frees after its copy-out.
 *  - backward: a unit's pre-backward hook gathers it (if resharded) and
 *    prefetches the unit before it in forward order (_backward_prefetch:
 *    the all-gather, its copy-out waits for that unit's own hook); autograd
 *    writes one gradient per parameter in param_dtype (the upcast to a wider
 *    reduce dtype is deferred to the copy-in, _set_unsharded_grad_dtypes).
 *  - reduction (post_backward, foreach_reduce): the unsharded tensors are
 *    freed; the previous unit's reduce-scatter input is released
 *    (reduce_scatter_states, at most one kept); a reduce-scatter input of
 *    the padded unsharded size in reduce_dtype, the gradients copied in and
 *    freed, an output of the shard's size in reduce_dtype. In fp32 the
 *    sharded .grad are views of that output; otherwise they are an fp32
 *    cast of it and the output is freed (kept until the end of backward by
 *    HSDP's all-reduce, AllReduceState). A later micro-step adds into the
 *    existing .grad and frees what it made. The last input is released at
 *    the end of backward (_end_backward_iteration).
 *  - the root's hooks: its forward ends the step's forward, its pre-backward
 *    is the first of backward, its post-backward runs in the final
 *    callback (its inputs need no gradient), after every block's.
 */
#include "memwalk_int.h"

/* ---- per-parameter shards ------------------------------------------------------ */

/* Elements of rank 0's shard of op i's parameter tensor k (n elements):
 * ceil(rows / N) of its dim-0 rows (graph_param_rows; torch.chunk, and
 * _init_sharded_param pads every rank to chunk 0's size). */
int64_t memfsdp2_shard(const struct wk *w, int i, int k, int64_t n)
{
	int64_t r = (int64_t)graph_param_rows(w->g, i, k, (double)n);

	return r > 0 ? cdiv(r, w->N) * (n / r) : 0;
}

/* Calls f(w, elements, op) for every parameter tensor unit u owns (its
 * padded shard), in forward order (sign > 0) or backward order. */
static void each_param(struct wk *w, int u, int sign, void (*f)(struct wk *, int64_t, int))
{
	int p, i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	for (p = sign > 0 ? w->uooff[u + 1] - 1 : w->uooff[u]; p >= w->uooff[u] && p < w->uooff[u + 1];
	     p += sign > 0 ? -1 : 1) {  /* uops is descending */
		i = w->uops[p];
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++)
			f(w, memfsdp2_shard(w, i, k, sz[k]), i);
	}
}

/* ---- what each parameter holds ------------------------------------------------- */

static void shard_alloc(struct wk *w, int64_t sh, int op)
{
	alloc(w, MEM_PARAMS, W_PARAMS, op, sh * 4);
}

static void unsharded_alloc(struct wk *w, int64_t sh, int op)
{
	alloc(w, MEM_BUFFERS, W_GATHERED, op, sh * w->N * w->wgat);
}

static void unsharded_free(struct wk *w, int64_t sh, int op)
{
	release(w, MEM_BUFFERS, W_GATHERED, op, sh * w->N * w->wgat);
}

static int64_t post_fwd_elems(const struct wk *w, int64_t sh)
{
	return sh * w->N / w->pl->reshard_group;
}

/* to_sharded_post_forward: the slice over N ranks cloned, then the unsharded
 * tensor freed, parameter by parameter */
static void post_fwd_reshard(struct wk *w, int64_t sh, int op)
{
	alloc(w, MEM_BUFFERS, W_POST_FWD, op, post_fwd_elems(w, sh) * w->wgat);
	unsharded_free(w, sh, op);
}

static void post_fwd_free(struct wk *w, int64_t sh, int op)
{
	release(w, MEM_BUFFERS, W_POST_FWD, op, post_fwd_elems(w, sh) * w->wgat);
}

/* The elements a unit's all-gather sends from this rank: its shards, or its
 * post-forward slices. */
static int64_t ag_input(const struct wk *w, int u)
{
	return w->pfl[u] ? w->ush[u] * w->N / w->pl->reshard_group : w->ush[u];
}

/* ---- gathers ---------------------------------------------------------------------- */

/* foreach_all_gather: the param_dtype copy of the inputs, the flat output. */
static void unshard(struct wk *w, int u, int op)
{
	int64_t in;

	if (u < 0 || w->ul[u] || w->agl[u] || w->u[u].elems <= 0)
		return;
	in = ag_input(w, u);  /* u is a unit: after the check */
	if (w->wmp)
		alloc(w, MEM_BUFFERS, W_AG_BUF, op, in * w->wmp);
	alloc(w, MEM_BUFFERS, W_AG_BUF, op, w->ush[u] * w->N * w->wagb);
	if (w->wmp)
		release(w, MEM_BUFFERS, W_AG_BUF, op, in * w->wmp);
	w->agl[u] = 1;
}

static void ag_free(struct wk *w, int u, int op)
{
	if (u < 0 || !w->agl[u])
		return;
	release(w, MEM_BUFFERS, W_AG_BUF, op, w->ush[u] * w->N * w->wagb);
	w->agl[u] = 0;
}

/* The unit's tensors, one per parameter under PyTorch, one buffer in the
 * runtime. */
static void params_in(struct wk *w, int u, int op)
{
	if (pt(w))
		each_param(w, u, +1, unsharded_alloc);
	else
		alloc(w, MEM_BUFFERS, W_GATHERED, op, w->ush[u] * w->N * w->wgat);
}

static void params_out(struct wk *w, int u, int op)
{
	if (pt(w))
		each_param(w, u, -1, unsharded_free);
	else
		release(w, MEM_BUFFERS, W_GATHERED, op, w->ush[u] * w->N * w->wgat);
}

/* unshard + wait_for_unshard: gather (unless prefetched), the copy-out, the
 * post-forward slices freed; the output kept in forward (the handoff: the
 * one kept before is freed first), freed in backward. */
static void gather(struct wk *w, int u, int op, int fwd)
{
	if (u < 0 || w->ul[u] || w->u[u].elems <= 0)
		return;
	unshard(w, u, op);
	if (fwd && w->agheld >= 0 && w->agheld != u) {
		ag_free(w, w->agheld, op);
		w->agheld = -1;
	}
	params_in(w, u, op);
	w->ul[u] = 1;
	if (w->pfl[u]) {
		each_param(w, u, -1, post_fwd_free);
		w->pfl[u] = 0;
	}
	if (fwd)
		w->agheld = u;
	else
		ag_free(w, u, op);
}

/* reshard: the unsharded tensors freed, or traded for post-forward slices */
static void reshard(struct wk *w, int u, int op, int fwd)
{
	if (!w->ul[u])
		return;
	if (fwd && w->pl->reshard_group > 1 && pt(w)) {
		each_param(w, u, -1, post_fwd_reshard);
		w->pfl[u] = 1;
	} else if (fwd && w->pl->reshard_group > 1) {
		alloc(w, MEM_BUFFERS, W_POST_FWD, op, w->ush[u] * w->N / w->pl->reshard_group * w->wgat);
		params_out(w, u, op);
		w->pfl[u] = 1;
	} else {
		params_out(w, u, op);
	}
	w->ul[u] = 0;
}

/* ---- the hooks ------------------------------------------------------------------- */

/* The units starting at op i: gathered, then set_modules_to_forward_prefetch's
 * next unit all-gathered (its copy-out waits for its own hook). */
void memfsdp2_fwd_pre(struct wk *w, int i)
{
	int p, u;

	for (p = w->ufoff[i]; p < w->ufoff[i + 1]; p++) {
		u = w->ufirst[p];
		gather(w, u, i, 1);
		if (w->fwd_prefetch)
			unshard(w, memstrat_next_unit(w, u, 1), i);
	}
}

/* The units ending at op i, innermost first: resharded unless the root
 * stays gathered (reshard_after_forward's default). */
void memfsdp2_fwd_post(struct wk *w, int i)
{
	int p, u;

	for (p = w->uloff[i + 1] - 1; p >= w->uloff[i]; p--) {
		u = w->ulast[p];
		if (w->u[u].root ? w->pl->reshard_root : w->reshard_fwd)
			reshard(w, u, i, 1);
	}
}

/* The root's forward ends: the last all-gather output kept is freed. */
void memfsdp2_fwd_end(struct wk *w)
{
	ag_free(w, w->agheld, w->g->nops - 1);
	w->agheld = -1;
}

/* The units ending at op i: the pre-backward hook gathers each and
 * all-gathers the unit before it in forward order. */
void memfsdp2_bwd_pre(struct wk *w, int i)
{
	int p, u;

	for (p = w->uloff[i]; p < w->uloff[i + 1]; p++) {
		u = w->ulast[p];
		gather(w, u, i, 0);
		unshard(w, memstrat_next_unit(w, u, 0), i);
	}
}

/* The per-parameter gradients of unit u (PyTorch), freed after the copy-in. */
static void grads_out(struct wk *w, int u, int op)
{
	if (!pt(w)) {
		release(w, MEM_GRADS, W_UNSHARDED_GRAD, op, w->ush[u] * w->N * w->wug);
		return;
	}
	memstrat_unit_grads_free(w, u, op);
}

/* foreach_reduce's output: the sharded .grad itself when the reduce dtype is
 * theirs (views; a later micro-step adds it and frees it), else a cast into
 * them; HSDP keeps a reduce-dtype output for its all-reduce. */
static void reduce_out(struct wk *w, int u, int op)
{
	int64_t sh = w->ush[u];
	int keep = w->pl->hybrid && w->pl->replicate_n > 1 && w->wrs != w->wsg && pt(w);

	if (w->wrs == w->wsg && !w->usg[u] && pt(w)) {
		alloc(w, MEM_GRADS, W_GRAD_SHARD, op, sh * w->wsg);
		w->usg[u] = 1;
		return;
	}
	alloc(w, MEM_BUFFERS, W_RS_OUT, op, sh * w->wrs);
	if (w->wrs != w->wsg && pt(w))
		memstrat_grad_shard(w, u, op, sh * w->wsg);
	if (keep)
		w->arl[u] = 1;
	else
		release(w, MEM_BUFFERS, W_RS_OUT, op, sh * w->wrs);
}

static void rs_release(struct wk *w, int op)
{
	if (w->rsheld < 0)
		return;
	release(w, MEM_BUFFERS, W_RS_OUT, op, w->ush[w->rsheld] * w->N * w->wrs);
	w->rsheld = -1;
}

/* post_backward of unit u: reshard, the previous input released, the
 * reduce-scatter input and output, the input kept. Under
 * set_requires_gradient_sync(False) it reshards and returns: the unsharded
 * gradients stay on the parameters for the later micro-steps to add into
 * (memstrat.c accum_cast), and the reducing micro-step reduce-scatters them. */
static void reduce(struct wk *w, int u, int op)
{
	reshard(w, u, op, 0);
	if (!w->ugl[u] || !walk_syncs(w))
		return;
	rs_release(w, op);
	alloc(w, MEM_BUFFERS, W_RS_OUT, op, w->ush[u] * w->N * w->wrs);
	grads_out(w, u, op);
	w->ugl[u] = 0;
	reduce_out(w, u, op);
	w->rsheld = u;
}

/* The units starting at op i, innermost last. */
void memfsdp2_bwd_post(struct wk *w, int i)
{
	int p;

	for (p = w->ufoff[i + 1] - 1; p >= w->ufoff[i]; p--)
		reduce(w, w->ufirst[p], i);
}

/* _end_backward_iteration: the last reduce-scatter input and HSDP's kept
 * outputs released. */
void memfsdp2_bwd_end(struct wk *w)
{
	int u;

	rs_release(w, 0);
	for (u = 0; u < w->nu; u++)
		if (w->arl[u]) {
			release(w, MEM_BUFFERS, W_RS_OUT, 0, w->ush[u] * w->wrs);
			w->arl[u] = 0;
		}
}

/* ---- setup and the optimizer step ------------------------------------------------ */

static void state_alloc(struct wk *w, int64_t sh, int op)
{
	int c, copies = w->pl->opt_tensors, bytes = copies ? w->pl->opt_state_bytes / copies : 0;

	for (c = 0; c < copies; c++)
		alloc(w, MEM_OPTIM, W_OPT_STATES, op, sh * bytes);
}

static void temp_alloc(struct wk *w, int64_t sh, int op)
{
	alloc(w, MEM_BUFFERS, W_OPT_TEMP, op, sh * (int64_t)w->pf->adam_step_temp);
}

static void temp_free(struct wk *w, int64_t sh, int op)
{
	release(w, MEM_BUFFERS, W_OPT_TEMP, op, sh * (int64_t)w->pf->adam_step_temp);
}

/* PyTorch: a DTensor shard per parameter and torch.optim's states per
 * parameter; the runtime: flat buffers of every unit's shards (memory.h S3). */
void memfsdp2_setup(struct wk *w)
{
	int u, copies = w->pl->opt_tensors, bytes = copies ? w->pl->opt_state_bytes / copies : 0;
	int64_t S = 0;

	if (!pt(w)) {
		for (u = 0; u < w->nu; u++)
			S += w->ush[u];
		alloc(w, MEM_PARAMS, W_PARAMS, -1, S * w->wp);
		alloc(w, MEM_OPTIM, W_MASTER, -1, S * w->wm);
		alloc(w, MEM_OPTIM, W_OPT_STATES, -1, S * bytes * copies);
		alloc(w, MEM_GRADS, W_GRAD_SHARD, -1, S * w->wg);
		return;
	}
	for (u = 0; u < w->nu; u++)
		each_param(w, u, +1, shard_alloc);
	for (u = 0; u < w->nu; u++)
		each_param(w, u, +1, state_alloc);
}

/* torch.optim over the DTensor parameters (foreach: a temporary per
 * parameter; for-loop: two of the largest), then zero_grad frees each unit's
 * sharded gradients. */
void memfsdp2_step(struct wk *w)
{
	int u, p, i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS], big = 0;

	if (!pt(w))
		return;
	if (memstrat_opt_temp_kind(w) == OPTI_FOREACH) {
		for (u = 0; u < w->nu; u++)
			each_param(w, u, +1, temp_alloc);
		for (u = w->nu - 1; u >= 0; u--)
			each_param(w, u, -1, temp_free);
	} else if (memstrat_opt_temp_kind(w) == OPTI_FOR_LOOP) {
		for (u = 0; u < w->nu; u++)
			for (p = w->uooff[u]; p < w->uooff[u + 1]; p++)
				for (i = w->uops[p], k = 0, n = graph_op_params(w->g, i, sz); k < n; k++)
					big = memfsdp2_shard(w, i, k, sz[k]) > big ? memfsdp2_shard(w, i, k, sz[k]) : big;
		alloc(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
		release(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
	}
	for (u = w->nu - 1; u >= 0; u--)
		if (w->usg[u]) {
			release(w, MEM_GRADS, W_GRAD_SHARD, -1, w->ush[u] * w->wsg);
			w->usg[u] = 0;
		}
}

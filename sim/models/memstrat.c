/*
 * memstrat.c — what each strategy and framework allocates around the autograd
 * walk of memwalk.c: model states, buckets, gathered parameters, replicas,
 * optimizer-step temporaries and the fixed per-process memory (see memory.h).
 *
 * Mechanisms and their sources:
 *  - nn.DataParallel (torch/nn/parallel/data_parallel.py, _functions.py):
 *    replicate() broadcasts the parameters to every GPU each forward
 *    (Broadcast), parallel_apply runs the replicas, gather() concatenates every
 *    replica's outputs on GPU 0; the replicas' parameter gradients are summed
 *    onto GPU 0 by ReduceAddCoalesced once all are ready (end of backward).
 *  - DDP (torch/nn/parallel/distributed.py, reducer.cpp): buckets of
 *    bucket_cap_mb (the first 1 MiB, dist._DEFAULT_FIRST_BUCKET_BYTES) filled
 *    with parameters in reverse order, allocated at construction; with
 *    gradient_as_bucket_view the gradients are views into them.
 *  - FSDP (torch/distributed/fsdp/_runtime_utils.py): flat parameters sharded
 *    with padding to a multiple of the group; all-gather before a unit's
 *    forward, reshard after it (FULL_SHARD, HYBRID_SHARD) or after backward
 *    (SHARD_GRAD_OP, _HYBRID_SHARD_ZERO2, NO_SHARD); the root is not resharded
 *    after forward; pre-backward unshard, post-backward reshard then
 *    reduce-scatter of the unsharded gradient; BACKWARD_PRE prefetches in the
 *    pre-backward hook, BACKWARD_POST after the post-backward reshard;
 *    forward_prefetch in the pre-forward hook. MixedPrecision: a low-precision
 *    copy of the shard is made for the all-gather, gradients reduced in
 *    low precision and cast to fp32 into the sharded .grad.
 *  - DeepSpeed ZeRO stages 1-2 (deepspeed/runtime/zero/stage_1_and_2.py): 16-bit
 *    flat parameters, fp32 master and optimizer partitions, an ipg buffer of
 *    reduce_bucket_size elements during backward, a 16-bit gradient partition
 *    (stage 2, contiguous_gradients), an fp32 copy of the gradient partition
 *    during the step.
 *  - DeepSpeed ZeRO-3 (stage3.py, partitioned_param_coordinator.py): per-module
 *    fetch with prefetch up to stage3_prefetch_bucket_size elements while fewer
 *    than stage3_max_live_parameters are live; release after use unless reused
 *    within stage3_max_reuse_distance; parameters under
 *    stage3_param_persistence_threshold stay whole; a flat ipg bucket of
 *    reduce_bucket_size elements; a gradient partition in the model dtype
 *    (engine.get_data_types: ZeRO accumulates in the model dtype); an fp32
 *    gradient copy per sub-group during the step.
 */
#include "memwalk_int.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

/* ---- parameters and fixed overhead ------------------------------------------- */

/* Setup: one allocation per parameter tensor (PyTorch) of bpe bytes per element,
 * times copies (optimizer states: 2 for Adam). */
static void per_tensor_states(struct wk *w, int cat, int what, int bpe, int copies)
{
	int i, k, c, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	if (bpe <= 0)
		return;
	for (i = 0; i < w->g->nops; i++) {
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++)
			for (c = 0; c < copies; c++)
				alloc(w, cat, what, i, sz[k] * bpe);
	}
}

static void per_tensor_free(struct wk *w, int cat, int what, int bpe, int copies)
{
	int i, k, c, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	if (bpe <= 0)
		return;
	for (i = w->g->nops - 1; i >= 0; i--) {
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++)
			for (c = 0; c < copies; c++)
				release(w, cat, what, i, sz[k] * bpe);
	}
}

/* Optimizer state bytes per parameter of each state tensor, and how many there are. */
static void opt_layout(const struct wk *w, int *bytes, int *copies)
{
	*copies = w->pl->opt_tensors;
	*bytes = *copies ? w->pl->opt_state_bytes / *copies : 0;
}

/* Which temporaries torch.optim's Adam/AdamW step allocates (torch/optim/adam.py,
 * adamw.py; SGD without weight decay allocates none):
 *  - foreach (_multi_tensor_adam): exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs),
 *    an fp32 list as large as the group's parameters, to the end of the step
 *    (the profile's adam_step_temp bytes per element);
 *  - for_loop (_single_tensor_adam): denom = exp_avg_sq.sqrt() / bias_correction2_sqrt,
 *    two fp32 tensors of one parameter at a time: 8 bytes x the largest;
 *  - fused (_fused_adam_): none.
 * Returns the enum opt_impl whose temporaries apply, or OPTI_DEFAULT for none. */
static int opt_temp_kind(const struct wk *w)
{
	int bytes, copies;

	opt_layout(w, &bytes, &copies);
	if (copies != 2 || w->pl->opt_impl == OPTI_FUSED)
		return OPTI_DEFAULT;
	if (w->pl->opt_impl == OPTI_FOREACH && w->pf->adam_step_temp <= 0)
		return OPTI_DEFAULT;
	return w->pl->opt_impl;
}

static void overhead(struct wk *w)
{
	const struct fw_profile *pf = w->pf;
	int64_t ws, k;

	if (w->s->gpu.memory <= 0)  /* gpu = cpu: the runtime's arena counts tensors only */
		return;
	memwalk_event(w, +1, MEM_OVERHEAD, W_CONTEXT, -1, (int64_t)pf->cuda_context, 0, 0);
	ws = (int64_t)(w->s->gpu.compute_capability >= 9 ? pf->cublas_workspace_sm90 : pf->cublas_workspace);
	for (k = 0; k < pf->cublas_handles; k++)
		alloc(w, MEM_OVERHEAD, W_CUBLAS, -1, ws);
	memwalk_event(w, +1, MEM_OVERHEAD, W_NCCL, -1,
	   (int64_t)(w->pl->nccl_comms * pf->nccl_channels * pf->nccl_connections * pf->nccl_buffer), 0, 0);
}

/* ---- wrap units (FSDP, shardcast zero3) -------------------------------------- */

/* Which units start and end at each op and which ops each unit owns: the
 * hooks look these up instead of scanning every unit or op. */
static int unit_index(struct wk *w)
{
	int *key = malloc(((size_t)w->nu + 1) * sizeof *key), u;

	if (!key)
		return -1;
	for (u = 0; u < w->nu; u++)
		key[u] = w->u[u].first;
	w->ufirst = life_csr(key, w->nu, w->g->nops, &w->ufoff);
	for (u = 0; u < w->nu; u++)
		key[u] = w->u[u].last;
	w->ulast = life_csr(key, w->nu, w->g->nops, &w->uloff);
	free(key);
	w->uops = life_csr(w->uown, w->g->nops, w->nu, &w->uooff);
	return w->ufirst && w->ulast && w->uops ? 0 : -1;
}

/* Each unit's shard: ceil(elems / N) of a FlatParameter (FSDP1), or the
 * sum of its parameters' padded dim-0 shards (FSDP2, memfsdp2_shard). */
static void shard_sizes(struct wk *w)
{
	int u, i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	for (u = 0; u < w->nu; u++)
		w->ush[u] = w->pl->layout == LAYOUT_PER_PARAM ? 0 : shard(w, w->u[u].elems);
	if (w->pl->layout != LAYOUT_PER_PARAM)
		return;
	for (i = 0; i < w->g->nops; i++)
		for (k = 0, n = graph_op_params(w->g, i, sz); k < n && w->uown[i] >= 0; k++)
			w->ush[w->uown[i]] += memfsdp2_shard(w, i, k, sz[k]);
}

static int build_units(struct wk *w, int policy)
{
	struct wrap_units wu;

	if (wrap_units_build(&wu, w->g, policy, w->pl->wrap_min_params))
		return -1;
	w->u = wu.u;
	w->nu = wu.n;
	w->capu = wu.cap;
	w->uown = wu.own;
	w->unext = wu.next;
	w->ul = calloc((size_t)w->nu + 1, 1);
	w->ugl = calloc((size_t)w->nu + 1, 1);
	w->usg = calloc((size_t)w->nu + 1, 1);
	w->ufg = calloc((size_t)w->nu + 1, 1);
	w->agl = calloc((size_t)w->nu + 1, 1);
	w->pfl = calloc((size_t)w->nu + 1, 1);
	w->arl = calloc((size_t)w->nu + 1, 1);
	w->ush = calloc((size_t)w->nu + 1, sizeof *w->ush);
	if (!w->ul || !w->ugl || !w->usg || !w->ufg || !w->agl || !w->pfl || !w->arl || !w->ush)
		return -1;
	shard_sizes(w);
	return unit_index(w);
}

/* The unit whose parameters op i's gradient lands in (tied: the table's). */
static int grad_unit(const struct wk *w, int i)
{
	if (w->g->ops[i].tied && w->owner >= 0)
		return w->uown[w->owner];
	return w->uown[i];
}

/* Next unit after u in forward order (first op ascending, outer first) or in
 * backward order (last op descending); -1 none (next_units). */
static inline int next_unit(const struct wk *w, int u, int fwd)
{
	return u < 0 ? -1 : w->unext[2 * u + (fwd ? 1 : 0)];
}

/* ---- FSDP units: gather, reduce, reshard ------------------------------------- */

static void ugather(struct wk *w, int u, int op)
{
	int64_t sh, full;

	if (u < 0 || w->ul[u] || w->wgat == 0 || w->u[u].elems <= 0)
		return;
	sh = shard(w, w->u[u].elems);
	full = sh * w->N;
	if (w->wstage)
		alloc(w, MEM_BUFFERS, W_STAGING, op, sh * w->wstage);
	if (w->wmp)
		alloc(w, MEM_BUFFERS, W_STAGING, op, sh * w->wmp);
	alloc(w, MEM_BUFFERS, W_GATHERED, op, full * w->wgat);
	if (w->wmp)
		release(w, MEM_BUFFERS, W_STAGING, op, sh * w->wmp);
	if (w->wstage)
		release(w, MEM_BUFFERS, W_STAGING, op, sh * w->wstage);
	w->ul[u] = 1;
}

static void ufree(struct wk *w, int u, int op)
{
	if (!w->ul[u])
		return;
	release(w, MEM_BUFFERS, W_GATHERED, op, shard(w, w->u[u].elems) * w->N * w->wgat);
	w->ul[u] = 0;
}

/* The units starting at op i in ascending order (units_fwd_pre). */
static void units_fwd_pre(struct wk *w, int i)
{
	int p, u;

	for (p = w->ufoff[i]; p < w->ufoff[i + 1]; p++) {
		u = w->ufirst[p];
		ugather(w, u, i);
		if (w->fwd_prefetch)
			ugather(w, next_unit(w, u, 1), i);
	}
}

/* The units ending at op i in descending order. */
static void units_fwd_post(struct wk *w, int i)
{
	int p, u;

	if (!w->reshard_fwd)
		return;
	for (p = w->uloff[i + 1] - 1; p >= w->uloff[i]; p--) {
		u = w->ulast[p];
		if (!w->u[u].root)
			ufree(w, u, i);
	}
}

/* The units ending at op i in ascending order. */
static void units_bwd_pre(struct wk *w, int i)
{
	int p, u;

	for (p = w->uloff[i]; p < w->uloff[i + 1]; p++) {
		u = w->ulast[p];
		ugather(w, u, i);
		if (w->bwd_prefetch == PREFETCH_BACKWARD_PRE)
			ugather(w, next_unit(w, u, 0), i);
	}
}

static int bucket_view(const struct wk *w)
{
	return w->pl->ddp_bucket_view;
}

/* Whether a replica's .grad is there before this micro-step's gradient: kept
 * by zero_grad (PyTorch 1.13), or DDP's bucket view on a micro-step that
 * reduces; not on a no_sync one after zero_grad(set_to_none) (to_view). */
static int repl_grad_exists(const struct wk *w)
{
	return w->keep_grads || (bucket_view(w) && walk_syncs(w));
}

/* DDP with gradient_as_bucket_view on a micro-step that reduces: the reducer
 * copies a .grad that is not its bucket's view into the bucket and points .grad
 * at the view (reducer.cpp mark_variable_ready_dense). Such a .grad is one a
 * no_sync micro-step made: zero_grad(set_to_none) left .grad None, so
 * AccumulateGrad stole a fresh tensor there (repl_grad_exists). It goes once
 * this micro-step's gradient has been added into it (slot idx, bytes). */
static void to_view(struct wk *w, int i, int idx, int64_t bytes, int what)
{
	if (!w->pg[idx] || w->mech != MECH_REPL || !bucket_view(w) || w->keep_grads || !walk_syncs(w))
		return;
	release(w, MEM_GRADS, what, i, bytes);
	w->pg[idx] = 0;
}

/* A token table tied to other ops (an output projection, T5's decoder
 * embedding sharing the encoder's): its gradients reach one AccumulateGrad,
 * and autograd holds them in that node's input buffer until the last, the
 * owner's (the embedding, last in the backward), has arrived, summing each
 * later one into them out of place (torch/csrc/autograd/input_buffer.cpp
 * accumulate: aten::add, a new table-sized tensor; the CPU profiler of a real
 * backward of a tied 50,000 x 256 table shows the 48.8 MiB add on torch 1.13
 * and 2.15, and the PyTorch reference's traces show the first held across the
 * backward). The sum is then AccumulateGrad's: stolen as .grad when there is
 * none, else added into it in place and freed. tied_grad takes one gradient
 * of bytes at op i: a tied op's is held (or summed into what is held); the
 * owner's, with what is held, makes the sum and hands it on, labelled what
 * when it becomes .grad (slot idx, exists: .grad is there whatever pg says).
 * src: 0, or the bytes of the gradient as the op's kernel writes it where the
 * engine casts it to bytes as it leaves the op (FSDP2's grad_dtype:
 * accum_cast). Returns 1 when it took the gradient, 0 when nothing is held and
 * i is the owner (the caller's usual path: a gradient of its own). */
static int tied_grad(struct wk *w, int i, int idx, int64_t bytes, int what, int exists, int64_t src)
{
	int owner = i == w->owner;

	if (owner && !w->tied_held)
		return 0;
	if (src)
		alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, src);
	alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, bytes);  /* this op's gradient */
	if (src)
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, src);
	if (!w->tied_held) {
		w->tied_held = bytes;  /* the first: held */
		return 1;
	}
	exists = exists || w->pg[idx];
	if (owner && !exists) {  /* the sum becomes .grad */
		alloc(w, MEM_GRADS, what, i, bytes);
		w->pg[idx] = 1;
	} else {
		alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, bytes);
	}
	release(w, MEM_GRADS, W_WGRAD_TEMP, i, w->tied_held);
	release(w, MEM_GRADS, W_WGRAD_TEMP, i, bytes);
	w->tied_held = owner ? 0 : bytes;  /* the sum, held, or handed on */
	if (owner && exists) {
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, bytes);  /* added into .grad */
		to_view(w, i, idx, bytes, what);
	}
	return 1;
}

/* FSDP2 under set_requires_gradient_sync(False) (plan.h accum_grad): a
 * gradient that AccumulateGrad has just stolen as the unsharded parameter's
 * .grad (slot idx, n elements) becomes one of the accumulation width when
 * that is wider. The all-gather sets the unsharded parameter's grad_dtype to
 * its unsharded_grad_dtype (_fsdp_param.py init_unsharded_param), and the
 * pre-backward hook clears it only where a .grad is there or the group
 * reduces (_fsdp_param_group.py _set_unsharded_grad_dtypes, defer_upcast):
 * so in a no_sync micro-step a first gradient is cast as it lands (the
 * wider copy made, autograd's freed), and the later micro-steps add into it
 * in place (units_param_grads). */
static int accum_casts(const struct wk *w, int idx)
{
	return w->wacc && w->wacc != w->wug && !walk_syncs(w) && !w->pg[idx];
}

static void accum_cast(struct wk *w, int i, int idx, int64_t n)
{
	alloc(w, MEM_GRADS, W_UNSHARDED_GRAD, i, n * w->wacc);
	release(w, MEM_GRADS, W_UNSHARDED_GRAD, i, n * w->wug);
	w->pg[idx] = 2;
}

/* A gradient of a tied table (n elements) at op i, slot idx the owner's:
 * tied_grad's, each in the accumulation width where accum_cast's rule holds
 * (the engine casts a gradient to its leaf's grad_dtype as it leaves the op
 * that made it, so the held gradient and the sum are wide too: the PyTorch
 * reference's trace of GPT-2 shows the fp32 cast of the embedding's gradient,
 * then the fp32 sum). Returns tied_grad's. */
static int units_tied_grad(struct wk *w, int i, int idx, int64_t n)
{
	int cast = accum_casts(w, idx);

	if (!tied_grad(w, i, idx, n * (cast ? w->wacc : w->wug), W_UNSHARDED_GRAD, 0, cast ? n * w->wug : 0))
		return 0;
	if (cast && w->pg[idx])
		w->pg[idx] = 2;  /* the sum, already wide, became .grad */
	return 1;
}

/* Parameter gradients of op i into its unit: PyTorch keeps one gradient per
 * parameter until the post-backward hook flattens them for the reduce-scatter
 * (FSDP2: copies them into its reduce-scatter input; under no_sync keeps them,
 * accum_cast); the shardcast runtime writes them into one unsharded buffer. */
static void units_param_grads(struct wk *w, int i)
{
	int u = grad_unit(w, i), k, n, idx;
	int64_t sz[GRAPH_OP_PTENSORS];

	if (u < 0)
		return;
	if (!pt(w)) {
		if (w->wug && !w->ugl[u]) {
			alloc(w, MEM_GRADS, W_UNSHARDED_GRAD, i, w->ush[u] * w->N * w->wug);
			w->ugl[u] = 1;
		}
		return;
	}
	n = graph_op_params(w->g, i, sz);
	for (k = 0; k < n; k++) {
		idx = i * GRAPH_OP_PTENSORS + k;
		if (k == 0 && i == w->owner && units_tied_grad(w, i, idx, sz[k])) {
			continue;  /* the tied table's sum (tied_grad) */
		} else if (!w->pg[idx]) {
			int cast = accum_casts(w, idx);
			alloc(w, MEM_GRADS, W_UNSHARDED_GRAD, i, sz[k] * w->wug);
			w->pg[idx] = 1;
			if (cast)
				accum_cast(w, i, idx, sz[k]);
		} else {
			alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, sz[k] * w->wug);
			release(w, MEM_GRADS, W_WGRAD_TEMP, i, sz[k] * w->wug);
		}
	}
	if (w->g->ops[i].tied && w->owner >= 0)
		units_tied_grad(w, i, w->owner * GRAPH_OP_PTENSORS, w->table);
	w->ugl[u] = 1;
}

/* Unit u's sharded gradient (bytes) after its reduction at op: the first
 * micro-step's allocates it; a later one's is a temporary added into it. */
void memstrat_grad_shard(struct wk *w, int u, int op, int64_t bytes)
{
	if (!w->usg[u]) {
		alloc(w, MEM_GRADS, W_GRAD_SHARD, op, bytes);
		w->usg[u] = 1;
		return;
	}
	alloc(w, MEM_GRADS, W_WGRAD_TEMP, op, bytes);
	release(w, MEM_GRADS, W_WGRAD_TEMP, op, bytes);
}

/* Bytes of unit u's flat unsharded gradient (its shard padded, times the ranks). */
static int64_t unit_flat(const struct wk *w, int u)
{
	return shard(w, w->u[u].elems) * w->N * w->wug;
}

/* Autograd's end of unit u's backward (PyTorch FSDP1): SplitWithSizesBackward
 * concatenates the per-parameter gradients into one flat gradient and frees
 * them, and AccumulateGrad takes it, all before the post-backward hook runs
 * (the hook is AccumulateGrad's; the PyTorch reference's traces: the cat, then
 * the gathered parameters freed). The flat gradient becomes .grad (and, on a
 * micro-step that reduces, the reduction's input: pt_reduce), or under no_sync
 * (plan.h) is kept as .grad, unsharded, for the later micro-steps to add into:
 * theirs is a temporary added into it, which lives until the hook returns
 * (_post_backward_hook returns before _reduce_grad; prepare_gradient_for_backward
 * keeps an unsharded .grad). Returns 1 when the flat gradient is such a
 * temporary. */
static int pt_flatten(struct wk *w, int u, int op, int sync)
{
	int64_t flat = unit_flat(w, u);
	int temp = w->ufg[u];

	if (sync)
		alloc(w, MEM_BUFFERS, W_RS_OUT, op, flat);
	else
		alloc(w, MEM_GRADS, temp ? W_WGRAD_TEMP : W_UNSHARDED_GRAD, op, flat);
	memstrat_unit_grads_free(w, u, op);
	w->ufg[u] |= !sync;
	return temp;
}

/* PyTorch's post-backward reduction of unit u, whose flat gradient pt_flatten
 * made: reduced into a shard in the reduce dtype, cast to fp32 and accumulated
 * into the sharded .grad. A reduce_dtype unlike the gradients' adds a cast
 * copy of the flat gradient, which lives with it until the reduction is done
 * (_post_backward_hook keeps the autograd gradient until then); a .grad kept
 * by no_sync micro-steps, into which this one's was added, goes with it. */
static void pt_reduce(struct wk *w, int u, int op)
{
	int64_t sh = shard(w, w->u[u].elems), flat = unit_flat(w, u), cast = sh * w->N * w->wfc;

	if (cast)
		alloc(w, MEM_BUFFERS, W_RS_OUT, op, cast);
	if (w->N > 1 && w->wrs)
		alloc(w, MEM_BUFFERS, W_RS_OUT, op, sh * w->wrs);
	if (cast)
		release(w, MEM_BUFFERS, W_RS_OUT, op, cast);
	release(w, MEM_BUFFERS, W_RS_OUT, op, flat);
	if (w->ufg[u]) {  /* the .grad of the no_sync micro-steps, this one's added into it, reduced */
		release(w, MEM_GRADS, W_UNSHARDED_GRAD, op, flat);
		w->ufg[u] = 0;
	}
	if (w->wsg)
		memstrat_grad_shard(w, u, op, sh * w->wsg);
	if (w->N > 1 && w->wrs)
		release(w, MEM_BUFFERS, W_RS_OUT, op, sh * w->wrs);
}

/* backward_post gathers the next unit once a unit's backward is done; the
 * root's backward (it holds the embedding) ends the step, so nothing follows it */
static int prefetch_post(const struct wk *w, int u)
{
	return w->bwd_prefetch == PREFETCH_BACKWARD_POST && !w->u[u].root;
}

/* The end of unit u's backward at op i under PyTorch: autograd's flat
 * gradient (pt_flatten), then the post-backward hook: reshard (but what a
 * no_sync micro-step keeps gathered), prefetch, reduce. */
static void pt_post(struct wk *w, int u, int i)
{
	int sync = walk_syncs(w), had = w->ugl[u], temp = had && pt_flatten(w, u, i, sync);

	if (sync || !w->pl->no_sync_keeps_gathered)
		ufree(w, u, i);
	if (prefetch_post(w, u))
		ugather(w, next_unit(w, u, 0), i);
	if (had && sync)
		pt_reduce(w, u, i);
	else if (temp)
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, unit_flat(w, u));
	w->ugl[u] = 0;
}

/* The units starting at op i in descending order; under forward prefetch
 * (plan.h post_lag) each one's end after the backward of the one before it. */
static void units_bwd_post(struct wk *w, int i)
{
	int p, u;

	for (p = w->ufoff[i + 1] - 1; p >= w->ufoff[i]; p--) {
		u = w->ufirst[p];
		if (!pt(w)) {
			int64_t sh = shard(w, w->u[u].elems);
			if (w->ugl[u]) {
				if (w->wstage)  /* reduce-scatter output staged for the host */
					alloc(w, MEM_BUFFERS, W_STAGING, i, sh * w->wg);
				release(w, MEM_GRADS, W_UNSHARDED_GRAD, i, unit_flat(w, u));
				if (w->wstage)
					release(w, MEM_BUFFERS, W_STAGING, i, sh * w->wg);
				w->ugl[u] = 0;
			}
			ufree(w, u, i);
			if (prefetch_post(w, u))
				ugather(w, next_unit(w, u, 0), i);
			continue;
		}
		if (!w->pl->post_lag) {
			pt_post(w, u, i);
			continue;
		}
		/* forward prefetch: the unit before this one in backward is done now,
		 * this one after the next unit's ops (the root's last, before its own) */
		if (w->ulag >= 0)
			pt_post(w, w->ulag, i);
		w->ulag = -1;
		if (w->u[u].root)
			pt_post(w, u, i);
		else
			w->ulag = u;
	}
}

static void units_setup(struct wk *w)
{
	int u, c, bytes, copies;
	int64_t S = 0;

	opt_layout(w, &bytes, &copies);
	for (u = 0; u < w->nu; u++)
		S += shard(w, w->u[u].elems);
	if (!pt(w)) {
		/* memory.h S3 order: params, master, optimizer states, grads */
		int host_p = w->offload == OFFLOAD_OPTIMIZER_AND_PARAMS, host_o = w->offload != OFFLOAD_NONE;
		if (host_p)
			w->host += (double)S * (w->wp + w->wg);
		else
			alloc(w, MEM_PARAMS, W_PARAMS, -1, S * w->wp);
		if (host_o) {
			w->host += (double)S * (w->wm + bytes * copies);
		} else {
			alloc(w, MEM_OPTIM, W_MASTER, -1, S * w->wm);
			alloc(w, MEM_OPTIM, W_OPT_STATES, -1, S * bytes * copies);
		}
		if (!host_p)
			alloc(w, MEM_GRADS, W_GRAD_SHARD, -1, S * w->wg);
		return;
	}
	/* PyTorch: a FlatParameter shard per unit; offload keeps it on the host */
	for (u = 0; u < w->nu; u++) {
		int64_t sh = shard(w, w->u[u].elems);
		if (sh <= 0)
			continue;
		if (w->offload) {
			w->host += (double)sh * (4 + 4 + bytes * copies + w->pf->adam_step_temp * (copies == 2));
			continue;
		}
		alloc(w, MEM_PARAMS, W_PARAMS, -1, sh * 4);
		for (c = 0; c < copies; c++)
			alloc(w, MEM_OPTIM, W_OPT_STATES, -1, sh * bytes);
	}
}

static void units_step(struct wk *w)
{
	int u;

	if (!pt(w) || w->offload)
		return;
	if (opt_temp_kind(w) == OPTI_FOREACH) {
		for (u = 0; u < w->nu; u++)
			alloc(w, MEM_BUFFERS, W_OPT_TEMP, -1, shard(w, w->u[u].elems) * (int64_t)w->pf->adam_step_temp);
		for (u = w->nu - 1; u >= 0; u--)
			release(w, MEM_BUFFERS, W_OPT_TEMP, -1, shard(w, w->u[u].elems) * (int64_t)w->pf->adam_step_temp);
	} else if (opt_temp_kind(w) == OPTI_FOR_LOOP) {
		int64_t big = 0;
		for (u = 0; u < w->nu; u++)
			big = shard(w, w->u[u].elems) > big ? shard(w, w->u[u].elems) : big;
		alloc(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
		release(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
	}
	for (u = w->nu - 1; u >= 0; u--)  /* zero_grad(set_to_none=True) */
		if (w->usg[u]) {
			release(w, MEM_GRADS, W_GRAD_SHARD, -1, shard(w, w->u[u].elems) * w->wsg);
			w->usg[u] = 0;
		}
}

/* ---- DeepSpeed ZeRO-3: per-module fetch, prefetch and release ---------------- */

static int zero3_arrays(struct wk *w)
{
	const struct graph *g = w->g;
	double thr = w->s->s.training.zero_param_persistence_threshold;
	int i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS], acc = 0;

	w->G = calloc((size_t)g->nops, sizeof *w->G);
	w->pers = calloc((size_t)g->nops, sizeof *w->pers);
	w->after = calloc((size_t)g->nops, sizeof *w->after);
	w->zl = calloc((size_t)g->nops, 1);
	if (!w->G || !w->pers || !w->after || !w->zl)
		return -1;
	for (i = 0; i < g->nops; i++) {
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++) {
			if ((double)sz[k] < thr)
				w->pers[i] += sz[k];
			else
				w->G[i] += sz[k];
		}
		if (g->ops[i].tied && (double)w->table >= thr)
			w->G[i] += w->table;  /* an external parameter of the LM head */
	}
	for (i = g->nops - 1; i >= 0; i--) {
		w->after[i] = acc;
		acc += w->G[i];
	}
	w->znext = malloc(((size_t)g->nops + 1) * sizeof *w->znext);
	w->zprev = malloc(((size_t)g->nops + 1) * sizeof *w->zprev);
	if (!w->znext || !w->zprev)
		return -1;
	for (k = -1, i = g->nops - 1; i >= 0; i--) {
		w->znext[i] = k;
		if (w->G[i] > 0)
			k = i;
	}
	for (k = -1, i = 0; i < g->nops; i++) {
		w->zprev[i] = k;
		if (w->G[i] > 0)
			k = i;
	}
	return 0;
}

static void zfetch(struct wk *w, int j, int op)
{
	int64_t sh;

	if (w->G[j] <= 0 || w->zl[j])
		return;
	sh = shard(w, w->G[j]);
	if (w->offload == OFFLOAD_OPTIMIZER_AND_PARAMS)
		alloc(w, MEM_BUFFERS, W_STAGING, op, sh * w->wp);
	alloc(w, MEM_BUFFERS, W_GATHERED, op, sh * w->N * w->wp);
	if (w->offload == OFFLOAD_OPTIMIZER_AND_PARAMS)
		release(w, MEM_BUFFERS, W_STAGING, op, sh * w->wp);
	w->zl[j] = 1;
	w->zlive += w->G[j];
}

/* Whether op j lies strictly between ops a and c in direction dir (+1 up, -1
 * down; c -1: the end of the ops). */
static inline int zbetween(int a, int j, int c, int dir)
{
	return dir > 0 ? j > a && (c < 0 || j < c) : j < a && j > c;
}

static void zrelease(struct wk *w, int j, int op)
{
	int d;

	if (!w->zl[j])
		return;
	release(w, MEM_BUFFERS, W_GATHERED, op, shard(w, w->G[j]) * w->N * w->wp);
	w->zl[j] = 0;
	w->zlive -= w->G[j];
	for (d = 0; d < 2; d++)  /* a module zero3_pre's stop passed is not gathered now */
		if (w->zok[d] && zbetween(w->zfrom[d], j, w->zcur[d], d ? 1 : -1))
			w->zok[d] = 0;
}

/* Fetches op i's parameters, then prefetches the next modules in execution
 * order (dir +1 forward, -1 backward) up to stage3_prefetch_bucket_size
 * elements while fewer than stage3_max_live_parameters are live. */
static void zero3_pre(struct wk *w, int i, int dir)
{
	const struct scn_training *t = &w->s->s.training;
	const int *next = dir > 0 ? w->znext : w->zprev;
	int64_t done = 0;
	int j, d = dir > 0;

	if (w->G[i] <= 0)
		return;
	zfetch(w, i, i);
	/* only the ops that fetch (G > 0) are visited: at the others neither the
	 * condition's inputs nor anything else changes. Nor at a module already
	 * gathered: the ops between the last call's op and where it stopped (zcur)
	 * stay gathered unless zrelease says otherwise, so a call from among them
	 * starts at that stop, past the modules it would only step over (ZeRO-3's
	 * prefetch ran through every gathered module at every op; 2.8 % of
	 * bench/sweep-1m.ini's tables, perf) */
	j = next[i];
	if (!w->zscan && w->zok[d] && (i == w->zfrom[d] || zbetween(w->zfrom[d], i, w->zcur[d], dir)))
		j = w->zcur[d];
	for (; j >= 0; j = next[j]) {
		if ((double)done >= t->zero_prefetch_bucket_size || (double)w->zlive >= t->zero_max_live_parameters)
			break;
		if (!w->zl[j]) {
			zfetch(w, j, i);
			done += w->G[j];
		}
	}
	w->zfrom[d] = i;
	w->zcur[d] = j;
	w->zok[d] = 1;
}

/* After forward, a module's parameters stay gathered when they are reused (in
 * backward) within stage3_max_reuse_distance elements: the later modules'
 * forward and backward fetches. */
static void zero3_fwd_post(struct wk *w, int i)
{
	if (w->G[i] > 0 && (double)(2 * w->after[i]) >= w->pf->zero3_reuse_distance)
		zrelease(w, i, i);
}

/* The recompute's forward fetches each module again; its backward follows
 * within the region, so the parameters stay gathered unless the rest of the
 * region's fetches exceed the reuse distance. */
static void zero3_replay_fetch(struct wk *w, int i, int last)
{
	int64_t dist = 0;
	int j;

	if (w->G[i] <= 0)
		return;
	zfetch(w, i, i);
	for (j = i + 1; j <= last; j++)
		dist += 2 * w->G[j];
	if ((double)dist >= w->pf->zero3_reuse_distance)
		zrelease(w, i, i);
}

static void zero3_setup(struct wk *w)
{
	int i, bytes, copies;
	int64_t own = 0, sh;

	opt_layout(w, &bytes, &copies);
	for (i = 0; i < w->g->nops; i++)
		own += w->G[i] - (w->g->ops[i].tied && w->G[i] > 0 ? w->table : 0);
	sh = shard(w, own);
	if (w->offload == OFFLOAD_OPTIMIZER_AND_PARAMS)
		w->host += (double)sh * w->wp;
	else
		alloc(w, MEM_PARAMS, W_PARAMS, -1, sh * w->wp);
	for (i = 0; i < w->g->nops; i++)
		alloc(w, MEM_PARAMS, W_PARAMS, i, w->pers[i] * w->wp);
	sh = shard(w, w->P);
	if (w->offload) {
		w->host += (double)sh * (w->wm + bytes * copies + w->wg);
	} else {
		alloc(w, MEM_OPTIM, W_MASTER, -1, sh * w->wm);
		for (i = 0; i < copies; i++)
			alloc(w, MEM_OPTIM, W_OPT_STATES, -1, sh * bytes);
		alloc(w, MEM_GRADS, W_GRAD_SHARD, -1, sh * w->wg);
	}
	alloc(w, MEM_BUFFERS, W_BUCKET, -1,
	      (int64_t)w->s->s.training.zero_reduce_bucket_size * w->wg);
}

static void zero3_step(struct wk *w)
{
	int64_t left = shard(w, w->P), sub = (int64_t)w->pf->zero3_sub_group_size, n;

	if (w->offload || !w->mixed)
		return;
	while (left > 0) {  /* one fp32 gradient copy per sub-group, in turn */
		n = left < sub ? left : sub;
		alloc(w, MEM_GRADS, W_FP32_GRADS, -1, n * 4);
		release(w, MEM_GRADS, W_FP32_GRADS, -1, n * 4);
		left -= n;
	}
}

/* ---- per-parameter gradients (PyTorch autograd) ------------------------------ */

/* A gradient of n elements for parameter slot idx of op i: a fresh tensor is
 * stolen by AccumulateGrad when .grad is None (exists = 0), else it is a
 * temporary added in place. cast: the bytes of the 16-bit gradient it was cast
 * from (autocast), freed once the cast is made (ToCopyBackward's input goes
 * before AccumulateGrad runs); 0 none. */
static void grad_one(struct wk *w, int i, int idx, int64_t n, int what, int exists, int64_t cast)
{
	if (exists || w->pg[idx]) {
		alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, n * w->wg);
		if (cast)
			release(w, MEM_GRADS, W_WGRAD_TEMP, i, cast);
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, n * w->wg);
		to_view(w, i, idx, n * w->wg, what);
	} else {
		alloc(w, MEM_GRADS, what, i, n * w->wg);
		w->pg[idx] = 1;
		if (cast)
			release(w, MEM_GRADS, W_WGRAD_TEMP, i, cast);
	}
}

/* Whether op i's weight gradient comes 16-bit from an autocast product. */
static int cast_grad(const struct wk *w, int i)
{
	return w->wcast && w->g->ops[i].kind == OP_MATMUL;
}

/* The 16-bit weight gradient an autocast product makes: its elements (the
 * tied table's for a tied op); 0 none. */
static int64_t cast_grad_elems(const struct wk *w, int i)
{
	int64_t sz[GRAPH_OP_PTENSORS];

	if (!cast_grad(w, i))
		return 0;
	if (w->g->ops[i].tied && w->owner >= 0)
		return w->table;
	return graph_op_params(w->g, i, sz) > 0 ? sz[0] : 0;
}

/* Gradients of op i's parameters, one tensor each; free_now: copied into a
 * bucket and dropped at once (ZeRO-2, ZeRO-3). Under autocast a product's
 * weight gradient is made 16-bit here, beside its input gradient, and cast to
 * fp32 only after the op's backward has released what it saved and its
 * incoming gradient (pt_cast_grads, at H_BWD_POST): autograd's engine
 * releases a node's saved variables and inputs when it returns, and
 * ToCopyBackward, the weight cast's node, runs next (the PyTorch reference's
 * traces: the lm_head's bf16 weight copy is freed before its fp32 gradient
 * is made). */
static void pt_param_grads(struct wk *w, int i, int what, int exists, int free_now)
{
	const struct gop *o = &w->g->ops[i];
	int k, n;
	int64_t sz[GRAPH_OP_PTENSORS], c = cast_grad_elems(w, i);

	if (c && pt(w)) {
		alloc(w, MEM_GRADS, W_WGRAD_TEMP, i, c * w->wcast);
		w->cast_op = i;
	}
	n = graph_op_params(w->g, i, sz);
	for (k = 0; k < n; k++) {
		if (k == 0 && c && pt(w) && !o->tied)
			continue;  /* the weight's, after the op's frees: pt_cast_grads */
		if (!(pt(w) && k == 0 && i == w->owner &&
		      tied_grad(w, i, i * GRAPH_OP_PTENSORS, sz[k] * w->wg, what, exists, 0)))
			grad_one(w, i, i * GRAPH_OP_PTENSORS + k, sz[k], what, exists, 0);
		if (free_now && w->pg[i * GRAPH_OP_PTENSORS + k]) {
			release(w, MEM_GRADS, what, i, sz[k] * w->wg);
			w->pg[i * GRAPH_OP_PTENSORS + k] = 0;
		}
	}
	if (!o->tied || w->owner < 0)
		return;
	if (pt(w)) {  /* autograd: held for the owner's (tied_grad); under autocast after the op's frees */
		if (!c)
			tied_grad(w, i, w->owner * GRAPH_OP_PTENSORS, w->table * w->wg, what, exists, 0);
		return;
	}
	/* the shardcast runtime: straight into the table's gradient */
	grad_one(w, i, w->owner * GRAPH_OP_PTENSORS, w->table, what, exists, 0);
	if (free_now && w->pg[w->owner * GRAPH_OP_PTENSORS]) {
		release(w, MEM_GRADS, what, i, w->table * w->wg);
		w->pg[w->owner * GRAPH_OP_PTENSORS] = 0;
	}
}

/* ToCopyBackward and AccumulateGrad of op i's 16-bit weight gradient, which
 * pt_param_grads made: its fp32 copy becomes .grad, or is added into it (a
 * tied op's is held for the owner's, tied_grad); the 16-bit one goes. */
static void pt_cast_grads(struct wk *w, int i, int what, int exists, int free_now)
{
	const struct gop *o = &w->g->ops[i];
	int64_t sz[GRAPH_OP_PTENSORS], c = cast_grad_elems(w, i) * w->wcast;

	if (w->cast_op != i)
		return;
	w->cast_op = -1;
	if (o->tied && w->owner >= 0) {
		tied_grad(w, i, w->owner * GRAPH_OP_PTENSORS, w->table * w->wg, what, exists, 0);
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, c);
		return;
	}
	graph_op_params(w->g, i, sz);
	if (!(i == w->owner && tied_grad(w, i, i * GRAPH_OP_PTENSORS, sz[0] * w->wg, what, exists, 0))) {
		grad_one(w, i, i * GRAPH_OP_PTENSORS, sz[0], what, exists, c);
		c = 0;
	}
	if (c)
		release(w, MEM_GRADS, W_WGRAD_TEMP, i, c);
	if (free_now && w->pg[i * GRAPH_OP_PTENSORS]) {
		release(w, MEM_GRADS, what, i, sz[0] * w->wg);
		w->pg[i * GRAPH_OP_PTENSORS] = 0;
	}
}

/* Frees every per-parameter gradient still held (zero_grad, set_to_none). */
static void pt_free_grads(struct wk *w, int what)
{
	int i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	for (i = w->g->nops - 1; i >= 0; i--) {
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++)
			if (w->pg[i * GRAPH_OP_PTENSORS + k]) {
				release(w, MEM_GRADS, what, -1, sz[k] * w->wg);
				w->pg[i * GRAPH_OP_PTENSORS + k] = 0;
			}
	}
}

static void adam_temp(struct wk *w)
{
	int64_t sz[GRAPH_OP_PTENSORS], big = 0;
	int i, k, n;

	if (opt_temp_kind(w) == OPTI_FOREACH) {
		per_tensor_states(w, MEM_BUFFERS, W_OPT_TEMP, (int)w->pf->adam_step_temp, 1);
		per_tensor_free(w, MEM_BUFFERS, W_OPT_TEMP, (int)w->pf->adam_step_temp, 1);
		return;
	}
	if (opt_temp_kind(w) != OPTI_FOR_LOOP)
		return;
	for (i = 0; i < w->g->nops; i++)
		for (k = 0, n = graph_op_params(w->g, i, sz); k < n; k++)
			big = sz[k] > big ? sz[k] : big;
	alloc(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
	release(w, MEM_BUFFERS, W_OPT_TEMP, -1, 8 * big);
}

/* ---- replicated model states: single, ddp, dp -------------------------------- */

/* DDP's buckets: parameters in reverse order, the first bucket capped at 1 MiB,
 * the others at bucket_cap_mb; a bucket closes once it reaches its cap. */
static void ddp_buckets(struct wk *w, int sign, int cat)
{
	int64_t cap = 1 << 20, cur = 0, sz[2];
	int i, k, n;

	for (i = w->g->nops - 1; i >= 0; i--) {
		n = graph_op_params(w->g, i, sz);
		for (k = n - 1; k >= 0; k--) {
			cur += sz[k] * w->wg;
			if (cur >= cap) {
				memwalk_event(w, sign, cat, W_BUCKET, -1, cur, 0, 1);
				cur = 0;
				cap = (int64_t)(w->s->s.training.ddp_bucket_mb * (1 << 20));
			}
		}
	}
	memwalk_event(w, sign, cat, W_BUCKET, -1, cur, 0, 1);
}

static void repl_setup(struct wk *w)
{
	int bytes, copies;

	opt_layout(w, &bytes, &copies);
	if (pt(w)) {
		per_tensor_states(w, MEM_PARAMS, W_PARAMS, w->wp, 1);
		per_tensor_states(w, MEM_OPTIM, W_OPT_STATES, bytes, copies);
		if (w->keep_grads && !bucket_view(w))
			per_tensor_states(w, MEM_GRADS, W_GRADS, w->wg, 1);
		if (w->pl->reduce == REDUCE_DDP)
			ddp_buckets(w, +1, bucket_view(w) ? MEM_GRADS : MEM_BUFFERS);
		return;
	}
	alloc(w, MEM_PARAMS, W_PARAMS, -1, w->P * w->wp);
	alloc(w, MEM_OPTIM, W_MASTER, -1, w->P * w->wm);
	alloc(w, MEM_OPTIM, W_OPT_STATES, -1, w->P * bytes * copies);
	alloc(w, MEM_GRADS, W_GRADS, -1, w->P * w->wg);
	if (w->pl->reduce == REDUCE_DDP && !bucket_view(w))
		alloc(w, MEM_BUFFERS, W_BUCKET, -1, w->P * w->wg);
}

static void repl_step(struct wk *w)
{
	if (!pt(w))
		return;
	adam_temp(w);
	if (!w->keep_grads)
		pt_free_grads(w, W_GRADS);
}

/* nn.DataParallel: GPU 0 holds the module, its gradients and the optimizer;
 * every GPU holds a replica's parameters during the micro-step. */
static void dp_setup(struct wk *w)
{
	int bytes, copies;

	if (w->role != ROLE_DP_MASTER)
		return;
	opt_layout(w, &bytes, &copies);
	per_tensor_states(w, MEM_PARAMS, W_PARAMS, w->wp, 1);
	per_tensor_states(w, MEM_OPTIM, W_MASTER, w->wm, 1);  /* 16-bit params' fp32 masters (S2) */
	per_tensor_states(w, MEM_OPTIM, W_OPT_STATES, bytes, copies);
	if (w->keep_grads)
		per_tensor_states(w, MEM_GRADS, W_GRADS, w->wg, 1);
}

static void dp_micro_begin(struct wk *w)
{
	const struct graph *g = w->g;
	int t;

	if (w->role == ROLE_DP_REPLICA) {  /* replicate(): Broadcast of every parameter */
		per_tensor_states(w, MEM_PARAMS, W_REPLICA_PARAMS, w->wp, 1);
		return;
	}
	for (t = 0; t < g->nt; t++)  /* the whole batch arrives on GPU 0 before scatter() */
		if (g->t[t].producer < 0)
			memwalk_event(w, +1, MEM_ACT, W_INPUT, -1, 0, tbytes(w, t) * w->ndp, 1);
}

static int64_t held_bytes(const struct wk *w)
{
	int64_t n = 0;
	int t;

	for (t = 0; t < w->g->nt; t++)
		if (w->g->t[t].held)
			n += tbytes(w, t);
	return n;
}

static void dp_gather(struct wk *w)
{
	int t;

	if (w->role == ROLE_DP_MASTER)  /* gather(): every replica's outputs on GPU 0 */
		memwalk_event(w, +1, MEM_BUFFERS, W_GATHERED_OUT, w->g->nops - 1, 0, held_bytes(w) * w->ndp, 1);
	for (t = 0; t < w->g->nt; t++)  /* the replicas' own outputs are dropped */
		if (w->g->t[t].held && w->fl[t]) {
			act(w, -1, act_what(w, t), w->g->nops - 1, t, MEM_ACT);
			w->fl[t] = 0;
		}
}

/* End of backward: ReduceAddCoalesced sums the replicas' gradients onto GPU 0,
 * into .grad (stolen when None, added otherwise); the replicas are dropped. */
static void dp_bwd_end(struct wk *w)
{
	int i, k, n;
	int64_t sz[GRAPH_OP_PTENSORS];

	if (w->role == ROLE_DP_MASTER)
		for (i = 0; i < w->g->nops; i++) {
			n = graph_op_params(w->g, i, sz);
			for (k = 0; k < n; k++) {
				if (w->micro || w->keep_grads) {
					alloc(w, MEM_GRADS, W_WGRAD_TEMP, -1, sz[k] * w->wg);
					release(w, MEM_GRADS, W_WGRAD_TEMP, -1, sz[k] * w->wg);
				} else {
					alloc(w, MEM_GRADS, W_GRADS, -1, sz[k] * w->wg);
				}
			}
		}
	pt_free_grads(w, W_REPLICA_GRADS);
	if (w->role == ROLE_DP_REPLICA)
		per_tensor_free(w, MEM_PARAMS, W_REPLICA_PARAMS, w->wp, 1);
}

static void dp_micro_end(struct wk *w)
{
	const struct graph *g = w->g;
	int t;

	if (w->role != ROLE_DP_MASTER)
		return;
	memwalk_event(w, -1, MEM_BUFFERS, W_GATHERED_OUT, -1, 0, held_bytes(w) * w->ndp, 1);
	for (t = g->nt - 1; t >= 0; t--)
		if (g->t[t].producer < 0)
			memwalk_event(w, -1, MEM_ACT, W_INPUT, -1, 0, tbytes(w, t) * w->ndp, 1);
}

static void dp_step(struct wk *w)
{
	if (w->role != ROLE_DP_MASTER)
		return;
	adam_temp(w);
	if (!w->keep_grads)
		per_tensor_free(w, MEM_GRADS, W_GRADS, w->wg, 1);  /* zero_grad(set_to_none=True) */
}

/* ---- ZeRO stages 1-2 --------------------------------------------------------- */

static int64_t zbucket(const struct wk *w)
{
	return (int64_t)w->s->s.training.zero_reduce_bucket_size;
}

static void zero12_setup(struct wk *w)
{
	int bytes, copies, c;
	int64_t sh = shard(w, w->P);

	opt_layout(w, &bytes, &copies);
	alloc(w, MEM_PARAMS, W_PARAMS, -1, (pt(w) ? sh * w->N : w->P) * w->wp);
	if (w->offload) {
		w->host += (double)sh * (w->wm + bytes * copies + (pt(w) ? 4 : 0));
	} else {
		alloc(w, MEM_OPTIM, W_MASTER, -1, sh * w->wm);
		for (c = 0; c < (pt(w) ? copies : 1); c++)
			alloc(w, MEM_OPTIM, W_OPT_STATES, -1, sh * bytes * (pt(w) ? 1 : copies));
	}
	if (!pt(w)) {  /* shardcast: flat gradients (stage 1) or shard + bucket (stage 2) */
		if (w->zstage == 1) {
			alloc(w, MEM_GRADS, W_GRADS, -1, w->P * w->wg);
		} else {
			alloc(w, MEM_GRADS, W_GRAD_SHARD, -1, sh * w->wg);
			alloc(w, MEM_BUFFERS, W_BUCKET, -1, (zbucket(w) < w->P ? zbucket(w) : w->P) * w->wg);
		}
		return;
	}
	if (w->zstage == 2 && !w->offload)  /* grads_in_partition, kept once allocated */
		alloc(w, MEM_GRADS, W_GRAD_SHARD, -1, sh * w->wg);
}

static int ipg_count(const struct wk *w)
{
	return w->pf->zero_overlap_comm ? 2 : 1;
}

static void zero12_bwd_begin(struct wk *w)
{
	int k;

	if (pt(w) && w->zstage == 2)
		for (k = 0; k < ipg_count(w); k++)
			alloc(w, MEM_BUFFERS, W_BUCKET, -1, zbucket(w) * w->wg);
}

static void zero12_bwd_end(struct wk *w, int last_micro)
{
	int k;
	int64_t n = zbucket(w) < w->P ? zbucket(w) : w->P;

	if (!pt(w))
		return;
	if (w->zstage == 2) {
		for (k = 0; k < ipg_count(w); k++)
			release(w, MEM_BUFFERS, W_BUCKET, -1, zbucket(w) * w->wg);
	} else if (last_micro) {  /* stage 1: the flattened bucket of the final reduction */
		alloc(w, MEM_BUFFERS, W_BUCKET, -1, n * w->wg);
		release(w, MEM_BUFFERS, W_BUCKET, -1, n * w->wg);
	}
}

static void zero12_step(struct wk *w)
{
	int64_t sh = shard(w, w->P);
	int copy = pt(w) && w->mixed && !w->offload;

	if (!pt(w))
		return;
	if (copy)  /* single_grad_partition: the fp32 copy the optimizer reads */
		alloc(w, MEM_GRADS, W_FP32_GRADS, -1, sh * 4);
	if (w->zstage == 1)
		pt_free_grads(w, W_GRADS);
	if (copy)
		release(w, MEM_GRADS, W_FP32_GRADS, -1, sh * 4);
}

/* ---- hooks called by the walk ------------------------------------------------ */

/* FSDP2's units (memfsdp2.c) */
static int per_param(const struct wk *w)
{
	return w->mech == MECH_UNITS && w->pl->layout == LAYOUT_PER_PARAM;
}

void memstrat_fwd_pre(struct wk *w, int i)
{
	if (per_param(w))
		memfsdp2_fwd_pre(w, i);
	else if (w->mech == MECH_UNITS)
		units_fwd_pre(w, i);
	else if (w->mech == MECH_ZERO3)
		zero3_pre(w, i, +1);
}

void memstrat_fwd_post(struct wk *w, int i)
{
	if (per_param(w))
		memfsdp2_fwd_post(w, i);
	else if (w->mech == MECH_UNITS)
		units_fwd_post(w, i);
	else if (w->mech == MECH_ZERO3)
		zero3_fwd_post(w, i);
}

void memstrat_bwd_pre(struct wk *w, int i)
{
	if (per_param(w))
		memfsdp2_bwd_pre(w, i);
	else if (w->mech == MECH_UNITS)
		units_bwd_pre(w, i);
	else if (w->mech == MECH_ZERO3)
		zero3_pre(w, i, -1);
}

/* How autograd's per-parameter gradients land under w's mechanism: their label,
 * whether .grad is there before this micro-step's (exists), whether they are
 * copied into a bucket and dropped at once (free_now: ZeRO-2, ZeRO-3).
 * Returns 0 where the mechanism keeps no per-parameter gradients (FSDP's
 * units, the shardcast runtime's flat buffers). */
static int pt_grad_args(const struct wk *w, int *what, int *exists, int *free_now)
{
	*what = w->mech == MECH_DP ? W_REPLICA_GRADS : W_GRADS;
	*exists = w->mech == MECH_REPL ? repl_grad_exists(w) : 0;
	*free_now = w->mech == MECH_ZERO3 || (w->mech == MECH_ZERO12 && w->zstage == 2);
	return w->mech == MECH_DP || w->mech == MECH_ZERO3 ||
		((w->mech == MECH_REPL || w->mech == MECH_ZERO12) && pt(w));
}

void memstrat_param_grads(struct wk *w, int i)
{
	int what, exists, free_now;

	if (w->mech == MECH_UNITS)
		units_param_grads(w, i);
	else if (pt_grad_args(w, &what, &exists, &free_now))
		pt_param_grads(w, i, what, exists, free_now);
}

void memstrat_bwd_post(struct wk *w, int i)
{
	int what, exists, free_now;

	/* autocast's weight gradients, after the op's frees (pt_param_grads) */
	if (w->cast_op == i && pt_grad_args(w, &what, &exists, &free_now))
		pt_cast_grads(w, i, what, exists, free_now);
	if (per_param(w))
		memfsdp2_bwd_post(w, i);
	else if (w->mech == MECH_UNITS)
		units_bwd_post(w, i);
	else if (w->mech == MECH_ZERO3 && w->G[i] > 0)
		zrelease(w, i, i);
}

void memstrat_setup(struct wk *w)
{
	w->phase = MEM_SETUP;
	overhead(w);
	switch (w->mech) {
	case MECH_REPL: repl_setup(w); break;
	case MECH_DP: dp_setup(w); break;
	case MECH_ZERO12: zero12_setup(w); break;
	case MECH_UNITS: per_param(w) ? memfsdp2_setup(w) : units_setup(w); break;
	case MECH_ZERO3: zero3_setup(w); break;
	}
	if (w->pl->loss_scale && w->role != ROLE_DP_REPLICA)
		alloc(w, MEM_OPTIM, W_LOSS_SCALE, -1, (int64_t)w->pf->loss_scale_state);
	if (pt(w) && w->role != ROLE_DP_REPLICA)  /* the module's non-parameter buffers */
		alloc(w, MEM_PARAMS, W_PARAMS, -1, (int64_t)w->g->buffer_bytes);
}

void memstrat_step(struct wk *w)
{
	w->phase = MEM_OPT;
	switch (w->mech) {
	case MECH_REPL: repl_step(w); break;
	case MECH_DP: dp_step(w); break;
	case MECH_ZERO12: zero12_step(w); break;
	case MECH_UNITS: per_param(w) ? memfsdp2_step(w) : units_step(w); break;
	case MECH_ZERO3: zero3_step(w); break;
	}
}

/* ---- shared with memfsdp2.c -------------------------------------------------- */

int memstrat_next_unit(const struct wk *w, int u, int fwd)
{
	return next_unit(w, u, fwd);
}

int memstrat_opt_temp_kind(const struct wk *w)
{
	return opt_temp_kind(w);
}

void memstrat_unit_grads(struct wk *w, int i)
{
	units_param_grads(w, i);
}

void memstrat_unit_grads_free(struct wk *w, int u, int op)
{
	int64_t sz[GRAPH_OP_PTENSORS];
	int i, k, n, p;

	for (p = w->uooff[u + 1] - 1; p >= w->uooff[u]; p--) {  /* u's ops, descending */
		i = w->uops[p];
		n = graph_op_params(w->g, i, sz);
		for (k = 0; k < n; k++)
			if (w->pg[i * GRAPH_OP_PTENSORS + k]) {
				release(w, MEM_GRADS, W_UNSHARDED_GRAD, op,
					sz[k] * (w->pg[i * GRAPH_OP_PTENSORS + k] == 2 ? w->wacc : w->wug));
				w->pg[i * GRAPH_OP_PTENSORS + k] = 0;
			}
	}
}

/* ---- configuration ----------------------------------------------------------- */

/* Resharding, prefetch and the dtypes of the units (FSDP or shardcast zero3). */
static int configure_units(struct wk *w)
{
	const struct plan *p = w->pl;

	w->reshard_fwd = p->reshard_fwd;
	w->fwd_prefetch = p->fwd_prefetch;
	w->bwd_prefetch = p->bwd_prefetch;
	w->wgat = p->w.gathered;
	w->wug = p->w.unsharded_grad;
	w->wsg = p->w.grad_shard;
	w->wrs = p->w.reduced;
	w->wstage = p->w.staging;
	w->wmp = p->w.gather_src;
	w->wagb = p->w.gather_buf;
	w->agheld = w->rsheld = -1;
	w->wfc = p->w.flat_cast;
	w->wacc = p->w.accum_grad;
	return build_units(w, p->wrap);
}

int memstrat_configure(struct wk *w)
{
	const struct scenario *s = w->s;
	const struct plan *p = &s->plan;
	const struct graph *g = w->g;
	int i;

	w->pl = p;
	w->mech = p->mech;
	w->eager = g->o.flavor == GRAPH_EAGER;
	w->mixed = p->mixed;
	w->offload = p->offload;
	w->zstage = p->zero_stage == 2 ? 2 : 1;
	w->N = p->shard_n;
	w->keep_grads = p->zero_grad_keeps;
	w->ndp = s->world;
	w->P = (int64_t)g->params_rank;
	w->owner = -1;
	w->cast_op = -1;
	w->ulag = -1;
	for (i = 0; i < g->nops && w->owner < 0; i++)
		if (g->ops[i].kind == OP_EMBED && g->ops[i].nin == 1 && !g->ops[i].tied)
			w->owner = i;
	w->table = s->model.vocab * s->model.hidden / s->s.training.tensor_parallel;
	w->wp = p->w.params;
	w->wg = p->w.grads;
	w->wm = p->w.master;
	w->wcast = p->w.cast;
	if (w->mech == MECH_UNITS)
		return configure_units(w);
	if (w->mech == MECH_ZERO3)
		return zero3_arrays(w);
	return 0;
}

void memstrat_replay_fetch(struct wk *w, int i, int last)
{
	if (w->mech == MECH_ZERO3)
		zero3_replay_fetch(w, i, last);
}

void memstrat_micro_begin(struct wk *w)
{
	if (w->mech == MECH_DP)
		dp_micro_begin(w);
}

void memstrat_fwd_end(struct wk *w)
{
	if (per_param(w))
		memfsdp2_fwd_end(w);
	else if (w->mech == MECH_DP)
		dp_gather(w);
}

void memstrat_bwd_begin(struct wk *w)
{
	if (w->mech == MECH_ZERO12)
		zero12_bwd_begin(w);
}

void memstrat_bwd_end(struct wk *w, int last_micro)
{
	if (per_param(w))
		memfsdp2_bwd_end(w);
	else if (w->mech == MECH_ZERO12)
		zero12_bwd_end(w, last_micro);
	else if (w->mech == MECH_DP)
		dp_bwd_end(w);
}

void memstrat_micro_end(struct wk *w)
{
	if (w->mech == MECH_DP)
		dp_micro_end(w);
}

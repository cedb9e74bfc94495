/*
 * ckpt.c — what a checkpoint holds and what saving and loading it cost (see
 * ckpt.h for the model).
 *
 * Constants and where they come from:
 *   PLAN_ITEM_S   assumed: 10 us of the coordinator's CPython work per write
 *                 item of each rank (unpickling the gathered plans, the dedup
 *                 dictionary, one metadata entry): DCP plans on one rank over
 *                 ranks x entries items. An upper bound from a measurement:
 *                 PyTorch blog "6x faster Async Checkpointing in PyTorch, using
 *                 Cached Plans, no GIL contention" (Meta and Crusoe, 2025), Llama 3
 *                 70B on 1856 H200 with HSDP: the first save's background ran
 *                 about 436 s and the cached ones about 67 s, 69 us per item over
 *                 1856 ranks x 2892 entries (723 tensors with Adam's m, v and
 *                 step) — but that first save also started the background
 *                 process, "mainly" what it paid for, per the post.
 *   SLOW_THREAD   training throughput while a thread-based async save serializes
 *                 and writes: 700 -> 320 tokens/s in the same blog (GIL and host
 *                 contention), a 54% slowdown;
 *   SLOW_PROCESS  with the process-based save: a dip to 372 (47%) at its peak,
 *                 taken here for its whole (shorter) window.
 *   STATE_DICT_ITEM_S  assumed: the Python work of building one state-dict
 *                 entry (hooks, a ShardedTensor or DTensor wrapper).
 * The host rates (pageable and pinned copies, serialization, pinning) are
 * [checkpoint] keys whose defaults cite their measurements (scenario.c).
 */
#include "ckpt.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

#define PLAN_ITEM_S 10e-6        /* s per rank and state-dict entry, first save (assumed) */
#define STATE_DICT_ITEM_S 50e-6  /* s per state-dict entry (assumed) */
#define SLOW_THREAD 0.54         /* training slowdown under a thread-based async save */
#define SLOW_PROCESS 0.47        /* under a process-based one */

static double min2(double a, double b)
{
	return a < b ? a : b;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

/* ---- what it holds -------------------------------------------------------- */

/* State-dict entries of the model: per layer the attention projections, the
 * MLP's two or three matrices and two norms, their biases where the model has
 * them; embeddings, the final norm and the head. */
static double tensors_of(const struct model *m)
{
	double layer = 4 + (m->activation == ACT_SWIGLU || m->activation == ACT_GATED_GELU ? 3 : 2) + 2;
	double layers = (double)(m->layers + m->encoder_layers);

	layer += m->qkv_bias ? 3 : 0;
	layer += m->out_bias ? 1 : 0;
	layer += m->mlp_bias ? 2 : 0;
	layer += m->norm == NORM_LAYERNORM ? 2 : 0;
	return layer * layers + 3;
}

/* What a save holds and who writes it, from the strategy's plan (plan.h:
 * shard and replicate groups, the saved bytes per parameter, the engine). */
void ckpt_in_of(const struct scenario *s, double params, struct ckpt_in *in)
{
	const struct plan *p = &s->plan;
	const struct scn_checkpoint *k = &s->s.checkpoint;

	memset(in, 0, sizeof *in);
	in->params = params;
	in->tensors = tensors_of(&s->model);
	in->nodes = s->s.cluster.nodes;
	in->gpus_per_node = s->s.cluster.gpus_per_node;
	in->mp = s->s.training.tensor_parallel;
	in->shard = p->shard_n;
	in->replicas = p->replicate_n;
	in->module_replicated = p->module_replicated;
	in->weight_bytes = p->ckpt_weight_bytes;
	in->master_bytes = p->ckpt_master_bytes;
	in->optim_bytes = p->ckpt_optim_bytes;
	in->optim_tensors = p->ckpt_optim_tensors;
	in->grad_bytes = p->ckpt_grad_bytes;
	in->state_dict = p->ckpt_state_dict;
	in->writer = k->writer != CKPT_WRITER_AUTO ? k->writer
		: in->state_dict == CKPT_FULL ? CKPT_WRITER_TORCH_SAVE
		: p->engine == FW_DEEPSPEED ? CKPT_WRITER_DEEPSPEED
		: p->engine == FW_SHARDCAST ? CKPT_WRITER_PER_RANK : CKPT_WRITER_DCP;
	/* HSDP: replica 0 writes (IBM's fms-fsdp; DCP 2.3 deduplicates to the
	 * lowest rank); other DCP replicas are spread by dedup_save_plans;
	 * DeepSpeed's data-parallel rank 0 writes the module */
	in->replica_writers = k->replica_writers != CKPT_REPLICAS_AUTO ? k->replica_writers
		: in->writer == CKPT_WRITER_DCP && in->shard == 1 ? CKPT_REPLICAS_BALANCED
		: CKPT_REPLICAS_FIRST;
}

/* B of checkpointed state one rank holds when the job runs on w GPUs: a shard
 * group spanning all data-parallel ranks follows w, a node's (HSDP) does not. */
static double local_at(const struct ckpt_in *in, double w)
{
	double world = (double)(in->nodes * in->gpus_per_node), mp = (double)in->mp;
	double shard = (double)in->shard * (in->shard * in->mp == (int64_t)world ? w / world : 1);
	double rep = in->module_replicated ? in->weight_bytes : 0;
	double sh = in->master_bytes + in->optim_bytes + in->grad_bytes + (in->module_replicated ? 0 : in->weight_bytes);

	return in->params / mp * (sh / max2(1, shard) + rep);
}

void ckpt_layout(const struct ckpt_in *in, struct ckpt_layout *l)
{
	double gpn = (double)in->gpus_per_node, world = (double)in->nodes * gpn;
	double mp = (double)in->mp, shard = (double)in->shard, dp = world / mp;
	double rep = in->module_replicated ? in->weight_bytes : 0;       /* B/param on every dp rank */
	double sh = in->master_bytes + in->optim_bytes + in->grad_bytes + (in->module_replicated ? 0 : in->weight_bytes);
	double per = in->params / mp, first;                              /* params of one slice */

	memset(l, 0, sizeof *l);
	l->bytes_per_param = in->weight_bytes + in->master_bytes + in->optim_bytes + in->grad_bytes;
	l->bytes = in->params * l->bytes_per_param;
	l->local = local_at(in, world);
	l->items = in->tensors * (1 + in->optim_tensors + (in->grad_bytes > 0));
	if (in->state_dict == CKPT_FULL || world <= 1) {
		l->rank = l->node = l->bytes;
		l->writers = l->writer_nodes = l->node_writers = 1;
		return;
	}
	if (in->replica_writers == CKPT_REPLICAS_BALANCED) {
		/* each slice's distinct bytes spread over its data-parallel ranks */
		l->rank = per * (sh + rep) / dp;
		l->writers = (int64_t)world;
		l->writer_nodes = in->nodes;
		l->node_writers = in->gpus_per_node;
		l->node = l->bytes / (double)in->nodes;
		return;
	}
	/* the first replica: ranks 0 .. mp x shard - 1 (model-parallel ranks
	 * fastest), whose first mp ranks (dp rank 0) also write the module */
	first = mp * shard;
	l->rank = l->local;
	l->writers = (int64_t)first;
	l->writer_nodes = (int64_t)ceil(first / gpn);
	l->node_writers = (int64_t)min2(gpn, first);
	l->node = per * sh / shard * min2(gpn, first) + per * rep * min2(gpn, mp);
}

/* ---- what it costs -------------------------------------------------------- */

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

static int64_t threads_of(const struct ckpt_in *in, const struct ckpt_env *env)
{
	return in->writer == CKPT_WRITER_DCP && env->threads > 1 ? env->threads : 1;
}

/* B/s the busiest node writes at: its client rate, its share of the
 * aggregate, and what its writers' request streams can carry. */
static double node_rate(const struct ckpt_env *env, const struct ckpt_layout *l, double threads)
{
	double stream = env->stream > 0 ? env->stream : env->client;
	double per_thread = env->inflight * env->request / (env->latency + env->request / stream);
	double r = env->client;

	if (env->aggregate > 0)
		r = min2(r, env->aggregate / (double)l->writer_nodes);
	return min2(r, (double)l->node_writers * threads * per_thread);
}

/* Planning: DCP's coordinator gathers every rank's plan (linear in ranks x
 * entries) unless it is cached; the others only meet at a barrier. */
static void planning(const struct ckpt_in *in, const struct ckpt_env *env, struct ckpt_cost *c)
{
	double world = (double)(in->nodes * in->gpus_per_node);

	c->plan_first = c->plan = 2 * env->coll_latency;
	if (in->writer != CKPT_WRITER_DCP)
		return;
	c->plan_first += world * c->l.items * PLAN_ITEM_S;
	c->plan = env->plan_cache ? c->plan + c->l.items * PLAN_ITEM_S : c->plan_first;
}

/* s to move the other nodes' share of bytes to or from rank 0: through its
 * NICs, inside a node over the intra-node link. */
static double to_rank0(const struct ckpt_in *in, const struct ckpt_env *env, double bytes)
{
	double nodes = (double)in->nodes, gpn = (double)in->gpus_per_node;

	return nodes > 1 ? bytes * (nodes - 1) / nodes / env->nic : bytes * (gpn - 1) / gpn / env->intra;
}

/* The write of the layout: serialization (from_device: each thread copies its
 * tensors to pageable memory first) against the storage, plus file operations. */
static void writing(const struct ckpt_in *in, const struct ckpt_env *env, int from_device,
		    struct ckpt_cost *c)
{
	double threads = (double)threads_of(in, env);
	double rate = from_device ? 1 / (1 / env->pageable + 1 / env->serialize) : env->serialize;
	double files = in->writer == CKPT_WRITER_DCP ? threads + 1 : in->writer == CKPT_WRITER_DEEPSPEED ? 2 : 1;

	c->serialize = c->l.rank / (threads * rate);
	if (from_device)
		c->serialize = max2(c->serialize, c->l.node / env->node_copy);
	c->node_bw = node_rate(env, &c->l, threads);
	c->store = c->l.node / c->node_bw;
	c->write_bw = c->l.bytes / c->store;
	c->meta = files * env->meta_latency;
	c->write = max2(c->serialize, c->store) + c->meta;
}

/* Async staging of each rank's local state to host memory. */
static double staging(const struct ckpt_in *in, const struct ckpt_env *env, double local)
{
	double per_gpu = env->node_copy / (double)in->gpus_per_node;
	double rate = env->staging == CKPT_STAGE_PAGEABLE ? env->pageable : env->pinned;
	double t = local / min2(rate, per_gpu);

	if (env->staging == CKPT_STAGE_PINNED_PER_SAVE)
		t += local / env->pin;
	return t;
}

/* The fraction training slows while the background write runs. */
static double slowdown_of(const struct ckpt_env *env, double node_bw)
{
	double host = env->executor == CKPT_EXEC_THREAD ? SLOW_THREAD : SLOW_PROCESS;
	double net = env->shared_network ? min2(1, node_bw / env->nic) * env->comm_share : 0;

	return 1 - (1 - host) * (1 - net);
}

/* A restart: every rank reads its local state, resharded to load_world GPUs. */
static double loading(const struct ckpt_in *in, const struct ckpt_env *env, const struct ckpt_cost *c)
{
	double world = (double)(in->nodes * in->gpus_per_node), w = (double)env->load_world;
	double gpn = (double)in->gpus_per_node, nodes = ceil(w / gpn);
	double rate = 1 / (1 / env->serialize + 1 / env->pageable), local, node, client, files;

	local = local_at(in, w);
	if (in->state_dict == CKPT_FULL || world <= 1)  /* rank 0 reads and loads it, then scatters */
		return c->plan_first + c->l.bytes / min2(env->read_client, env->read_aggregate > 0
							 ? env->read_aggregate : INFINITY)
			+ c->l.bytes / env->serialize + to_rank0(in, env, c->l.bytes) + local / env->pageable;
	node = local * min2(gpn, w);
	client = env->read_client;
	if (env->read_aggregate > 0)
		client = min2(client, env->read_aggregate / nodes);
	files = w == world ? (in->writer == CKPT_WRITER_DCP ? (double)threads_of(in, env) : 1)
		: max2(1, (double)c->l.writers / w) + 1;
	return c->plan_first + c->state_dict + max2(node / client, local / ((double)threads_of(in, env) * rate))
		+ files * env->meta_latency;
}

static void check(const struct ckpt_env *env, int full, struct ckpt_cost *c)
{
	char b[2][32];

	if (c->block > env->timeout)
		warn(c, "a checkpoint blocks training for %s, longer than the collective timeout (%s): "
		     "ranks waiting in a collective meanwhile hit the NCCL watchdog; raise the timeout or use %s",
		     units_format(b[0], 32, c->block, UNIT_TIME), units_format(b[1], 32, env->timeout, UNIT_TIME),
		     full ? "state_dict = sharded" : "mode = async");
	if (c->plan_first > env->timeout)
		warn(c, "the first save after a start plans for %s (DCP gathers every rank's plan), longer than "
		     "the collective timeout (%s): its planning collectives can time out",
		     units_format(b[0], 32, c->plan_first, UNIT_TIME), units_format(b[1], 32, env->timeout, UNIT_TIME));
	if (env->host_memory > 0 && c->host > env->host_memory)
		warn(c, "the checkpoint needs %s of host memory on %s, more than its %s",
		     units_format(b[0], 32, c->host, UNIT_BYTES), full ? "rank 0's node" : "each node",
		     units_format(b[1], 32, env->host_memory, UNIT_BYTES));
}

void ckpt_model(const struct ckpt_in *in, const struct ckpt_env *env, int mode, struct ckpt_cost *c)
{
	int full = in->state_dict == CKPT_FULL || in->nodes * in->gpus_per_node <= 1;

	memset(c, 0, sizeof *c);
	ckpt_layout(in, &c->l);
	c->bytes_per_param = c->l.bytes_per_param;
	c->bytes = c->l.bytes;
	c->shard = c->l.local;
	c->state_dict = c->l.items * STATE_DICT_ITEM_S;
	planning(in, env, c);
	if (full)
		c->gather = to_rank0(in, env, c->l.bytes) + c->l.bytes / env->pageable;  /* then to host */
	writing(in, env, !full, c);
	c->block_sync = c->state_dict + c->plan + c->gather + c->write;
	/* host memory: rank 0's full state dict; an async save's staged copies */
	c->host = full ? c->l.bytes : mode == CKPT_ASYNC ? c->l.local * (double)in->gpus_per_node : 0;
	if (mode == CKPT_SYNC) {
		c->block = c->block_sync;
	} else {
		c->stage = full ? 0 : staging(in, env, c->l.local);
		c->copy = c->stage;
		c->block = c->state_dict + c->gather + c->stage;
		writing(in, env, 0, c);  /* from host memory now */
		c->background = c->plan + c->write;
		c->background_first = c->background - c->plan + c->plan_first;
		c->slowdown = slowdown_of(env, c->node_bw);
		c->interfere = c->slowdown * c->background;
	}
	c->load = loading(in, env, c);
	check(env, full, c);
}

/* ---- a scenario ----------------------------------------------------------- */

void ckpt_env_of(const struct scenario *s, double comm_share, struct ckpt_env *env)
{
	const struct scn_checkpoint *k = &s->s.checkpoint;
	const struct storage *st = s->has_storage ? &s->storage : NULL;
	double gpn = (double)s->s.cluster.gpus_per_node, world = (double)s->world;

	memset(env, 0, sizeof *env);
	env->nic = (double)s->s.cluster.nics_per_node * s->inter.bandwidth * s->inter.efficiency;
	env->intra = s->intra.bandwidth * s->intra.efficiency;
	env->client = st && st->write_client > 0 ? st->write_client : env->nic;
	if (st && st->kind != STORAGE_LOCAL)
		env->client = min2(env->client, env->nic);  /* network storage: through the NICs */
	env->read_client = st && st->read_client > 0 ? min2(st->read_client, st->kind == STORAGE_LOCAL
							     ? INFINITY : env->nic) : env->client;
	if (k->node_bandwidth > 0)
		env->client = env->read_client = k->node_bandwidth;
	env->aggregate = k->storage_bandwidth > 0 ? k->storage_bandwidth : st ? st->write_aggregate : 100e9;
	env->read_aggregate = k->storage_bandwidth <= 0 && st && st->read_aggregate > 0 ? st->read_aggregate
		: env->aggregate;
	env->stream = st && st->stream > 0 ? st->stream : env->client;
	env->request = st ? st->request : 1 << 20;
	env->inflight = st ? (double)st->inflight : 8;
	env->latency = k->storage_latency >= 0 ? k->storage_latency : st ? st->latency : 1e-3;
	env->meta_latency = k->storage_latency >= 0 ? k->storage_latency : st ? st->metadata_latency : 1e-3;
	env->shared_network = st ? st->shared_network : 1;
	env->coll_latency = (s->s.cluster.nodes > 1 ? s->inter.latency : s->intra.latency) * max2(1, log2(world));
	env->pageable = k->pageable_copy_bandwidth;
	env->pinned = k->host_copy_bandwidth;
	env->node_copy = k->node_host_copy_bandwidth > 0 ? k->node_host_copy_bandwidth
		: max2(1, gpn / 2) * k->host_copy_bandwidth;
	env->pin = k->pin_bandwidth;
	env->serialize = k->serialize_bandwidth;
	env->threads = k->writer_threads > 0 ? k->writer_threads : 1;
	env->staging = k->staging;
	env->executor = k->executor;
	env->plan_cache = k->plan_cache;
	env->load_world = k->load_gpus > 0 ? k->load_gpus : s->world;
	env->comm_share = comm_share;
	env->timeout = k->collective_timeout_minutes * 60;
	env->host_memory = k->host_memory;
}

void ckpt_cost(const struct scenario *s, double params, double comm_share, int mode, struct ckpt_cost *c)
{
	struct ckpt_in in;
	struct ckpt_env env;

	ckpt_in_of(s, params, &in);
	ckpt_env_of(s, comm_share, &env);
	ckpt_model(&in, &env, mode, c);
}

/*
 * test_grid.c — the simulator predicts the runtime's memory exactly.
 *
 * For a grid of scenarios (strategy x world size x micro-batch x sequence x
 * model (gpt-tiny, gpt-mini, llama-tiny) x activation checkpointing x dropout
 * x accumulation x precision: fp32, and bf16 and fp16 mixed precision with
 * 16-bit activations, parameters and gradients beside fp32 masters) on the CPU
 * backend with framework = shardcast:
 *  - the peak bytes per rank that predict_run() gives (sim/models/memory.c walking
 *    the graph under sim/models/memory.h's contract) equal the arena's measured peak
 *    over two optimizer steps, byte for byte;
 *  - with gpu_memory set just below the predicted peak at B + 1, the
 *    predicted max micro-batch and the runtime's search (grow, bisect,
 *    confirm) both find B.
 * World sizes above one run as rank 0 of an emulated world (collectives keep
 * their sizes; runtime/backend.h), which allocates exactly what a rank of a
 * real job does: tests/rt_mpi_main.c checks that against real 4-rank runs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "predict.h"
#include "search.h"

static const char *const models[] = {"gpt-tiny", "gpt-mini", "llama-tiny"};

struct gcase {
	const char *strategy;      /* strategy, with ":sharding" for fsdp */
	int world, B, seq, mini, recompute, accum;   /* mini: index into models[] */
	double dropout;
	const char *extra;         /* one more --set, or NULL */
	int prec;                  /* 0 fp32, 1 bf16, 2 fp16 (16-bit storage emulated: backend.h) */
};

static int load(struct scenario *s, const struct gcase *c, int64_t B, double gpu_memory)
{
	char set[14][128];
	const char *sets[14];
	const char *colon = strchr(c->strategy, ':');
	struct err e = {0};
	int n = 0, rc, hybrid = colon && strstr(colon, "hybrid"), v2 = !strncmp(c->strategy, "fsdp2", 5);

	/* fsdp2[:sharding] is strategy = fsdp with fsdp_version = 2 */
	snprintf(set[n++], 128, "training.strategy=%.*s", v2 ? 4 : colon ? (int)(colon - c->strategy) : (int)strlen(c->strategy),
		 c->strategy);
	if (v2)
		snprintf(set[n++], 128, "training.fsdp_version=2");
	if (colon)
		snprintf(set[n++], 128, "training.fsdp_sharding_strategy=%s", colon + 1);
	/* hybrid: two nodes, sharding inside each */
	snprintf(set[n++], 128, "cluster.nodes=%d", hybrid && c->world > 1 ? 2 : 1);
	snprintf(set[n++], 128, "cluster.gpus_per_node=%d", hybrid && c->world > 1 ? c->world / 2 : c->world);
	snprintf(set[n++], 128, "model.seq_len=%d", c->seq);
	snprintf(set[n++], 128, "model.name=%s", models[c->mini]);
	snprintf(set[n++], 128, "training.activation_checkpointing=%s",
		 c->recompute == 2 ? "selective" : c->recompute ? "full" : "none");
	snprintf(set[n++], 128, "training.grad_accum=%d", c->accum);
	snprintf(set[n++], 128, "model.dropout=%g", c->dropout);
	if (B > 0)
		snprintf(set[n++], 128, "training.micro_batch=%lld", (long long)B);
	else
		snprintf(set[n++], 128, "training.micro_batch=auto");
	snprintf(set[n++], 128, "cluster.gpu_memory=%.0f", gpu_memory);
	if (c->extra)
		snprintf(set[n++], 128, "%s", c->extra);
	if (c->prec)
		snprintf(set[n++], 128, "training.precision=%s", c->prec == 2 ? "fp16" : "bf16");
	for (int i = 0; i < n; i++)
		sets[i] = set[i];
	rc = scenario_load(s, "tests/grid/base.ini", sets, n, &e);
	cr_assert_eq(rc, 0, "%s: %s", c->strategy, e.msg);
	return rc;
}

static void world_of(const struct scenario *s, struct rt_comm *w)
{
	if (s->plan.mech == MECH_DP || s->world == 1)
		*w = (struct rt_comm){0, 1, NULL, 0};
	else
		backend_emulated_world(w, (int)s->world);
}

static void run_case(const struct gcase *c)
{
	struct backend *be;
	struct rt_comm world;
	struct scenario s;
	struct prediction p;
	struct rt_trial t;
	struct err e = {0};
	double cap, pred;
	int64_t best = -1;
	int trials;

	cr_assert_eq(backend_open("cpu", &be, &world, &e), 0, "%s", e.msg);
	/* 1. the peak at B */
	load(&s, c, c->B, 1 << 30);
	cr_assert_eq(predict_run(&s, &p, &e), 0, "%s", e.msg);
	cr_assert(p.mem.valid);
	world_of(&s, &world);
	cr_assert_eq(rt_trial(&s, be, &world, c->B, 2, 0, &t, &e), 0, "%s", e.msg);
	cr_assert(t.fits);
	pred = p.mem.peak;
	cr_expect_eq((int64_t)t.peak, (int64_t)p.mem.peak,
		     "%s world %d B %d seq %d %s recompute %d accum %d dropout %g: measured %.0f, predicted %.0f (diff %+.0f)",
		     c->strategy, c->world, c->B, c->seq, models[c->mini], c->recompute, c->accum,
		     c->dropout, t.peak, p.mem.peak, t.peak - p.mem.peak);
	scenario_free(&s);
	/* 2. the max micro-batch under a capacity just below the peak at B + 1 */
	load(&s, c, c->B + 1, 1 << 30);
	cr_assert_eq(predict_run(&s, &p, &e), 0, "%s", e.msg);
	cap = p.mem.peak - 1;
	scenario_free(&s);
	load(&s, c, 0, cap);
	cr_assert_eq(predict_run(&s, &p, &e), 0, "%s", e.msg);
	cr_assert_eq(rt_max_batch(&s, be, &world, cap, 1 << 12, &best, &trials, &e), 0, "%s", e.msg);
	cr_expect_eq(best, p.max_micro_batch, "%s world %d: measured max micro-batch %lld, predicted %lld",
		     c->strategy, c->world, (long long)best, (long long)p.max_micro_batch);
	cr_expect_eq(best, c->B, "%s world %d: the capacity below B+1's peak admits B", c->strategy, c->world);
	cr_log_info("%-24s world %d B %d seq %2d %-10s recompute %d accum %d dropout %.1f prec %d: peak %9.0f = %9.0f; "
		    "max batch at %9.0f B: %lld = %lld (%d trials)\n", c->strategy, c->world, c->B, c->seq,
		    models[c->mini], c->recompute, c->accum, c->dropout, c->prec, t.peak, pred, cap,
		    (long long)best, (long long)p.max_micro_batch, trials);
	scenario_free(&s);
}

#define GRID(name, ...)                                                                   \
	Test(grid, name)                                                                  \
	{                                                                                 \
		static const struct gcase cases[] = {__VA_ARGS__};                         \
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)                \
			run_case(&cases[i]);                                               \
	}

/* strategy, world, B, seq, mini, recompute (0 none, 1 full, 2 selective), accum, dropout, extra */
GRID(single_and_dp,
     {"single", 1, 1, 32, 0, 0, 1, 0, NULL, 0}, {"single", 1, 3, 16, 0, 1, 1, 0, NULL, 0},
     {"single", 1, 2, 32, 1, 2, 1, 0.1, NULL, 0}, {"single", 1, 4, 24, 0, 0, 2, 0.1, NULL, 0},
     {"single", 1, 2, 32, 1, 1, 1, 0.1, "training.optimizer=sgd_momentum", 0},
     {"single", 1, 3, 32, 0, 0, 1, 0, "training.optimizer=sgd", 0},
     {"dp", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"dp", 4, 1, 16, 0, 1, 1, 0.1, NULL, 0},
     {"dp", 3, 3, 32, 1, 0, 2, 0, NULL, 0}, {"dp", 2, 2, 24, 0, 2, 1, 0, NULL, 0})

GRID(ddp,
     {"ddp", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"ddp", 4, 1, 32, 1, 1, 1, 0.1, NULL, 0},
     {"ddp", 8, 3, 16, 0, 2, 2, 0, NULL, 0}, {"ddp", 3, 2, 32, 0, 0, 1, 0, "training.ddp_gradient_as_bucket_view=true", 0},
     {"ddp", 2, 4, 24, 1, 0, 1, 0, "training.ddp_bucket_mb=0.5", 0},
     {"ddp", 4, 2, 32, 0, 1, 1, 0, "training.optimizer=sgd_momentum", 0})

GRID(zero12,
     {"zero1", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"zero1", 4, 3, 16, 1, 1, 1, 0, NULL, 0},
     {"zero1", 8, 1, 32, 0, 2, 2, 0.1, NULL, 0}, {"zero1", 3, 2, 24, 0, 0, 1, 0, NULL, 0},
     {"zero2", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"zero2", 4, 1, 32, 1, 1, 2, 0, NULL, 0},
     {"zero2", 8, 3, 16, 0, 0, 1, 0.1, NULL, 0}, {"zero2", 3, 2, 32, 0, 2, 1, 0, NULL, 0},
     {"zero2", 4, 2, 24, 0, 0, 1, 0, "training.optimizer=sgd_momentum", 0})

GRID(zero3_full_shard,
     {"zero3", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"zero3", 4, 3, 16, 1, 1, 1, 0, NULL, 0},
     {"zero3", 8, 1, 32, 0, 2, 2, 0.1, NULL, 0}, {"zero3", 3, 2, 24, 0, 0, 1, 0, NULL, 0},
     {"fsdp:full_shard", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp:full_shard", 4, 3, 32, 1, 1, 1, 0.1, NULL, 0},
     {"fsdp:full_shard", 8, 2, 16, 0, 0, 2, 0, "training.fsdp_backward_prefetch=none", 0},
     {"fsdp:full_shard", 4, 2, 32, 0, 1, 1, 0, "training.fsdp_forward_prefetch=true", 0},
     {"fsdp:full_shard", 1, 2, 32, 0, 0, 1, 0, NULL, 0},
     {"fsdp:full_shard", 4, 1, 24, 1, 2, 1, 0, "training.fsdp_auto_wrap_policy=no_wrap", 0})

GRID(fsdp_other,
     {"fsdp:shard_grad_op", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp:shard_grad_op", 4, 3, 16, 1, 1, 1, 0, NULL, 0},
     {"fsdp:shard_grad_op", 8, 1, 32, 0, 2, 2, 0.1, NULL, 0},
     {"fsdp:no_shard", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp:no_shard", 4, 3, 24, 1, 1, 2, 0, NULL, 0},
     {"fsdp:no_shard", 3, 1, 32, 0, 0, 1, 0.1, NULL, 0},
     {"fsdp:hybrid_shard", 4, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp:hybrid_shard", 8, 3, 16, 1, 1, 1, 0, NULL, 0},
     {"fsdp:hybrid_shard", 4, 1, 32, 0, 2, 2, 0.1, NULL, 0},
     {"fsdp:hybrid_shard_zero2", 4, 2, 32, 0, 0, 1, 0, NULL, 0},
     {"fsdp:hybrid_shard_zero2", 8, 2, 24, 1, 1, 1, 0, NULL, 0},
     {"fsdp:hybrid_shard_zero2", 4, 3, 32, 0, 0, 2, 0, "training.fsdp_backward_prefetch=none", 0},
     {"fsdp:full_shard", 8, 2, 32, 1, 0, 1, 0, "training.fsdp_backward_prefetch=backward_post", 0},
     /* backward_post with accumulation: after the root's backward nothing is
      * prefetched, so the second micro-step starts with no unit gathered */
     {"fsdp:full_shard", 4, 2, 16, 0, 0, 2, 0, "training.fsdp_backward_prefetch=backward_post", 0},
     {"fsdp:shard_grad_op", 4, 2, 32, 0, 0, 1, 0, "training.fsdp_forward_prefetch=true", 0},
     {"fsdp:full_shard", 2, 4, 8, 0, 1, 1, 0.1, "training.optimizer=sgd", 0},
     {"zero3", 8, 2, 32, 1, 0, 1, 0, "training.optimizer=sgd_momentum", 0})

/* FSDP2 (sim/models/memfsdp2.c, runtime/stratfsdp2.c): per-parameter shards, the
 * all-gather buffer handed to the next unit in forward, the reduce-scatter
 * input kept until the next reduction; default (blocks resharded, the root
 * kept), true, false; forward prefetch; hybrid; accumulation; bf16 and fp16 */
GRID(fsdp2,
     {"fsdp2", 2, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp2", 4, 3, 16, 1, 1, 1, 0.1, NULL, 0},
     {"fsdp2", 8, 1, 32, 0, 2, 2, 0, NULL, 0}, {"fsdp2", 3, 2, 24, 0, 0, 1, 0, NULL, 0},
     {"fsdp2", 4, 2, 32, 2, 1, 2, 0, NULL, 0}, {"fsdp2", 1, 2, 32, 0, 0, 1, 0, NULL, 0},
     {"fsdp2", 8, 2, 32, 1, 0, 1, 0, "training.fsdp_reshard_after_forward=false", 0},
     {"fsdp2", 4, 3, 16, 0, 1, 2, 0.1, "training.fsdp_reshard_after_forward=true", 0},
     {"fsdp2", 4, 2, 32, 2, 0, 1, 0, "training.fsdp_forward_prefetch=true", 0},
     {"fsdp2", 4, 1, 24, 1, 2, 1, 0, "training.fsdp_auto_wrap_policy=no_wrap", 0},
     {"fsdp2", 2, 4, 8, 0, 1, 1, 0.1, "training.optimizer=sgd_momentum", 0},
     {"fsdp2:hybrid_shard", 4, 2, 32, 0, 0, 1, 0, NULL, 0}, {"fsdp2:hybrid_shard", 8, 3, 16, 2, 1, 2, 0, NULL, 0},
     {"fsdp2", 4, 2, 32, 0, 0, 1, 0, NULL, 1}, {"fsdp2", 8, 4, 32, 2, 2, 2, 0.1, NULL, 1},
     {"fsdp2", 4, 3, 32, 1, 1, 1, 0, "training.fsdp_reshard_after_forward=false", 1},
     {"fsdp2:hybrid_shard", 8, 6, 32, 2, 0, 1, 0, NULL, 1}, {"fsdp2", 4, 2, 32, 1, 1, 1, 0, NULL, 2})

/* Llama-style blocks: RMSNorm, rotary positions, SwiGLU, grouped-query attention */
GRID(llama,
     {"single", 1, 2, 32, 2, 0, 1, 0, NULL, 0}, {"single", 1, 3, 16, 2, 1, 1, 0, NULL, 0},
     {"ddp", 4, 2, 32, 2, 2, 2, 0, NULL, 0}, {"zero1", 2, 3, 32, 2, 0, 1, 0, NULL, 0},
     {"zero2", 4, 2, 24, 2, 1, 1, 0, NULL, 0}, {"zero3", 8, 2, 32, 2, 0, 1, 0, NULL, 0},
     {"fsdp:full_shard", 4, 3, 32, 2, 1, 2, 0, NULL, 0}, {"fsdp:shard_grad_op", 2, 2, 32, 2, 2, 1, 0, NULL, 0},
     {"fsdp:hybrid_shard", 4, 2, 16, 2, 0, 1, 0, NULL, 0}, {"dp", 2, 2, 32, 2, 0, 1, 0, NULL, 0})

/* Mixed precision (memory.h S2): bf16 (1) and fp16 with its loss-scale state (2),
 * every strategy, over the same axes */
GRID(bf16_replicated,
     {"single", 1, 2, 32, 0, 0, 1, 0, NULL, 1}, {"single", 1, 3, 16, 1, 1, 1, 0.1, NULL, 1},
     {"single", 1, 2, 32, 2, 2, 2, 0, NULL, 1}, {"single", 1, 4, 24, 0, 0, 1, 0, "training.optimizer=sgd", 1},
     {"dp", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"dp", 4, 1, 16, 1, 1, 2, 0.1, NULL, 1},
     {"dp", 2, 3, 32, 2, 0, 1, 0, NULL, 1},
     {"ddp", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"ddp", 4, 1, 32, 1, 1, 1, 0.1, NULL, 1},
     {"ddp", 8, 3, 16, 0, 2, 2, 0, NULL, 1}, {"ddp", 3, 2, 32, 0, 0, 1, 0, "training.ddp_gradient_as_bucket_view=true", 1},
     {"ddp", 4, 2, 32, 2, 1, 1, 0, "training.ddp_bucket_mb=0.5", 1})

GRID(bf16_sharded,
     {"zero1", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"zero1", 4, 3, 16, 1, 1, 1, 0, NULL, 1},
     {"zero1", 3, 2, 24, 2, 2, 2, 0.1, NULL, 1},
     {"zero2", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"zero2", 4, 3, 32, 1, 1, 2, 0, NULL, 1},
     {"zero2", 8, 6, 32, 2, 0, 1, 0.1, NULL, 1},
     {"zero3", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"zero3", 4, 3, 16, 1, 1, 1, 0, NULL, 1},
     {"zero3", 8, 4, 32, 2, 2, 2, 0.1, NULL, 1},
     {"fsdp:full_shard", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"fsdp:full_shard", 4, 3, 32, 1, 1, 1, 0.1, NULL, 1},
     {"fsdp:full_shard", 4, 2, 32, 2, 1, 2, 0, "training.fsdp_forward_prefetch=true", 1},
     {"fsdp:full_shard", 8, 8, 32, 0, 0, 1, 0, "training.fsdp_backward_prefetch=backward_post", 1},
     {"fsdp:shard_grad_op", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"fsdp:shard_grad_op", 4, 6, 32, 2, 2, 1, 0, NULL, 1},
     {"fsdp:no_shard", 2, 2, 32, 0, 0, 1, 0, NULL, 1}, {"fsdp:no_shard", 4, 3, 24, 1, 1, 2, 0, NULL, 1},
     {"fsdp:hybrid_shard", 4, 2, 32, 0, 0, 1, 0, NULL, 1}, {"fsdp:hybrid_shard", 8, 6, 32, 2, 1, 1, 0, NULL, 1},
     {"fsdp:hybrid_shard_zero2", 4, 2, 32, 1, 0, 2, 0, NULL, 1},
     {"fsdp:full_shard", 4, 4, 32, 0, 2, 1, 0, "training.fsdp_auto_wrap_policy=no_wrap", 1})

GRID(fp16,
     {"single", 1, 2, 32, 0, 0, 1, 0, NULL, 2}, {"dp", 2, 2, 32, 2, 1, 1, 0, NULL, 2},
     {"ddp", 4, 2, 32, 1, 0, 2, 0.1, NULL, 2}, {"zero1", 2, 3, 16, 0, 1, 1, 0, NULL, 2},
     {"zero2", 4, 2, 32, 2, 2, 1, 0, NULL, 2}, {"zero3", 4, 4, 32, 0, 0, 2, 0, NULL, 2},
     {"fsdp:full_shard", 4, 2, 32, 1, 1, 1, 0, NULL, 2}, {"fsdp:hybrid_shard", 4, 6, 32, 0, 0, 1, 0.1, NULL, 2})

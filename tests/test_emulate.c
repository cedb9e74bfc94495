/*
 * test_emulate.c — `--emulate-world N` on the cpu backend: rank 0 of an
 * N-rank job in one process (runtime/emulate.c), and opening the cuda backend
 * on a machine that may have no GPU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "backend.h"
#include "emulate.h"
#include "strategy.h"

static struct backend *cpu;
static struct rt_comm world;

static void setup(void)
{
	struct err e = {0};
	cr_assert_eq(backend_open("cpu", &cpu, &world, &e), 0, "%s", e.msg);
}

static struct strat_opts opts(const char *spec, int B, int group)
{
	struct strat_opts o;
	memset(&o, 0, sizeof o);
	cr_assert_eq(strat_parse(spec, &o), 0, "%s", spec);
	o.optimizer = OPT_ADAMW;
	o.micro_batch = B;
	o.grad_accum = 1;
	o.bucket_mb = 0.1;
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01;
	o.momentum = 0.9;
	o.seed = 1234;
	o.group = group;
	o.devices = 1;
	o.bwd_prefetch = PREFETCH_BACKWARD_PRE;
	return o;
}

static struct model tiny(void)
{
	struct model m;
	struct err e = {0};
	cr_assert_eq(model_load("gpt-tiny", &m, NULL, 0, &e), 0, "%s", e.msg);
	return m;
}

Test(emulate, zero3_states_are_one_nth_of_the_model, .init = setup)
{
	/* ZeRO-3 (Rajbhandari et al. 2020): parameters, gradients and both Adam
	 * moments sharded N ways, per wrap unit ceil(n / N) elements (the root
	 * unit and one per block); strategy.h's flat buffers: params (S), optimizer
	 * states (m then v, 2S), gradients (S), each rounded to 256 bytes */
	struct model m = tiny();
	struct strat_opts o = opts("zero3", 2, 4);
	struct backend emu;
	struct rt_comm w;
	struct strat s;
	struct err e = {0};
	size_t S = 0, want;

	cr_assert_eq(emu_open(cpu, 4, 4, &emu, &w, &e), 0, "%s", e.msg);
	cr_assert_eq(w.size, 4);
	cr_assert_eq(w.rank, 0);
	cr_assert_eq(strat_init(&s, &o, &m, 32, 0, &emu, &w, &e), 0, "%s", e.msg);
	for (int u = 0; u < s.m.nunits; u++)
		S += (s.m.unit_n[u] + 3) / 4;
	want = 2 * arena_round(S * sizeof(float)) + arena_round(2 * S * sizeof(float));
	cr_expect_eq(s.ar[0].live, want, "live %zu, expected %zu", s.ar[0].live, want);
	strat_free(&s);
	emu_close(&w);
}

/* With every rank holding rank 0's samples, rank 0 of N computes what a
 * single process computes on those samples: the first step's loss is the
 * same, and so is rank 0's slice of the parameters after the update (the
 * N-fold sum and the 1/N loss scale are powers of two here, hence exact). */
static void same_as_single(const char *spec, int group)
{
	struct model m = tiny();
	struct strat_opts o1 = opts("single", 2, 1), o4 = opts(spec, 2, group);
	struct backend emu;
	struct rt_comm w;
	struct strat a, b;
	struct err e = {0};
	size_t n, bad = 0;

	cr_assert_eq(strat_init(&a, &o1, &m, 32, 0, cpu, &world, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_step(&a, &e), 0, "%s", e.msg);
	cr_assert_eq(emu_open(cpu, 4, group, &emu, &w, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_init(&b, &o4, &m, 32, 0, &emu, &w, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_step(&b, &e), 0, "%s", e.msg);
	cr_expect_leq(fabs(a.loss - b.loss), 1e-6 * a.loss, "%s: loss %.9g vs single %.9g", spec, b.loss, a.loss);
	n = b.sh ? b.sh : b.P;  /* zero1/2: rank 0's shard of the flat model; else all of it */
	for (size_t i = 0; i < n; i++)
		bad += a.params[i] != b.params[i];
	cr_expect_eq(bad, 0, "%s: %zu of %zu parameters of rank 0's slice differ", spec, bad, n);
	strat_free(&a);
	strat_free(&b);
	emu_close(&w);
}

Test(emulate, ddp_rank0_matches_single, .init = setup) { same_as_single("ddp", 4); }
Test(emulate, zero1_rank0_matches_single, .init = setup) { same_as_single("zero1", 4); }
Test(emulate, zero2_rank0_matches_single, .init = setup) { same_as_single("zero2", 4); }

/* Strategies that shard parameters gather N copies of rank 0's shard, so
 * their numbers are not a real job's; what must hold is that they run, stay
 * finite, and free everything but the states between steps. */
static void runs_finite(const char *spec, int group)
{
	struct model m = tiny();
	struct strat_opts o = opts(spec, 2, group);
	struct backend emu;
	struct rt_comm w;
	struct strat s;
	struct err e = {0};
	size_t states;

	cr_assert_eq(emu_open(cpu, 4, group, &emu, &w, &e), 0, "%s", e.msg);
	cr_assert_eq(strat_init(&s, &o, &m, 32, 0, &emu, &w, &e), 0, "%s", e.msg);
	states = s.ar[0].live;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(strat_step(&s, &e), 0, "%s", e.msg);
		cr_expect(isfinite(s.loss) && s.loss > 0, "%s step %d: loss %g", spec, i, s.loss);
		cr_expect_eq(s.ar[0].live, states, "%s step %d: %zu bytes live after the step, %zu before",
			     spec, i, s.ar[0].live, states);
	}
	cr_expect_gt(s.ar[0].peak, states, "the gathered units and activations come on top of the states");
	strat_free(&s);
	emu_close(&w);
}

Test(emulate, zero3_runs, .init = setup) { runs_finite("zero3", 4); }
Test(emulate, fsdp_full_shard_runs, .init = setup) { runs_finite("fsdp", 4); }
Test(emulate, fsdp_sgo_runs, .init = setup) { runs_finite("fsdp:shard_grad_op", 4); }
Test(emulate, fsdp_hybrid_runs, .init = setup) { runs_finite("fsdp:hybrid_shard", 2); }
Test(emulate, fsdp_no_shard_rank0_matches_single, .init = setup) { same_as_single("fsdp:no_shard", 4); }

Test(emulate, world_must_be_positive, .init = setup)
{
	struct backend emu;
	struct rt_comm w;
	struct err e = {0};
	cr_expect_eq(emu_open(cpu, 0, 1, &emu, &w, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "--emulate-world 0") != NULL, "%s", e.msg);
}

Test(cuda, opening_fails_cleanly_or_opens)
{
	/* no crash either way: a GPU machine opens it; elsewhere the message says
	 * what is missing (no device/driver, or a build without nvcc) */
	struct backend *be;
	struct rt_comm w;
	struct err e = {0};
	int rc = backend_open("cuda", &be, &w, &e);

	if (rc == 0) {
		cr_expect_str_eq(be->name, "cuda");
		cr_expect_not_null(be->device_used);
		backend_close(be);
		return;
	}
	cr_expect(rc == ERR_SYSTEM || rc == ERR_INPUT, "rc %d", rc);
	cr_expect(strstr(e.msg, "no CUDA device") || strstr(e.msg, "no CUDA backend"), "%s", e.msg);
	cr_expect(strstr(e.msg, "--backend cpu") != NULL, "the message offers the cpu backend: %s", e.msg);
}

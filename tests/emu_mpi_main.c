/*
 * emu_mpi_main.c — `--emulate-world N` against a real N-rank job (run by
 * tests/emu_mpi.sh under mpirun -np 4 on the cpu backend): for every
 * data-parallel strategy, the arena of the emulated rank 0 must reach exactly
 * the peak and hold exactly the states of rank 0 of the real job — the
 * emulation replaces collectives, never allocations. Prints "ok"/"FAIL" lines
 * and "emu-mpi (N ranks): P passed, F failed" on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "emulate.h"
#include "strategy.h"

static struct strat_opts opts(const char *spec, int group)
{
	struct strat_opts o;

	memset(&o, 0, sizeof o);
	strat_parse(spec, &o);
	o.optimizer = OPT_ADAMW;
	o.micro_batch = 2;
	o.grad_accum = 2;
	o.bucket_mb = 0.1;
	o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8, o.weight_decay = 0.01;
	o.momentum = 0.9;
	o.seed = 5;
	o.group = group;
	o.devices = 1;
	o.bwd_prefetch = PREFETCH_BACKWARD_PRE;
	return o;
}

/* states after init and peak over two steps, on be/world */
static int run(const char *spec, int group, int recompute, struct backend *be, struct rt_comm *w,
	       size_t *states, size_t *peak, struct err *e)
{
	struct model m;
	struct strat_opts o = opts(spec, group);
	struct strat s;
	int rc, i;

	o.recompute = recompute;
	if ((rc = model_load("gpt-tiny", &m, NULL, 0, e)))
		return rc;
	if ((rc = strat_init(&s, &o, &m, 32, 0.1, be, w, e)))
		return rc;
	*states = s.ar[0].live;
	for (i = 0; i < 2 && !rc; i++)
		rc = strat_step(&s, e);
	*peak = s.ar[0].peak;
	strat_free(&s);
	return rc;
}

int main(void)
{
	static const struct { const char *spec; int group, recompute; } t[] = {
		{"ddp", 4, 0}, {"zero1", 4, 0}, {"zero2", 4, 0}, {"zero3", 4, 0}, {"fsdp", 4, 0},
		{"fsdp", 4, 1}, {"fsdp:shard_grad_op", 4, 0}, {"fsdp:no_shard", 4, 0},
		{"fsdp:hybrid_shard", 2, 0}, {"fsdp:hybrid_shard_zero2", 2, 0}};
	struct backend *be, emu;
	struct rt_comm world, ew;
	struct err e = {0};
	int pass = 0, fail = 0;

	if (backend_open("cpu", &be, &world, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		size_t rs = 0, rp = 0, es = 0, ep = 0;
		int rc = run(t[i].spec, t[i].group, t[i].recompute, be, &world, &rs, &rp, &e);
		if (world.rank == 0) {
			int ok = !rc && !emu_open(be, world.size, t[i].group, &emu, &ew, &e) &&
				 !run(t[i].spec, t[i].group, t[i].recompute, &emu, &ew, &es, &ep, &e);
			ok = ok && es == rs && ep == rp;
			printf("%s %s%s: real rank 0 states %zu peak %zu, emulated states %zu peak %zu%s%s\n",
			       ok ? "ok  " : "FAIL", t[i].spec, t[i].recompute ? " +recompute" : "", rs, rp, es, ep,
			       e.msg[0] ? " — " : "", e.msg);
			if (ok)
				pass++;
			else
				fail++;
			if (ew.impl)
				emu_close(&ew);
			memset(&ew, 0, sizeof ew);
			err_clear(&e);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	if (world.rank == 0)
		printf("emu-mpi (%d ranks): %d passed, %d failed\n", world.size, pass, fail);
	be->comm_free(&world);
	backend_close(be);
	return fail ? 1 : 0;
}

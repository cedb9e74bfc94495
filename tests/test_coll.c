/*
 * test_coll.c — the event queue, the collective cost models and the task-graph
 * simulation with shared links.
 *
 * Expected values are the models' published formulas: nccl-tests
 * doc/PERFORMANCE.md defines bus bandwidth from algorithm bandwidth with the
 * factors 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter) and 1
 * (broadcast, reduce), i.e. a ring all-reduce of S bytes at bus bandwidth B takes
 * 2(n-1)/n · S/B; NCCL's tuning model (src/graph/tuning.cc) adds a base latency
 * and one hop latency per ring step (2(n-1) for all-reduce, n-1 otherwise) or
 * 2·((r-1)·α_intra + log2(N)·α_inter) for its tree.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "coll.h"
#include "des.h"
#include "evq.h"

static const struct link nvl = {"nvlink3", LINK_INTRA, 300e9, 0.77, 2e-6, ""};
static const struct link ib = {"ib-hdr", LINK_INTER, 25e9, 0.96, 1.5e-6, ""};

/* ---- evq ---------------------------------------------------------------------- */

Test(evq, ties_come_out_in_insertion_order)
{
	struct evq q;
	struct evq_event ev;
	uint32_t i, expect[] = {10, 0, 1, 2, 3, 4, 11};

	cr_assert_eq(evq_create(&q, 4), 0);
	cr_assert_eq(evq_push(&q, 0.5, 0, 10), 0);
	for (i = 0; i < 5; i++)
		cr_assert_eq(evq_push(&q, 1.0, 0, i), 0);  /* five events at the same time */
	cr_assert_eq(evq_push(&q, 2.0, 0, 11), 0);
	for (i = 0; i < 7; i++) {
		cr_assert(evq_pop(&q, &ev));
		cr_expect_eq(ev.id, expect[i], "pop %u gave %u", i, ev.id);
	}
	cr_expect_eq(evq_pop(&q, &ev), 0, "empty");
	/* the integer comparison needs finite times >= 0 */
	cr_expect_eq(evq_push(&q, -1.0, 0, 0), -1);
	cr_expect_eq(evq_push(&q, INFINITY, 0, 0), -1);
	cr_expect_eq(evq_push(&q, NAN, 0, 0), -1);
	evq_delete(&q);
}

Test(evq, pops_in_order_while_interleaved)
{
	/* a hold model: pop one, push one later; times must come out nondecreasing
	 * and every event exactly once (the heap grows past its initial capacity) */
	struct evq q;
	struct evq_event ev;
	unsigned seed = 7;
	double last = -1;
	int i, popped = 0;

	cr_assert_eq(evq_create(&q, 16), 0);
	for (i = 0; i < 1000; i++)
		evq_push(&q, (double)(rand_r(&seed) % 1000), 0, (uint32_t)i);
	for (i = 0; i < 5000; i++) {
		cr_assert(evq_pop(&q, &ev));
		cr_expect_geq(ev.time, last);
		last = ev.time;
		popped++;
		if (i < 4000)
			evq_push(&q, ev.time + (double)(rand_r(&seed) % 100), 0, ev.id);
	}
	cr_expect_eq(popped, 5000);
	cr_expect_eq(evq_size(&q), 0);
	evq_delete(&q);
}

Test(evq, any_interleaving_pops_by_time_then_insertion)
{
	/* pushes and pops interleaved at random over few distinct times (many
	 * ties), as a simulation does: every pop must be the earliest pending event
	 * by (time, insertion), found here by a plain scan of what is pending; the
	 * event kept outside the heap (evq.h) must not change that order */
	struct evq q;
	struct evq_event ev;
	double t[4096];
	uint32_t seq[4096];
	int live[4096], n = 0, i, j, best, step;
	unsigned seed = 11;
	uint32_t next = 0;

	cr_assert_eq(evq_create(&q, 4), 0);
	for (step = 0; step < 20000; step++) {
		if (n < 4096 && (n == 0 || rand_r(&seed) % 5 < 3)) {
			t[n] = (double)(rand_r(&seed) % 8);
			seq[n] = next;
			live[n] = 1;
			cr_assert_eq(evq_push(&q, t[n], 0, next++), 0);
			n++;
			continue;
		}
		for (best = -1, j = 0; j < n; j++)
			if (live[j] && (best < 0 || t[j] < t[best] || (t[j] == t[best] && seq[j] < seq[best])))
				best = j;
		cr_assert(evq_pop(&q, &ev));
		cr_assert_eq(ev.id, seq[best], "step %d: popped %u, expected %u", step, ev.id, seq[best]);
		cr_assert_eq(ev.time, t[best]);
		live[best] = 0;
		for (i = 0, j = 0; j < n; j++)  /* compact */
			if (live[j])
				t[i] = t[j], seq[i] = seq[j], live[i++] = 1;
		n = i;
	}
	cr_expect_eq(evq_size(&q), (size_t)n);
	evq_delete(&q);
}

/* ---- collective costs ------------------------------------------------------------ */

Test(coll, ring_allreduce_is_nccl_bus_bandwidth_formula)
{
	struct coll_group g;
	struct coll_cost c;
	double S = 1e9, B = 300e9 * 0.77, n = 8;

	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, S, &g, &c);
	/* 2(n-1)/n · S/B + base + 2(n-1) hops */
	cr_expect_float_eq(coll_time(&c), 2 * (n - 1) / n * S / B + COLL_BASE_LATENCY + 14 * 2e-6, 1e-12);
}

Test(coll, allgather_and_reduce_scatter_move_n_minus_1_over_n)
{
	struct coll_group g;
	struct coll_cost ag, rs;
	double S = 512e6, B = 300e9 * 0.77, n = 4;

	coll_group_make(&g, 4, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLGATHER, COLL_RING, S, &g, &ag);
	coll_cost(COLL_REDUCE_SCATTER, COLL_RING, S, &g, &rs);
	cr_expect_float_eq(coll_time(&ag), (n - 1) / n * S / B + COLL_BASE_LATENCY + 3 * 2e-6, 1e-12);
	cr_expect_float_eq(coll_time(&rs), coll_time(&ag), 1e-15);
}

Test(coll, ring_across_nodes_is_limited_by_the_slower_link)
{
	/* 4 nodes x 8 GPUs, 4 NICs per node: per node the ring moves 2(n-1)/n·S
	 * through 4 x 24 GB/s, slower than NVLink; latency: 2(n-1) steps of which
	 * 2(N-1) cross nodes */
	struct coll_group g;
	struct coll_cost c;
	double S = 1e9, n = 32, Bnet = 4 * 25e9 * 0.96;

	coll_group_make(&g, 32, 4, &nvl, &ib, 4, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, S, &g, &c);
	cr_expect_float_eq(coll_time(&c), 2 * (n - 1) / n * S / Bnet + COLL_BASE_LATENCY +
			   (62 - 6) * 2e-6 + 6 * 1.5e-6, 1e-12);
}

Test(coll, tree_latency_grows_with_log2_of_nodes)
{
	/* NCCL tree: 2·((r-1)·α_intra + log2(N)·α_inter): doubling the nodes adds 2·α_inter */
	struct coll_group g;
	struct coll_cost c;
	double prev = 0;
	int N;

	for (N = 2; N <= 64; N *= 2) {
		coll_group_make(&g, 8 * N, N, &nvl, &ib, 8, 1);
		coll_cost(COLL_ALLREDUCE, COLL_TREE, 0 + 1, &g, &c);
		if (N > 2)
			cr_expect_float_eq(c.latency - prev, 2 * 1.5e-6, 1e-15, "N = %d", N);
		prev = c.latency;
	}
	cr_expect_float_eq(prev, COLL_BASE_LATENCY + 2 * (7 * 2e-6 + 6 * 1.5e-6), 1e-15);
}

Test(coll, auto_picks_tree_for_small_and_ring_for_large_messages)
{
	/* 128 nodes: the tree's log-latency wins on small messages, the ring's
	 * bandwidth (2(n-1)/n vs the tree's 1/(0.5·0.9)) on large ones */
	struct coll_group g;
	struct coll_cost c;

	coll_group_make(&g, 1024, 128, &nvl, &ib, 8, 1);
	coll_cost(COLL_ALLREDUCE, COLL_AUTO, 1e4, &g, &c);
	cr_expect_eq(c.algo, COLL_TREE);
	coll_cost(COLL_ALLREDUCE, COLL_AUTO, 1e10, &g, &c);
	cr_expect_eq(c.algo, COLL_RING);
	coll_cost(COLL_ALLGATHER, COLL_AUTO, 1e4, &g, &c);
	cr_expect_eq(c.algo, COLL_RING, "NCCL has no tree all-gather");
}

Test(coll, hierarchical_is_three_phases)
{
	/* intra reduce-scatter (r-1)/r·S, inter all-reduce moving 2(N-1)/N·S per node,
	 * intra all-gather (r-1)/r·S */
	struct coll_group g;
	struct coll_cost c;
	double S = 1e9, Bi = 300e9 * 0.77, Bn = 2 * 25e9 * 0.96;

	coll_group_make(&g, 32, 4, &nvl, &ib, 2, 1);
	coll_cost(COLL_ALLREDUCE, COLL_HIER, S, &g, &c);
	cr_expect_eq(c.nphase, 3);
	cr_expect_float_eq(coll_time(&c), 2 * 7.0 / 8 * S / Bi + 2 * 3.0 / 4 * S / Bn +
			   3 * COLL_BASE_LATENCY + 2 * 7 * 2e-6 + 6 * 1.5e-6, 1e-12);
}

Test(coll, sharing_divides_the_nics)
{
	/* 8 data-parallel groups crossing a node share its NICs: 8x the inter time */
	struct coll_group g1, g8;
	struct coll_cost c1, c8;

	coll_group_make(&g1, 16, 16, &nvl, &ib, 8, 1);
	coll_group_make(&g8, 16, 16, &nvl, &ib, 8, 8);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e9, &g1, &c1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e9, &g8, &c8);
	cr_expect_float_eq(c8.ph[0].work[COLL_INTER], 8 * c1.ph[0].work[COLL_INTER], 1e-12);
	cr_expect_eq(c1.ph[0].work[COLL_INTRA], 0, "one rank per node: no NVLink hop");
}

/* ---- task-graph simulation ------------------------------------------------------------ */

Test(des, lone_allreduce_takes_its_formula_time)
{
	struct des d;
	struct coll_group g;
	struct coll_cost c;
	int s, t;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 2e9, &g, &c);
	s = des_stream(&d, 0, DES_COMM, "nccl");
	t = des_coll(&d, s, &c, 0, 0);
	cr_assert_eq(des_run(&d), 0);
	cr_expect_float_eq(d.tasks[t].end, 2 * 7.0 / 8 * 2e9 / (300e9 * 0.77) + COLL_BASE_LATENCY + 14 * 2e-6, 1e-12);
	cr_expect_float_eq(d.tot.exposed, d.tasks[t].end, 1e-12, "no compute: all of it exposed");
	des_delete(&d);
}

Test(des, overlapping_collectives_share_a_link)
{
	/* two equal all-reduces on the same NVLink at once: processor sharing gives
	 * each half the bandwidth, so both end at latency + 2 x the bandwidth time;
	 * a third on the NICs only is not slowed */
	struct des d;
	struct coll_group g, gi;
	struct coll_cost c, ci;
	int s1, s2, s3, a, b, x;
	double w;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_group_make(&gi, 4, 4, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e9, &g, &c);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e8, &gi, &ci);
	s1 = des_stream(&d, 0, DES_COMM, "a");
	s2 = des_stream(&d, 0, DES_COMM, "b");
	s3 = des_stream(&d, 0, DES_COMM, "c");
	a = des_coll(&d, s1, &c, 0, 0);
	b = des_coll(&d, s2, &c, 0, 0);
	x = des_coll(&d, s3, &ci, 0, 0);
	cr_assert_eq(des_run(&d), 0);
	w = c.ph[0].work[COLL_INTRA];
	cr_expect_float_eq(d.tasks[a].end, c.latency + 2 * w, 1e-12);
	cr_expect_float_eq(d.tasks[b].end, c.latency + 2 * w, 1e-12);
	cr_expect_float_eq(d.tasks[x].end, coll_time(&ci), 1e-12);
	des_delete(&d);
}

Test(des, sharing_ends_when_one_finishes)
{
	/* a small and a large all-reduce start together: while both run each gets
	 * half; after the small one ends the large one gets the whole link back:
	 * end = L + w_small·2 + (w_large - w_small) */
	struct des d;
	struct coll_group g;
	struct coll_cost cs, cl;
	int s1, s2, a, b;
	double ws, wl;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e8, &g, &cs);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e9, &g, &cl);
	s1 = des_stream(&d, 0, DES_COMM, "a");
	s2 = des_stream(&d, 0, DES_COMM, "b");
	a = des_coll(&d, s1, &cs, 0, 0);
	b = des_coll(&d, s2, &cl, 0, 0);
	cr_assert_eq(des_run(&d), 0);
	ws = cs.ph[0].work[COLL_INTRA];
	wl = cl.ph[0].work[COLL_INTRA];
	cr_expect_float_eq(d.tasks[a].end, cs.latency + 2 * ws, 1e-12);
	cr_expect_float_eq(d.tasks[b].end, cl.latency + 2 * ws + (wl - ws), 1e-12);
	des_delete(&d);
}

Test(des, compute_slows_while_a_collective_moves_data)
{
	/* a 2 s kernel; a collective issued after a 1 s host task: from 1 s + its
	 * latency L to the end of its bandwidth phase (W long) the kernel advances
	 * at 1/slow, so it ends W (1 - 1/slow) late; a kernel starting while the
	 * collective runs takes slow x its time until the collective ends */
	struct des d;
	struct coll_group g;
	struct coll_cost c;
	int gs, hs, cs, k, h, x, k2, gs2;
	double W, slow = 1.25;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 5e10, &g, &c);
	W = c.ph[0].work[COLL_INTRA];
	cr_assert_lt(c.latency + W, 0.9, "the collective ends inside the kernel");
	d.slow = slow;
	gs = des_stream(&d, 0, DES_COMPUTE, "gpu");
	gs2 = des_stream(&d, 0, DES_COMPUTE, "gpu 2");
	hs = des_stream(&d, 0, DES_CPU, "host");
	cs = des_stream(&d, 0, DES_COMM, "nccl");
	k = des_work(&d, gs, 2.0, 0, 0);
	h = des_work(&d, hs, 1.0, 0, 0);
	x = des_coll(&d, cs, &c, 0, 0);
	cr_assert_eq(des_dep(&d, h, x), 0);
	k2 = des_work(&d, gs2, 0.1, 0, 0);
	cr_assert_eq(des_dep(&d, h, k2), 0);  /* starts with the collective's latency */
	cr_assert_eq(des_run(&d), 0);
	cr_expect_float_eq(d.tasks[x].end, 1.0 + c.latency + W, 1e-12, "the collective is not slowed");
	cr_expect_float_eq(d.tasks[k].end, 2.0 + W * (1 - 1 / slow), 1e-12);
	/* k2 starts at 1 s before the bandwidth phase: L at full speed, the rest slowed */
	cr_expect_float_eq(d.tasks[k2].end, 1.0 + c.latency + (0.1 - c.latency) * slow, 1e-12);
	des_delete(&d);
}

Test(des, back_to_back_collectives_keep_the_slowdown)
{
	/* two collectives in a row on one NCCL stream: the second starts as the
	 * first ends, so its latency does not lift the slowdown; a 10 s kernel
	 * loses W1 + L2 + W2 scaled by (1 - 1/slow) from the first bandwidth phase
	 * to the second's end */
	struct des d;
	struct coll_group g;
	struct coll_cost c;
	int gs, cs, k, x1, x2;
	double W, slow = 1.5;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 5e10, &g, &c);
	W = c.ph[0].work[COLL_INTRA];
	d.slow = slow;
	gs = des_stream(&d, 0, DES_COMPUTE, "gpu");
	cs = des_stream(&d, 0, DES_COMM, "nccl");
	k = des_work(&d, gs, 10.0, 0, 0);
	x1 = des_coll(&d, cs, &c, 0, 0);
	x2 = des_coll(&d, cs, &c, 0, 0);
	cr_assert_eq(des_run(&d), 0);
	cr_expect_float_eq(d.tasks[x2].end, 2 * (c.latency + W), 1e-12);
	cr_expect_float_eq(d.tasks[k].end, 10 + (W + c.latency + W) * (1 - 1 / slow), 1e-12);
	(void)x1;
	des_delete(&d);
}

Test(des, stream_order_and_dependencies)
{
	/* compute 1 s then 2 s on one stream; a copy waiting for the first kernel;
	 * exposure counts only time when a collective runs and compute is idle */
	struct des d;
	struct coll_group g;
	struct coll_cost c;
	int gs, cs, k1, k2, x;

	cr_assert_eq(des_create(&d), 0);
	coll_group_make(&g, 8, 1, &nvl, &ib, 1, 1);
	coll_cost(COLL_ALLREDUCE, COLL_RING, 1e12, &g, &c);  /* about 7.6 s */
	gs = des_stream(&d, 0, DES_COMPUTE, "gpu");
	cs = des_stream(&d, 0, DES_COMM, "nccl");
	k1 = des_work(&d, gs, 1.0, 0, 0);
	k2 = des_work(&d, gs, 2.0, 0, 0);
	x = des_coll(&d, cs, &c, 0, 0);
	cr_assert_eq(des_dep(&d, k1, x), 0);
	cr_assert_eq(des_run(&d), 0);
	cr_expect_float_eq(d.tasks[k2].start, 1.0, 1e-12);
	cr_expect_float_eq(d.tasks[x].start, 1.0, 1e-12);
	cr_expect_float_eq(d.tot.comm, coll_time(&c), 1e-9);
	/* the collective overlaps k2 for 2 s: the rest is exposed */
	cr_expect_float_eq(d.tot.exposed, coll_time(&c) - 2.0, 1e-9);
	cr_expect_float_eq(d.tot.makespan, 1.0 + coll_time(&c), 1e-9);
	des_delete(&d);
}

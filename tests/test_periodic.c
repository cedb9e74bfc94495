/*
 * test_periodic.c — property tests of the periodic shortcuts (issue 16): a
 * transformer's repeated blocks evaluated once and extended must give what the
 * full evaluation gives, on random models, strategies, frameworks and batch
 * sizes.
 *
 *  - memory (memrun.h): the peak, the breakdown at it, the maxima of mem_detail
 *    and the largest micro-batch, from a tape's periodic runs in closed form,
 *    equal those of the same tape read event by event (one literal run), byte
 *    for byte: the expected values are the full walk's, computed here; the
 *    search's linear bound equals its definition applied to every event.
 *
 * The random cases come from a fixed seed, so a failure repeats; each names
 * its model file and settings.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "memory.h"
#include "memrun.h"
#include "predict.h"
#include "profile.h"

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int pick(uint64_t *s, int n)
{
	return (int)(rng_next(s) % (uint64_t)n);
}

/* A random model file: a decoder (GPT-2 or Llama style), an encoder (BERT
 * style) or an encoder-decoder (T5 style) of 2 to 24 blocks. */
static void random_model(uint64_t *s, const char *path, char *what, size_t nwhat)
{
	static const int hid[] = {64, 128, 256, 512, 768, 1024};
	static const int vocab[] = {256, 1000, 32000, 50257};
	static const char *const act[] = {"gelu", "relu", "swiglu", "gated_gelu"};
	int fam = pick(s, 6), layers = 2 + pick(s, 23), h = hid[pick(s, 6)], heads = 1 << pick(s, 4);
	int llama = pick(s, 2), kv = heads >> pick(s, 2);
	FILE *f = fopen(path, "w");

	cr_assert(f);
	fam = fam < 4 ? 0 : fam == 4 ? 1 : 2;  /* mostly decoders */
	if (kv < 1)
		kv = 1;
	fprintf(f, "[model]\nfamily = %s\nvocab_size = %d\nhidden = %d\nlayers = %d\nencoder_layers = %d\n",
		fam == 0 ? "decoder" : fam == 1 ? "encoder" : "encoder_decoder", vocab[pick(s, 4)], h, layers,
		fam == 2 ? 1 + pick(s, 12) : 0);
	fprintf(f, "heads = %d\nkv_heads = %d\nhead_dim = %d\nffn = %d\nactivation = %s\n", heads,
		fam == 0 && llama ? kv : heads, h / heads, (2 + pick(s, 3)) * h, fam == 0 && llama ? "swiglu" :
		act[pick(s, 4)]);
	fprintf(f, "norm = %s\npositions = %s\nmax_positions = 4096\nrelative_buckets = %d\n",
		fam == 2 || (fam == 0 && llama) ? "rmsnorm" : "layernorm",
		fam == 2 ? "relative" : fam == 0 && llama ? "rotary" : "learned", fam == 2 ? 32 : 0);
	fprintf(f, "qkv_bias = %s\nout_bias = %s\nmlp_bias = %s\nlm_head_bias = false\ntied_embeddings = %s\n",
		pick(s, 2) ? "true" : "false", pick(s, 2) ? "true" : "false", pick(s, 2) ? "true" : "false",
		pick(s, 2) ? "true" : "false");
	fprintf(f, "type_vocab = %d\nembed_norm = %s\npooler = %s\nfinal_norm = true\ndropout = %s\n",
		fam == 1 ? 2 : 0, fam == 1 ? "true" : "false", fam == 1 ? "true" : "false",
		pick(s, 2) ? "0.1" : "0.0");
	fclose(f);
	snprintf(what, nwhat, "%s %d blocks, hidden %d, %d heads", fam == 0 ? "decoder" : fam == 1 ? "encoder" :
		 "encoder-decoder", layers, h, heads);
}

/* Random training settings as --set overrides into sets (of at most 16). */
static int random_settings(uint64_t *s, const char *model, char buf[16][160], const char **sets)
{
	static const char *const strat[] = {"single", "dp", "ddp", "zero1", "zero2", "zero3", "fsdp"};
	static const char *const shard[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
					    "hybrid_shard_zero2"};
	static const char *const fw[] = {"pytorch", "deepspeed", "shardcast"};
	static const char *const prec[] = {"fp32", "bf16", "fp16"};
	static const char *const ckpt[] = {"none", "selective", "full"};
	static const char *const off[] = {"none", "optimizer", "optimizer_and_params"};
	static const char *const attn[] = {"default", "eager", "sdpa"};
	int n = 0, st = pick(s, 7), gpn = st == 0 ? 1 : 1 << pick(s, 4);

	snprintf(buf[n++], 160, "model.name=%s", model);
	snprintf(buf[n++], 160, "model.seq_len=%d", 64 << pick(s, 5));
	snprintf(buf[n++], 160, "cluster.gpus_per_node=%d", gpn);
	snprintf(buf[n++], 160, "cluster.nodes=%d", st == 0 ? 1 : 1 << pick(s, 3));
	snprintf(buf[n++], 160, "cluster.gpu_memory=%dGiB", 4 << pick(s, 5));
	snprintf(buf[n++], 160, "training.strategy=%s", strat[st]);
	snprintf(buf[n++], 160, "training.fsdp_sharding_strategy=%s", shard[pick(s, 5)]);
	snprintf(buf[n++], 160, "training.fsdp_auto_wrap_policy=%s", pick(s, 4) ? "transformer_based_wrap" :
		 "size_based_wrap");
	snprintf(buf[n++], 160, "training.framework=%s", fw[pick(s, 3)]);
	snprintf(buf[n++], 160, "training.precision=%s", prec[pick(s, 3)]);
	snprintf(buf[n++], 160, "training.activation_checkpointing=%s", ckpt[pick(s, 3)]);
	snprintf(buf[n++], 160, "training.offload=%s", off[pick(s, 4) ? 0 : 1 + pick(s, 2)]);
	snprintf(buf[n++], 160, "training.tensor_parallel=%d", gpn >= 2 && pick(s, 3) == 0 ? 2 : 1);
	snprintf(buf[n++], 160, "training.grad_accum=%d", pick(s, 3) ? 1 : 4);
	snprintf(buf[n++], 160, "training.attention=%s", attn[pick(s, 3)]);
	for (int i = 0; i < n; i++)
		sets[i] = buf[i];
	return n;
}

/* A scenario file naming the cluster's device; the model and the rest come as
 * overrides. */
static void write_scenario(const char *path)
{
	FILE *f = fopen(path, "w");

	cr_assert(f);
	fputs("[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\nmicro_batch = 1\n", f);
	fclose(f);
}

/* Plan flat, built apart from the plan it is compared with (an emulator of
 * its own: no replay remembered by the other answers for it), with every
 * tape read as one literal run: the full evaluation. Its own runs are kept in
 * kept[] for unflatten. */
static void flatten(struct mem_plan *flat, struct mem_run one[2], struct mem_tape kept[2])
{
	int t;

	for (t = 0; t < flat->ntapes; t++) {
		kept[t] = flat->tape[t];
		one[t] = (struct mem_run){0, flat->tape[t].n, 1, 0};
		flat->tape[t].run = &one[t];
		flat->tape[t].nrun = 1;
	}
}

/* flat's own runs back, so that mem_plan_free frees them. */
static void unflatten(struct mem_plan *flat, const struct mem_tape kept[2])
{
	int t;

	for (t = 0; t < flat->ntapes; t++) {
		flat->tape[t].run = kept[t].run;
		flat->tape[t].nrun = kept[t].nrun;
	}
}

/* mem_linear_bound by its definition, event by event: -1 when the fixed bytes
 * live after some event exceed cap, else the least floor((cap - fixed) /
 * per_sample) over the events with per-sample bytes live, at most 2^40. */
static int64_t bound_by_events(const struct mem_tape *t, int64_t cap)
{
	int64_t f = 0, ps = 0, ub = (int64_t)1 << 40;
	int i;

	for (i = 0; i < t->n; i++) {
		f += t->ev[i].sign * t->ev[i].fixed;
		ps += t->ev[i].sign * t->ev[i].per_sample;
		if (f > cap)
			return -1;
		if (ps > 0 && (cap - f) / ps < ub)
			ub = (cap - f) / ps;
	}
	return ub;
}

/* mem_linear_bound of plan p's tape t (read over its periodic runs) against
 * bound_by_events at the device's capacity and at capacities around the
 * tape's most fixed bytes (where the answer goes from -1 to a count of
 * samples), so that both the fit test and the divisions are checked. Returns
 * how many of them gave an answer of at least one sample. */
static int expect_same_bound(struct mem_plan *p, int t, const char *why)
{
	const struct mem_tape *tp = &p->tape[t];
	int64_t f = 0, most = 0, caps[6], keep = p->capacity, got, want;
	int i, some = 0;

	for (i = 0; i < tp->n; i++) {
		f += tp->ev[i].sign * tp->ev[i].fixed;
		most = f > most ? f : most;
	}
	caps[0] = keep;
	caps[1] = most - 1;
	caps[2] = most;
	caps[3] = most + (1 << 20);
	caps[4] = most + ((int64_t)1 << 30);
	caps[5] = 2 * most + ((int64_t)8 << 30);
	for (i = 0; i < 6; i++) {
		p->capacity = caps[i];
		got = mem_linear_bound(p, t);
		want = bound_by_events(tp, caps[i]);
		cr_expect_eq(got, want, "%s tape %d capacity %lld: bound %lld, by every event %lld", why, t,
			     (long long)caps[i], (long long)got, (long long)want);
		some += want >= 1;
	}
	p->capacity = keep;
	return some;
}

static void expect_same_detail(const struct mem_detail *a, const struct mem_detail *d, const char *why)
{
	int w;

	cr_expect_eq(a->peak, d->peak, "%s: peak %lld vs %lld", why, (long long)a->peak, (long long)d->peak);
	cr_expect_eq(a->event, d->event, "%s: event %d vs %d", why, a->event, d->event);
	cr_expect_eq(a->slack, d->slack, "%s: slack", why);
	cr_expect_eq(a->op, d->op, "%s: op", why);
	cr_expect_eq(a->phase, d->phase, "%s: phase", why);
	cr_expect_eq(a->states_peak, d->states_peak, "%s: states_peak", why);
	cr_expect_eq(a->states_setup, d->states_setup, "%s: states_setup", why);
	cr_expect_eq(a->tensors, d->tensors, "%s: tensors %lld vs %lld", why, (long long)a->tensors,
		     (long long)d->tensors);
	cr_expect_eq(a->tensor_phase, d->tensor_phase, "%s: tensor_phase", why);
	for (w = 0; w < MEM_NCAT; w++)
		cr_expect_eq(a->live[w], d->live[w], "%s: live[%d]", why, w);
	for (w = 0; w < W_NWHAT; w++) {
		cr_expect_eq(a->what[w], d->what[w], "%s: what[%d]", why, w);
		cr_expect_eq(a->what_peak[w], d->what_peak[w], "%s: what_peak[%d]", why, w);
	}
}

/* Random tapes of literal and periodic runs (copies repeat the first copy's
 * signed sizes), whose running per-sample and fixed sums may go down as well
 * as up, so the copies where per-sample bytes are live form every kind of
 * interval (from the first copy, up to the last, none, all): the bound read
 * over the runs against its definition over every event, at random
 * capacities. */
Test(periodic, linear_bound_of_random_runs)
{
	enum { MAXEV = 400 };
	struct mem_event ev[MAXEV];
	struct mem_run run[40];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	int trial, some = 0, nonemp = 0;

	for (trial = 0; trial < 20000; trial++) {
		struct mem_plan p;
		int n = 0, nrun = 0, len, reps, j, k;
		int64_t got, want;

		memset(&p, 0, sizeof p);
		while (nrun < 40) {
			len = 1 + pick(&seed, 4);
			reps = pick(&seed, 3) ? 1 + pick(&seed, 12) : 1;
			if (n + len * reps > MAXEV)
				break;
			for (j = 0; j < len; j++) {
				memset(&ev[n + j], 0, sizeof ev[n + j]);
				ev[n + j].sign = (int8_t)(pick(&seed, 3) ? 1 : -1);
				ev[n + j].fixed = pick(&seed, 4) ? pick(&seed, 1000) : 0;
				ev[n + j].per_sample = pick(&seed, 2) ? pick(&seed, 20) : 0;
				ev[n + j].pooled = 1;
				ev[n + j].op = -1;
			}
			for (k = 1; k < reps; k++)
				memcpy(&ev[n + k * len], &ev[n], (size_t)len * sizeof ev[0]);
			run[nrun++] = (struct mem_run){n, len, reps, 0};
			n += len * reps;
		}
		p.ntapes = 1;
		p.tape[0].ev = ev;
		p.tape[0].n = n;
		p.tape[0].run = run;
		p.tape[0].nrun = nrun;
		for (j = 0, got = 0, want = 0; j < n; j++) {  /* want: the most fixed bytes live */
			got += ev[j].sign * ev[j].fixed;
			want = got > want ? got : want;
		}
		p.capacity = want - 500 + pick(&seed, 5000);  /* a tenth below it: -1 */
		got = mem_linear_bound(&p, 0);
		want = bound_by_events(&p.tape[0], p.capacity);
		cr_expect_eq(got, want, "trial %d: bound %lld, by every event %lld", trial, (long long)got,
			     (long long)want);
		some += want >= 0 && want < ((int64_t)1 << 40);
		nonemp += want == -1;
	}
	cr_log_info("linear bound: %d of 20000 random tapes bounded by a count, %d not fitting", some, nonemp);
	/* coverage, not the result: with this seed 17,805 tapes are bounded by a
	 * count and 2,022 do not fit; far fewer would mean the generator changed */
	cr_expect_geq(some, 10000);
	cr_expect_geq(nonemp, 1000);
}

/* mem_detail and mem_detail_peak of plans p and q, tape t at micro-batch b, alike. */
static void expect_same_at(const struct mem_plan *p, const struct mem_plan *q, int t, int64_t b, const char *why)
{
	struct mem_detail a, d;

	mem_detail(p, t, b, &a);
	mem_detail(q, t, b, &d);
	expect_same_detail(&a, &d, why);
	mem_detail_peak(p, t, b, &a);
	mem_detail_peak(q, t, b, &d);
	expect_same_detail(&a, &d, why);
}

/* The micro-batches each memory comparison reads. */
static const int64_t run_bs[] = {0, 1, 2, 3, 7, 16, 61};

/* Scenario scen with sets[0..n) (why names it): the closed form over its
 * periodic runs against the event-by-event reading of the same tape, at
 * run_bs's micro-batches (peaks, details, the max batch). Returns -1 when the
 * loader or the graph refuses the settings, else the events the runs cover
 * (reps > 1); *bounded counts the tapes with a linear bound of a sample or
 * more, *events the tapes' events. */
static int same_as_full_tape(const char *scen, const char *const *sets, int n, const char *why, int *bounded,
			     int *events)
{
	struct scenario s;
	struct graph g;
	struct graph_opts o;
	struct fw_profile pf;
	struct mem_plan p, flat;
	struct mem_run one[2];
	struct mem_tape kept[2];
	struct err e = {0};
	int covered = 0, t, k, bind, bind2;

	if (scenario_load(&s, scen, sets, n, &e)) {
		scenario_free(&s);  /* scenario.h: freed after a failed load too */
		return -1;  /* not a valid setting (offload without sharding...) */
	}
	cr_assert_eq(plan_profile_load(&s, &pf, &e), 0, "%s", e.msg);
	predict_graph_opts(&s, &o);
	if (graph_build(&g, &s.model, &o, &e)) {  /* tp must divide the heads... */
		graph_free(&g);
		scenario_free(&s);
		return -1;
	}
	cr_assert_eq(mem_plan_build(&p, &s, &g, &pf, &e), 0, "%s", e.msg);
	cr_assert_eq(mem_plan_build(&flat, &s, &g, &pf, &e), 0, "%s", e.msg);
	flatten(&flat, one, kept);
	*events = 0;
	for (t = 0; t < p.ntapes; t++) {
		*events += p.tape[t].n;
		for (k = 0; k < p.tape[t].nrun; k++)
			if (p.tape[t].run[k].reps > 1)
				covered += p.tape[t].run[k].len * p.tape[t].run[k].reps;
		*bounded += expect_same_bound(&p, t, why) > 0;
		for (k = 0; k < (int)(sizeof run_bs / sizeof run_bs[0]); k++) {
			cr_expect_eq(mem_peak(&p, t, run_bs[k]), mem_peak(&flat, t, run_bs[k]), "%s b=%lld", why,
				     (long long)run_bs[k]);
			expect_same_at(&p, &flat, t, run_bs[k], why);
		}
	}
	cr_expect_eq(mem_max_batch(&p, &bind), mem_max_batch(&flat, &bind2), "%s: max batch", why);
	cr_expect_eq(bind, bind2, "%s: binding tape", why);
	unflatten(&flat, kept);
	mem_plan_free(&flat);
	mem_plan_free(&p);
	graph_free(&g);
	scenario_free(&s);
	return covered;
}

/* 300 random configurations (those the loader accepts), each at several
 * micro-batches: the closed form over periodic runs against the event-by-event
 * reading of the same tape. At least half of the tapes must have periodic runs
 * covering most of their events, and half a linear bound of a sample or more
 * at some capacity, or the test would check nothing. */
Test(periodic, memory_runs_match_full_tape, .timeout = 120)
{
	char model[96], scen[96], what[96], why[600], buf[16][160];
	const char *sets[16];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int cases = 0, periodic = 0, bounded = 0, i, n, k, covered, events;

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-model.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i < 300; i++) {
		random_model(&seed, model, what, sizeof what);
		n = random_settings(&seed, model, buf, sets);
		snprintf(why, sizeof why, "case %d: %s;", i, what);
		for (k = 1; k < n; k++)
			snprintf(why + strlen(why), sizeof why - strlen(why), " %s", sets[k]);
		if ((covered = same_as_full_tape(scen, sets, n, why, &bounded, &events)) < 0)
			continue;
		cases++;
		periodic += 2 * covered > events;
	}
	remove(model);
	remove(scen);
	cr_log_info("memory: %d valid random settings, %d tapes mostly periodic runs, %d with a linear bound of a sample or more",
		    cases, periodic, bounded);
	cr_expect_geq(cases, 100, "only %d of 300 random settings were valid", cases);
	cr_expect_geq(2 * periodic, cases, "only %d of %d tapes were mostly periodic runs", periodic, cases);
	cr_expect_geq(2 * bounded, cases, "only %d of %d tapes had a bound of a sample or more", bounded, cases);
}

/* Model file path rewritten with layers blocks (decoder or encoder) and
 * encoder-decoder layers capped at that; what says so. */
static void deepen(const char *path, int layers, char *what, size_t nwhat)
{
	char text[2048], out[2200], *line, *save = NULL;
	size_t len;
	FILE *f = fopen(path, "r");

	cr_assert(f);
	len = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[len] = '\0';
	out[0] = '\0';
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "layers = ", 9) == 0)
			snprintf(out + strlen(out), sizeof out - strlen(out), "layers = %d\n", layers);
		else
			snprintf(out + strlen(out), sizeof out - strlen(out), "%s\n", line);
	}
	f = fopen(path, "w");
	cr_assert(f);
	fputs(out, f);
	fclose(f);
	snprintf(what + strlen(what), nwhat - strlen(what), " -> %d blocks", layers);
}

/* The caching allocator's replays with a periodic run's copies made at once
 * (emu.c emu_skip: the free blocks of a period's start cut as the period
 * read cut them, its segments made again, its blocks pushed) answer as
 * replays through every event (mem_plan.whole_replays, a plan of its own, so
 * that no replay remembered by one answers for the other): the largest
 * micro-batch, the peak and the breakdown at it (mem_detail, mem_detail_peak:
 * reserved bytes, the event, every category and label) at micro-batches below,
 * at and above it, on random models and settings under devices of 4 to 64
 * GiB, and on the shipped GPT-3 175B bench scenario (96 blocks, checkpointed).
 * With this seed 327 of the 500 random settings are valid and 28 of them made
 * copies at once, 5,921 copies in all, and the bench scenario 684 over its
 * search and breakdowns (measured when written); the floors (20 cases, 500
 * copies, 76 for the bench: one replay's forward, 19 periods of 4 copies)
 * fail only a test that no longer exercises the extension. */
/* Scenario s (why names it): the allocator's emulation with its periodic
 * runs' copies made at once against one replaying every event
 * (mem_plan.whole_replays): the max batch and its binding tape, and the
 * details and peaks around it. Returns the copies made at once, or -1 when
 * the graph refuses the settings. s is freed. */
static long same_as_whole_replays(struct scenario *s, const char *why)
{
	struct graph g;
	struct graph_opts o;
	struct fw_profile pf;
	struct mem_plan p, w;
	struct mem_emu_counts kp;
	struct err e = {0};
	int64_t mp, mw, bs[8];
	int t, k, bp, bw;

	cr_assert_eq(plan_profile_load(s, &pf, &e), 0, "%s", e.msg);
	predict_graph_opts(s, &o);
	if (graph_build(&g, &s->model, &o, &e)) {
		graph_free(&g);
		scenario_free(s);
		return -1;
	}
	cr_assert_eq(mem_plan_build(&p, s, &g, &pf, &e), 0, "%s", e.msg);
	cr_assert_eq(mem_plan_build(&w, s, &g, &pf, &e), 0, "%s", e.msg);
	w.whole_replays = 1;
	mp = mem_max_batch(&p, &bp);
	mw = mem_max_batch(&w, &bw);
	cr_expect_eq(mp, mw, "%s: max batch %lld, through every event %lld", why, (long long)mp, (long long)mw);
	cr_expect_eq(bp, bw, "%s: binding tape", why);
	bs[0] = 1, bs[1] = 2, bs[2] = 7, bs[3] = mw, bs[4] = mw + 1, bs[5] = mw > 1 ? mw - 1 : 3;
	bs[6] = 2 * mw + 5, bs[7] = 61;
	for (t = 0; t < p.ntapes && !p.unfit; t++)
		for (k = 0; k < 8; k++) {
			if (bs[k] < 1)
				continue;
			expect_same_at(&p, &w, t, bs[k], why);
		}
	mem_emu_counts(&p, &kp);
	mem_plan_free(&p);
	mem_plan_free(&w);
	graph_free(&g);
	scenario_free(s);
	return kp.skipped;
}

Test(periodic, allocator_periods_match_whole_replays, .timeout = 300)
{
	char model[96], scen[96], what[96], why[700], buf[16][160];
	const char *sets[16];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	long made = 0, bench = 0, x;
	int cases = 0, with = 0, i, n, k;

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-model.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i <= 500; i++) {  /* 500 random cases, then the bench scenario */
		struct scenario s;
		struct err e = {0};

		if (i < 500) {
			random_model(&seed, model, what, sizeof what);
			deepen(model, 24 + pick(&seed, 73), what, sizeof what);
			n = random_settings(&seed, model, buf, sets);
			if (scenario_load(&s, scen, sets, n, &e)) {
				scenario_free(&s);
				continue;
			}
			snprintf(why, sizeof why, "case %d: %s;", i, what);
			for (k = 1; k < n; k++)
				snprintf(why + strlen(why), sizeof why - strlen(why), " %s", sets[k]);
		} else {
			cr_assert_eq(scenario_load(&s, "bench/gpt3-175b-3072.ini", NULL, 0, &e), 0, "%s", e.msg);
			snprintf(why, sizeof why, "bench/gpt3-175b-3072.ini");
		}
		if ((x = same_as_whole_replays(&s, why)) < 0)
			continue;
		if (i < 500) {
			cases++;
			with += x > 0;
			made += x;
		} else {
			bench = x;
		}
	}
	remove(model);
	remove(scen);
	cr_log_info("allocator: %d valid random settings, %d with copies made at once, %ld copies; the bench %ld",
		    cases, with, made, bench);
	cr_expect_geq(with, 20, "only %d of %d cases made copies at once", with, cases);
	cr_expect_geq(made, 500, "only %ld copies made at once", made);
	cr_expect_geq(bench, 76, "the bench scenario's forward: %ld copies made at once", bench);
}

/* Gradient accumulation without gradient sync (training.no_sync = true: FSDP1's
 * no_sync(), FSDP2's set_requires_gradient_sync(False)), which the random
 * settings above never draw: the unsharded gradients kept and, under FSDP2,
 * cast to the reduce dtype as they land, the tied tables' held gradients and
 * sums included (memstrat.c accum_cast), must read the same in closed form as
 * event by event, and the allocator's emulation the same as through every
 * event (none of these makes a copy at once today: each FSDP unit's forward
 * frees the previous unit's gathered parameters, README (30)(c); the check
 * holds for when one does). GPT-2 (a tied table) and Llama-2-7B, two and three
 * micro-steps, FSDP1 full_shard and shard_grad_op, FSDP2 with reduce_dtype
 * default and bf16, on 8 x 80 GiB and 8 x 16 GiB (GPT-2 fits 10 samples there,
 * Llama-2-7B none). */
Test(periodic, runs_and_allocator_periods_without_gradient_sync, .timeout = 120)
{
	static const char *const models[] = {"model.name=gpt2", "model.name=llama-2-7b"};
	static const char *const ways[][2] = {
		{"training.fsdp_version=1", "training.fsdp_sharding_strategy=full_shard"},
		{"training.fsdp_version=1", "training.fsdp_sharding_strategy=shard_grad_op"},
		{"training.fsdp_version=2", "training.fsdp_reduce_dtype=default"},
		{"training.fsdp_version=2", "training.fsdp_reduce_dtype=bf16"},
	};
	char scen[96], why[400], ga[32], mem[40];
	const char *sets[9];
	struct scenario s;
	struct err e = {0};
	int m, w, k, q, covered, events, bounded = 0, cases = 0, periodic = 0;

	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-ns-%d.ini", (int)getpid());
	write_scenario(scen);
	for (m = 0; m < 2; m++)
		for (w = 0; w < 4; w++)
			for (k = 2; k <= 3; k++)
				for (q = 0; q < 2; q++) {
					snprintf(ga, sizeof ga, "training.grad_accum=%d", k);
					snprintf(mem, sizeof mem, "cluster.gpu_memory=%dGiB", q ? 16 : 80);
					sets[0] = models[m];
					sets[1] = "training.strategy=fsdp";
					sets[2] = "training.precision=bf16";
					sets[3] = "cluster.gpus_per_node=8";
					sets[4] = "training.no_sync=true";
					sets[5] = ways[w][0];
					sets[6] = ways[w][1];
					sets[7] = ga;
					sets[8] = mem;
					snprintf(why, sizeof why, "%s %s %s %s %s", models[m], ways[w][0], ways[w][1], ga, mem);
					covered = same_as_full_tape(scen, sets, 9, why, &bounded, &events);
					cr_assert_geq(covered, 0, "%s: refused", why);
					cases++;
					periodic += 2 * covered > events;
					cr_assert_eq(scenario_load(&s, scen, sets, 9, &e), 0, "%s", e.msg);
					cr_assert_geq(same_as_whole_replays(&s, why), 0, "%s", why);
				}
	remove(scen);
	/* every tape is mostly periodic runs (the blocks), or the closed form
	 * was not what ran */
	cr_expect_eq(periodic, cases, "%d of %d tapes mostly periodic runs", periodic, cases);
}

/* Whether plan p's runs are those of plan f, tape by tape. */
static int same_runs(const struct mem_plan *p, const struct mem_plan *f)
{
	int t;

	if (p->ntapes != f->ntapes)
		return 0;
	for (t = 0; t < p->ntapes; t++)
		if (p->tape[t].nrun != f->tape[t].nrun ||
		    memcmp(p->tape[t].run, f->tape[t].run, (size_t)f->tape[t].nrun * sizeof *f->tape[t].run))
			return 0;
	return 1;
}

/* memrun_again (memrun.h): a plan rebuilt keeps the runs of the tape it
 * replaced when the new events are those events, field for field, and finds
 * them afresh otherwise. On random models and settings, one plan rebuilt for
 * a scenario, the same scenario again, the scenario in another precision (the
 * same events in number, other sizes, as often as not) and back must hold
 * the runs of a plan built fresh for each. Whether it kept or found them is
 * seen by marking the runs kept (a period of 1,000 more copies): the mark
 * must survive a rebuild for the same events and never one for others.
 * Measured with this seed: 43 of the 60 random settings valid in both
 * precisions, the runs kept in all 43, 3 of the other precisions with as many
 * events; the floors asserted (20 valid, kept in half, one such precision)
 * fail only a test that no longer exercises what it checks. */
Test(periodic, runs_kept_for_the_same_tape, .timeout = 120)
{
	char model[96], scen[96], what[96], buf[16][160];
	const char *sets[16];
	uint64_t seed = 0x51ed270b27f3c2a1ull;
	int cases = 0, kept = 0, counted = 0, i, n, k, t;
	struct mem_plan p;

	memset(&p, 0, sizeof p);
	snprintf(model, sizeof model, "/tmp/shardcast-again-%d-model.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-again-%d.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i < 60; i++) {
		struct scenario s[2];
		struct graph g[2];
		struct graph_opts o;
		struct fw_profile pf[2];
		struct mem_plan f[2];
		struct err e = {0};
		int loaded = 0, x;

		random_model(&seed, model, what, sizeof what);
		n = random_settings(&seed, model, buf, sets);
		for (x = 0; x < 2 && loaded == x; x++) {  /* the settings, then in another precision */
			if (x == 1)
				for (k = 0; k < n; k++)
					if (!strncmp(buf[k], "training.precision=", 19))
						snprintf(buf[k], 160, "training.precision=%s", strstr(buf[k], "fp32") ? "bf16" : "fp32");
			if (scenario_load(&s[x], scen, sets, n, &e)) {
				scenario_free(&s[x]);  /* scenario.h: freed after a failed load too */
				continue;  /* not a valid setting (offload without sharding...) */
			}
			cr_assert_eq(plan_profile_load(&s[x], &pf[x], &e), 0, "%s", e.msg);
			predict_graph_opts(&s[x], &o);
			if (graph_build(&g[x], &s[x].model, &o, &e)) {  /* tp must divide the heads... */
				graph_free(&g[x]);
				scenario_free(&s[x]);
				continue;
			}
			cr_assert_eq(mem_plan_build(&f[x], &s[x], &g[x], &pf[x], &e), 0, "%s", e.msg);
			loaded++;
		}
		if (loaded < 2) {
			for (x = 0; x < loaded; x++) {
				mem_plan_free(&f[x]);
				graph_free(&g[x]);
				scenario_free(&s[x]);
			}
			continue;
		}
		for (x = 0; x < 4; x++) {  /* s0, s0, s1, s0 */
			int y = x == 2;
			cr_assert_eq(mem_plan_rebuild(&p, &s[y], &g[y], &pf[y], &e), 0, "%s", e.msg);
			cr_expect(same_runs(&p, &f[y]), "case %d (%s) step %d: runs not a fresh plan's", i, what, x);
		}
		/* marked, then rebuilt for the same events: kept; for the other
		 * precision: found again (the mark gone) */
		for (x = 0; x < 2; x++) {
			int y = x, marked = 0, left = 0;
			for (t = 0; t < p.ntapes; t++)
				if (p.tape[t].nrun > 0) {
					p.tape[t].run[0].reps += 1000;
					marked++;
				}
			cr_assert_eq(mem_plan_rebuild(&p, &s[y], &g[y], &pf[y], &e), 0, "%s", e.msg);
			for (t = 0; t < p.ntapes; t++)
				left += p.tape[t].nrun > 0 && p.tape[t].run[0].reps >= 1000;
			if (y == 0) {
				cr_expect_eq(left, marked, "case %d (%s): the same events, runs not kept", i, what);
				kept += left > 0;
			} else {
				counted += p.tape[0].pn == p.tape[0].n;  /* as many events: the comparison decided */
				cr_expect_eq(left, 0, "case %d (%s): other events, marked runs kept", i, what);
				cr_expect(same_runs(&p, &f[1]), "case %d (%s): runs not a fresh plan's", i, what);
			}
		}
		cases++;
		for (x = 0; x < 2; x++) {
			mem_plan_free(&f[x]);
			graph_free(&g[x]);
			scenario_free(&s[x]);
		}
	}
	mem_plan_free(&p);
	remove(model);
	remove(scen);
	cr_log_info("memrun_again: %d cases, runs kept in %d, %d of the other precisions as many events", cases,
		    kept, counted);
	cr_expect_geq(cases, 20, "only %d of 60 random settings were valid", cases);
	cr_expect_geq(2 * kept, cases, "runs kept in only %d of %d", kept, cases);
	cr_expect_gt(counted, 0, "no other precision with as many events: the comparison went untried");
}

/* ---- the step (step.h: periodic blocks) ------------------------------------------ */

#include "step.h"

/* Whether x and y agree to a relative 1e-9 (what the periodic extension of
 * micro-steps is held to, tests/test_step.c). */
static int close9(double x, double y)
{
	return fabs(x - y) <= 1e-9 * fmax(fabs(x), fabs(y)) + 1e-15;
}

/* One step of s over g at micro-batch mb, periodic (default) and with every
 * block simulated; returns whether the periodic one used the shorter steps. */
static int compare_step(const struct scenario *s, const struct graph *g, int64_t mb, const char *why)
{
	struct step_sim a, f;
	struct step_result ra, rf;
	struct err e = {0};
	int used;

	cr_assert_eq(step_sim_create(&a), 0);
	cr_assert_eq(step_sim_create(&f), 0);
	f.full = 1;
	cr_assert_eq(step_simulate(&a, s, g, mb, &ra, &e), 0, "%s", e.msg);
	cr_assert_eq(step_simulate(&f, s, g, mb, &rf, &e), 0, "%s", e.msg);
	used = a.blocks;
	cr_expect(close9(ra.time, rf.time), "%s mb %lld: time %.17g vs full %.17g", why, (long long)mb, ra.time, rf.time);
	cr_expect(close9(ra.compute, rf.compute), "%s: compute %.17g vs %.17g", why, ra.compute, rf.compute);
	cr_expect(close9(ra.comm, rf.comm), "%s: comm %.17g vs %.17g", why, ra.comm, rf.comm);
	cr_expect(close9(ra.exposed_comm, rf.exposed_comm), "%s: exposed %.17g vs %.17g", why,
		  ra.exposed_comm, rf.exposed_comm);
	cr_expect(close9(ra.comm_tp, rf.comm_tp), "%s: comm_tp %.17g vs %.17g", why, ra.comm_tp, rf.comm_tp);
	cr_expect(close9(ra.optimizer, rf.optimizer), "%s: optimizer", why);
	cr_expect(close9(ra.copy, rf.copy), "%s: copy %.17g vs %.17g", why, ra.copy, rf.copy);
	cr_expect(close9(ra.host_optimizer, rf.host_optimizer), "%s: host optimizer", why);
	cr_expect(close9(ra.tokens_per_s, rf.tokens_per_s), "%s: tokens/s", why);
	cr_expect(close9(ra.mfu, rf.mfu), "%s: mfu", why);
	cr_expect_eq(ra.global_batch, rf.global_batch, "%s: global batch", why);
	step_sim_delete(&a);
	step_sim_delete(&f);
	return used;
}

/* Case i of a random step test: random_settings's settings for model (what
 * describes it), then an intra- and an inter-node link and 1 to nga
 * micro-steps, drawn in that order, loaded from scen with its graph into s and
 * g, and named in why. Returns 0, or -1 where the loader or the graph refuses
 * them (nothing kept). */
static int random_step_case(uint64_t *seed, const char *model, const char *scen, const char *what, int i, int nga,
			    struct scenario *s, struct graph *g, char *why, size_t nwhy)
{
	static const char *const intra[] = {"nvlink3", "nvlink4", "pcie4"};
	static const char *const inter[] = {"ib-hdr", "ib-ndr", "roce-200", "eth-25", "eth-100"};
	char buf[20][160];
	const char *sets[20];
	struct graph_opts o;
	struct err e = {0};
	int n = random_settings(seed, model, buf, sets), k;

	snprintf(buf[n], 160, "cluster.intra_node=%s", intra[pick(seed, 3)]);
	sets[n] = buf[n];
	n++;
	snprintf(buf[n], 160, "cluster.inter_node=%s", inter[pick(seed, 5)]);
	sets[n] = buf[n];
	n++;
	snprintf(buf[n], 160, "training.grad_accum=%d", 1 + pick(seed, nga));
	sets[n] = buf[n];
	n++;
	if (scenario_load(s, scen, sets, n, &e)) {
		scenario_free(s);
		return -1;
	}
	predict_graph_opts(s, &o);
	if (graph_build(g, &s->model, &o, &e)) {
		graph_free(g);
		scenario_free(s);
		return -1;
	}
	snprintf(why, nwhy, "case %d: %s;", i, what);
	for (k = 1; k < n; k++)
		snprintf(why + strlen(why), nwhy - strlen(why), " %s", sets[k]);
	return 0;
}

/* 200 random configurations on NVLink, PCIe, InfiniBand, RoCE and Ethernet,
 * with 1 to 3 micro-steps: the step with its repeated blocks simulated a few
 * times and extended equals the full simulation of every block to 1e-9
 * (expected: the full simulation, computed here). The shortcut must apply to a
 * good share of them, or the test would check nothing. */
Test(periodic, step_blocks_match_full_simulation, .timeout = 300)
{
	char model[96], scen[96], what[96], why[700];
	uint64_t seed = 0x2545f4914f6cdd1dull;
	int cases = 0, used = 0, i;

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-smodel.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d-s.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i < 200; i++) {
		struct scenario s;
		struct graph g;

		random_model(&seed, model, what, sizeof what);
		if (random_step_case(&seed, model, scen, what, i, 3, &s, &g, why, sizeof why))
			continue;
		used += compare_step(&s, &g, 1 + pick(&seed, 8), why);
		cases++;
		graph_free(&g);
		scenario_free(&s);
	}
	remove(model);
	remove(scen);
	cr_log_info("step: %d valid random settings, %d extended by their blocks' period", cases, used);
	cr_expect_geq(cases, 100, "only %d of 200 random settings were valid", cases);
	cr_expect_geq(3 * used, cases, "only %d of %d steps used the periodic blocks", used, cases);
}

/* The critical path of step_bound (des_path_bound) on 200 random
 * configurations (models, strategies, frameworks, checkpointing, offload, TP,
 * NVLink/PCIe x InfiniBand/RoCE/Ethernet, one or two micro-steps): never above
 * the simulated step (it is sound: des_run starts a task when the last it
 * waits for ends and only stretches tasks), never below a stream's sum (each
 * stream is one chain of it), and above the largest stream's sum by more than
 * 1 % in a good share of them, or it would bound nothing the sums do not
 * (measured when written: 122 valid cases, 86 of them; the floor, a third,
 * fails a path that has lost the waits between streams, which falls to the
 * largest sum). recommend's tables rule candidates out on it (sweep_eval.c
 * bounds). */
Test(periodic, critical_path_is_below_random_steps, .timeout = 300)
{
	char model[96], scen[96], what[96], why[700];
	uint64_t seed = 0x6a09e667f3bcc908ull;
	int cases = 0, tighter = 0, i, j;

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-pmodel.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d-p.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i < 200; i++) {
		struct scenario s;
		struct graph g;
		struct step_sim ss;
		struct step_bound bd;
		struct step_result r;
		struct err e = {0};
		double streams = 0;
		int64_t mb;

		random_model(&seed, model, what, sizeof what);
		if (random_step_case(&seed, model, scen, what, i, 2, &s, &g, why, sizeof why))
			continue;
		mb = 1 + pick(&seed, 8);
		snprintf(why + strlen(why), sizeof why - strlen(why), "; micro-batch %lld", (long long)mb);
		cr_assert_eq(step_sim_create(&ss), 0);
		ss.full = 1;
		cr_assert_eq(step_bound(&ss, &s, &g, mb, 1, &bd, &e), 0, "%s: %s", why, e.msg);
		cr_assert_eq(step_simulate(&ss, &s, &g, mb, &r, &e), 0, "%s: %s", why, e.msg);
		cr_expect_leq(bd.path, r.time * (1 + 1e-12), "%s: path %.17g s, step %.17g s", why, bd.path, r.time);
		for (j = 0; j < bd.nstream; j++) {
			cr_expect_geq(bd.path, bd.stream[j] * (1 - 1e-12), "%s: path %.17g s, stream %d %.17g s", why,
				      bd.path, j, bd.stream[j]);
			streams = bd.stream[j] > streams ? bd.stream[j] : streams;
		}
		tighter += bd.path > 1.01 * streams;
		cases++;
		step_sim_delete(&ss);
		graph_free(&g);
		scenario_free(&s);
	}
	remove(model);
	remove(scen);
	cr_log_info("critical path: %d valid random settings, %d above the largest stream's sum by 1 %%", cases, tighter);
	cr_expect_geq(cases, 100, "only %d of 200 random settings were valid", cases);
	cr_expect_geq(3 * tighter, cases, "only %d of %d paths above the largest stream's sum", tighter, cases);
}

/* Every strategy (and offload, tensor parallelism, checkpointing) of a 32-block
 * Llama 2 7B on 4 nodes of 8 GPUs and 8 NICs over NVLink + InfiniBand, PCIe +
 * RoCE and NVLink + Ethernet, with 1 and 12 micro-steps: the periodic step
 * against the full simulation of every block (expected: the full simulation),
 * to 1e-9. Where the builder's state differs around the cut or the periods
 * have not settled, every block is simulated. Measured: 14 of the 90 steps
 * are extended (FSDP1's sharding strategies, FSDP2, selective checkpointing,
 * TP 2 and ZeRO-1 with one micro-step);
 * DDP's buckets, ZeRO-2/3, offload and accumulated micro-steps fall back to
 * every block today, so the floor below (one in eight) only guards against
 * the shortcut ceasing to apply at all. */
Test(periodic, step_blocks_every_strategy_and_network, .timeout = 300)
{
	static const char *const strat[][2] = {
		{"training.strategy=ddp", NULL}, {"training.strategy=zero1", NULL},
		{"training.strategy=zero2", NULL}, {"training.strategy=zero3", NULL},
		{"training.strategy=fsdp", "training.fsdp_sharding_strategy=full_shard"},
		{"training.strategy=fsdp", "training.fsdp_sharding_strategy=shard_grad_op"},
		{"training.strategy=fsdp", "training.fsdp_sharding_strategy=no_shard"},
		{"training.strategy=fsdp", "training.fsdp_sharding_strategy=hybrid_shard"},
		{"training.strategy=fsdp", "training.fsdp_sharding_strategy=hybrid_shard_zero2"},
		{"training.strategy=fsdp", "training.fsdp_version=2"},
		{"training.strategy=zero2", "training.offload=optimizer"},
		{"training.strategy=fsdp", "training.offload=optimizer_and_params"},
		{"training.strategy=fsdp", "training.tensor_parallel=2"},
		{"training.strategy=ddp", "training.activation_checkpointing=full"},
		{"training.strategy=fsdp", "training.activation_checkpointing=selective"},
		{"training.strategy=fsdp", "training.fsdp_forward_prefetch=true"}};
	static const char *const nets[][2] = {{"cluster.intra_node=nvlink3", "cluster.inter_node=ib-hdr"},
					      {"cluster.intra_node=pcie4", "cluster.inter_node=roce-200"},
					      {"cluster.intra_node=nvlink4", "cluster.inter_node=eth-100"}};
	static const char *const accum[] = {"training.grad_accum=1", "training.grad_accum=12"};
	const char *sets[11] = {"model.name=llama-2-7b", "model.seq_len=512", "cluster.nodes=4",
				"cluster.gpus_per_node=8", "cluster.nics_per_node=8", "training.precision=bf16"};
	char why[400];
	int st, nt, a, n, used = 0, cases = 0;

	for (st = 0; st < (int)(sizeof strat / sizeof strat[0]); st++)
		for (nt = 0; nt < 3; nt++)
			for (a = 0; a < 2; a++) {
				struct scenario s;
				struct graph g;
				struct graph_opts o;
				struct err e = {0};
				n = 6;
				sets[n++] = strat[st][0];
				if (strat[st][1])
					sets[n++] = strat[st][1];
				sets[n++] = nets[nt][0];
				sets[n++] = nets[nt][1];
				sets[n++] = accum[a];
				cr_assert_eq(scenario_load(&s, "tests/good/minimal.ini", sets, n, &e), 0, "%s", e.msg);
				predict_graph_opts(&s, &o);
				cr_assert_eq(graph_build(&g, &s.model, &o, &e), 0, "%s", e.msg);
				snprintf(why, sizeof why, "%s %s %s %s %s", strat[st][0], strat[st][1] ? strat[st][1] : "",
					 nets[nt][0], nets[nt][1], accum[a]);
				used += compare_step(&s, &g, 2, why);
				cases++;
				graph_free(&g);
				scenario_free(&s);
			}
	cr_log_info("step: %d of %d extended by their blocks' period", used, cases);
	cr_expect_geq(8 * used, cases, "only %d of %d steps used the periodic blocks", used, cases);
}

/* The shortcut takes a task issued before the repeating blocks for done
 * before the blocks it would delay; where one is still running when a stream's
 * first task after the cut is ready, that task waits for it and the step does
 * not grow by the periods left out, so the step must be simulated whole
 * (step.c old_tasks_wait). Two cases where it was not, against full
 * simulations: T5-3B under FSDP with parameter offload on 4 PCIe A100s (the
 * shipped scenario: 1.7406 s extended against 1.6570 s whole, 5 % slow), and
 * DDP of a 21-block decoder with an untied 50,257-token head over PCIe and
 * 100 Gb Ethernet, whose first bucket (the head's 51 MB) is still all-reducing
 * when the next closes (0.08636 s against 0.08567 s; a random case of
 * step_blocks_match_full_simulation's under another seed). */
Test(periodic, step_blocks_wait_for_old_collectives)
{
	static const char *const ddp[] = {"model.seq_len=64", "cluster.gpus_per_node=8", "cluster.nodes=2",
					   "training.strategy=ddp", "training.precision=fp32",
					   "training.attention=sdpa", "cluster.intra_node=pcie4",
					   "cluster.inter_node=eth-100"};
	char model[96], scen[96], set0[160];
	const char *sets[9];
	struct scenario s;
	struct graph g;
	struct graph_opts o;
	struct err e = {0};
	FILE *f;
	int k;

	cr_assert_eq(scenario_load(&s, "scenarios/t5-3b-fsdp-offload.ini", NULL, 0, &e), 0, "%s", e.msg);
	predict_graph_opts(&s, &o);
	cr_assert_eq(graph_build(&g, &s.model, &o, &e), 0, "%s", e.msg);
	compare_step(&s, &g, 8, "t5-3b-fsdp-offload at micro-batch 8");
	graph_free(&g);
	scenario_free(&s);

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-old.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d-olds.ini", (int)getpid());
	write_scenario(scen);
	f = fopen(model, "w");
	cr_assert(f);
	fputs("[model]\nfamily = decoder\nvocab_size = 50257\nhidden = 256\nlayers = 21\nencoder_layers = 0\n"
	      "heads = 8\nkv_heads = 8\nhead_dim = 32\nffn = 512\nactivation = swiglu\nnorm = layernorm\n"
	      "positions = learned\nmax_positions = 4096\nrelative_buckets = 0\nqkv_bias = true\n"
	      "out_bias = true\nmlp_bias = true\nlm_head_bias = false\ntied_embeddings = false\n"
	      "type_vocab = 0\nembed_norm = false\npooler = false\nfinal_norm = true\ndropout = 0.0\n", f);
	fclose(f);
	snprintf(set0, sizeof set0, "model.name=%s", model);
	sets[0] = set0;
	for (k = 0; k < 8; k++)
		sets[k + 1] = ddp[k];
	cr_assert_eq(scenario_load(&s, scen, sets, 9, &e), 0, "%s", e.msg);
	predict_graph_opts(&s, &o);
	cr_assert_eq(graph_build(&g, &s.model, &o, &e), 0, "%s", e.msg);
	compare_step(&s, &g, 1, "ddp of a 21-block decoder over PCIe and eth-100 at micro-batch 1");
	graph_free(&g);
	scenario_free(&s);
	remove(model);
	remove(scen);
}

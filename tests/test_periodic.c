/*
 * test_periodic.c — property tests of the periodic shortcuts (issue 16): a
 * transformer's repeated blocks evaluated once and extended must give what the
 * full evaluation gives, on random models, strategies, frameworks and batch
 * sizes.
 *
 *  - memory (memrun.h): the peak, the breakdown at it, the maxima of mem_detail
 *    and the largest micro-batch, from a tape's periodic runs in closed form,
 *    equal those of the same tape read event by event (one literal run), byte
 *    for byte: the expected values are the full walk's, computed here.
 *
 * The random cases come from a fixed seed, so a failure repeats; each names
 * its model file and settings.
 */
#include <criterion/criterion.h>
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

/* Plan p with every tape read as one literal run: the full evaluation. */
static void flatten(const struct mem_plan *p, struct mem_plan *flat, struct mem_run one[2])
{
	int t;

	*flat = *p;
	for (t = 0; t < p->ntapes; t++) {
		one[t] = (struct mem_run){0, p->tape[t].n, 1, 0};
		flat->tape[t].run = &one[t];
		flat->tape[t].nrun = 1;
	}
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
	for (w = 0; w < MEM_NCAT; w++)
		cr_expect_eq(a->live[w], d->live[w], "%s: live[%d]", why, w);
	for (w = 0; w < W_NWHAT; w++) {
		cr_expect_eq(a->what[w], d->what[w], "%s: what[%d]", why, w);
		cr_expect_eq(a->what_peak[w], d->what_peak[w], "%s: what_peak[%d]", why, w);
	}
}

/* 300 random configurations (those the loader accepts), each at several
 * micro-batches: the closed form over periodic runs against the event-by-event
 * reading of the same tape. At least half of the tapes must have periodic runs
 * covering most of their events, or the test would check nothing. */
Test(periodic, memory_runs_match_full_tape, .timeout = 120)
{
	static const int64_t bs[] = {0, 1, 2, 3, 7, 16, 61};
	char model[96], scen[96], what[96], why[600], buf[16][160];
	const char *sets[16];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int cases = 0, periodic = 0, i, n, t, k, bind, bind2;

	snprintf(model, sizeof model, "/tmp/shardcast-periodic-%d-model.ini", (int)getpid());
	snprintf(scen, sizeof scen, "/tmp/shardcast-periodic-%d.ini", (int)getpid());
	write_scenario(scen);
	for (i = 0; i < 300; i++) {
		struct scenario s;
		struct graph g;
		struct graph_opts o;
		struct fw_profile pf;
		struct mem_plan p, flat;
		struct mem_run one[2];
		struct mem_detail a, d;
		struct err e = {0};
		int covered = 0;

		random_model(&seed, model, what, sizeof what);
		n = random_settings(&seed, model, buf, sets);
		if (scenario_load(&s, scen, sets, n, &e))
			continue;  /* not a valid setting (offload without sharding...) */
		cr_assert_eq(plan_profile_load(&s, &pf, &e), 0, "%s", e.msg);
		predict_graph_opts(&s, &o);
		if (graph_build(&g, &s.model, &o, &e)) {  /* tp must divide the heads... */
			graph_free(&g);
			scenario_free(&s);
			continue;
		}
		cr_assert_eq(mem_plan_build(&p, &s, &g, &pf, &e), 0, "%s", e.msg);
		flatten(&p, &flat, one);
		snprintf(why, sizeof why, "case %d: %s;", i, what);
		for (k = 1; k < n; k++)
			snprintf(why + strlen(why), sizeof why - strlen(why), " %s", sets[k]);
		for (t = 0; t < p.ntapes; t++) {
			for (k = 0; k < p.tape[t].nrun; k++)
				if (p.tape[t].run[k].reps > 1)
					covered += p.tape[t].run[k].len * p.tape[t].run[k].reps;
			for (k = 0; k < (int)(sizeof bs / sizeof bs[0]); k++) {
				cr_expect_eq(mem_peak(&p, t, bs[k]), mem_peak(&flat, t, bs[k]), "%s b=%lld", why,
					     (long long)bs[k]);
				mem_detail(&p, t, bs[k], &a);
				mem_detail(&flat, t, bs[k], &d);
				expect_same_detail(&a, &d, why);
				mem_detail_peak(&p, t, bs[k], &a);
				mem_detail_peak(&flat, t, bs[k], &d);
				expect_same_detail(&a, &d, why);
			}
		}
		cr_expect_eq(mem_max_batch(&p, &bind), mem_max_batch(&flat, &bind2), "%s: max batch", why);
		cr_expect_eq(bind, bind2, "%s: binding tape", why);
		cases++;
		periodic += 2 * covered > p.tape[0].n + (p.ntapes > 1 ? p.tape[1].n : 0);
		mem_plan_free(&p);
		graph_free(&g);
		scenario_free(&s);
	}
	remove(model);
	remove(scen);
	cr_log_info("memory: %d valid random settings, %d tapes mostly periodic runs", cases, periodic);
	cr_expect_geq(cases, 100, "only %d of 300 random settings were valid", cases);
	cr_expect_geq(2 * periodic, cases, "only %d of %d tapes were mostly periodic runs", periodic, cases);
}

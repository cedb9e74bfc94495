/*
 * test_loader.c — the scenario loader: defaults, overrides, resolution, and
 * located errors (the CLI-level bad-scenario suite is tests/golden.sh).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "cfg.h"
#include "compute.h"
#include "scenario.h"

static char path[64];

static void write_scn(const char *text)
{
	FILE *f;
	snprintf(path, sizeof path, "/tmp/shardcast-test-%d.ini", (int)getpid());
	f = fopen(path, "w");
	cr_assert(f);
	fputs(text, f);
	fclose(f);
}

static int load(struct scenario *s, const char *text, const char *const *sets, int n, struct err *e)
{
	write_scn(text);
	return scenario_load(s, path, sets, n, e);
}

Test(loader, defaults_and_resolution)
{
	struct scenario s;
	struct err e = {0};

	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n", NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.strategy, STRAT_DDP);
	cr_expect_eq(s.s.training.micro_batch, -1, "auto");
	cr_expect_eq(s.seq_len, 1024);
	cr_expect_eq(s.world, 8);
	cr_expect_eq(s.capacity, 80.0 * 1073741824.0);  /* the catalog's 80GiB */
	cr_expect_float_eq(s.dropout, 0.1, 1e-12, "gpt2's file dropout");
	cr_expect_eq(s.intra.bandwidth, 300e9, "nvlink3 default: 300 GB/s per direction");
	cr_expect_eq(s.has_failures, 0);
	scenario_free(&s);
}

Test(loader, set_overrides_and_line_numbers)
{
	struct scenario s;
	struct err e = {0};
	const char *sets[] = {"training.strategy=fsdp", "model.dropout = 0"};

	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 2\n[training]\nstrategy = ddp\n", sets, 2, &e), 0, "%s", e.msg);
	cr_expect_eq(s.s.training.strategy, STRAT_FSDP);
	cr_expect_eq(s.dropout, 0);
	cr_expect_eq(s.line[cfg_index(scenario_keys(), "model", "name")], 2);
	cr_expect_eq(s.line[cfg_index(scenario_keys(), "training", "strategy")], -1);
	scenario_free(&s);
}

/* pad_vocab_multiple rounds the model's vocabulary up as llm.c's export does
 * (train_gpt2.py: "pad the vocab to a multiple of 128"): GPT-2's 50,257 tokens
 * become 50,304 = 393 x 128; 1 (the default) keeps the file's. */
Test(loader, pad_vocab_multiple)
{
	struct scenario s;
	struct err e = {0};
	const char *text = "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n";
	const char *sets[] = {"model.pad_vocab_multiple=128"};

	cr_assert_eq(load(&s, text, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.model.vocab, 50257);
	scenario_free(&s);
	cr_assert_eq(load(&s, text, sets, 1, &e), 0, "%s", e.msg);
	cr_expect_eq(s.model.vocab, 50304);
	scenario_free(&s);
}

Test(loader, gpu_memory_override_and_units)
{
	struct scenario s;
	struct err e = {0};

	cr_assert_eq(load(&s, "[model]\nname = gpt-tiny\nseq_len = 32\n[cluster]\ngpu = cpu\ngpu_memory = 64MiB\nintra_node = shm\n[training]\nstrategy = single\n", NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.capacity, 64.0 * 1048576);
	scenario_free(&s);
}

Test(loader, errors_name_file_line_and_key)
{
	struct scenario s;
	struct err e = {0};
	char want[128];

	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\nnodes = 1e30\n", NULL, 0, &e), ERR_INPUT);
	snprintf(want, sizeof want, "%s:5: nodes = 1e30: out of range", path);
	cr_expect(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
	scenario_free(&s);
}

Test(loader, encoder_decoder_target_len)
{
	struct scenario s;
	struct err e = {0};

	cr_assert_eq(load(&s, "[model]\nname = t5-large\nseq_len = 512\ntarget_len = 128\n[cluster]\ngpu = v100-sxm2-32gb\ngpus_per_node = 4\nintra_node = nvlink2\n", NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.target_len, 128);
	scenario_free(&s);
	err_clear(&e);
	cr_expect_eq(load(&s, "[model]\nname = gpt2\ntarget_len = 128\n[cluster]\ngpu = a100-sxm4-80gb\n", NULL, 0, &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "encoder-decoder models only") != NULL, "%s", e.msg);
	scenario_free(&s);
}

Test(loader, typo_distance_counts_transpositions)
{
	cr_expect_eq(err_distance("fdsp", "fsdp"), 1);
	cr_expect_eq(err_distance("strategey", "strategy"), 1);
	cr_expect_eq(err_distance("", "abc"), 3);
}

Test(loader, every_catalog_file_loads)
{
	/* each hardware entry the scenario keys can name loads and has a source */
	const char *gpus[] = {"v100-sxm2-16gb", "v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb",
			      "h100-sxm5-80gb", "h200-sxm-141gb", "cpu"};
	const char *links[] = {"pcie3", "pcie4", "pcie5", "nvlink2", "nvlink3", "nvlink4", "ib-edr",
			       "ib-hdr", "ib-ndr", "roce-100", "roce-200", "roce-400", "eth-25", "eth-100", "shm"};
	size_t i;

	for (i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
		struct gpu g;
		struct err e = {0};
		cr_expect_eq(hw_gpu_load(gpus[i], &g, NULL, 0, "gpu", &e), 0, "%s: %s", gpus[i], e.msg);
		cr_expect(strlen(g.source) > 10, "%s has no source", gpus[i]);
	}
	for (i = 0; i < sizeof links / sizeof links[0]; i++) {
		struct link l;
		struct err e = {0};
		cr_expect_eq(hw_link_load(links[i], &l, NULL, 0, "link", &e), 0, "%s: %s", links[i], e.msg);
		cr_expect(strlen(l.source) > 10, "%s has no source", links[i]);
	}
}

/* Writes text to dir/name (dir/sub/ created as needed). */
static void put(const char *dir, const char *name, const char *text)
{
	char p[512], cmd[600];
	FILE *f;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", p);
	cr_assert_eq(system(cmd), 0);
	f = fopen(p, "w");
	cr_assert(f, "%s", p);
	fputs(text, f);
	fclose(f);
}

/* Every path a scenario file gives is relative to the scenario's folder, not to
 * the working directory (tests run from the repository root): a model file, a
 * device and two links given as files, and a failure catalog, all beside a
 * scenario in a temporary folder. Their values differ from every catalog
 * entry, so the assertions show which file was read. */
/* A classification head needs an encoder with a pooler (BertForSequenceClassification
 * classifies the pooled first token): a decoder with num_labels is refused,
 * naming the file. */
Test(loader, num_labels_needs_an_encoder)
{
	char dir[64], file[128];
	struct model m;
	struct err e = {0};

	snprintf(dir, sizeof dir, "/tmp/shardcast-labels-%d", (int)getpid());
	put(dir, "dec.ini", "[model]\nfamily = decoder\nvocab_size = 256\nhidden = 64\nlayers = 3\n"
	    "heads = 4\nkv_heads = 4\nhead_dim = 16\nffn = 256\nactivation = gelu_new\nnorm = layernorm\n"
	    "positions = learned\nmax_positions = 64\nnum_labels = 2\n");
	snprintf(file, sizeof file, "%s/dec.ini", dir);
	cr_expect_neq(model_load(file, &m, NULL, 0, &e), 0);
	cr_expect(strstr(e.msg, "num_labels") != NULL, "%s", e.msg);
	cr_expect(strstr(e.msg, "dec.ini") != NULL, "the file is named: %s", e.msg);
}

Test(loader, paths_are_relative_to_the_scenario_file)
{
	char dir[64], scn[128];
	struct scenario s;
	struct err e = {0};

	snprintf(dir, sizeof dir, "/tmp/shardcast-paths-%d", (int)getpid());
	put(dir, "nn/three.ini", "[model]\nfamily = decoder\nvocab_size = 256\nhidden = 64\nlayers = 3\n"
	    "heads = 4\nkv_heads = 4\nhead_dim = 16\nffn = 256\nactivation = gelu\nnorm = layernorm\n"
	    "positions = learned\nmax_positions = 64\n");
	put(dir, "hw/dev.ini", "[dev]\nmemory = 48GiB\nmemory_bandwidth = 1000GB/s\npeak_fp32 = 10TFLOP/s\n"
	    "peak_tf32 = 10TFLOP/s\npeak_fp16 = 100TFLOP/s\npeak_bf16 = 100TFLOP/s\nsm_count = 10\n"
	    "compute_capability = 8.0\nsource = a test device\n");
	put(dir, "hw/links.ini", "[fast]\nkind = intra\nbandwidth = 123GB/s\nefficiency = 1\nlatency = 1us\n"
	    "source = a test link\n");
	put(dir, "hw/net.ini", "[slow]\nkind = inter\nbandwidth = 7GB/s\nefficiency = 1\nlatency = 1us\n"
	    "source = a test link\n");
	put(dir, "fail/cat.ini", "[gpu]\nper = gpu\nrate = 1e-5\n");
	put(dir, "run/s.ini", "[model]\nname = ../nn/three.ini\nseq_len = 32\n[cluster]\ngpu = ../hw/dev.ini\n"
	    "gpus_per_node = 2\nintra_node = ../hw/links.ini\ninter_node = ../hw/net.ini\n"
	    "[failures]\ncatalog = ../fail/cat.ini\n[job]\nsteps = 10\nstep_time = 1s\n");
	snprintf(scn, sizeof scn, "%s/run/s.ini", dir);
	cr_assert_eq(scenario_load(&s, scn, NULL, 0, &e), 0, "%s", e.msg);
	cr_expect_eq(s.model.layers, 3, "the model file beside the scenario (gpt-tiny has 2)");
	cr_expect_str_eq(s.model.name, "../nn/three.ini", "named as written, whatever the cwd");
	cr_expect_eq(s.capacity, 48.0 * 1073741824.0, "the device file's 48GiB");
	cr_expect_str_eq(s.gpu.name, "../hw/dev.ini");
	cr_expect_eq(s.intra.bandwidth, 123e9);
	cr_expect_eq(s.inter.bandwidth, 7e9);
	cr_expect_eq(s.failures.n, 1, "the catalog file's one component");
	cr_expect_str_eq(s.failures.name, "../fail/cat.ini");
	scenario_free(&s);

	/* --set paths are relative to the working directory (the repository root
	 * here): Korthikanti's GPT layer, a file of tests/good/ */
	{
		const char *sets[] = {"model.name=tests/good/gpt-korthikanti.ini"};
		cr_assert_eq(scenario_load(&s, scn, sets, 1, &e), 0, "%s", e.msg);
		cr_expect_str_eq(s.model.name, "tests/good/gpt-korthikanti.ini");
		scenario_free(&s);
	}
	{
		/* the same file named from the scenario's folder is not found from the cwd */
		char cmd[128];
		put(dir, "run/t.ini", "[model]\nname = tests/good/gpt-korthikanti.ini\n[cluster]\ngpu = cpu\n"
		    "gpu_memory = 64MiB\n");
		snprintf(scn, sizeof scn, "%s/run/t.ini", dir);
		cr_expect_eq(scenario_load(&s, scn, NULL, 0, &e), ERR_INPUT);
		cr_expect(strstr(e.msg, "run/tests/good/gpt-korthikanti.ini: no such file"), "%s", e.msg);
		scenario_free(&s);
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		cr_expect_eq(system(cmd), 0);
	}
}

/* cfg.c hands libinih its lines through a reader of its own (line numbers,
 * binary junk checked eight bytes at a time, overlong lines): each text below
 * is read by both, and cfg must store the value, or report the syntax error at
 * the line, that libinih alone gives (multi-line values off, as cfg sets them). */
struct ini_seen {
	char value[CFG_STR_MAX];
	char section[64];
};

static int ini_seen_key(void *user, const char *section, const char *name, const char *value)
{
	struct ini_seen *s = user;

	if (strcmp(name, "k") == 0) {
		snprintf(s->value, sizeof s->value, "%s", value);
		snprintf(s->section, sizeof s->section, "%s", section);
	}
	return 1;
}

Test(loader, lines_read_as_libinih_reads_them)
{
	static const struct cfg_key keys[] = {
		{NULL, "k", CFG_STR, 0, 0, 0, 0, NULL, 0, NULL, "the key under test"},
	};
	static const struct cfg_table t = {keys, 1};
	static const char *const ok[] = {
		"[s]\nk = plain\n", "[s]\n  k   =   spaced value   \n", "[s]\nk = a ; comment\n",
		"[s]\nk = a;not a comment\n", "[s]\nk : colon\n", "[s]\nk=a=b\n", "[s]\nk = x:y\n",
		"[s] ; after the header\nk = v\n", "[s]\n# hash\n; semi\nk = \t tabbed \t\n",
		"\xEF\xBB\xBF[s]\nk = bom\n", "[s]\r\nk = crlf\r\n", "[ s ]\nk = v\n",
		"[s]\nk\t= tab before ;c\n", "[s]\nk = a\t;tab comment\n",
		"[s]\nk =;x\n", "[s]\n\n   \n\tk = indented\n", "[s]]\nk = two brackets\n",
		"[s]\nk = \"quoted ; kept?\" ; no\n", "[s]\nk = last line without a newline",
	};
	static const char *const bad[] = {
		"[s]\nno separator here\n", "[s]\n[t ;x]\nk = v\n", "[s]\nk ; = v\n", "[s\nk = v\n",
	};
	char file[] = "(test)";
	size_t i;

	ini_allow_multiline = 0;
	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct ini_seen want = {{0}, {0}};
		char got[CFG_STR_MAX] = "";
		struct err e = {0};

		cr_assert_eq(ini_parse_string(ok[i], ini_seen_key, &want), 0, "libinih: %s", ok[i]);
		cr_assert_eq(cfg_parse(&t, got, NULL, file, ok[i], strlen(ok[i]), &e), 0, "%s: %s", ok[i], e.msg);
		cr_expect_str_eq(got, want.value, "text %zu: cfg '%s', libinih '%s'", i, got, want.value);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct ini_seen seen = {{0}, {0}};
		char got[CFG_STR_MAX] = "", where[32];
		struct err e = {0};
		int line = ini_parse_string(bad[i], ini_seen_key, &seen);

		cr_assert_gt(line, 0, "libinih takes %s", bad[i]);
		cr_assert_neq(cfg_parse(&t, got, NULL, file, bad[i], strlen(bad[i]), &e), 0, "%s", bad[i]);
		snprintf(where, sizeof where, "(test):%d:", line);
		cr_expect(strncmp(e.msg, where, strlen(where)) == 0, "text %zu: libinih line %d, cfg: %s",
			  i, line, e.msg);
	}
}

/* The text check scans eight bytes at a time (cfg.c word_suspect): every byte it
 * rejects (NUL, the controls other than tab, CR and LF, DEL) is still caught
 * at its exact column wherever it sits in the word, and bytes from 0x80 up
 * (UTF-8 text) still pass. The expected columns are where each byte is put. */
Test(loader, control_bytes_found_at_their_column)
{
	static const struct cfg_key keys[] = {
		{NULL, "k", CFG_STR, 0, 0, 0, 0, NULL, 0, NULL, "the key under test"},
	};
	static const struct cfg_table t = {keys, 1};
	const char *line = "k = abcdefghijklmnopqrstuvwxyz\n";
	char text[64], got[CFG_STR_MAX], want[96], file[] = "(test)";
	size_t len = 4 + strlen(line), col;
	int c;

	for (c = 0; c < 256; c++) {
		int junk = c == 0 || (c < 32 && c != '\t' && c != '\r' && c != '\n') || c == 127;
		if (!junk && c < 128)
			continue;
		for (col = 4; col < strlen(line) - 1; col++) {
			struct err e = {0};
			memcpy(text, "[s]\n", 4);
			memcpy(text + 4, line, strlen(line) + 1);
			text[4 + col] = (char)c;
			if (!junk) {
				cr_expect_eq(cfg_parse(&t, got, NULL, file, text, len, &e), 0,
					     "byte 0x%02x at column %zu: %s", c, col + 1, e.msg);
				continue;
			}
			cr_expect_eq(cfg_parse(&t, got, NULL, file, text, len, &e), ERR_INPUT);
			snprintf(want, sizeof want, "(test):2: binary data (byte 0x%02x at column %zu)", c, col + 1);
			cr_expect(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
		}
	}
}

/* A binary file is named one whatever its first lines hold: the whole text is
 * checked before any line is parsed. CI's random 4,096 bytes once began with a
 * line free of control bytes (about 1 in 31 do: 30 of the 31 bytes that can end
 * such a line are junk, the 31st is LF), and that line was reported as a key
 * outside any section. Each text below has an earlier line that is an error of
 * its own; the byte is at line 4 (after three LFs), column 3. */
Test(loader, binary_named_before_any_line_is_parsed)
{
	static const struct cfg_key keys[] = {
		{NULL, "k", CFG_STR, 0, 0, 0, 0, NULL, 0, NULL, "the key under test"},
	};
	static const struct cfg_table t = {keys, 1};
	static const char *const texts[] = {
		"j\251nk = 1\n[s]\nk = v\nab\001cd\n",  /* a key outside any section */
		"[s]\nk = v\n[nope]\nab\000cd",       /* an unknown section */
		"[s]\nno equals sign\n\nab\177",        /* a syntax error */
	};
	static const size_t lens[] = {25, 22, 23};  /* the NUL is inside the second */
	char got[CFG_STR_MAX], file[] = "(test)";
	size_t i;

	for (i = 0; i < sizeof texts / sizeof *texts; i++) {
		struct err e = {0};
		cr_expect_eq(cfg_parse(&t, got, NULL, file, texts[i], lens[i], &e), ERR_INPUT, "text %zu", i);
		cr_expect(strstr(e.msg, "(test):4: binary data") == e.msg && strstr(e.msg, "at column 3"),
			  "text %zu: %s", i, e.msg);
	}
}

/* cfg_parse_entries loads several entries of one catalog text in one pass:
 * each must come out as cfg_parse_entry alone gives it (the expected side),
 * an optional entry that is missing is only marked so, and a required one
 * that is missing is cfg_parse_entry's error. */
Test(loader, entries_in_one_pass_as_one_by_one)
{
	static const struct cfg_key keys[] = {
		{NULL, "k", CFG_STR, 0, 0, 0, 0, NULL, 0, NULL, "the key under test"},
	};
	static const struct cfg_table t = {keys, 1};
	const char *text = "[b]\nk = from b\n[a]\nk = from a\n[c]\nk = from c\n";
	char a[CFG_STR_MAX] = "", c[CFG_STR_MAX] = "", one[CFG_STR_MAX] = "", none[CFG_STR_MAX] = "";
	char file[] = "(test)";
	struct cfg_entry ents[3] = {{"c", c, 0, 0}, {"nothing-here", none, 1, 0}, {"a", a, 0, 0}};
	struct err e = {0};

	cr_assert_eq(cfg_parse_entries(&t, ents, 3, CFG_STR_MAX, file, text, strlen(text), &e), 0, "%s", e.msg);
	cr_assert_eq(cfg_parse_entry(&t, one, CFG_STR_MAX, "a", file, text, strlen(text), &e), 0, "%s", e.msg);
	cr_expect_str_eq(a, one);
	cr_assert_eq(cfg_parse_entry(&t, one, CFG_STR_MAX, "c", file, text, strlen(text), &e), 0, "%s", e.msg);
	cr_expect_str_eq(c, one);
	cr_expect(ents[0].found && !ents[1].found && ents[2].found);
	cr_expect_str_eq(none, "");
	ents[1].optional = 0;
	cr_expect_eq(cfg_parse_entries(&t, ents, 3, CFG_STR_MAX, file, text, strlen(text), &e), ERR_INPUT);
	cr_expect(strstr(e.msg, "no entry [nothing-here] (3 entries in the file)") != NULL, "%s", e.msg);
}

/* hw_links_load reads links.ini once for a scenario's links: each link must
 * equal what hw_link_load gives alone (the expected side), a name given twice
 * both times, and a missing entry is reported at the key that named it. */
Test(loader, links_in_one_pass_as_one_by_one)
{
	struct link intra, inter, one;
	const struct hw_link_ref refs[2] = {{"nvlink3", &intra, 6, "intra_node", NULL},
					     {"ib-hdr", &inter, 7, "inter_node", NULL}};
	const struct hw_link_ref twice[2] = {{"ib-hdr", &intra, 6, "intra_node", NULL},
					     {"ib-hdr", &inter, 7, "inter_node", NULL}};
	const struct hw_link_ref bad[2] = {{"nvlink3", &intra, 6, "intra_node", NULL},
					     {"ib-hdrr", &inter, 7, "inter_node", NULL}};
	struct err e = {0};

	memset(&intra, 0, sizeof intra);  /* memcmp below: the padding too */
	memset(&inter, 0, sizeof inter);
	memset(&one, 0, sizeof one);
	cr_assert_eq(hw_links_load(refs, 2, "s.ini", &e), 0, "%s", e.msg);
	cr_assert_eq(hw_link_load("nvlink3", &one, "s.ini", 6, "intra_node", &e), 0, "%s", e.msg);
	cr_expect_eq(memcmp(&one, &intra, sizeof one), 0);
	cr_assert_eq(hw_link_load("ib-hdr", &one, "s.ini", 7, "inter_node", &e), 0, "%s", e.msg);
	cr_expect_eq(memcmp(&one, &inter, sizeof one), 0);
	cr_assert_eq(hw_links_load(twice, 2, "s.ini", &e), 0, "%s", e.msg);
	cr_expect_eq(memcmp(&one, &intra, sizeof one), 0);
	cr_expect_eq(memcmp(&one, &inter, sizeof one), 0);
	cr_expect_eq(hw_links_load(bad, 2, "s.ini", &e), ERR_INPUT);
	cr_expect(strncmp(e.msg, "s.ini:7: inter_node = ib-hdrr: ", 31) == 0, "%s", e.msg);
	cr_expect(strstr(e.msg, "no entry [ib-hdrr]; did you mean 'ib-hdr'?") != NULL, "%s", e.msg);
	err_clear(&e);
	/* a link named in another file (efficiency.ini's host_link) is reported there */
	const struct hw_link_ref host[2] = {{"nvlink3", &intra, 6, "intra_node", NULL},
					    {"pcie44", &inter, 0, "host_link", "eff.ini"}};
	cr_expect_eq(hw_links_load(host, 2, "s.ini", &e), ERR_INPUT);
	cr_expect(strncmp(e.msg, "eff.ini: host_link = pcie44: ", 29) == 0, "%s", e.msg);
}

/* A scenario reads its links and its device's host link (efficiency.ini's
 * host_link) in one pass over links.ini: the host link is what compute_load
 * and hw_link_load give alone. */
Test(loader, host_link_read_with_the_links)
{
	struct scenario s;
	struct compute_eff ce;
	struct err e = {0};

	cr_assert_eq(load(&s, "[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n"
			  "intra_node = nvlink3\ninter_node = ib-hdr\nnodes = 2\n", NULL, 0, &e), 0, "%s", e.msg);
	cr_assert_eq(compute_load(s.gpu.name, &ce, &e), 0, "%s", e.msg);
	cr_expect_str_eq(s.eff.host_link_name, ce.host_link_name);
	cr_expect_eq(memcmp(&s.eff.host_link, &ce.host_link, sizeof ce.host_link), 0);
	cr_expect_gt(s.eff.host_link.bandwidth, 0);
	scenario_free(&s);
}

/*
 * test_loader.c — the scenario loader: defaults, overrides, resolution, and
 * located errors (the CLI-level bad-scenario suite is tests/golden.sh).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/*
 * test_alloc.c — the emulated CUDA caching allocator (sim/models/alloc.c) on cases
 * worked by hand from c10/cuda/CUDACachingAllocator.cpp's rules, and on a
 * trace recorded by the PyTorch reference tracer.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "alloc.h"
#include "pyref.h"

#define MiB ((int64_t)1 << 20)

static struct alloc a;

static void start(int64_t capacity, int64_t max_split, int expandable)
{
	struct alloc_cfg c = {.capacity = capacity, .max_split = max_split, .expandable = expandable};
	alloc_init(&a, &c);
}

Test(alloc, rounds_to_512_and_packs_small_requests_in_2_MiB_segments)
{
	int i;

	start(1024 * MiB, 0, 0);
	cr_assert_geq(alloc_malloc(&a, 1), 0);
	/* kMinBlockSize 512; kSmallBuffer 2 MiB */
	cr_expect_eq(a.allocated, 512);
	cr_expect_eq(a.reserved, 2 * MiB);
	/* three more 512 KiB requests: 0.5 KiB + 1.5 MiB still fit the segment */
	for (i = 0; i < 3; i++)
		alloc_malloc(&a, 512 * 1024);
	cr_expect_eq(a.reserved, 2 * MiB);
	alloc_malloc(&a, 512 * 1024);  /* 2 MiB + 512 B: a second segment */
	cr_expect_eq(a.reserved, 4 * MiB);
	alloc_release(&a);
}

Test(alloc, mid_requests_split_a_20_MiB_segment)
{
	int i;

	start(1024 * MiB, 0, 0);
	/* 1-10 MiB requests come from kLargeBuffer = 20 MiB segments; a block is
	 * split while more than kSmallSize (1 MiB) would remain: 15, 10, 5, then
	 * the last 5 MiB block is handed out whole */
	for (i = 0; i < 4; i++)
		cr_assert_geq(alloc_malloc(&a, 5 * MiB), 0);
	cr_expect_eq(a.reserved, 20 * MiB);
	cr_expect_eq(a.allocated, 20 * MiB);
	alloc_malloc(&a, 5 * MiB);
	cr_expect_eq(a.reserved, 40 * MiB);
	alloc_release(&a);
}

Test(alloc, large_requests_get_a_segment_rounded_to_2_MiB_handed_out_whole)
{
	start(1024 * MiB, 0, 0);
	/* >= kMinLargeAlloc (10 MiB): rounded to kRoundLarge (2 MiB); 1 MiB left
	 * is not > kSmallSize, so the block is not split and counts 12 MiB */
	alloc_malloc(&a, 11 * MiB);
	cr_expect_eq(a.reserved, 12 * MiB);
	cr_expect_eq(a.allocated, 12 * MiB);
	alloc_release(&a);
}

Test(alloc, best_fit_reuses_and_splits_a_cached_block)
{
	int h;

	start(1024 * MiB, 0, 0);
	h = alloc_malloc(&a, 30 * MiB);
	alloc_free(&a, h);
	cr_expect_eq(a.reserved, 30 * MiB);  /* freed blocks stay cached */
	alloc_malloc(&a, 12 * MiB);          /* 18 MiB remain > 1 MiB: split */
	cr_expect_eq(a.reserved, 30 * MiB);
	cr_expect_eq(a.allocated, 12 * MiB);
	alloc_release(&a);
}

Test(alloc, max_split_size_keeps_oversize_blocks_for_large_requests)
{
	int h;

	start(1024 * MiB, 20 * MiB, 0);
	h = alloc_malloc(&a, 30 * MiB);
	alloc_free(&a, h);
	/* 12 MiB < max_split_size: the 30 MiB (oversize) block is not taken */
	alloc_malloc(&a, 12 * MiB);
	cr_expect_eq(a.reserved, 42 * MiB);
	alloc_release(&a);
}

Test(alloc, cache_is_released_only_when_an_allocation_fails)
{
	int h;

	start(40 * MiB, 0, 0);
	h = alloc_malloc(&a, 30 * MiB);
	alloc_free(&a, h);
	/* 34 MiB: the cached 30 MiB block is too small, 30 + 34 > 40 fails, the
	 * cache is freed (release_cached_blocks) and the retry succeeds */
	cr_assert_geq(alloc_malloc(&a, 34 * MiB), 0);
	cr_expect_eq(a.reserved, 34 * MiB);
	cr_expect_eq(a.retries, 1);
	cr_expect_eq(alloc_malloc(&a, 8 * MiB), ALLOC_EOOM);  /* 34 + 20 > 40 */
	alloc_release(&a);
}

/* 30 MiB freed, 40 MiB freed, then 50 MiB: no cached block fits the last */
static int64_t gc_case(int64_t capacity, int64_t allowed)
{
	struct alloc_cfg c = {.capacity = capacity, .gc_threshold = 0.5, .allowed = allowed};
	int64_t r;

	alloc_init(&a, &c);
	alloc_free(&a, alloc_malloc(&a, 30 * MiB));
	alloc_free(&a, alloc_malloc(&a, 40 * MiB));
	cr_assert_geq(alloc_malloc(&a, 50 * MiB), 0);
	r = a.reserved;
	alloc_release(&a);
	return r;
}

Test(alloc, garbage_collection_needs_a_memory_fraction)
{
	/* DeviceCachingAllocator::malloc collects only when set_fraction: with no
	 * fraction the threshold is ignored and, with room, both cached blocks stay */
	cr_expect_eq(gc_case(1024 * MiB, 0), 120 * MiB);
	/* fraction 100 MiB, threshold 0.5: at the 50 MiB request reserved memory is
	 * 70 MiB > 50 MiB; blocks at least as old as the average age (counted in
	 * get_free_block calls: the 30 MiB one freed at call 1, the 40 MiB one at
	 * call 2, now call 3: ages 2 and 1, average 1.5) are freed until 20 MiB are
	 * reclaimed: the 30 MiB block; 40 + 50 = 90 MiB */
	cr_expect_eq(gc_case(1024 * MiB, 100 * MiB), 90 * MiB);
	/* without the collection the same 100 MiB limit empties the whole cache */
	{
		struct alloc_cfg c = {.capacity = 100 * MiB};
		alloc_init(&a, &c);
		alloc_free(&a, alloc_malloc(&a, 30 * MiB));
		alloc_free(&a, alloc_malloc(&a, 40 * MiB));
		cr_assert_geq(alloc_malloc(&a, 50 * MiB), 0);
		cr_expect_eq(a.reserved, 50 * MiB);
		alloc_release(&a);
	}
}

Test(alloc, memory_fraction_limits_what_cudamalloc_may_hold)
{
	struct alloc_cfg c = {.capacity = 1024 * MiB, .allowed = 60 * MiB};

	/* set_per_process_memory_fraction: allowed_memory_maximum caps the
	 * segments below the device's capacity */
	alloc_init(&a, &c);
	cr_assert_geq(alloc_malloc(&a, 50 * MiB), 0);
	cr_expect_eq(alloc_malloc(&a, 20 * MiB), ALLOC_EOOM);  /* 50 + 20 > 60 */
	alloc_release(&a);
}

Test(alloc, expandable_segments_map_pages_on_demand)
{
	start(1024 * MiB, 0, 1);
	/* large-pool pages of 20 MiB; blocks split whenever >= 512 B remain */
	alloc_malloc(&a, 5 * MiB);
	cr_expect_eq(a.reserved, 20 * MiB);
	cr_expect_eq(a.allocated, 5 * MiB);
	/* 30 MiB: the free 15 MiB tail grows by one more page */
	alloc_malloc(&a, 30 * MiB);
	cr_expect_eq(a.reserved, 40 * MiB);
	cr_expect_eq(a.allocated, 35 * MiB);
	alloc_release(&a);
}

Test(alloc, replays_a_tracer_trace)
{
	/* tests/data/pyref/gpt-tiny-b2.csv: runtime/pytorch/pyref.py on gpt-tiny,
	 * micro-batch 2, two AdamW steps. Every request is below 1 MiB, so each is
	 * a small-pool block of exactly its size rounded to 512 B: the emulator's
	 * peak allocated must be the trace's peak of rounded sizes, computed here
	 * independently, and its reserved whole 2 MiB segments. */
	FILE *f = fopen("tests/data/pyref/gpt-tiny-b2.csv", "r");
	char line[512], act[16];
	long long id, bytes, live = 0, peak = 0;
	int64_t al, re;
	struct err e = {0};

	cr_assert(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%15[a-z],%lld,%lld", act, &id, &bytes) == 3) {
			live += (act[0] == 'a' ? 1 : -1) * alloc_round(bytes);
			peak = live > peak ? live : peak;
		}
	fclose(f);
	cr_assert_eq(pyref_replay_csv("tests/data/pyref/gpt-tiny-b2.csv", 1024 * MiB, &al, &re, &e), 0, "%s", e.msg);
	cr_expect_eq(al, peak);
	cr_expect_eq(re % (2 * MiB), 0);
	cr_expect_geq(re, al);
}

/*
 * emu.h — PyTorch's caching allocator (alloc.h) run over an allocation tape,
 * inside the memory model: memory.c's scratch for it (struct mem_emu), a
 * replay of one tape at one micro-batch, and the extension of a periodic
 * run's copies whose allocator state repeats (emu.c). Not an API of its own:
 * memory.h's mem_* functions are the model's.
 */
#ifndef SHARDCAST_EMU_H
#define SHARDCAST_EMU_H

#include <stdint.h>

#include "alloc.h"
#include "memory.h"

/* The emulation's scratch: the allocator, and its live blocks by request size
 * (a free releases the latest live block of its size).
 *
 * A request's size is fixed + b x per_sample: the tape's pooled events fall in
 * classes of equal (fixed, per_sample), found once per tape. At a given b two
 * classes may have the same size (fixed1 + b ps1 = fixed2 + b ps2), so each
 * replay maps every class to a representative, the first class of its size
 * at that b: live blocks stacked per representative are then exactly the live
 * blocks stacked per size, and an event needs no hashing of its own. */
struct mem_classes {
	int *of;               /* (n) per event: its class, -1 outside the allocator; an
				  alloc the next event frees (that event of its class): -2 - class */
	int64_t *fixed, *ps;   /* (k) per class: bytes, bytes per sample */
	int k;                 /* classes; -1 not found yet for the tape */
	int end;               /* 1 + the last alloc event: a replay stops there (only frees
				  follow, which change neither its peak nor whether it fits) */
	int capn, capk;
};

/* Where a replay stands: its next event, the bytes outside the allocator,
 * and its peak so far (emu_take). */
struct emu_pos {
	int i, at;
	int64_t outside, peak, best_alloc;
};

#define EMU_MEMO 8

/* A segment made during the period emu_skip reads: with reserved bytes r
 * above the period's start before it, of seg bytes. */
struct emu_made {
	int64_t r, seg;
};

/* A part of the allocator a period changed: free block i of its start
 * (segment 0), or a segment it made (segment 1, of pool small), cut into
 * pieces first .. first + n - 1 (emu_period). */
struct emu_region {
	int segment, i, small, first, n;
	int64_t end;           /* the address past its last piece */
};

/* A free block as emu_skip compares them. */
struct emu_free {
	int64_t addr, size;
	int small, whole;
};

/* A block the period pushed on its size's stack (rep), and whether it is
 * still there at the period's end. */
struct emu_push {
	int rep, h, live;
};

/* emu_skip's scratch, kept between replays. */
struct emu_period {
	struct emu_free *fb0;  /* (capf) the free blocks at the period's start: in the pools'
				  (size, address) order, then in address order (emu_skip) */
	int capf;
	int *free1;            /* (capf1) those at its end */
	int capf1;
	struct emu_made *made; /* (capmade) */
	int nmade, capmade;
	struct emu_push *push; /* (cappush) */
	int npush, cappush;
	/* what the period left: per region (a free block of its start, or a
	 * segment it made) its pieces, and per block it pushed the piece */
	struct emu_region *reg; /* (capreg) */
	int nreg, capreg;
	int64_t *psize;        /* (capp) per piece: bytes */
	int8_t *pused;         /* (capp) allocated */
	int *ph;               /* (capp) its handle: at the period's end, then as made */
	int np, capp;
	int *pof;              /* (cappof) per push: its piece, -1 popped */
	int cappof;
	int *cur;              /* (capcur) per free block of the start: its region (emu_layout);
				  then the free blocks a period made at once starts from */
	int *next;             /* (capcur) those it leaves */
	int *rof;              /* (capcur) per free block of the start: its region, -1 none */
	int capcur;
	int *sego;             /* (capreg) the segment regions in address order */
	int nseg, capsego;
};

struct mem_emu {
	struct alloc a;
	struct mem_classes cls[2];  /* per tape */
	/* an open-addressing table: (k1, k2) -> val, the slots of older
	 * generations empty */
	int64_t *k1, *k2;      /* (cap) */
	int *val;              /* (cap) */
	uint32_t *gen;         /* (cap) the use that set the slot (older: empty) */
	uint32_t cur;          /* this use */
	int cap;
	int *rep;              /* (capk) per class: its representative at this b */
	int *top;              /* (capk) per representative: its size's latest live block, -1 none */
	int *depth;            /* (capk) per representative: emu_closed's stack depth */
	int capk;
	struct emu_period per; /* emu_skip's scratch */
	int *below;            /* (capb) per block handle: the next live block of its size */
	int capb;
	int nomem;             /* the host ran out of memory */
	/* the last EMU_MEMO replays that ran through at the capacity, per tape
	 * (a replay is a function of its tape and b): a sweep asks for the
	 * breakdown at micro-batches its search checked (7 % of the replays of
	 * bench/sweep.ini were repeats) */
	int64_t memo_b[2][EMU_MEMO], memo_peak[2][EMU_MEMO];  /* b -1: empty */
	int memo_at[2][EMU_MEMO];
	int memo_next[2];      /* the entry the next replay takes */
	int64_t max[2];        /* the search's answer per tape, -1 not searched */
	struct emu_memos *known; /* searches done, by what they read; NULL none yet */
	struct emu_memos *seen;  /* peaks found, by what they read; NULL none yet */
	struct mem_emu_counts k; /* what it has done */
};

#define EMU_UNLIMITED ((int64_t)1 << 60)

/* Replays tape t of p at micro-batch b through the emulated allocator, cap
 * bytes for its requests, with a periodic run's copies made at once where
 * its allocator state repeats (emu_skip). Returns 0, ALLOC_EOOM (it ran out)
 * or ALLOC_ESYS (host memory); *peak = the most it held plus what is outside
 * it, *at = the event where it first held that with the most allocated (-1
 * none). */
int emu_replay(const struct mem_plan *p, int t, int64_t b, int64_t cap, int64_t *peak, int *at);

/* Frees emu_skip's scratch. */
void emu_period_free(struct emu_period *x);

#endif

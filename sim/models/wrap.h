/*
 * wrap.h — FSDP's wrap units of a model graph: the plan's wrap policy
 * (plan.h: wrap, wrap_min_params) applied to the graph once, for every model
 * that reads it (the memory walk, memstrat.c; the step's task graph, step.c).
 *
 * A unit is a module FSDP wraps: the root (the whole model, unit 0) and, by
 * policy, each block (transformer_based_wrap), none (no_wrap), or what
 * size_based_auto_wrap_policy wraps (wrap.c). A unit owns the parameters of
 * the ops in its range that no unit inside it owns; units nest (a stack's
 * unit around its Linear layers' under size_based_wrap).
 */
#ifndef SHARDCAST_WRAP_H
#define SHARDCAST_WRAP_H

#include <stdint.h>

#include "graph.h"

struct wrap_unit {
	int first, last;     /* op range */
	int64_t elems;       /* parameters it owns (per TP rank) */
	int root;
};

struct wrap_units {
	struct wrap_unit *u; /* (n) unit 0 the root */
	int n, cap;
	int *own;            /* (nops) the unit owning op i's parameters, -1 none */
	int *next;           /* (2 n) per unit the next one gathered in backward [2u] and in
				forward [2u + 1] order, -1 none: among the units (not the
				root) owning parameters, forward by first op (an outer unit
				before the units inside it), backward by last op descending */
};

/* The units of graph g under policy (enum fsdp_wrap) with min_params the
 * size-based threshold (parameters per TP rank). Returns 0, or -1 when out
 * of memory (w then holds nothing). The arrays are w's to free: wrap_units_free. */
int wrap_units_build(struct wrap_units *w, const struct graph *g, int policy, double min_params);

void wrap_units_free(struct wrap_units *w);

#endif

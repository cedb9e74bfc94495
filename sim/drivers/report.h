/*
 * report.h — the human-readable report and the JSON contract of simulate.
 */
#ifndef SHARDCAST_REPORT_H
#define SHARDCAST_REPORT_H

#include <stdio.h>

#include "predict.h"
#include "scenario.h"

/* Prints the readable report of s and p to f. */
void report_text(FILE *f, const struct scenario *s, const struct prediction *p);

/* The JSON object of docs/CONTRACT.md as a malloc'd string (caller frees),
 * NULL when out of memory. */
char *report_json(const struct scenario *s, const struct prediction *p);

#endif

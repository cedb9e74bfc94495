/*
 * units.h — readable quantities in, SI out.
 *
 * The loaders are the only place that sees "80GiB", "450GB/s", "5us" or
 * "989TFLOP/s"; everything past them works in bytes, bytes/s, seconds and FLOP/s.
 * Decimal prefixes are powers of 1000 (GB = 1e9 B), binary ones powers of 1024
 * (GiB = 2^30 B); "Gb/s" and "Gbit/s" are bits.
 */
#ifndef SHARDCAST_UNITS_H
#define SHARDCAST_UNITS_H

#include <stddef.h>

enum unit {
	UNIT_NONE,   /* a plain number: 12, 1e9, 0.5 */
	UNIT_BYTES,  /* B KB MB GB TB KiB MiB GiB TiB; bare number = bytes */
	UNIT_BW,     /* B/s KB/s MB/s GB/s TB/s KiB/s MiB/s GiB/s Mb/s Gb/s Gbit/s; bare = bytes/s */
	UNIT_TIME,   /* ns us ms s min h d; bare number = seconds */
	UNIT_FLOPS,  /* FLOP/s GFLOP/s TFLOP/s PFLOP/s; bare = FLOP/s */
	UNIT_COUNT
};

/* Parses s as a finite number with an optional unit of kind u into *out (SI).
 * Returns 0, or -1 with a short reason in why (e.g. "unknown unit 'GHz'"). */
int units_parse(const char *s, enum unit u, double *out, char *why, size_t nwhy);

/* What a value of kind u looks like, for error messages: "a size such as 80GiB". */
const char *units_expect(enum unit u);

/* Formats v (SI of kind u) with a readable prefix: "79.35 GiB", "450 GB/s", "3.2 ms";
 * below 1 KiB whole bytes ("0 B"), and a zero time "0 s". */
const char *units_format(char *buf, size_t n, double v, enum unit u);

/* Formats a count in words, never a unit's letter: "1.558 billion",
 * "120.6 thousand", "812" ("B" is bytes elsewhere in the reports). */
const char *units_format_count(char *buf, size_t n, double v);

#endif

/*
 * units.c — parse and format quantities with units (see units.h).
 */
#include "units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct suffix {
	const char *name;
	double scale;
};

static const struct suffix bytes_sfx[] = {
	{"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
	{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
	{"TiB", 1099511627776.0}, {NULL, 0}
};

static const struct suffix bw_sfx[] = {
	{"B/s", 1}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
	{"KiB/s", 1024.0}, {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0},
	{"Mb/s", 1e6 / 8}, {"Gb/s", 1e9 / 8}, {"Tb/s", 1e12 / 8},
	{"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8},
	{"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {NULL, 0}
};

static const struct suffix time_sfx[] = {
	{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"min", 60},
	{"h", 3600}, {"d", 86400}, {NULL, 0}
};

static const struct suffix flops_sfx[] = {
	{"FLOP/s", 1}, {"MFLOP/s", 1e6}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12},
	{"PFLOP/s", 1e15}, {NULL, 0}
};

static const struct suffix *table(enum unit u)
{
	switch (u) {
	case UNIT_BYTES: return bytes_sfx;
	case UNIT_BW: return bw_sfx;
	case UNIT_TIME: return time_sfx;
	case UNIT_FLOPS: return flops_sfx;
	default: return NULL;
	}
}

const char *units_expect(enum unit u)
{
	switch (u) {
	case UNIT_BYTES: return "a size such as 80GiB, 512MiB or 4e9 (bytes)";
	case UNIT_BW: return "a bandwidth such as 450GB/s, 200Gb/s or 2.5e10 (bytes/s)";
	case UNIT_TIME: return "a time such as 5us, 10min or 0.5 (seconds)";
	case UNIT_FLOPS: return "a rate such as 989TFLOP/s or 1.5e13 (FLOP/s)";
	default: return "a number";
	}
}

int units_parse(const char *s, enum unit u, double *out, char *why, size_t nwhy)
{
	const struct suffix *t = table(u);
	char *end;
	double v;

	while (isspace((unsigned char)*s))
		s++;
	/* strtod would also take "inf", "nan" and hex floats: none is a quantity */
	if (!(isdigit((unsigned char)*s) || *s == '.' || *s == '-' || *s == '+') ||
	    (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))) {
		snprintf(why, nwhy, "'%s' is not a number", s);
		return -1;
	}
	v = strtod(s, &end);
	if (end == s || !isfinite(v)) {
		snprintf(why, nwhy, "'%s' is not a finite number", s);
		return -1;
	}
	while (isspace((unsigned char)*end))
		end++;
	if (*end) {
		size_t i;
		if (!t) {
			snprintf(why, nwhy, "unexpected '%s' after the number (this key takes no unit)", end);
			return -1;
		}
		for (i = 0; t[i].name; i++)
			if (strcmp(end, t[i].name) == 0)
				break;
		if (!t[i].name) {
			snprintf(why, nwhy, "unknown unit '%s'", end);
			return -1;
		}
		v *= t[i].scale;
	}
	*out = v;
	return 0;
}

const char *units_format(char *buf, size_t n, double v, enum unit u)
{
	static const char *bin[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	static const char *bws[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
	static const char *fls[] = {"FLOP/s", "KFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
	int i = 0;
	double a = fabs(v);

	switch (u) {
	case UNIT_BYTES:
		if (a < 1024.0) {  /* whole bytes: "0 B", "512 B" */
			snprintf(buf, n, "%.0f B", v);
			break;
		}
		while (a >= 1024.0 && i < 5) {
			a /= 1024.0;
			v /= 1024.0;
			i++;
		}
		snprintf(buf, n, "%.2f %s", v, bin[i]);
		break;
	case UNIT_BW:
	case UNIT_FLOPS:
		while (a >= 1000.0 && i < 5) {
			a /= 1000.0;
			v /= 1000.0;
			i++;
		}
		snprintf(buf, n, "%.2f %s", v, u == UNIT_BW ? bws[i] : fls[i]);
		break;
	case UNIT_TIME:
		if (a == 0)
			snprintf(buf, n, "0 s");
		else if (a < 1e-3)
			snprintf(buf, n, "%.2f us", v * 1e6);
		else if (a < 1)
			snprintf(buf, n, "%.2f ms", v * 1e3);
		else if (a < 600)
			snprintf(buf, n, "%.3f s", v);
		else if (a < 3 * 86400.0)
			snprintf(buf, n, "%.2f h", v / 3600);
		else
			snprintf(buf, n, "%.2f days", v / 86400);
		break;
	default:
		snprintf(buf, n, "%g", v);
	}
	return buf;
}

const char *units_format_count(char *buf, size_t n, double v)
{
	static const char *words[] = {"thousand", "million", "billion", "trillion"};
	double a = fabs(v);
	int i = -1;

	while (a >= 1000.0 && i < 3) {
		a /= 1000.0;
		v /= 1000.0;
		i++;
	}
	if (i < 0)
		snprintf(buf, n, "%.0f", v);
	else
		snprintf(buf, n, "%.4g %s", v, words[i]);
	return buf;
}

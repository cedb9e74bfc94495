/*
 * test_units.c — quantities with units (sim/core/units.c).
 */
#include <criterion/criterion.h>

#include "units.h"

static double parse(const char *s, enum unit u)
{
	double v = -1;
	char why[128];
	cr_assert_eq(units_parse(s, u, &v, why, sizeof why), 0, "%s: %s", s, why);
	return v;
}

static void reject(const char *s, enum unit u, const char *why_part)
{
	double v;
	char why[128] = "";
	cr_expect_eq(units_parse(s, u, &v, why, sizeof why), -1, "%s accepted", s);
	cr_expect(strstr(why, why_part) != NULL, "%s: '%s' lacks '%s'", s, why, why_part);
}

Test(units, sizes_decimal_and_binary)
{
	cr_expect_eq(parse("80GiB", UNIT_BYTES), 80.0 * 1073741824.0);
	cr_expect_eq(parse("40GB", UNIT_BYTES), 40e9);
	cr_expect_eq(parse("64 MiB", UNIT_BYTES), 64.0 * 1048576);
	cr_expect_eq(parse("4e9", UNIT_BYTES), 4e9);
}

Test(units, bandwidth_bytes_and_bits)
{
	cr_expect_eq(parse("450GB/s", UNIT_BW), 450e9);
	/* 200 Gb/s HDR InfiniBand = 25 GB/s */
	cr_expect_eq(parse("200Gb/s", UNIT_BW), 25e9);
	cr_expect_eq(parse("100Gbit/s", UNIT_BW), 12.5e9);
}

Test(units, times_and_rates)
{
	cr_expect_float_eq(parse("5us", UNIT_TIME), 5e-6, 1e-18);
	cr_expect_eq(parse("10min", UNIT_TIME), 600);
	cr_expect_eq(parse("2h", UNIT_TIME), 7200);
	cr_expect_float_eq(parse("989.4TFLOP/s", UNIT_FLOPS), 989.4e12, 1);
}

Test(units, rejects_junk)
{
	reject("40GHz", UNIT_BYTES, "unknown unit 'GHz'");
	reject("nan", UNIT_BYTES, "not a number");
	reject("inf", UNIT_TIME, "not a number");
	reject("0x10", UNIT_NONE, "not a number");
	reject("12 apples", UNIT_NONE, "takes no unit");
	reject("1e999", UNIT_NONE, "not a finite number");
	reject("", UNIT_NONE, "not a number");
}

Test(units, format_readable)
{
	char b[32];
	cr_expect_str_eq(units_format(b, sizeof b, 80.0 * 1073741824.0, UNIT_BYTES), "80.00 GiB");
	cr_expect_str_eq(units_format(b, sizeof b, 450e9, UNIT_BW), "450.00 GB/s");
	cr_expect_str_eq(units_format(b, sizeof b, 3.2e-3, UNIT_TIME), "3.20 ms");
}

/* One screen used "B" for billions ("(1.558 B) parameters") and for bytes
 * ("gradients 0.00 B"), printed 120,576 parameters as "0.000 B" and a CPU's
 * 11.6 GFLOP/s as "0.0 TFLOP/s": counts are words, bytes whole below 1 KiB,
 * FLOP/s take the prefix that fits. */
Test(units, units_that_fit)
{
	char b[32];
	cr_expect_str_eq(units_format_count(b, sizeof b, 1557611200), "1.558 billion");
	cr_expect_str_eq(units_format_count(b, sizeof b, 120576), "120.6 thousand");
	cr_expect_str_eq(units_format_count(b, sizeof b, 405853388800), "405.9 billion");
	cr_expect_str_eq(units_format_count(b, sizeof b, 812), "812");
	cr_expect_str_eq(units_format(b, sizeof b, 0, UNIT_BYTES), "0 B");
	cr_expect_str_eq(units_format(b, sizeof b, 512, UNIT_BYTES), "512 B");
	cr_expect_str_eq(units_format(b, sizeof b, 11.61e9, UNIT_FLOPS), "11.61 GFLOP/s");
	cr_expect_str_eq(units_format(b, sizeof b, 131.6e12, UNIT_FLOPS), "131.60 TFLOP/s");
	cr_expect_str_eq(units_format(b, sizeof b, 0, UNIT_TIME), "0 s");
}

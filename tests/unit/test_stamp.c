/* Unit tests for stamp: nanosecond stamps pass through; counter stamps are
 * placed between the two reference readings at the rate measured over
 * them, clamped, exact in 128 bits; and on this machine the counter agrees
 * with CLOCK_MONOTONIC. */
#include "unit.h"

#include <time.h>

#include "clock.h"
#include "stamp.h"

#define T(v) ((v) | BS_STAMP_TICKS)

static void test_nanosecond_stamps_pass_through(void **state)
{
	(void)state;
	struct bs_stamp_pair ref = {100, 1000}, now = {300, 2000};
	assert_int_equal(bs_stamp_ns(0, ref, now), 0);
	assert_int_equal(bs_stamp_ns(123456789, ref, now), 123456789);
	assert_int_equal(bs_stamp_ns(BS_STAMP_TICKS - 1, ref, now), BS_STAMP_TICKS - 1);
}

static void test_counter_stamps_at_the_measured_rate(void **state)
{
	(void)state;
	/* 1 tick a nanosecond */
	struct bs_stamp_pair ref = {1000, 5000}, now = {3000, 7000};
	assert_int_equal(bs_stamp_ns(T(2000), ref, now), 6000);
	assert_int_equal(bs_stamp_ns(T(1000), ref, now), 5000);
	assert_int_equal(bs_stamp_ns(T(3000), ref, now), 7000);
	/* 3 ticks a nanosecond (a 3 GHz counter) */
	ref = (struct bs_stamp_pair){0, 1000000000};
	now = (struct bs_stamp_pair){3000000000ull, 2000000000};
	assert_int_equal(bs_stamp_ns(T(1500000000ull), ref, now), 1500000000);
	/* 0.024 ticks a nanosecond (aarch64's 24 MHz counter) */
	now = (struct bs_stamp_pair){24000000ull, 2000000000};
	assert_int_equal(bs_stamp_ns(T(12000000ull), ref, now), 1500000000);
}

static void test_large_values_do_not_overflow(void **state)
{
	(void)state;
	/* a machine up for a year at 4 GHz, stamps an hour apart */
	uint64_t year = 365ull * 86400 * 1000000000, hour = 3600ull * 1000000000;
	struct bs_stamp_pair ref = {4 * year, year}, now = {4 * (year + hour), year + hour};
	assert_int_equal(bs_stamp_ns(T(4 * year + 2 * hour), ref, now), year + hour / 2);
}

static void test_out_of_range_readings_are_clamped(void **state)
{
	(void)state;
	struct bs_stamp_pair ref = {1000, 5000}, now = {3000, 7000};
	assert_int_equal(bs_stamp_ns(T(10), ref, now), 5000);    /* before the reference */
	assert_int_equal(bs_stamp_ns(T(99999), ref, now), 7000); /* after now */
	/* no interval to measure over (a counter that stood still or went
	 * back, a clock that did): now */
	assert_int_equal(bs_stamp_ns(T(2000), ref, (struct bs_stamp_pair){1000, 7000}), 7000);
	assert_int_equal(bs_stamp_ns(T(2000), ref, (struct bs_stamp_pair){900, 7000}), 7000);
	assert_int_equal(bs_stamp_ns(T(2000), ref, (struct bs_stamp_pair){3000, 5000}), 5000);
}

static struct bs_stamp_pair pair(void)
{
	struct bs_stamp_pair p = {bs_stamp_counter(), bs_now()};
	return p;
}

/* On x86-64 and aarch64 the counter exists; whether the library trusts it
 * is the kernel's clocksource (stamp.c), but its conversion must agree with
 * the clock read beside it to well under a millisecond. */
static void test_the_counter_agrees_with_the_clock(void **state)
{
	(void)state;
#if defined(__x86_64__) || defined(__aarch64__)
	struct bs_stamp_pair ref = pair();
	struct timespec pause = {0, 20 * 1000 * 1000};
	nanosleep(&pause, NULL);
	uint64_t stamp = T(bs_stamp_counter()), beside = bs_now();
	nanosleep(&pause, NULL);
	uint64_t ns = bs_stamp_ns(stamp, ref, pair());
	uint64_t diff = ns > beside ? ns - beside : beside - ns;
	assert_true(diff < 1000000);
	assert_true(ns > ref.ns);
#else
	skip();
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nanosecond_stamps_pass_through),
		cmocka_unit_test(test_counter_stamps_at_the_measured_rate),
		cmocka_unit_test(test_large_values_do_not_overflow),
		cmocka_unit_test(test_out_of_range_readings_are_clamped),
		cmocka_unit_test(test_the_counter_agrees_with_the_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for timeout: deadlines that saturate instead of wrapping,
 * the kernel's EINVAL rules, and conversions that never shorten a wait. */
#include "unit.h"

#include <limits.h>

#include "timeout.h"
#include "units.h"

#define NOW (5 * BS_NS_PER_SEC)

static void test_validity_follows_the_kernel(void **state)
{
	(void)state;
	struct timespec ts[] = {{0, 0}, {1, 999999999}, {-1, 0}, {0, -1}, {0, 1000000000}};
	int ts_ok[] = {1, 1, 0, 0, 0};
	for (unsigned i = 0; i < sizeof ts / sizeof *ts; i++)
		assert_int_equal(bs_timeout_ts_valid(&ts[i]), ts_ok[i]);
	assert_true(bs_timeout_ts_valid(NULL));
	/* select folds a large tv_usec into seconds; negatives are refused */
	struct timeval tv[] = {{0, 0}, {0, 5000000}, {-1, 0}, {0, -1}};
	int tv_ok[] = {1, 1, 0, 0};
	for (unsigned i = 0; i < sizeof tv / sizeof *tv; i++)
		assert_int_equal(bs_timeout_tv_valid(&tv[i]), tv_ok[i]);
	assert_true(bs_timeout_tv_valid(NULL));
}

static void test_deadlines(void **state)
{
	(void)state;
	assert_true(bs_timeout_deadline_ms(NOW, -1) == BS_TIMEOUT_NONE);
	assert_true(bs_timeout_deadline_ms(NOW, 0) == NOW);
	assert_true(bs_timeout_deadline_ms(NOW, INT_MAX) == NOW + INT_MAX * BS_NS_PER_MS);
	struct timespec ts = {2, 20000};
	assert_true(bs_timeout_deadline_ts(NOW, &ts) == NOW + 2 * BS_NS_PER_SEC + 20000);
	assert_true(bs_timeout_deadline_ts(NOW, NULL) == BS_TIMEOUT_NONE);
	struct timeval tv = {1, 2500000}; /* 3.5 s */
	assert_true(bs_timeout_deadline_tv(NOW, &tv) == NOW + 3500 * BS_NS_PER_MS);
	assert_true(bs_timeout_deadline_tv(NOW, NULL) == BS_TIMEOUT_NONE);
}

static int host_four(void)
{
	return 4;
}

static int host_never_asked(void)
{
	fail();
	return 0;
}

static void test_the_programs_handshake_bound(void **state)
{
	(void)state;
	assert_int_equal(bs_timeout_bound_is_programs(300, 0, host_never_asked), 1);
	assert_int_equal(bs_timeout_bound_is_programs(0, 1, host_four), 1);
	assert_int_equal(bs_timeout_bound_is_programs(0, 4, host_four), 0); /* the host's own */
	assert_int_equal(bs_timeout_bound_is_programs(0, 6, host_never_asked), 0);
	assert_int_equal(bs_timeout_bound_is_programs(0, 0, host_never_asked), 0);
	assert_int_equal(bs_timeout_syn_retries("3\n", 2), 3);
	assert_int_equal(bs_timeout_syn_retries("", -1), 6);
	assert_int_equal(bs_timeout_syn_retries("0\n", 2), 6);
	assert_int_equal(bs_timeout_syn_retries("999\n", 4), 6);
	assert_int_equal(bs_timeout_syn_retries("x", 1), 6);
}

static void test_a_sockets_send_timeout(void **state)
{
	(void)state;
	struct timeval none = {0, 0}, half = {0, 500000}, huge = {18446744074, 0};
	assert_true(bs_timeout_sndtimeo(&none) == BS_TIMEOUT_NONE);
	assert_true(bs_timeout_sndtimeo(&half) == 500 * BS_NS_PER_MS);
	assert_true(bs_timeout_sndtimeo(&huge) == BS_TIMEOUT_NONE);
}

static void test_huge_timeouts_saturate_to_none(void **state)
{
	(void)state;
	/* 18446744074 s * 1e9 wraps 64 bits to about 0.3 s */
	struct timespec ts = {18446744074, 0};
	assert_true(bs_timeout_deadline_ts(NOW, &ts) == BS_TIMEOUT_NONE);
	struct timespec max = {LONG_MAX, 999999999};
	assert_true(bs_timeout_deadline_ts(NOW, &max) == BS_TIMEOUT_NONE);
	struct timeval tv = {18446744074, 0};
	assert_true(bs_timeout_deadline_tv(NOW, &tv) == BS_TIMEOUT_NONE);
	struct timeval tvmax = {LONG_MAX, LONG_MAX};
	assert_true(bs_timeout_deadline_tv(NOW, &tvmax) == BS_TIMEOUT_NONE);
	/* the largest that fits is kept */
	struct timespec fits = {(time_t)((BS_TIMEOUT_NONE - 1 - NOW) / BS_NS_PER_SEC), 0};
	uint64_t d = bs_timeout_deadline_ts(NOW, &fits);
	assert_true(d != BS_TIMEOUT_NONE && d > NOW);
	assert_true(bs_timeout_deadline_ms(BS_TIMEOUT_NONE - 5, 1) == BS_TIMEOUT_NONE);
}

static void test_left(void **state)
{
	(void)state;
	assert_true(bs_timeout_left(NOW, NOW + 7) == 7);
	assert_true(bs_timeout_left(NOW, NOW - 7) == 0);
	assert_true(bs_timeout_left(NOW, BS_TIMEOUT_NONE) == BS_TIMEOUT_NONE);
}

static void test_conversions_never_shorten(void **state)
{
	(void)state;
	assert_int_equal(bs_timeout_ms(BS_TIMEOUT_NONE), -1);
	assert_int_equal(bs_timeout_ms(0), 0);
	assert_int_equal(bs_timeout_ms(1), 1);
	assert_int_equal(bs_timeout_ms(BS_NS_PER_MS), 1);
	assert_int_equal(bs_timeout_ms(BS_NS_PER_MS + 1), 2);
	assert_int_equal(bs_timeout_ms(BS_TIMEOUT_NONE - 1), INT32_MAX);
	struct timespec ts;
	assert_null(bs_timeout_ts(BS_TIMEOUT_NONE, &ts));
	assert_ptr_equal(bs_timeout_ts(20000, &ts), &ts);
	assert_int_equal(ts.tv_sec, 0);
	assert_int_equal(ts.tv_nsec, 20000); /* 20 µs stays 20 µs */
	bs_timeout_ts(3 * BS_NS_PER_SEC + 5, &ts);
	assert_int_equal(ts.tv_sec, 3);
	assert_int_equal(ts.tv_nsec, 5);
	struct timeval tv;
	assert_null(bs_timeout_tv(BS_TIMEOUT_NONE, &tv));
	bs_timeout_tv(20001, &tv);
	assert_int_equal(tv.tv_sec, 0);
	assert_int_equal(tv.tv_usec, 21);
	bs_timeout_tv(2 * BS_NS_PER_SEC, &tv);
	assert_int_equal(tv.tv_sec, 2);
	assert_int_equal(tv.tv_usec, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validity_follows_the_kernel),
		cmocka_unit_test(test_deadlines),
		cmocka_unit_test(test_a_sockets_send_timeout),
		cmocka_unit_test(test_the_programs_handshake_bound),
		cmocka_unit_test(test_huge_timeouts_saturate_to_none),
		cmocka_unit_test(test_left),
		cmocka_unit_test(test_conversions_never_shorten),
	};
	return cmocka_run_group_tests_name("timeout", tests, NULL, NULL);
}

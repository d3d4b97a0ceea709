/* Unit tests for policy.c: the gRPC connection-backoff schedule
 * (grpc doc/connection-backoff.md). All randomness is seeded. */
#include "unit.h"
#include "mix.h"
#include "unit_time.h"

#include "policy.h"

#include <math.h>
#include <stdio.h>

#define SEED 0x5eedb0ffull

static const struct bs_policy DEFAULTS = {
	.initial_backoff = 1 * SEC,
	.multiplier = 1.6,
	.jitter = 0.2,
	.max_backoff = 120 * SEC,
	.min_connect_timeout = 20 * SEC,
};

/* Largest double below 1: the top of the u range. */
static const double U_TOP = 0x1.fffffffffffffp-1;

static double draw(uint64_t seed, uint64_t k)
{
	return bs_policy_unit(bs_mix64(seed + k * BS_GOLDEN));
}

/* The Makefile links no libm, so no fabs()/fmin(). */
static double dabs(double x)
{
	return x < 0 ? -x : x;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* failures == 1 waits initial_backoff exactly, whatever u and jitter are. */
static void test_first_failure_exact(void **state)
{
	(void)state;
	struct bs_policy p = DEFAULTS;
	const double us[] = {0.0, 1e-12, 0.25, 0.5, 0.75, U_TOP, 1.0, -1.0, NAN};
	for (int j = 0; j < 3; j++) {
		p.jitter = j == 0 ? 0.2 : j == 1 ? 1.0 : 0.0;
		for (size_t i = 0; i < sizeof us / sizeof us[0]; i++)
			assert_int_equal(bs_policy_delay(&p, 1, us[i]), 1 * SEC);
		for (uint64_t k = 0; k < 1000; k++)
			assert_int_equal(bs_policy_delay(&p, 1, draw(SEED, k)), 1 * SEC);
	}
	assert_int_equal(bs_policy_backoff(&p, 1), 1 * SEC);
	/* No failure, no wait. */
	assert_int_equal(bs_policy_backoff(&p, 0), 0);
	assert_int_equal(bs_policy_delay(&p, 0, 0.5), 0);
}

/* min(initial * 1.6^(n-1), max) against a plain multiply-by-1.6 loop. */
static void test_unjittered_sequence(void **state)
{
	(void)state;
	struct bs_policy p = DEFAULTS;
	double ref = (double)p.initial_backoff;
	uint64_t prev = 0;
	int capped_at = 0;
	for (uint32_t n = 1; n <= 30; n++) {
		double want_d = ref < (double)p.max_backoff ? ref : (double)p.max_backoff;
		uint64_t want = (uint64_t)want_d;
		uint64_t got = bs_policy_backoff(&p, n);
		if (absdiff(got, want) > 1)
			fail_msg("n=%u: backoff %llu, reference %llu", n,
				 (unsigned long long)got, (unsigned long long)want);
		assert_true(got >= prev); /* non-decreasing */
		assert_true(got <= p.max_backoff);
		if (!capped_at && got == p.max_backoff)
			capped_at = (int)n;
		prev = got;
		ref *= p.multiplier;
	}
	/* 1.6^10 = 109.95 < 120 < 1.6^11 = 175.9: the cap is first hit at n=12. */
	assert_int_equal(capped_at, 12);
	assert_int_equal(bs_policy_backoff(&p, 2), 1600000000ull);
	/* Without jitter the delay is the backoff itself. */
	p.jitter = 0.0;
	for (uint32_t n = 1; n <= 30; n++)
		assert_int_equal(bs_policy_delay(&p, n, 0.9), bs_policy_backoff(&p, n));
}

/* For n >= 2 the delay lies in [0.8 b, 1.2 b] and reaches both ends. */
static void test_jitter_bounds(void **state)
{
	(void)state;
	const struct bs_policy *p = &DEFAULTS;
	for (uint32_t n = 2; n <= 30; n++) {
		double b = (double)bs_policy_backoff(p, n);
		double lo = 0.8 * b, hi = 1.2 * b;
		for (int i = 0; i <= 1000; i++) {
			double u = i == 1000 ? U_TOP : i / 1000.0;
			double d = (double)bs_policy_delay(p, n, u);
			if (d < lo - 1.0 || d > hi)
				fail_msg("n=%u u=%g: %.0f outside [%.0f, %.0f]", n, u, d, lo, hi);
		}
		/* u = 0 gives the bottom, u -> 1 the top (to within a ns). */
		assert_true(dabs((double)bs_policy_delay(p, n, 0.0) - lo) <= 1.0);
		assert_true(hi - (double)bs_policy_delay(p, n, U_TOP) <= 1.0);
		/* the middle of the range is the un-jittered backoff */
		assert_true(dabs((double)bs_policy_delay(p, n, 0.5) - b) <= 1.0);
		/* out-of-contract u is clamped into the range, never outside */
		const double bad[] = {-1.0, 1.0, 7.5, NAN, INFINITY, -INFINITY};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			double d = (double)bs_policy_delay(p, n, bad[i]);
			assert_true(d >= lo - 1.0 && d <= hi);
		}
	}
}

/* Jitter is applied after the cap: at large n waits span [96 s, 144 s]. */
static void test_jitter_after_cap(void **state)
{
	(void)state;
	const struct bs_policy *p = &DEFAULTS;
	const uint32_t ns[] = {12, 13, 20, 50, 1000};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint64_t k = 0; k < 2000; k++) {
			uint64_t d = bs_policy_delay(p, ns[i], draw(SEED + i, k));
			assert_true(d >= 96 * SEC && d <= 144 * SEC);
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		/* jitter before the cap could never exceed 120 s */
		assert_true(hi > 143 * SEC);
		assert_true(lo < 97 * SEC);
	}
	assert_int_equal(bs_policy_delay(p, 50, 0.0), 96 * SEC);
	assert_true(bs_policy_delay(p, 50, U_TOP) >= 144 * SEC - 1);
}

/* The gRPC interop-test bounds: each wait within [0.8 e, 1.2 e] where
 * e = min(e_prev * 1.6, max); the jitter factor averages 1.0 and spans
 * 0.8 .. 1.2. Runs of 1..25 failures cover both the growing and the capped
 * part of the schedule. */
static void test_seeded_simulation(void **state)
{
	(void)state;
	const struct bs_policy *p = &DEFAULTS;
	double e = 0.0, sum = 0.0, flo = 2.0, fhi = 0.0;
	unsigned count = 0, capped = 0;
	for (uint64_t k = 0; k < 10000; k++) {
		uint32_t n = (uint32_t)(k % 25) + 1;
		uint64_t d = bs_policy_delay(p, n, draw(SEED, k));
		if (n == 1) {
			e = (double)p->initial_backoff;
			assert_int_equal(d, p->initial_backoff);
			continue;
		}
		e = e * 1.6 < (double)p->max_backoff ? e * 1.6 : (double)p->max_backoff;
		if ((double)d < 0.8 * e - 2.0 || (double)d > 1.2 * e + 2.0)
			fail_msg("k=%llu n=%u: delay %llu outside [0.8, 1.2] x %.0f",
				 (unsigned long long)k, n, (unsigned long long)d, e);
		double f = (double)d / e;
		sum += f;
		flo = f < flo ? f : flo;
		fhi = f > fhi ? f : fhi;
		count++;
		capped += e == (double)p->max_backoff;
	}
	assert_true(count == 9600 && capped > 4000);
	double mean = sum / count;
	if (dabs(mean - 1.0) > 0.01)
		fail_msg("mean jitter factor %f", mean);
	assert_true(flo >= 0.8 - 1e-9 && flo < 0.801);
	assert_true(fhi <= 1.2 + 1e-9 && fhi > 1.199);
}

static void check_policy_sane(const struct bs_policy *p)
{
	const uint32_t fs[] = {1, 2, 3, 31, 32, 33, 64, 65, 100, 1000, 1000000,
			       0x7fffffffu, UINT32_MAX - 1, UINT32_MAX};
	const double us[] = {0.0, 0.5, U_TOP};
	double top = (double)p->max_backoff * (1.0 + p->jitter);
	uint64_t prev = 0;
	for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		uint64_t b = bs_policy_backoff(p, fs[i]);
		assert_true(b <= p->max_backoff);
		assert_true(b >= prev);
		assert_true(b > 0);
		prev = b;
		for (size_t j = 0; j < sizeof us / sizeof us[0]; j++) {
			uint64_t d = bs_policy_delay(p, fs[i], us[j]);
			assert_true((double)d <= top + 1.0);
			assert_true((double)d >= (double)b * (1.0 - p->jitter) - 1.0);
		}
	}
}

/* No overflow, NaN or wrap-around for extreme inputs and parameters. */
static void test_extremes(void **state)
{
	(void)state;
	struct bs_policy p = DEFAULTS;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 1000000), p.max_backoff);
	assert_int_equal(bs_policy_backoff(&p, UINT32_MAX), p.max_backoff);
	assert_int_equal(bs_policy_delay(&p, UINT32_MAX, 0.0), 96 * SEC);

	/* multiplier 1.0: constant initial backoff, forever */
	p.multiplier = 1.0;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 2), 1 * SEC);
	assert_int_equal(bs_policy_backoff(&p, UINT32_MAX), 1 * SEC);

	/* multiplier 100: 1 s, 100 s, then capped */
	p.multiplier = 100.0;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 2), 100 * SEC);
	assert_int_equal(bs_policy_backoff(&p, 3), 120 * SEC);
	assert_int_equal(bs_policy_backoff(&p, UINT32_MAX), 120 * SEC);

	/* an absurd multiplier saturates instead of reaching inf * 0 or NaN */
	p.multiplier = 1e300;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 2), 120 * SEC);

	/* initial >= max: every wait is the cap */
	p = DEFAULTS;
	p.initial_backoff = 200 * SEC;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 1), 120 * SEC);
	assert_int_equal(bs_policy_delay(&p, 1, 0.9), 120 * SEC);
	p.initial_backoff = 120 * SEC;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_backoff(&p, 7), 120 * SEC);

	/* initial 1 ns, max 30 days: ~77 doublings of 1.6 before the cap */
	p = DEFAULTS;
	p.initial_backoff = 1;
	p.max_backoff = 30ull * 24 * 3600 * SEC;
	check_policy_sane(&p);
	double ref = 1.0;
	for (uint32_t n = 1; n <= 120; n++) {
		double want = ref < (double)p.max_backoff ? ref : (double)p.max_backoff;
		double got = (double)bs_policy_backoff(&p, n);
		if (dabs(got - want) > 1.0 + want * 1e-12)
			fail_msg("n=%u: %.0f vs %.0f", n, got, want);
		ref *= 1.6;
	}
	assert_int_equal(bs_policy_backoff(&p, UINT32_MAX), p.max_backoff);
	assert_true(bs_policy_backoff(&p, 76) < p.max_backoff);
	assert_int_equal(bs_policy_backoff(&p, 78), p.max_backoff);

	/* full jitter may go down to zero but never below */
	p = DEFAULTS;
	p.jitter = 1.0;
	check_policy_sane(&p);
	assert_int_equal(bs_policy_delay(&p, 5, 0.0), 0);
	assert_true(bs_policy_delay(&p, 50, U_TOP) <= 240 * SEC);
}

/* An attempt may run for max(its own wait, min_connect_timeout). */
/* The bound on any wait taken from a shared table: at least every wait the
 * policy can draw. */
static void test_longest_wait(void **state)
{
	(void)state;
	struct bs_policy p = DEFAULTS;
	uint64_t longest = bs_policy_longest_wait(&p);
	assert_true(longest >= 144 * SEC && longest <= 144 * SEC + 2 * MS);
	for (uint32_t n = 1; n <= 40; n++)
		for (double u = 0; u < 1; u += 0.125)
			assert_true(bs_policy_wait(&p, n, 0, u) <= longest);
	p.max_backoff = 2 * MS; /* below the floor: the floor bounds */
	assert_true(bs_policy_longest_wait(&p) >= BS_RETRY_FLOOR);
	p = DEFAULTS;
	p.kind = BS_POLICY_LIST;
	p.ndelays = 2;
	p.delays[0] = 1 * SEC;
	p.delays[1] = 300 * SEC;
	assert_true(bs_policy_longest_wait(&p) >= 450 * SEC); /* x1.5 at most */
	for (uint32_t n = 1; n <= 4; n++)
		for (double u = 0; u < 1; u += 0.125)
			assert_true(bs_policy_wait(&p, n, 0, u) <= bs_policy_longest_wait(&p));
	/* other policies never take the default list's waits: a 2 s cap
	 * bounds a grpc schedule at 2.4 s (it once said 6 s, the list's 5 s) */
	p = DEFAULTS;
	p.initial_backoff = 200 * MS;
	p.max_backoff = 2 * SEC;
	p.min_connect_timeout = 0;
	longest = bs_policy_longest_wait(&p);
	assert_true(longest >= 2400 * MS && longest <= 2400 * MS + 2 * MS);
	p.kind = BS_POLICY_EXPONENTIAL;
	assert_true(bs_policy_longest_wait(&p) <= 2400 * MS + 2 * MS);
}

static void test_attempt_timeout(void **state)
{
	(void)state;
	struct bs_policy p = DEFAULTS;
	assert_int_equal(bs_policy_attempt_timeout(&p, 0), 20 * SEC);
	assert_int_equal(bs_policy_attempt_timeout(&p, 1 * SEC), 20 * SEC);
	assert_int_equal(bs_policy_attempt_timeout(&p, 20 * SEC), 20 * SEC);
	assert_int_equal(bs_policy_attempt_timeout(&p, 20 * SEC + 1), 20 * SEC + 1);
	assert_int_equal(bs_policy_attempt_timeout(&p, 144 * SEC), 144 * SEC);
	assert_int_equal(bs_policy_attempt_timeout(&p, UINT64_MAX), UINT64_MAX);
	for (uint32_t n = 1; n <= 30; n++) {
		uint64_t d = bs_policy_delay(&p, n, draw(SEED, n));
		uint64_t want = d > 20 * SEC ? d : 20 * SEC;
		assert_int_equal(bs_policy_attempt_timeout(&p, d), want);
	}
	p.min_connect_timeout = 0;
	assert_int_equal(bs_policy_attempt_timeout(&p, 0), 0);
	assert_int_equal(bs_policy_attempt_timeout(&p, 5), 5);
}

/* bs_policy_unit maps onto [0, 1); bs_mix64 is splitmix64. */
static void test_unit_range(void **state)
{
	(void)state;
	assert_true(bs_policy_unit(0) == 0.0);
	assert_true(bs_policy_unit(UINT64_MAX) < 1.0);
	assert_true(bs_policy_unit(UINT64_MAX) == U_TOP);
	assert_true(bs_policy_unit(1ull << 11) == 0x1.0p-53);
	assert_true(bs_policy_unit(1ull << 63) == 0.5);
	/* reference splitmix64 output for state 0 */
	assert_int_equal(bs_mix64(0), 0xe220a8397b1dcdafull);
	assert_true(bs_mix64(1) != bs_mix64(2));

	double sum = 0.0, lo = 1.0, hi = 0.0;
	unsigned buckets[10] = {0};
	const unsigned N = 100000;
	for (uint64_t k = 0; k < N; k++) {
		double u = draw(SEED, k);
		assert_true(u >= 0.0 && u < 1.0);
		sum += u;
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
		buckets[(int)(u * 10)]++;
	}
	assert_true(dabs(sum / N - 0.5) < 0.005);
	assert_true(lo < 0.001 && hi > 0.999);
	for (int i = 0; i < 10; i++)
		assert_true(buckets[i] > N / 10 - N / 100 && buckets[i] < N / 10 + N / 100);
	/* reproducible */
	assert_true(draw(SEED, 1234) == draw(SEED, 1234));
	assert_true(draw(SEED, 1234) != draw(SEED + 1, 1234));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_failure_exact),
		cmocka_unit_test(test_unjittered_sequence),
		cmocka_unit_test(test_jitter_bounds),
		cmocka_unit_test(test_jitter_after_cap),
		cmocka_unit_test(test_seeded_simulation),
		cmocka_unit_test(test_extremes),
		cmocka_unit_test(test_longest_wait),
		cmocka_unit_test(test_attempt_timeout),
		cmocka_unit_test(test_unit_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

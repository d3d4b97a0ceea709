/* Unit tests for the policy kinds beyond proportional gRPC: jitter modes,
 * the delay list, exponential with its stop rule, off; and their config
 * keys. Distributions are checked over 10 000 seeded draws. */
#include "unit.h"
#include "mix.h"
#include "unit_time.h"

#include <string.h>

#include "config.h"
#include "policy.h"

#define DRAWS 10000

static double draw(uint64_t k)
{
	return bs_policy_unit(bs_mix64(12345 + k * BS_GOLDEN));
}

static struct bs_policy grpc(int mode)
{
	struct bs_config c;
	bs_config_defaults(&c);
	c.policy.jitter_mode = mode;
	return c.policy;
}

struct stats {
	double min, max, mean;
};

static struct stats sample(const struct bs_policy *p, uint32_t failures, uint64_t prev)
{
	struct stats s = {1e300, 0, 0};
	for (uint64_t k = 0; k < DRAWS; k++) {
		uint64_t w = bs_policy_wait(p, failures, prev, draw(k));
		assert_true(w != BS_STOP);
		double x = (double)w;
		s.min = x < s.min ? x : s.min;
		s.max = x > s.max ? x : s.max;
		s.mean += x / DRAWS;
	}
	return s;
}

static void test_proportional_is_grpc(void **state)
{
	(void)state;
	struct bs_policy p = grpc(BS_JITTER_PROPORTIONAL);
	for (uint32_t f = 1; f < 20; f++)
		for (uint64_t k = 0; k < 100; k++)
			assert_int_equal(bs_policy_wait(&p, f, 0, draw(k)),
					 bs_policy_delay(&p, f, draw(k)));
}

static void test_full_jitter(void **state)
{
	(void)state;
	struct bs_policy p = grpc(BS_JITTER_FULL);
	double d = (double)bs_policy_backoff(&p, 4); /* 4.096 s */
	struct stats s = sample(&p, 4, 0);
	assert_true(s.min >= 0 && s.min < 0.01 * d);
	assert_true(s.max <= d && s.max > 0.99 * d);
	assert_true(s.mean > 0.49 * d && s.mean < 0.51 * d);
}

static void test_equal_jitter(void **state)
{
	(void)state;
	struct bs_policy p = grpc(BS_JITTER_EQUAL);
	double d = (double)bs_policy_backoff(&p, 4);
	struct stats s = sample(&p, 4, 0);
	assert_true(s.min >= 0.5 * d && s.min < 0.51 * d);
	assert_true(s.max <= d && s.max > 0.99 * d);
	assert_true(s.mean > 0.74 * d && s.mean < 0.76 * d);
}

static void test_decorrelated_jitter(void **state)
{
	(void)state;
	struct bs_policy p = grpc(BS_JITTER_DECORRELATED);
	/* U[base, 3 * prev], capped */
	struct stats s = sample(&p, 3, 2 * SEC);
	assert_true(s.min >= (double)SEC && s.min < 1.06 * SEC);
	assert_true(s.max <= 6.0 * SEC && s.max > 5.94 * SEC);
	assert_true(s.mean > 3.45 * SEC && s.mean < 3.55 * SEC);
	/* no previous wait: starts from base */
	s = sample(&p, 1, 0);
	assert_true(s.min >= (double)SEC && s.max <= 3.0 * SEC);
	/* the cap */
	s = sample(&p, 9, 100 * SEC);
	assert_true(s.max <= (double)p.max_backoff);
	assert_true(s.min >= (double)SEC);
}

static void test_list_default_and_jitter(void **state)
{
	(void)state;
	struct bs_policy p = grpc(0);
	p.kind = BS_POLICY_LIST;
	static const uint64_t want[] = {0, 10 * MS, 10 * MS, 100 * MS, 100 * MS, 500 * MS,
					500 * MS, 3 * SEC, 3 * SEC, 5 * SEC};
	for (uint32_t f = 1; f <= 14; f++) {
		uint64_t d = want[f <= 10 ? f - 1 : 9]; /* saturates at the last */
		struct stats s = sample(&p, f, 0);
		if (d == 0) {
			assert_true(s.max == 0); /* 0 stays 0 */
			continue;
		}
		if (d / 2 < BS_RETRY_FLOOR) { /* the floor lifts the low end */
			assert_true(s.min == BS_RETRY_FLOOR);
			assert_true(s.max <= 1.5 * d && s.max > 1.49 * d);
			continue;
		}
		assert_true(s.min >= 0.5 * d && s.min < 0.51 * d);
		assert_true(s.max <= 1.5 * d && s.max > 1.49 * d);
		assert_true(s.mean > 0.99 * d && s.mean < 1.01 * d);
	}
}

/* Audit row 9: no policy, no jitter mode, no parameters ever make a retry
 * loop run hotter than the floor, but for a list's explicit, unrepeated 0. */
static void test_every_wait_has_a_floor(void **state)
{
	(void)state;
	for (int kind = BS_POLICY_GRPC; kind <= BS_POLICY_EXPONENTIAL; kind++) {
		for (int mode = BS_JITTER_PROPORTIONAL; mode <= BS_JITTER_DECORRELATED; mode++) {
			struct bs_policy p = grpc(mode);
			p.kind = kind;
			p.initial_backoff = 100000; /* 100 us */
			p.max_backoff = 2 * MS;
			p.delays[0] = 1000;
			p.ndelays = kind == BS_POLICY_LIST;
			for (uint32_t f = 1; f <= 12; f++)
				for (uint64_t k = 0; k < 2000; k++) {
					uint64_t w = bs_policy_wait(&p, f, 3000, draw(k));
					assert_true(w == BS_STOP || w >= BS_RETRY_FLOOR);
				}
		}
	}
	struct bs_policy p = grpc(0);
	p.initial_backoff = 1000;
	assert_true(bs_responsive_up(&p, 0, 0.0) >= BS_RETRY_FLOOR);
	assert_true(bs_responsive_up(&p, 2000, 0.0) >= BS_RETRY_FLOOR);
}

static void test_list_zero_only_where_explicit(void **state)
{
	(void)state;
	struct bs_policy p = grpc(0);
	p.kind = BS_POLICY_LIST;
	p.ndelays = 2;
	p.delays[0] = 0;
	p.delays[1] = 0; /* refused by config; floored if it slips through */
	assert_int_equal(bs_policy_wait(&p, 1, 0, 0.5), 0);
	assert_int_equal(bs_policy_wait(&p, 2, 0, 0.5), BS_RETRY_FLOOR);
	assert_int_equal(bs_policy_wait(&p, 50, 0, 0.5), BS_RETRY_FLOOR);

	struct bs_config c;
	const char *why;
	bs_config_defaults(&c);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "0", &why), -1);
	assert_non_null(strstr(why, "cannot be 0"));
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "1s, 0ms", &why), -1);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "0, 0, 5ms", &why), 0);
	assert_int_equal(c.policy.ndelays, 3);
}

static void test_list_from_config(void **state)
{
	(void)state;
	struct bs_config c;
	const char *why;
	bs_config_defaults(&c);
	assert_int_equal(bs_config_set(&c, "backoff", "policy", "list", &why), 0);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "1s, 250ms,2s", &why), 0);
	assert_int_equal(c.policy.kind, BS_POLICY_LIST);
	assert_int_equal(c.policy.ndelays, 3);
	assert_int_equal(bs_policy_wait(&c.policy, 2, 0, 0.5), 250 * MS);
	assert_int_equal(bs_policy_wait(&c.policy, 7, 0, 0.5), 2 * SEC);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "1s,,2s", &why), -1);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "", &why), -1);
	assert_int_equal(bs_config_set(&c, "backoff", "delays", "1s, soon", &why), -1);
	assert_int_equal(c.policy.ndelays, 3); /* unchanged */
	assert_int_equal(bs_config_set(&c, "backoff", "policy", "fibonacci", &why), -1);
	assert_int_equal(bs_config_set(&c, "backoff", "jitter_mode", "Decorrelated", &why), 0);
	assert_int_equal(c.policy.jitter_mode, BS_JITTER_DECORRELATED);
	assert_int_equal(bs_config_set(&c, "backoff", "jitter_mode", "half", &why), -1);
	assert_int_equal(bs_config_set(&c, NULL, "policy", " off ", &why), 0);
	assert_int_equal(c.policy.kind, BS_POLICY_OFF);
}

static void test_exponential_stops_before_max(void **state)
{
	(void)state;
	struct bs_policy p = grpc(0);
	p.kind = BS_POLICY_EXPONENTIAL;
	p.initial_backoff = 1 * SEC;
	p.multiplier = 2.0;
	p.max_backoff = 10 * SEC;
	/* waits of 1, 2, 4 and 8 s: 5 attempts, then stop; no jitter */
	assert_int_equal(bs_policy_wait(&p, 1, 0, 0.9), 1 * SEC);
	assert_int_equal(bs_policy_wait(&p, 2, 0, 0.1), 2 * SEC);
	assert_int_equal(bs_policy_wait(&p, 3, 0, 0.7), 4 * SEC);
	assert_int_equal(bs_policy_wait(&p, 4, 0, 0.3), 8 * SEC);
	assert_true(bs_policy_wait(&p, 5, 0, 0.3) == BS_STOP);
	assert_true(bs_policy_wait(&p, 1000000, 0, 0.3) == BS_STOP);
	p.initial_backoff = 10 * SEC; /* already at the cap: one attempt only */
	assert_true(bs_policy_wait(&p, 1, 0, 0.3) == BS_STOP);
}

static void test_off_stops(void **state)
{
	(void)state;
	struct bs_policy p = grpc(0);
	p.kind = BS_POLICY_OFF;
	assert_true(bs_policy_wait(&p, 1, 0, 0.5) == BS_STOP);
}

static void test_responsive(void **state)
{
	(void)state;
	struct bs_config c;
	const char *why;
	bs_config_defaults(&c);
	assert_int_equal(bs_config_set(&c, "backoff", "policy", "responsive", &why), 0);
	struct bs_policy *p = &c.policy;
	assert_true(p->up_multiplier == 1.5 && p->down_multiplier == 0.9);
	assert_int_equal(p->down_threshold, 10);
	assert_true(p->randomization_factor == 0.3);
	assert_int_equal(p->max_randomization, 120 * SEC);
	/* up: 0 -> initial exactly, then * 1.5 within +-30% */
	assert_int_equal(bs_responsive_up(p, 0, 0.9), p->initial_backoff);
	uint64_t lo = ~0ull, hi = 0;
	double mean = 0;
	for (uint64_t k = 0; k < DRAWS; k++) {
		uint64_t v = bs_responsive_up(p, 2 * SEC, draw(k));
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
		mean += (double)v / DRAWS;
	}
	assert_true(lo >= 2.1 * SEC && lo < 2.12 * SEC); /* 3s - 30% */
	assert_true(hi <= 3.9 * SEC && hi > 3.88 * SEC); /* 3s + 30% */
	assert_true(mean > 2.97 * SEC && mean < 3.03 * SEC);
	/* the randomisation is capped at max_randomization, the value at max_backoff */
	assert_int_equal(bs_config_set(&c, "backoff", "max_randomization", "100ms", &why), 0);
	assert_int_equal(bs_responsive_up(p, 2 * SEC, 0.0), 3 * SEC - 100 * MS);
	assert_int_equal(bs_responsive_up(p, 100 * SEC, 0.5), p->max_backoff);
	/* down: * 0.9, randomised; below initial it is 0 */
	assert_int_equal(bs_responsive_down(p, 10 * SEC, 0.5), 9 * SEC);
	assert_int_equal(bs_responsive_down(p, 1 * SEC, 0.5), 0);
	/* keys */
	assert_int_equal(bs_config_set(&c, NULL, "up_multiplier", "0.5", &why), -1);
	assert_int_equal(bs_config_set(&c, NULL, "randomization_factor", "1.5", &why), -1);
	assert_int_equal(bs_config_set(&c, NULL, "down_threshold", "3", &why), 0);
	assert_int_equal(p->down_threshold, 3);
	assert_int_equal(bs_config_set(&c, NULL, "down_multiplier", "0.5", &why), 0);
	assert_true(p->down_multiplier == 0.5);
}

/* bs_policy_wait_range holds every draw of bs_policy_wait (and, for
 * responsive, of bs_responsive_up), and is tight: the draws come near both
 * ends. */
static void check_range(const struct bs_policy *p, uint32_t failures, uint64_t prev)
{
	uint64_t lo, hi, min = UINT64_MAX, max = 0;
	bs_policy_wait_range(p, failures, prev, &lo, &hi);
	assert_true(lo <= hi);
	for (uint64_t k = 0; k < 2000; k++) {
		uint64_t w = p->kind == BS_POLICY_RESPONSIVE ? bs_responsive_up(p, prev, draw(k))
							     : bs_policy_wait(p, failures, prev, draw(k));
		if (w == BS_STOP)
			return;
		if (w + 1 < lo || w > hi + 1)
			fail_msg("kind %d mode %d failures %u prev %llu: %llu not in [%llu, %llu]",
				 p->kind, p->jitter_mode, failures, (unsigned long long)prev,
				 (unsigned long long)w, (unsigned long long)lo,
				 (unsigned long long)hi);
		min = w < min ? w : min;
		max = w > max ? w : max;
	}
	uint64_t slack = hi / 50 + 1; /* of hi: the floor may gather most draws */
	if (min > lo + slack || max + slack < hi)
		fail_msg("kind %d mode %d failures %u: draws [%llu, %llu], range [%llu, %llu]",
			 p->kind, p->jitter_mode, failures, (unsigned long long)min,
			 (unsigned long long)max, (unsigned long long)lo, (unsigned long long)hi);
}

static void test_wait_range_holds_the_draws(void **state)
{
	(void)state;
	static const uint64_t prevs[] = {0, 5 * MS, 700 * MS, 3 * SEC, 200 * SEC};
	struct bs_policy ps[8];
	unsigned n = 0;
	for (int mode = BS_JITTER_PROPORTIONAL; mode <= BS_JITTER_DECORRELATED; mode++)
		ps[n++] = grpc(mode);
	ps[n] = grpc(BS_JITTER_FULL); /* full jitter's low end is the floor */
	ps[n++].initial_backoff = 1 * MS;
	ps[n] = grpc(BS_JITTER_PROPORTIONAL);
	ps[n++].kind = BS_POLICY_LIST; /* the default list, its 0 and 10ms */
	ps[n] = grpc(BS_JITTER_PROPORTIONAL);
	ps[n++].kind = BS_POLICY_EXPONENTIAL;
	ps[n] = grpc(BS_JITTER_PROPORTIONAL);
	ps[n++].kind = BS_POLICY_RESPONSIVE;
	for (unsigned i = 0; i < n; i++)
		for (uint32_t f = 1; f <= 14; f++)
			for (size_t j = 0; j < sizeof prevs / sizeof prevs[0]; j++)
				check_range(&ps[i], f, prevs[j]);
	uint64_t lo, hi;
	bs_policy_wait_range(&ps[4], 5, 0, &lo, &hi); /* 1ms * 1.6^4 = 6.5ms: floored */
	assert_int_equal(lo, BS_RETRY_FLOOR);
	assert_int_equal(hi, BS_RETRY_FLOOR);
	bs_policy_wait_range(&ps[5], 1, 0, &lo, &hi); /* the list's explicit 0 */
	assert_int_equal(lo, 0);
	assert_int_equal(hi, 0);
	bs_policy_wait_range(&ps[0], 1, 0, &lo, &hi); /* gRPC's first wait: exact */
	assert_int_equal(lo, 1 * SEC);
	assert_int_equal(hi, 1 * SEC);
}

/* The table's interval is another process's word: bounded by max_backoff. */
static void test_responsive_bounded(void **state)
{
	(void)state;
	struct bs_config c;
	const char *why;
	bs_config_defaults(&c);
	assert_int_equal(bs_config_set(&c, "backoff", "policy", "responsive", &why), 0);
	assert_int_equal(bs_config_set(&c, "backoff", "max_backoff", "2s", &why), 0);
	assert_int_equal(bs_responsive_bounded(&c.policy, 0), 0);
	assert_int_equal(bs_responsive_bounded(&c.policy, SEC), SEC);
	assert_int_equal(bs_responsive_bounded(&c.policy, 1000 * SEC), 2 * SEC);
	assert_int_equal(bs_responsive_bounded(&c.policy, UINT64_MAX), 2 * SEC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_range_holds_the_draws),
		cmocka_unit_test(test_proportional_is_grpc),
		cmocka_unit_test(test_full_jitter),
		cmocka_unit_test(test_equal_jitter),
		cmocka_unit_test(test_decorrelated_jitter),
		cmocka_unit_test(test_list_default_and_jitter),
		cmocka_unit_test(test_list_from_config),
		cmocka_unit_test(test_every_wait_has_a_floor),
		cmocka_unit_test(test_list_zero_only_where_explicit),
		cmocka_unit_test(test_exponential_stops_before_max),
		cmocka_unit_test(test_off_stops),
		cmocka_unit_test(test_responsive),
		cmocka_unit_test(test_responsive_bounded),
	};
	return cmocka_run_group_tests_name("policy kinds", tests, NULL, NULL);
}

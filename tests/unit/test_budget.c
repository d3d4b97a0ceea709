/* Unit tests for budget.c: a call's start, deadlines, attempts counted and
 * the reason it stopped. Pure: every time is made up here. */
#include "unit.h"
#include "unit_time.h"

#include "budget.h"
#include "clock.h"

#include <string.h>

#define T0 (1000 * MS)

static void test_no_limits(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 0, 0, BS_BUDGET_NO_TIMEOUT);
	assert_true(b.start == T0);
	assert_true(bs_budget_end(&b) == BS_NEVER);
	bs_budget_count(&b, 1000000);
	assert_int_equal(bs_budget_check(&b, BS_NEVER - 1), BS_STOP_NONE);
	assert_int_equal(bs_budget_check_next(&b, BS_NEVER - 1), BS_STOP_NONE);
	assert_int_equal(b.stop, BS_STOP_NONE);
	assert_false(bs_budget_last(&b, BS_NEVER - 1));
}

static void test_max_attempts(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 0, 3, BS_BUDGET_NO_TIMEOUT);
	bs_budget_count(&b, 1);
	assert_false(bs_budget_last(&b, T0));
	assert_int_equal(bs_budget_check(&b, T0), BS_STOP_NONE);
	bs_budget_count(&b, 1);
	assert_true(bs_budget_last(&b, T0)); /* the third failure ends it */
	assert_int_equal(bs_budget_check(&b, T0), BS_STOP_NONE);
	bs_budget_count(&b, 1);
	assert_int_equal(bs_budget_check(&b, T0), BS_STOP_MAX_ATTEMPTS);
	assert_int_equal(b.stop, BS_STOP_MAX_ATTEMPTS);
	assert_int_equal(b.attempts, 3);
}

static void test_max_elapsed(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 300 * MS, 0, BS_BUDGET_NO_TIMEOUT);
	assert_true(bs_budget_end(&b) == T0 + 300 * MS);
	assert_int_equal(bs_budget_check(&b, T0 + 299 * MS), BS_STOP_NONE);
	assert_int_equal(bs_budget_check_next(&b, T0 + 299 * MS), BS_STOP_NONE);
	assert_false(bs_budget_last(&b, T0 + 299 * MS));
	assert_true(bs_budget_last(&b, T0 + 300 * MS));
	assert_int_equal(bs_budget_check_next(&b, T0 + 460 * MS), BS_STOP_NEXT_ELAPSED);
	assert_int_equal(bs_budget_check(&b, T0 + 300 * MS), BS_STOP_MAX_ELAPSED);
	assert_true(bs_budget_elapsed(&b, T0 + 300 * MS) == 300 * MS);
}

static void test_program_timeout(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 0, 0, 200 * MS);
	assert_true(b.elapsed_end == BS_NEVER);
	assert_true(bs_budget_end(&b) == T0 + 200 * MS);
	assert_int_equal(bs_budget_check_next(&b, T0 + 250 * MS), BS_STOP_NEXT_PROG);
	assert_int_equal(bs_budget_check(&b, T0 + 200 * MS), BS_STOP_PROG_TIMEOUT);
	/* the earlier end counts; max_elapsed is named first on a tie */
	bs_budget_init(&b, T0, 100 * MS, 0, 200 * MS);
	assert_true(bs_budget_end(&b) == T0 + 100 * MS);
	assert_int_equal(bs_budget_check_next(&b, T0 + 150 * MS), BS_STOP_NEXT_ELAPSED);
	bs_budget_init(&b, T0, 300 * MS, 0, 200 * MS);
	assert_true(bs_budget_end(&b) == T0 + 200 * MS);
	assert_int_equal(bs_budget_check(&b, T0 + 250 * MS), BS_STOP_PROG_TIMEOUT);
	bs_budget_init(&b, T0, 200 * MS, 0, 200 * MS);
	assert_int_equal(bs_budget_check(&b, T0 + 200 * MS), BS_STOP_MAX_ELAPSED);
}

/* The order of the checks: the policy, then max_attempts, then the clock. */
static void test_check_order(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 100 * MS, 2, 50 * MS);
	uint64_t late = T0 + 1000 * MS;
	assert_int_equal(bs_budget_check(&b, late), BS_STOP_MAX_ELAPSED);
	bs_budget_count(&b, 2);
	assert_int_equal(bs_budget_check(&b, late), BS_STOP_MAX_ATTEMPTS);
	bs_budget_policy_done(&b);
	assert_int_equal(bs_budget_check(&b, T0), BS_STOP_POLICY);
	assert_int_equal(b.stop, BS_STOP_POLICY);
}

static void test_stop_outside_reasons(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, T0, 0, 0, BS_BUDGET_NO_TIMEOUT);
	assert_int_equal(bs_budget_stop(&b, BS_STOP_SIGNAL), BS_STOP_SIGNAL);
	assert_int_equal(b.stop, BS_STOP_SIGNAL);
	assert_int_equal(bs_budget_stop(&b, BS_STOP_TABLE_FULL), BS_STOP_TABLE_FULL);
	assert_int_equal(b.stop, BS_STOP_TABLE_FULL);
}

static void test_overflow_saturates(void **state)
{
	(void)state;
	struct bs_budget b;
	bs_budget_init(&b, BS_NEVER - 10, BS_NEVER - 1, UINT32_MAX, BS_NEVER - 1);
	assert_true(b.elapsed_end == BS_NEVER && b.prog_end == BS_NEVER);
	bs_budget_count(&b, UINT32_MAX);
	bs_budget_count(&b, 5);
	assert_true(b.attempts == UINT32_MAX);
	assert_int_equal(bs_budget_check(&b, 0), BS_STOP_MAX_ATTEMPTS);
	assert_true(bs_budget_elapsed(&b, 0) == 0); /* a time before the start */
}

static void test_texts(void **state)
{
	(void)state;
	static const struct {
		enum bs_stop why;
		const char *text;
	} want[] = {
		{BS_STOP_MAX_ATTEMPTS, "max_attempts reached"},
		{BS_STOP_MAX_ELAPSED, "max_elapsed reached"},
		{BS_STOP_NEXT_ELAPSED, "next attempt is past max_elapsed"},
		{BS_STOP_PROG_TIMEOUT, "the program's SO_SNDTIMEO expired"},
		{BS_STOP_NEXT_PROG, "next attempt is past the program's SO_SNDTIMEO"},
		{BS_STOP_POLICY, "the policy allows no more attempts"},
		{BS_STOP_TABLE_FULL, "destination table full"},
		{BS_STOP_SIGNAL, "a signal interrupted the wait"},
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++)
		assert_string_equal(bs_stop_text(want[i].why), want[i].text);
	for (int w = 0; w < BS_STOP_COUNT; w++)
		assert_true(bs_stop_text((enum bs_stop)w)[0] != '\0');
	assert_non_null(bs_stop_text(BS_STOP_COUNT));
	assert_non_null(bs_stop_text((enum bs_stop)-1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_limits),
		cmocka_unit_test(test_max_attempts),
		cmocka_unit_test(test_max_elapsed),
		cmocka_unit_test(test_program_timeout),
		cmocka_unit_test(test_check_order),
		cmocka_unit_test(test_stop_outside_reasons),
		cmocka_unit_test(test_overflow_saturates),
		cmocka_unit_test(test_texts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

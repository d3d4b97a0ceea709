/* Unit tests for attempt.c: the one place a connect's retry is decided.
 * Pure: every state word, probe word and time is made up here. */
#include "unit.h"
#include "unit_time.h"

#include "attempt.h"
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include "table.h"

#define T0 (1000 * SEC)
#define LONGEST (3 * SEC)

/* A view of a destination in state s (no probe, no reset, no newcomer). */
static struct bs_attempt_view view(uint64_t s)
{
	struct bs_attempt_view v = {s, 0, 0, 0, 1, UINT64_MAX};
	return v;
}

static struct bs_attempt fresh(uint64_t max_elapsed, uint32_t max_attempts)
{
	struct bs_config cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.max_elapsed = max_elapsed;
	cfg.max_attempts = max_attempts;
	cfg.policy.min_connect_timeout = 20 * SEC;
	struct bs_attempt a;
	bs_attempt_init(&a, &cfg, T0, BS_BUDGET_NO_TIMEOUT);
	return a;
}

static void test_healthy_and_probation_go(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	struct bs_attempt_view v = view(0);
	struct bs_decision d = bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(d.verdict, BS_GO);
	assert_int_equal(d.reset, 0);
	v = view(bs_state_make(T0 + 5 * SEC, 3) | BS_PROBATION);
	assert_int_equal(bs_attempt_decide(&a, &v, T0, LONGEST).verdict, BS_GO);
}

/* Backing off: wait until the next allowed time, then take the probe. */
static void test_wait_then_probe(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t s = bs_state_make(T0 + 2 * SEC, 1);
	bs_attempt_join(&a, s, 0, 111);
	struct bs_attempt_view v = view(s);
	struct bs_decision d = bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(d.verdict, BS_WAIT);
	assert_true(d.until == T0 + 2 * SEC);
	assert_int_equal(a.b.attempts, 0); /* joined: earlier failures are not its */
	d = bs_attempt_decide(&a, &v, T0 + 2 * SEC, LONGEST);
	assert_int_equal(d.verdict, BS_TAKE_PROBE);
	assert_int_equal(d.join, 0);
	assert_int_equal(a.last_err, 111);
}

/* A probe held by a live holder is waited for until it goes stale (or the
 * budget ends); a stale one, or a dead holder's, is taken over. */
static void test_single_flight(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(10 * SEC, 0);
	uint64_t s = bs_state_make(T0, 1);
	bs_attempt_join(&a, s, 0, 0);
	struct bs_attempt_view v = view(s);
	v.probe = bs_probe_make(T0 + 4 * SEC, 77);
	struct bs_decision d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST);
	assert_int_equal(d.verdict, BS_WAIT);
	assert_true(d.until == bs_probe_stale_at(v.probe)); /* (ms, rounded up) */
	v.probe = bs_probe_make(T0 + 30 * SEC, 77); /* past the budget's end */
	d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + 10 * SEC);
	assert_int_equal(bs_attempt_decide(&a, &v, T0 + 10 * SEC, LONGEST).verdict, BS_END);
	a = fresh(0, 0);
	bs_attempt_join(&a, s, 0, 0);
	v.probe = bs_probe_make(T0 + 4 * SEC, 77);
	assert_int_equal(bs_attempt_decide(&a, &v, bs_probe_stale_at(v.probe), LONGEST).verdict,
			 BS_TAKE_PROBE);
	v.probe_live = 0;
	d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST);
	assert_int_equal(d.verdict, BS_TAKE_PROBE);
	/* what to swap, and the state it must still be after the swap */
	assert_true(d.probe == v.probe && d.state == s);
}

/* Steps: each new failure of the destination counts one; its own failure
 * counts one even when it folded into another's step; a count that went
 * down (healthy or reset in between) counts all it shows. */
static void test_steps(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	bs_attempt_join(&a, bs_state_make(T0, 2), 0, 0);
	struct bs_attempt_view v = view(bs_state_make(T0 + 100 * SEC, 5));
	v.last_err = 113;
	bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(a.b.attempts, 3);
	assert_int_equal(a.last_err, 113);
	bs_attempt_failed(&a, 111); /* folded: the count did not move */
	bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(a.b.attempts, 4);
	assert_int_equal(a.last_err, 111);
	bs_attempt_failed(&a, 111); /* its own, published: one, not two */
	v = view(bs_state_make(T0 + 100 * SEC, 6));
	v.last_err = 111;
	bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(a.b.attempts, 5);
	v = view(bs_state_make(T0 + 100 * SEC, 2)); /* went healthy, failed twice */
	bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_int_equal(a.b.attempts, 7);
	assert_int_equal(a.seen_fail, 2);
}

/* The table's word is advice: a next time beyond the schedule's longest
 * wait after the attempt last learned of a step is cut to that; a new
 * step moves the anchor. */
static void test_untrusted_next_time(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t s = bs_state_make(T0 + 3600 * SEC, 1);
	bs_attempt_join(&a, s, 0, 0);
	struct bs_attempt_view v = view(s);
	struct bs_decision d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + LONGEST);
	assert_int_equal(bs_attempt_decide(&a, &v, T0 + LONGEST, LONGEST).verdict, BS_TAKE_PROBE);
	v = view(bs_state_make(T0 + 3600 * SEC, 2));
	d = bs_attempt_decide(&a, &v, T0 + 5 * SEC, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + 5 * SEC + LONGEST);
	/* an anchor near the end of time saturates */
	a.anchor_at = UINT64_MAX - SEC;
	d = bs_attempt_decide(&a, &v, T0 + 6 * SEC, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + 3600 * SEC);
}

/* An operator's reset sends it at once, once, whatever the state says. */
static void test_reset(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t s = bs_state_make(T0 + 60 * SEC, 4);
	bs_attempt_join(&a, s, 7, 0);
	struct bs_attempt_view v = view(s);
	v.resets = 8;
	struct bs_decision d = bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_true(d.verdict == BS_GO && d.reset);
	d = bs_attempt_decide(&a, &v, T0, LONGEST);
	assert_true(d.verdict == BS_WAIT && !d.reset);
}

/* The budget: checked now, and against the next due time before a wait. */
static void test_budget_ends(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 2);
	uint64_t s = bs_state_make(T0 + SEC, 1);
	bs_attempt_join(&a, bs_state_make(T0, 0), 0, 0);
	struct bs_attempt_view v = view(s);
	assert_int_equal(bs_attempt_decide(&a, &v, T0, LONGEST).verdict, BS_WAIT);
	v = view(bs_state_make(T0 + 2 * SEC, 2));
	assert_int_equal(bs_attempt_decide(&a, &v, T0, LONGEST).verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_MAX_ATTEMPTS);

	a = fresh(1500 * MS, 0);
	bs_attempt_join(&a, s, 0, 0);
	v = view(bs_state_make(T0 + 2 * SEC, 1));
	assert_int_equal(bs_attempt_decide(&a, &v, T0, LONGEST).verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_NEXT_ELAPSED);
	a = fresh(1500 * MS, 0);
	bs_attempt_join(&a, s, 0, 0);
	v = view(s);
	assert_int_equal(bs_attempt_decide(&a, &v, T0 + 1500 * MS, LONGEST).verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_MAX_ELAPSED);

	/* a blocking socket's SO_SNDTIMEO bounds it too (TCP Fast Open's wait
	 * once ignored it) */
	struct bs_config cfg;
	memset(&cfg, 0, sizeof cfg);
	bs_attempt_init(&a, &cfg, T0, 500 * MS);
	bs_attempt_join(&a, s, 0, 0);
	v = view(s);
	assert_int_equal(bs_attempt_decide(&a, &v, T0, LONGEST).verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_NEXT_PROG);
}

/* A newcomer to a shared schedule goes at join_at when that is earlier
 * than the schedule's time, claiming it (join set); not when it is later. */
static void test_newcomer(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t s = bs_state_make(T0 + 10 * SEC, 3);
	bs_attempt_join(&a, s, 0, 0);
	struct bs_attempt_view v = view(s);
	v.join_at = T0 + SEC;
	struct bs_decision d = bs_attempt_decide(&a, &v, T0, LONGEST * 10);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + SEC);
	d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST * 10);
	assert_true(d.verdict == BS_TAKE_PROBE && d.join);
	v.join_at = T0 + 20 * SEC;
	d = bs_attempt_decide(&a, &v, T0 + SEC, LONGEST * 10);
	assert_true(d.verdict == BS_WAIT && d.until == T0 + 10 * SEC);
}

/* A connect that may not wait: healthy goes; inside the window nothing
 * goes but (pace) one claimed attempt per `every` since the last outcome,
 * a window probe before the next allowed time, the next step after it. */
static void test_no_wait(void **state)
{
	(void)state;
	uint64_t s = bs_state_make(T0 + 5 * SEC, 2);
	assert_int_equal(bs_attempt_no_wait(0, T0, SEC, T0), BS_NW_GO);
	assert_int_equal(bs_attempt_no_wait(s | BS_PROBATION, T0, SEC, T0), BS_NW_GO);
	/* defer (no probes) */
	assert_int_equal(bs_attempt_no_wait(s, T0, 0, T0 + SEC), BS_NW_WINDOW);
	assert_int_equal(bs_attempt_no_wait(s, T0, 0, T0 + 5 * SEC), BS_NW_DUE);
	/* pace */
	assert_int_equal(bs_attempt_no_wait(s, T0, SEC, T0 + SEC - 1), BS_NW_WINDOW);
	assert_int_equal(bs_attempt_no_wait(s, T0, SEC, T0 + SEC), BS_NW_CLAIM_PROBE);
	assert_int_equal(bs_attempt_no_wait(s, T0, SEC, T0 + 6 * SEC), BS_NW_CLAIM_DUE);
	/* due, but an attempt went out less than `every` ago: not another */
	assert_int_equal(bs_attempt_no_wait(s, T0 + 5500 * MS, SEC, T0 + 6 * SEC), BS_NW_WINDOW);
	/* an outcome time later than any real one (a damaged shared table)
	 * is claimed over, never waited on */
	assert_int_equal(bs_attempt_no_wait(s, UINT64_MAX - 1, SEC, T0 + 6 * SEC), BS_NW_CLAIM_DUE);
	assert_int_equal(bs_attempt_no_wait(s, T0 + 6 * SEC + SEC / 2, SEC, T0 + 6 * SEC),
			 BS_NW_WINDOW); /* (a concurrent claim a moment ahead: not garbage) */
}

/* The responsive policy: wait the interval (cut at the budget's end), then
 * go; after its own failure, end when the budget is spent. */
static void test_paced(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(10 * SEC, 3);
	struct bs_decision d = bs_attempt_paced(&a, 0, T0);
	assert_int_equal(d.verdict, BS_GO);
	d = bs_attempt_paced(&a, 2 * SEC, T0);
	assert_int_equal(d.verdict, BS_WAIT);
	assert_true(d.until == T0 + 2 * SEC);
	/* the first attempt waits at most until the budget's end, then goes */
	d = bs_attempt_paced(&a, 30 * SEC, T0 + 1 * SEC);
	assert_int_equal(d.verdict, BS_WAIT);
	assert_true(d.until == T0 + 10 * SEC);
	/* a failure counts one; the next go past max_elapsed ends it */
	bs_attempt_failed(&a, 111);
	d = bs_attempt_paced(&a, 30 * SEC, T0 + 2 * SEC);
	assert_int_equal(d.verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_NEXT_ELAPSED);
	assert_int_equal(a.b.attempts, 1);
	assert_int_equal(a.last_err, 111);

	/* max_attempts: the third failure ends it, whatever the interval */
	a = fresh(0, 3);
	for (int i = 0; i < 2; i++) {
		bs_attempt_failed(&a, 111);
		assert_int_equal(bs_attempt_paced(&a, SEC, T0).verdict, BS_WAIT);
	}
	bs_attempt_failed(&a, 111);
	assert_int_equal(bs_attempt_paced(&a, 0, T0).verdict, BS_END);
	assert_int_equal(a.b.stop, BS_STOP_MAX_ATTEMPTS);
	/* an interval near the clock's end does not wrap */
	a = fresh(0, 0);
	d = bs_attempt_paced(&a, UINT64_MAX - 5, T0);
	assert_int_equal(d.verdict, BS_WAIT);
	assert_true(d.until > T0);
}

/* Another process holds the probe's lock byte: its in-time probe is
 * waited for; an empty word once (it is about to swap), then not again; a
 * stale word not at all (its holder is gone or stopped). */
static void test_lock_busy(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t p = bs_attempt_probe(T0, 2 * SEC, 42);
	int waited = 0;
	assert_int_equal(bs_attempt_lock_busy_waits(&a, p, T0 + SEC, &waited), 1);
	assert_int_equal(bs_attempt_lock_busy_waits(&a, p, T0 + 3 * SEC + BS_PROBE_GRACE, &waited), 0);
	assert_int_equal(waited, 0);
	assert_int_equal(bs_attempt_lock_busy_waits(&a, 0, T0, &waited), 1);
	assert_int_equal(waited, 1);
	assert_int_equal(bs_attempt_lock_busy_waits(&a, 0, T0 + SEC, &waited), 0);
	assert_int_equal(bs_attempt_lock_busy_waits(&a, p, T0 + SEC, &waited), 1);
}

/* A probe word whose stale time lies an hour ahead (another time
 * namespace's clock, a forged word) holds the others no longer than this
 * policy's longest probe, from when they first saw it; a new word starts
 * the count afresh. */
static void test_probe_stale_time_is_bounded(void **state)
{
	(void)state;
	struct bs_attempt a = fresh(0, 0);
	uint64_t s = bs_state_make(T0, 1);
	bs_attempt_join(&a, s, 0, 0);
	struct bs_attempt_view v = view(s);
	v.probe = bs_probe_make(T0 + 3600 * SEC, 77);
	uint64_t seen = T0 + SEC, most = a.probe_most;
	assert_true(most >= 20 * SEC && most < 3600 * SEC);
	struct bs_decision d = bs_attempt_decide(&a, &v, seen, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == seen + most);
	d = bs_attempt_decide(&a, &v, seen + most / 2, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == seen + most); /* (not a moving bound) */
	assert_int_equal(bs_attempt_decide(&a, &v, seen + most, LONGEST).verdict, BS_TAKE_PROBE);
	int waited = 0;
	assert_int_equal(bs_attempt_lock_busy_waits(&a, v.probe, seen + most, &waited), 0);
	v.probe = bs_probe_make(T0 + 7200 * SEC, 78);
	d = bs_attempt_decide(&a, &v, seen + most, LONGEST);
	assert_true(d.verdict == BS_WAIT && d.until == 2 * most + seen);
}

/* A socket as options: TCP_USER_TIMEOUT, TCP_SYNCNT, IPV6_V6ONLY. */
struct fake_sock {
	int user, syncnt, v6only, asked;
};

static int fake_option(void *sock, int level, int name)
{
	struct fake_sock *f = sock;
	f->asked++;
	(void)level;
	return name == TCP_USER_TIMEOUT ? f->user : name == TCP_SYNCNT ? f->syncnt : f->v6only;
}

static int host_six(void)
{
	return 6;
}

static void test_final_errors(void **state)
{
	(void)state;
	struct sockaddr_in mc = {.sin_family = AF_INET}, lo = {.sin_family = AF_INET};
	struct sockaddr_in6 mapped = {.sin6_family = AF_INET6};
	inet_pton(AF_INET, "224.0.0.1", &mc.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.sin6_addr);
	struct fake_sock plain = {0, 6, 0, 0}, bounded = {300, 6, 0, 0}, few = {0, 1, 0, 0},
			 v6only = {0, 6, 1, 0};
	const struct sockaddr *to_lo = (struct sockaddr *)&lo;
	assert_int_equal(bs_attempt_error_is_final(ETIMEDOUT, to_lo, fake_option, &plain, host_six), 0);
	assert_int_equal(bs_attempt_error_is_final(ETIMEDOUT, to_lo, fake_option, &bounded, host_six), 1);
	assert_int_equal(bs_attempt_error_is_final(ETIMEDOUT, to_lo, fake_option, &few, host_six), 1);
	assert_int_equal(bs_attempt_error_is_final(ENETUNREACH, to_lo, fake_option, &plain, host_six), 0);
	assert_int_equal(bs_attempt_error_is_final(ENETUNREACH, (struct sockaddr *)&mc, fake_option,
						   &plain, host_six), 1);
	assert_int_equal(bs_attempt_error_is_final(ENETUNREACH, (struct sockaddr *)&mapped,
						   fake_option, &v6only, host_six), 1);
	/* other errors ask the socket nothing */
	plain.asked = 0;
	assert_int_equal(bs_attempt_error_is_final(ECONNREFUSED, to_lo, fake_option, &plain, host_six), 0);
	assert_int_equal(plain.asked, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_healthy_and_probation_go),
		cmocka_unit_test(test_wait_then_probe),
		cmocka_unit_test(test_single_flight),
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_untrusted_next_time),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_budget_ends),
		cmocka_unit_test(test_newcomer),
		cmocka_unit_test(test_no_wait),
		cmocka_unit_test(test_paced),
		cmocka_unit_test(test_lock_busy),
		cmocka_unit_test(test_probe_stale_time_is_bounded),
		cmocka_unit_test(test_final_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for clock: monotonic time, futex deadline waits, the EINTR rule. */
#include "unit.h"
#include "unit_time.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "clock.h"


static void test_now_is_monotonic(void **state)
{
	(void)state;
	uint64_t prev = bs_now();
	assert_true(prev > 0);
	for (int i = 0; i < 1000; i++) {
		uint64_t t = bs_now();
		assert_true(t >= prev);
		prev = t;
	}
}

static void test_wait_returns_at_deadline(void **state)
{
	(void)state;
	uint32_t word = 7;
	uint64_t t0 = bs_now(), deadline = t0 + 30 * MS;
	assert_int_equal(bs_wait(&word, 7, deadline), 0);
	uint64_t t1 = bs_now();
	assert_true(t1 >= deadline); /* never early */
	assert_true(t1 - t0 < 2000 * MS); /* and not stuck */
}

static void test_wait_in_the_past_returns_at_once(void **state)
{
	(void)state;
	uint32_t word = 0;
	uint64_t t0 = bs_now();
	assert_int_equal(bs_wait(&word, 0, t0 > MS ? t0 - MS : 0), 0);
	assert_true(bs_now() - t0 < 1000 * MS);
}

static void test_wait_with_changed_word_returns_at_once(void **state)
{
	(void)state;
	uint32_t word = 1;
	uint64_t t0 = bs_now();
	assert_int_equal(bs_wait(&word, 2, t0 + 5000 * MS), 0);
	assert_true(bs_now() - t0 < 1000 * MS);
}

static _Atomic uint32_t shared_word;
static _Atomic int waiter_started;

static void *waiter(void *arg)
{
	(void)arg;
	atomic_store(&waiter_started, 1);
	bs_wait((const uint32_t *)&shared_word, 0, BS_NEVER);
	return NULL;
}

static void test_wake_ends_a_wait(void **state)
{
	(void)state;
	pthread_t t;
	atomic_store(&shared_word, 0);
	atomic_store(&waiter_started, 0);
	assert_int_equal(pthread_create(&t, NULL, waiter, NULL), 0);
	/* wait for the thread to exist, bounded */
	for (int i = 0; i < 100000 && !atomic_load(&waiter_started); i++)
		sched_yield();
	assert_true(atomic_load(&waiter_started));
	/* change the word, then wake: the waiter cannot miss it either way */
	atomic_store(&shared_word, 1);
	bs_wake((const uint32_t *)&shared_word);
	assert_int_equal(pthread_join(t, NULL), 0); /* would hang if lost */
}

static volatile sig_atomic_t fired;
static void on_alarm(int sig)
{
	(void)sig;
	fired = 1;
}

static void set_handler(int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = flags;
	sigaction(SIGALRM, &sa, NULL);
}

static void restore_default(void)
{
	signal(SIGALRM, SIG_DFL);
}

static void test_signal_interrupts_wait_with_eintr(void **state)
{
	(void)state;
	uint32_t word = 0;
	fired = 0;
	set_handler(0);
	struct itimerval it = {{0, 0}, {0, 20000}};
	setitimer(ITIMER_REAL, &it, NULL);
	uint64_t t0 = bs_now();
	int r = bs_wait(&word, 0, t0 + 5000 * MS);
	assert_int_equal(r, EINTR);
	assert_true(fired);
	assert_true(bs_now() - t0 < 4000 * MS);
	restore_default();
}

static int eintr(int has_timeout)
{
	struct bs_intr in;
	bs_intr_begin(&in, has_timeout);
	bs_intr_before_wait(&in);
	return bs_intr_returns_eintr(&in);
}

static void test_eintr_rule(void **state)
{
	(void)state;
	restore_default();
	/* with a timeout on the socket the kernel never restarts connect() */
	assert_int_equal(eintr(1), 1);
	set_handler(SA_RESTART);
	assert_int_equal(eintr(0), 0);
	set_handler(0);
	assert_int_equal(eintr(0), 1);
	restore_default();
	/* ignored and default dispositions run no handler */
	signal(SIGUSR1, SIG_IGN);
	assert_int_equal(eintr(0), 0);
	signal(SIGUSR1, SIG_DFL);
}

static void test_a_handler_that_reset_itself_ran(void **state)
{
	(void)state;
	restore_default();
	struct bs_intr in;
	set_handler(SA_RESETHAND);
	bs_intr_begin(&in, 0);
	bs_intr_before_wait(&in);
	assert_int_equal(bs_intr_returns_eintr(&in), 1); /* (installed, not yet run) */
	raise(SIGALRM); /* runs it, and SIG_DFL is back */
	assert_int_equal(eintr(0), 0); /* read afresh, nothing tells it ran */
	assert_int_equal(bs_intr_returns_eintr(&in), 1);
	/* with SA_RESTART as well, the kernel restarts: not counted */
	set_handler(SA_RESETHAND | SA_RESTART);
	bs_intr_begin(&in, 0);
	bs_intr_before_wait(&in);
	raise(SIGALRM);
	assert_int_equal(bs_intr_returns_eintr(&in), 0);
	restore_default();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_now_is_monotonic),
		cmocka_unit_test(test_wait_returns_at_deadline),
		cmocka_unit_test(test_wait_in_the_past_returns_at_once),
		cmocka_unit_test(test_wait_with_changed_word_returns_at_once),
		cmocka_unit_test(test_wake_ends_a_wait),
		cmocka_unit_test(test_signal_interrupts_wait_with_eintr),
		cmocka_unit_test(test_eintr_rule),
		cmocka_unit_test(test_a_handler_that_reset_itself_ran),
	};
	return cmocka_run_group_tests_name("clock", tests, NULL, NULL);
}

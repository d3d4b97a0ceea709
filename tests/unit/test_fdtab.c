/* Unit tests for fdtab.c: untracked and out-of-range fds, track (key, times,
 * IPv4/IPv6 addresses, addresses too long to keep), set, clear, copy (dup2),
 * clear_range (close_range/closefrom, bounded by the high-water mark),
 * fail/take_err, the consistent destination reader, the socket identity,
 * the program's epoll registrations and the fast path's pieces (the
 * fresh IPv4 track, the one-store close, the first byte's one move, the
 * socket type, renewal of a clean slot).
 * Threads are in test_fdtab_threads.c. */
#include "fdtab_helpers.h"

#include "addr.h"
#include "fdtab.h"
#include "table.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* fd's slot holds exactly these values. */
static void expect_slot(struct bs_fdtab *t, int fd, unsigned st, uint64_t key,
			uint64_t since, uint64_t call_start, const void *addr, size_t len)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	assert_non_null(s);
	assert_int_equal(bs_fd_state(t, fd), st);
	assert_int_equal(atomic_load(&s->key), key);
	assert_int_equal(atomic_load(&s->since), since);
	assert_int_equal(atomic_load(&s->call_start), call_start);
	uint64_t k = 0;
	struct sockaddr_storage ss;
	socklen_t l = 999;
	assert_int_equal(bs_fd_read_dest(t, fd, &k, &ss, &l), 1);
	assert_int_equal(k, key);
	assert_int_equal(l, len);
	if (len)
		assert_memory_equal(&ss, addr, len);
	/* the generation is even (no writer left behind) */
	assert_int_equal(atomic_load(&s->gen) & BS_FD_GEN_WRITERS, 0);
}

static void test_untracked_and_out_of_range(void **state)
{
	struct bs_fdtab *t = *state;
	for (int fd = 0; fd < (int)CAP; fd++)
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);
	assert_ptr_equal(bs_fd_slot(t, 0), &t->slots[0]);
	assert_ptr_equal(bs_fd_slot(t, CAP - 1), &t->slots[CAP - 1]);

	static const int out[] = {-1, -2, INT_MIN, (int)CAP, (int)CAP + 1, INT_MAX};
	struct sockaddr_in a = v4(80);
	for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
		int fd = out[i];
		assert_null(bs_fd_slot(t, fd));
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);
		/* every operation on it is harmless */
		bs_fd_track(t, fd, BS_FD_CONNECTING, 9, 1, 2, (struct sockaddr *)&a, sizeof a);
		bs_fd_set(t, fd, BS_FD_HEALTHY, 3);
		bs_fd_fail(t, fd, ECONNREFUSED);
		assert_int_equal(bs_fd_take_err(t, fd), 0);
		bs_fd_clear(t, fd);
		bs_fd_copy(t, fd, fd);
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);
	}
	assert_int_equal(high(t), 0);
	for (int fd = 0; fd < (int)CAP; fd++)
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);

	/* a table without slots tracks nothing */
	struct bs_fdtab none;
	bs_fdtab_init(&none, NULL, CAP);
	assert_null(bs_fd_slot(&none, 0));
	assert_int_equal(bs_fd_state(&none, 0), BS_FD_NONE);
	bs_fd_track(&none, 0, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	assert_int_equal(high(&none), 0);
}

static void test_track(void **state)
{
	struct bs_fdtab *t = *state;
	struct sockaddr_in a4 = v4(8080);
	struct sockaddr_in6 a6 = v6(443);
	bs_fd_track(t, 3, BS_FD_CONNECTING, 0xabc, 100, 90, (struct sockaddr *)&a4, sizeof a4);
	expect_slot(t, 3, BS_FD_CONNECTING, 0xabc, 100, 90, &a4, sizeof a4);
	assert_int_equal(high(t), 4);
	assert_int_equal(sizeof a6, BS_FD_ADDR_MAX);
	bs_fd_track(t, 7, BS_FD_PROBATION, 0xdef, 200, 150, (struct sockaddr *)&a6, sizeof a6);
	expect_slot(t, 7, BS_FD_PROBATION, 0xdef, 200, 150, &a6, sizeof a6);
	assert_int_equal(high(t), 8);
	/* neighbours untouched */
	for (int fd = 0; fd < 10; fd++)
		if (fd != 3 && fd != 7)
			assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);

	/* longer than BS_FD_ADDR_MAX and not an internet address, or no
	 * address: tracked, nothing stored */
	struct sockaddr_storage big;
	memset(&big, 0x11, sizeof big);
	bs_fd_track(t, 5, BS_FD_CONNECTING, 5, 6, 7, (struct sockaddr *)&big,
		    BS_FD_ADDR_MAX + 1);
	expect_slot(t, 5, BS_FD_CONNECTING, 5, 6, 7, NULL, 0);
	bs_fd_track(t, 6, BS_FD_HEALTHY, 6, 7, 8, NULL, 0);
	expect_slot(t, 6, BS_FD_HEALTHY, 6, 7, 8, NULL, 0);

	/* re-tracking replaces everything, including a stored address */
	bs_fd_track(t, 7, BS_FD_CONNECTING, 0x777, 300, 299, (struct sockaddr *)&a4, sizeof a4);
	expect_slot(t, 7, BS_FD_CONNECTING, 0x777, 300, 299, &a4, sizeof a4);
	bs_fd_track(t, 7, BS_FD_CONNECTING, 0x778, 301, 300, (struct sockaddr *)&big, sizeof big);
	expect_slot(t, 7, BS_FD_CONNECTING, 0x778, 301, 300, NULL, 0);

	/* an internet address passed with a sockaddr_storage's length: kept
	 * at its family's size (a parked socket must be able to reconnect) */
	struct sockaddr_storage st4, st6;
	memset(&st4, 0, sizeof st4);
	memset(&st6, 0, sizeof st6);
	memcpy(&st4, &a4, sizeof a4);
	memcpy(&st6, &a6, sizeof a6);
	bs_fd_track(t, 4, BS_FD_CONNECTING, 8, 1, 1, (struct sockaddr *)&st4, sizeof st4);
	expect_slot(t, 4, BS_FD_CONNECTING, 8, 1, 1, &a4, sizeof a4);
	bs_fd_track(t, 4, BS_FD_CONNECTING, 9, 1, 1, (struct sockaddr *)&st6, sizeof st6);
	expect_slot(t, 4, BS_FD_CONNECTING, 9, 1, 1, &a6, sizeof a6);

	/* a lower fd never lowers the mark; the last slot raises it to cap */
	bs_fd_track(t, 0, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	assert_int_equal(high(t), 8);
	bs_fd_track(t, CAP - 1, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	assert_int_equal(high(t), CAP);
}

static void test_set_and_clear(void **state)
{
	struct bs_fdtab *t = *state;
	struct sockaddr_in a = v4(25);
	/* untracked: set does nothing */
	bs_fd_set(t, 5, BS_FD_HEALTHY, 42);
	expect_slot(t, 5, BS_FD_NONE, 0, 0, 0, NULL, 0);

	bs_fd_track(t, 5, BS_FD_CONNECTING, 0x55, 10, 9, (struct sockaddr *)&a, sizeof a);
	bs_fd_set(t, 5, BS_FD_PROBATION, 20);
	expect_slot(t, 5, BS_FD_PROBATION, 0x55, 20, 9, &a, sizeof a);
	bs_fd_set(t, 5, BS_FD_HEALTHY, 30);
	expect_slot(t, 5, BS_FD_HEALTHY, 0x55, 30, 9, &a, sizeof a);

	bs_fd_track(t, 4, BS_FD_CONNECTING, 0x44, 1, 1, NULL, 0);
	bs_fd_track(t, 6, BS_FD_CONNECTING, 0x66, 1, 1, NULL, 0);
	bs_fd_clear(t, 5);
	assert_int_equal(bs_fd_state(t, 5), BS_FD_NONE);
	assert_int_equal(bs_fd_state(t, 4), BS_FD_CONNECTING);
	assert_int_equal(bs_fd_state(t, 6), BS_FD_CONNECTING);
	/* cleared: set is a no-op again, clearing again harmless */
	bs_fd_set(t, 5, BS_FD_HEALTHY, 99);
	assert_int_equal(bs_fd_state(t, 5), BS_FD_NONE);
	assert_int_equal(atomic_load(&t->slots[5].since), 30);
	bs_fd_clear(t, 5);
	bs_fd_clear(t, 100);
	assert_int_equal(bs_fd_state(t, 5), BS_FD_NONE);
	assert_int_equal(bs_fd_state(t, 100), BS_FD_NONE);
}

/* The pending count (connecting or parked slots) follows every state
 * change exactly: readiness wrappers skip all work when it is 0. */
static void test_pending_count(void **state)
{
	struct bs_fdtab *t = *state;
	assert_false(bs_fd_any_pending(t));
	bs_fd_track(t, 3, BS_FD_CONNECTING, 0x33, 1, 1, NULL, 0);
	bs_fd_track(t, 4, BS_FD_CONNECTING, 0x44, 1, 1, NULL, 0);
	assert_int_equal(atomic_load(&t->pending), 2);
	bs_fd_set(t, 3, BS_FD_PARKED, 2); /* still pending */
	assert_int_equal(atomic_load(&t->pending), 2);
	assert_true(bs_fd_any_parked(t));
	bs_fd_track(t, 3, BS_FD_CONNECTING, 0x33, 3, 3, NULL, 0); /* re-tracked */
	assert_int_equal(atomic_load(&t->pending), 2);
	assert_false(bs_fd_any_parked(t));
	bs_fd_set(t, 3, BS_FD_PROBATION, 4);
	assert_int_equal(atomic_load(&t->pending), 1);
	bs_fd_copy(t, 4, 7); /* a second number for a connecting socket */
	assert_int_equal(atomic_load(&t->pending), 2);
	assert_true(atomic_load(&t->slots[4].flags) & BS_FDF_TWIN);
	assert_true(atomic_load(&t->slots[7].flags) & BS_FDF_TWIN);
	bs_fd_fail(t, 4, 111); /* an owed error is pending until taken */
	assert_int_equal(atomic_load(&t->pending), 2);
	assert_int_equal(bs_fd_take_err(t, 4), 111);
	assert_int_equal(atomic_load(&t->pending), 1);
	assert_int_equal(bs_fd_take_err(t, 4), 0); /* taken once */
	assert_int_equal(atomic_load(&t->pending), 1);
	bs_fd_clear_range(t, 0, 100);
	assert_int_equal(atomic_load(&t->pending), 0);
	assert_false(bs_fd_any_pending(t));
	/* renew forgets flags and the epoll registration; clear keeps them */
	bs_fd_ep_added(t, 40, 9, 1, 9);
	bs_fd_track(t, 9, BS_FD_CONNECTING, 0x99, 1, 1, NULL, 0);
	bs_fd_clear(t, 9);
	assert_int_equal(atomic_load(&t->slots[9].ep_set), 41);
	bs_fd_renew(t, 7);
	assert_int_equal(atomic_load(&t->slots[7].flags), 0);
	bs_fd_renew(t, 9);
	assert_int_equal(atomic_load(&t->slots[9].ep_set), 0);
	assert_int_equal(atomic_load(&t->pending), 0);
}

static void test_copy(void **state)
{
	struct bs_fdtab *t = *state;
	struct sockaddr_in6 a = v6(5432);
	bs_fd_track(t, 3, BS_FD_PROBATION, 0x33, 100, 80, (struct sockaddr *)&a, sizeof a);
	bs_fd_copy(t, 3, 20);
	expect_slot(t, 20, BS_FD_PROBATION, 0x33, 100, 80, &a, sizeof a);
	expect_slot(t, 3, BS_FD_PROBATION, 0x33, 100, 80, &a, sizeof a);
	assert_int_equal(high(t), 21);

	/* onto a tracked fd: replaced */
	bs_fd_track(t, 9, BS_FD_CONNECTING, 0x99, 1, 2, NULL, 0);
	bs_fd_copy(t, 3, 9);
	expect_slot(t, 9, BS_FD_PROBATION, 0x33, 100, 80, &a, sizeof a);

	/* from an untracked (or out-of-range) fd: `to` is no longer tracked */
	bs_fd_copy(t, 4, 9);
	assert_int_equal(bs_fd_state(t, 9), BS_FD_NONE);
	bs_fd_copy(t, -1, 20);
	assert_int_equal(bs_fd_state(t, 20), BS_FD_NONE);
	bs_fd_copy(t, 4, 5); /* untracked onto untracked: one socket, two numbers */
	assert_int_equal(bs_fd_state(t, 5), BS_FD_NONE);
	assert_int_equal(atomic_load(&t->slots[4].flags), BS_FDF_TWIN);
	assert_int_equal(atomic_load(&t->slots[5].flags), BS_FDF_TWIN);
	expect_slot(t, 3, BS_FD_PROBATION, 0x33, 100, 80, &a, sizeof a);
	/* the mark stays through a connect's tracking and the fast track's test,
	 * and goes when the number names a new descriptor */
	bs_fd_track(t, 5, BS_FD_CONNECTING, 0x55, 1, 1, NULL, 0);
	assert_true(atomic_load(&t->slots[5].flags) & BS_FDF_TWIN);
	bs_fd_renew(t, 4);
	assert_true(bs_fd_fresh_ready(&t->slots[4]));
	atomic_store(&t->slots[4].flags, BS_FDF_TWIN);
	assert_true(bs_fd_fresh_ready(&t->slots[4]));
	bs_fd_renew(t, 4);
	assert_int_equal(atomic_load(&t->slots[4].flags), 0);

	/* onto itself: nothing changes */
	bs_fd_copy(t, 3, 3);
	expect_slot(t, 3, BS_FD_PROBATION, 0x33, 100, 80, &a, sizeof a);
	/* to out of range: nothing */
	bs_fd_copy(t, 3, (int)CAP);
	assert_int_equal(high(t), 21);
}

/* dup2 of a connect whose error the shim read away: the error is owed to
 * the program's next look through either number. */
static void test_copy_failed_keeps_err(void **state)
{
	struct bs_fdtab *t = *state;
	/* slot 9 once held another error, taken long ago */
	bs_fd_track(t, 9, BS_FD_CONNECTING, 0x99, 1, 1, NULL, 0);
	bs_fd_fail(t, 9, ETIMEDOUT);
	assert_int_equal(bs_fd_take_err(t, 9), ETIMEDOUT);

	bs_fd_track(t, 3, BS_FD_CONNECTING, 0x33, 1, 1, NULL, 0);
	bs_fd_fail(t, 3, ECONNREFUSED);
	bs_fd_copy(t, 3, 8);
	bs_fd_copy(t, 3, 9);
	assert_int_equal(bs_fd_state(t, 8), BS_FD_FAILED);
	assert_int_equal(bs_fd_state(t, 9), BS_FD_FAILED);
	assert_int_equal(bs_fd_take_err(t, 8), ECONNREFUSED);
	assert_int_equal(bs_fd_take_err(t, 9), ECONNREFUSED);
	assert_int_equal(bs_fd_take_err(t, 3), ECONNREFUSED);
}

static void test_clear_range(void **state)
{
	struct bs_fdtab *t = *state;
	/* nothing tracked (high 0): a hand-written slot 0 survives */
	atomic_store(&t->slots[0].state, BS_FD_HEALTHY);
	bs_fd_clear_range(t, 0, ~0u);
	assert_int_equal(bs_fd_state(t, 0), BS_FD_HEALTHY);
	atomic_store(&t->slots[0].state, BS_FD_NONE);

	for (int fd = 0; fd < 10; fd++)
		bs_fd_track(t, fd, BS_FD_CONNECTING, (uint64_t)fd + 1, 1, 1, NULL, 0);
	assert_int_equal(high(t), 10);
	/* slot 500 set by hand, above the mark */
	atomic_store(&t->slots[500].state, BS_FD_PROBATION);
	atomic_store(&t->slots[500].key, 0x500);

	bs_fd_clear_range(t, 3, 5); /* inclusive, nothing else */
	for (int fd = 0; fd < 10; fd++)
		assert_int_equal(bs_fd_state(t, fd),
				 fd >= 3 && fd <= 5 ? BS_FD_NONE : BS_FD_CONNECTING);
	bs_fd_clear_range(t, 7, 7);
	assert_int_equal(bs_fd_state(t, 7), BS_FD_NONE);
	assert_int_equal(bs_fd_state(t, 6), BS_FD_CONNECTING);
	assert_int_equal(bs_fd_state(t, 8), BS_FD_CONNECTING);
	bs_fd_clear_range(t, 9, 8); /* empty range */
	assert_int_equal(bs_fd_state(t, 8), BS_FD_CONNECTING);
	assert_int_equal(bs_fd_state(t, 9), BS_FD_CONNECTING);
	bs_fd_clear_range(t, 10, 600); /* all above the mark */
	assert_int_equal(bs_fd_state(t, 500), BS_FD_PROBATION);

	/* closefrom(0): only fds below the mark */
	bs_fd_clear_range(t, 0, ~0u);
	for (int fd = 0; fd < 10; fd++)
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);
	assert_int_equal(bs_fd_state(t, 500), BS_FD_PROBATION);
	assert_int_equal(atomic_load(&t->slots[500].key), 0x500);

	/* hi exactly at the last tracked fd */
	bs_fd_track(t, 9, BS_FD_HEALTHY, 9, 1, 1, NULL, 0);
	bs_fd_clear_range(t, 9, 9);
	assert_int_equal(bs_fd_state(t, 9), BS_FD_NONE);
}

static void test_fail_and_take(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_track(t, 4, BS_FD_CONNECTING, 0x44, 10, 5, NULL, 0);
	bs_fd_fail(t, 4, ECONNREFUSED);
	assert_int_equal(bs_fd_state(t, 4), BS_FD_FAILED);
	assert_int_equal(atomic_load(&t->slots[4].key), 0x44);
	assert_int_equal(bs_fd_take_err(t, 4), ECONNREFUSED); /* once */
	assert_int_equal(bs_fd_state(t, 4), BS_FD_NONE);
	assert_int_equal(bs_fd_take_err(t, 4), 0);
	assert_int_equal(bs_fd_state(t, 4), BS_FD_NONE);

	/* a later failure owes the later error */
	bs_fd_track(t, 4, BS_FD_CONNECTING, 0x45, 11, 6, NULL, 0);
	bs_fd_fail(t, 4, ETIMEDOUT);
	bs_fd_fail(t, 4, EHOSTUNREACH);
	assert_int_equal(bs_fd_take_err(t, 4), EHOSTUNREACH);

	/* not FAILED: 0, and the slot is left alone */
	static const unsigned others[] = {BS_FD_CONNECTING, BS_FD_PROBATION, BS_FD_HEALTHY};
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		bs_fd_track(t, 6, (enum bs_fd_state)others[i], 0x66, 7, 8, NULL, 0);
		assert_int_equal(bs_fd_take_err(t, 6), 0);
		expect_slot(t, 6, others[i], 0x66, 7, 8, NULL, 0);
	}
	assert_int_equal(bs_fd_take_err(t, 50), 0); /* never tracked */
	assert_int_equal(bs_fd_state(t, 50), BS_FD_NONE);

	/* closed after failing: nothing owed */
	bs_fd_track(t, 7, BS_FD_CONNECTING, 0x77, 1, 1, NULL, 0);
	bs_fd_fail(t, 7, ENETUNREACH);
	bs_fd_clear(t, 7);
	assert_int_equal(bs_fd_take_err(t, 7), 0);
}

/* The destination reader: key and address as tracked, no address for kinds
 * not kept, a NULL buffer, out-of-range fds. */
static void test_read_dest(void **state)
{
	struct bs_fdtab *t = *state;
	uint64_t k = 1;
	socklen_t l = 1;
	struct sockaddr_storage ss;
	/* never tracked: a consistent empty destination */
	assert_int_equal(bs_fd_read_dest(t, 3, &k, &ss, &l), 1);
	assert_int_equal(k, 0);
	assert_int_equal(l, 0);
	struct sockaddr_in6 a = v6(9000);
	bs_fd_track(t, 3, BS_FD_CONNECTING, 0x1234, 1, 2, (struct sockaddr *)&a, sizeof a);
	assert_int_equal(bs_fd_read_dest(t, 3, &k, NULL, &l), 1);
	assert_int_equal(k, 0x1234);
	assert_int_equal(l, sizeof a);
	memset(&ss, 0x5a, sizeof ss);
	assert_int_equal(bs_fd_read_dest(t, 3, &k, &ss, &l), 1);
	assert_memory_equal(&ss, &a, sizeof a);
	static const int out[] = {-1, (int)CAP, INT_MAX};
	for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
		assert_int_equal(bs_fd_read_dest(t, out[i], &k, &ss, &l), 0);
	/* a writer still inside its write (a signal handler interrupted it):
	 * the reader gives up rather than wait or return a mix */
	atomic_fetch_add(&t->slots[3].gen, 1);
	assert_int_equal(bs_fd_read_dest(t, 3, &k, &ss, &l), 0);
	assert_int_equal(bs_fd_ident_matches(t, 3, 0), -1); /* cannot tell */
	atomic_fetch_sub(&t->slots[3].gen, 1);
	assert_int_equal(bs_fd_read_dest(t, 3, &k, &ss, &l), 1);
}

/* connect.c's fast track around a connect that succeeded: 1 if it
 * applied. */
static int track_fresh(struct bs_fdtab *t, int fd, uint64_t key, uint64_t since)
{
	if (!bs_fd_fresh_below(t, fd) || !bs_fd_fresh_ready(bs_fd_slot_at(t, fd)))
		return 0;
	bs_fd_prepare_fresh(bs_fd_slot_at(t, fd), key, since);
	bs_fd_publish_fresh(bs_fd_slot_at(t, fd));
	return 1;
}

/* The fast track applies once enabled, below the high-water mark only. */
static void test_fresh_bound(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_track(t, 9, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	bs_fd_clear(t, 9);
	assert_false(bs_fd_fresh_below(t, 3)); /* not enabled */
	bs_fd_enable_fresh(t);
	assert_true(bs_fd_fresh_below(t, 3));
	assert_true(bs_fd_fresh_below(t, 9));
	assert_false(bs_fd_fresh_below(t, 10)); /* above the mark: the full track */
	assert_false(bs_fd_fresh_below(t, -1));
	bs_fd_track(t, 20, BS_FD_CONNECTING, 1, 1, 1, NULL, 0); /* raises both */
	assert_true(bs_fd_fresh_below(t, 20));
	assert_false(bs_fd_fresh_below(t, 21));
	bs_fd_track(t, (int)CAP - 1, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	assert_true(bs_fd_fresh_below(t, (int)CAP - 1));
	assert_false(bs_fd_fresh_below(t, (int)CAP));
}

/* The fast track: an IPv4 connection on probation, whose address is
 * rebuilt from its key; a slot with anything but NO_PARK recorded is left
 * to the full track. */
static void test_fresh_track(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_enable_fresh(t);
	bs_fd_track(t, 30, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	bs_fd_clear(t, 30);
	struct sockaddr_in a4 = v4(5432);
	uint64_t key = bs_addr_key((struct sockaddr *)&a4, sizeof a4);
	assert_true(track_fresh(t, 9, key, 777));
	expect_slot(t, 9, BS_FD_PROBATION, key, 777, 0, &a4, sizeof a4);
	assert_false(bs_fd_any_pending(t));
	assert_int_equal(high(t), 31);

	/* flags beyond NO_PARK, an identity, an epoll registration, a state:
	 * not for the fast track */
	atomic_store(&t->slots[11].flags, BS_FDF_NO_PARK | BS_FDF_EP_REMOVED);
	assert_false(track_fresh(t, 11, key, 5));
	bs_fd_set_ident(t, 12, 2);
	assert_false(track_fresh(t, 12, key, 5));
	bs_fd_ep_added(t, 25, 13, 1, 13);
	assert_false(track_fresh(t, 13, key, 5));
	bs_fd_track(t, 14, BS_FD_CONNECTING, key, 1, 1, NULL, 0);
	assert_false(track_fresh(t, 14, key, 5));
	assert_int_equal(bs_fd_state(t, 14), BS_FD_CONNECTING);
	/* NO_PARK alone (a dup'ed socket) is kept along */
	atomic_store(&t->slots[15].flags, BS_FDF_NO_PARK);
	assert_true(track_fresh(t, 15, key, 5));
	assert_int_equal(atomic_load(&t->slots[15].flags), BS_FDF_NO_PARK);

	/* over an earlier IPv6 destination: its bytes are never read back */
	struct sockaddr_in6 a6 = v6(443);
	bs_fd_track(t, 16, BS_FD_CONNECTING, 0xabc, 1, 1, (struct sockaddr *)&a6, sizeof a6);
	bs_fd_clear(t, 16);
	assert_true(track_fresh(t, 16, key, 2));
	expect_slot(t, 16, BS_FD_PROBATION, key, 2, 1, &a4, sizeof a4);
	/* copied by dup: the key, and so the address, go along */
	bs_fd_copy(t, 16, 17);
	expect_slot(t, 17, BS_FD_PROBATION, key, 2, 1, &a4, sizeof a4);
}

/* A table on the heap, and the fd table's fresh track enabled (and used
 * once), for the fast-track tests below; *key: 127.0.0.1:80's. */
static struct bs_table *fresh_setup(struct bs_fdtab *t, uint64_t *key)
{
	struct bs_table *tab = calloc(1, sizeof *tab);
	assert_non_null(tab);
	bs_fd_enable_fresh(t);
	bs_fd_track(t, 20, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	bs_fd_clear(t, 20);
	struct sockaddr_in a4 = v4(80);
	*key = bs_addr_key((struct sockaddr *)&a4, sizeof a4);
	return tab;
}

/* close() of a live connection that holds nothing else: on probation to a
 * destination with no entry, or healthy: one store. Anything more, and the
 * slot is left for the full path. */
static void test_drop_live(void **state)
{
	struct bs_fdtab *t = *state;
	uint64_t key;
	struct bs_table *tab = fresh_setup(t, &key);
	assert_true(track_fresh(t, 3, key, 1));
	assert_true(bs_fd_drop_live(bs_fd_slot(t, 3), tab));
	assert_int_equal(bs_fd_state(t, 3), BS_FD_NONE);
	/* not on probation */
	bs_fd_track(t, 4, BS_FD_CONNECTING, key, 1, 1, NULL, 0);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 4), tab));
	assert_int_equal(bs_fd_state(t, 4), BS_FD_CONNECTING);
	/* an epoll registration, flags, an identity: the full path */
	assert_true(track_fresh(t, 5, key, 1));
	bs_fd_ep_added(t, 19, 5, 1, 5);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 5), tab));
	assert_true(track_fresh(t, 6, key, 1));
	atomic_store(&t->slots[6].flags, BS_FDF_NO_PARK);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 6), tab));
	assert_true(track_fresh(t, 7, key, 1));
	bs_fd_set_ident(t, 7, 1);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 7), tab));
	/* its destination has an entry (a reset may be due) */
	assert_true(track_fresh(t, 8, key, 1));
	assert_non_null(bs_table_claim_as(tab, key, 1, 1000000000ull, 0, 0, 0));
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 8), tab));
	assert_int_equal(bs_fd_state(t, 8), BS_FD_PROBATION);
	/* healthy, the same (the full path only renews it) */
	assert_int_equal(bs_fd_set(t, 8, BS_FD_HEALTHY, 2), 1);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 8), tab));
	assert_int_equal(bs_fd_state(t, 8), BS_FD_HEALTHY);
	/* healthy, to a destination with no entry: one store */
	struct sockaddr_in b4 = v4(81);
	uint64_t other = bs_addr_key((struct sockaddr *)&b4, sizeof b4);
	assert_false(bs_table_may_hold(tab, other));
	assert_true(track_fresh(t, 10, other, 1));
	assert_int_equal(bs_fd_set(t, 10, BS_FD_HEALTHY, 2), 1);
	assert_true(bs_fd_drop_live(bs_fd_slot(t, 10), tab));
	assert_int_equal(bs_fd_state(t, 10), BS_FD_NONE);
	/* healthy with a flag: the full path */
	assert_true(track_fresh(t, 9, other, 1));
	assert_int_equal(bs_fd_set(t, 9, BS_FD_HEALTHY, 2), 1);
	atomic_store(&t->slots[9].flags, BS_FDF_NO_PARK);
	assert_false(bs_fd_drop_live(bs_fd_slot(t, 9), tab));
	assert_int_equal(bs_fd_state(t, 9), BS_FD_HEALTHY);
	free(tab);
}

/* The first byte's fast track (issue 21): a connection on probation to a
 * destination with no entry, whose number socket() made a stream, moves to
 * healthy with one compare-and-swap and nothing else: its start and its
 * destination are as they were. A datagram, an unknown type, another
 * state or a destination with an entry: not for it. */
static void test_first_byte(void **state)
{
	struct bs_fdtab *t = *state;
	uint64_t key;
	struct bs_table *tab = fresh_setup(t, &key);
	struct sockaddr_in a4 = v4(80);

	bs_fd_set_sotype(bs_fd_slot(t, 3), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
	assert_int_equal(atomic_load(&t->slots[3].sotype) & BS_FD_SOTYPE_MASK, SOCK_STREAM);
	assert_true(track_fresh(t, 3, key, 77));
	assert_true(bs_fd_fresh_probation(bs_fd_slot(t, 3), tab));
	assert_true(bs_fd_first_byte(bs_fd_slot(t, 3)));
	expect_slot(t, 3, BS_FD_HEALTHY, key, 77, 0, &a4, sizeof a4);
	assert_false(bs_fd_any_pending(t));
	/* healthy now: no longer on the fast track, and a second byte
	 * changes nothing */
	assert_false(bs_fd_fresh_probation(bs_fd_slot(t, 3), tab));
	assert_true(bs_fd_first_byte(bs_fd_slot(t, 3)));
	assert_int_equal(bs_fd_state(t, 3), BS_FD_HEALTHY);

	/* a datagram socket, or one whose type socket() did not tell: the
	 * full path asks the kernel */
	bs_fd_set_sotype(bs_fd_slot(t, 4), SOCK_DGRAM | SOCK_CLOEXEC);
	assert_true(track_fresh(t, 4, key, 1));
	assert_true(bs_fd_fresh_probation(bs_fd_slot(t, 4), tab));
	assert_false(bs_fd_first_byte(bs_fd_slot(t, 4)));
	assert_int_equal(bs_fd_state(t, 4), BS_FD_PROBATION);
	bs_fd_set_sotype(bs_fd_slot(t, 5), 0);
	assert_true(track_fresh(t, 5, key, 1));
	assert_false(bs_fd_first_byte(bs_fd_slot(t, 5)));
	assert_int_equal(bs_fd_state(t, 5), BS_FD_PROBATION);
	/* a number renewed (or retracked) by another thread meanwhile is
	 * left as it is */
	bs_fd_set_sotype(bs_fd_slot(t, 6), SOCK_STREAM);
	bs_fd_track(t, 6, BS_FD_CONNECTING, key, 1, 1, NULL, 0);
	assert_false(bs_fd_fresh_probation(bs_fd_slot(t, 6), tab));
	assert_true(bs_fd_first_byte(bs_fd_slot(t, 6)));
	assert_int_equal(bs_fd_state(t, 6), BS_FD_CONNECTING);
	assert_true(bs_fd_any_pending(t));
	/* a destination with an entry: the full path (it is to be marked
	 * healthy) */
	bs_fd_set_sotype(bs_fd_slot(t, 7), SOCK_STREAM);
	assert_true(track_fresh(t, 7, key, 1));
	assert_non_null(bs_table_claim_as(tab, key, 1, 1000000000ull, 0, 0, 0));
	assert_false(bs_fd_fresh_probation(bs_fd_slot(t, 7), tab));
	/* the type goes along with a dup, and renewing leaves it */
	bs_fd_copy(t, 7, 8);
	assert_int_equal(atomic_load(&t->slots[8].sotype), SOCK_STREAM);
	bs_fd_renew(t, 8);
	assert_int_equal(atomic_load(&t->slots[8].sotype), SOCK_STREAM);
	free(tab);
}

/* An identity or an epoll registration is never recorded without
 * BS_FDF_EXTRA, so the head word alone says "nothing recorded"; renewing
 * clears all of it. */
static void test_extra_flag(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_set_ident(t, 3, 9);
	bs_fd_ep_added(t, 10, 4, 1, 4);
	bs_fd_copy(t, 3, 5);
	bs_fd_track(t, 6, BS_FD_CONNECTING, 6, 1, 1, NULL, 0);
	bs_fd_ep_added(t, 10, 6, 1, 6);
	bs_fd_track(t, 6, BS_FD_PARKED, 6, 1, 1, NULL, 0); /* a new track keeps it */
	for (int fd = 3; fd <= 6; fd++) {
		struct bs_fdslot *s = bs_fd_slot(t, fd);
		if (atomic_load(&s->cookie) || atomic_load(&s->ep_set))
			assert_true(atomic_load(&s->flags) & BS_FDF_EXTRA);
		assert_true(bs_fd_head_of(s) != 0);
		bs_fd_renew(t, fd);
		assert_int_equal(bs_fd_head_of(s), 0);
		assert_int_equal(atomic_load(&s->cookie), 0);
		assert_int_equal(atomic_load(&s->ep_set), 0);
	}
	assert_int_equal(bs_fd_head(BS_FD_PROBATION, 0),
			 bs_fd_head(BS_FD_PROBATION, 0) & 0xffffffffull ? BS_FD_PROBATION
									: (uint64_t)BS_FD_PROBATION << 32);
}

/* socket()/accept(): a clean slot is only read; a slot with anything left
 * in it (a number closed behind the shim's back) is renewed. */
static void test_renew(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_renew(t, 3);
	assert_int_equal(bs_fd_state(t, 3), BS_FD_NONE);
	bs_fd_ep_added(t, 20, 4, 1, 4); /* registered, never connected */
	atomic_store(&t->slots[5].flags, BS_FDF_NO_PARK);
	bs_fd_set_ident(t, 6, 1);
	bs_fd_track(t, 7, BS_FD_CONNECTING, 7, 1, 1, NULL, 0);
	for (int fd = 4; fd <= 7; fd++) {
		bs_fd_renew(t, fd);
		assert_int_equal(bs_fd_state(t, fd), BS_FD_NONE);
		assert_int_equal(atomic_load(&t->slots[fd].flags), 0);
		assert_int_equal(atomic_load(&t->slots[fd].ep_set), 0);
		assert_int_equal(atomic_load(&t->slots[fd].cookie), 0);
	}
	assert_false(bs_fd_any_pending(t));
	bs_fd_renew(t, -1);
	bs_fd_renew(t, (int)CAP);
}

/* The socket's identity: recorded, matched, cleared by track and clear
 * (and close_range), carried along by copy. */
static void test_ident(void **state)
{
	struct bs_fdtab *t = *state;
	/* nothing recorded: never a match, not even 0 */
	assert_int_equal(bs_fd_ident_matches(t, 4, 0), 0);
	/* cookie 0 (no socket has it) records none */
	bs_fd_set_ident(t, 4, 0);
	assert_int_equal(bs_fd_ident_matches(t, 4, 0), 0);
	/* all 64 bits count */
	bs_fd_set_ident(t, 4, 0x100000005ull);
	assert_int_equal(bs_fd_ident_matches(t, 4, 0x100000005ull), 1);
	assert_int_equal(bs_fd_ident_matches(t, 4, 5), 0);
	bs_fd_set_ident(t, 4, 123456);
	assert_int_equal(bs_fd_ident_matches(t, 4, 123456), 1);
	assert_int_equal(bs_fd_ident_matches(t, 4, 123457), 0);
	assert_int_equal(bs_fd_ident_matches(t, 5, 123456), 0); /* another fd */
	assert_int_equal(high(t), 5);

	/* track clears it */
	bs_fd_track(t, 4, BS_FD_CONNECTING, 0x44, 1, 1, NULL, 0);
	assert_int_equal(bs_fd_ident_matches(t, 4, 123456), 0);
	/* recorded on a tracked fd, kept by set and fail, cleared by clear */
	bs_fd_set_ident(t, 4, 77);
	bs_fd_set(t, 4, BS_FD_PROBATION, 5);
	assert_int_equal(bs_fd_ident_matches(t, 4, 77), 1);
	expect_slot(t, 4, BS_FD_PROBATION, 0x44, 5, 1, NULL, 0);

	/* copy carries it (with the rest); onto a slot with its own identity too */
	struct sockaddr_in a = v4(80);
	bs_fd_track(t, 6, BS_FD_CONNECTING, 0x66, 1, 1, (struct sockaddr *)&a, sizeof a);
	bs_fd_set_ident(t, 6, 66);
	bs_fd_set_ident(t, 9, 99);
	bs_fd_copy(t, 6, 9);
	assert_int_equal(bs_fd_ident_matches(t, 9, 66), 1);
	assert_int_equal(bs_fd_ident_matches(t, 9, 99), 0);
	expect_slot(t, 9, BS_FD_CONNECTING, 0x66, 1, 1, &a, sizeof a);
	/* copy from an untracked fd clears `to`, identity included */
	bs_fd_copy(t, 100, 9);
	assert_int_equal(bs_fd_state(t, 9), BS_FD_NONE);
	assert_int_equal(bs_fd_ident_matches(t, 9, 66), 0);

	bs_fd_clear(t, 4);
	assert_int_equal(bs_fd_ident_matches(t, 4, 77), 0);
	/* an identity on an untracked fd is cleared too, by clear and by
	 * close_range */
	bs_fd_set_ident(t, 20, 2);
	bs_fd_clear(t, 20);
	assert_int_equal(bs_fd_ident_matches(t, 20, 2), 0);
	bs_fd_set_ident(t, 21, 2);
	bs_fd_clear_range(t, 0, ~0u);
	assert_int_equal(bs_fd_ident_matches(t, 21, 2), 0);
	assert_int_equal(bs_fd_ident_matches(t, 6, 66), 0);

	/* out of range: harmless */
	bs_fd_set_ident(t, -1, 2);
	bs_fd_set_ident(t, (int)CAP, 2);
	assert_int_equal(bs_fd_ident_matches(t, -1, 2), 0);
	assert_int_equal(bs_fd_ident_matches(t, (int)CAP, 2), 0);
	for (int fd = 0; fd < (int)CAP; fd++)
		assert_int_equal(atomic_load(&t->slots[fd].gen) & BS_FD_GEN_WRITERS, 0);
}

/* The program's epoll registrations: one per fd, a second set marks the fd
 * shared; an event's data names its fd only if one registration carries it. */
static void test_epoll_registrations(void **state)
{
	struct bs_fdtab *t = *state;
	bs_fd_track(t, 5, BS_FD_CONNECTING, 0x55, 1, 1, NULL, 0);
	bs_fd_ep_added(t, 9, 5, 4, 77);
	assert_true(bs_fd_ep_in(t, 9, 5));
	assert_false(bs_fd_ep_in(t, 8, 5));
	assert_int_equal(bs_fd_state(t, 9), BS_FD_EPOLL);
	assert_int_equal(bs_fd_ep_find(t, 9, 77, BS_FD_CONNECTING), 5);
	assert_int_equal(bs_fd_ep_find(t, 9, 77, BS_FD_FAILED), -1);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), -1);
	bs_fd_ep_modified(t, 9, 5, 1, 78);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), 5);
	assert_int_equal(atomic_load(&t->slots[5].ep_events), 1);

	/* an untracked fd (a pipe) with the same data: ambiguous */
	bs_fd_ep_added(t, 9, 6, 1, 78);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), BS_FD_EP_AMBIGUOUS);
	assert_false(atomic_load(&t->slots[5].flags) & BS_FDF_NO_PARK);
	bs_fd_ep_share(t, 9, 78);
	assert_true(atomic_load(&t->slots[5].flags) & BS_FDF_NO_PARK);
	assert_true(atomic_load(&t->slots[6].flags) & BS_FDF_NO_PARK);
	/* one the shim took out of the set reports nothing: not counted */
	atomic_fetch_or(&t->slots[5].flags, BS_FDF_EP_REMOVED);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), -1);
	atomic_fetch_and(&t->slots[5].flags, ~BS_FDF_EP_REMOVED);
	bs_fd_ep_deleted(t, 9, 6);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), 5);

	/* the same data in another set is another registration */
	bs_fd_ep_added(t, 10, 7, 1, 78);
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), 5);
	/* a DEL in a set the fd is not recorded in changes nothing */
	bs_fd_ep_deleted(t, 10, 5);
	assert_true(bs_fd_ep_in(t, 9, 5));
	/* the set is closed: its registrations are gone */
	bs_fd_ep_forget_set(t, 9);
	assert_false(bs_fd_ep_in(t, 9, 5));
	assert_int_equal(bs_fd_ep_find(t, 9, 78, BS_FD_CONNECTING), -1);
	assert_true(bs_fd_ep_in(t, 10, 7));
}

/* A slot's moves are explicit: each is one the table lists, and any
 * other is refused and changes nothing. */
static void test_moves(void **state)
{
	struct bs_fdtab *t = *state;
	static const char *const legal[] = {"0>4", "1>1", "1>2", "1>3", "1>4", "1>5", "2>3",
					    "3>3", "4>4", "5>1", "5>4"};
	for (unsigned from = 0; from <= BS_FD_EPOLL; from++)
		for (unsigned to = 0; to <= BS_FD_EPOLL; to++) {
			char pair[4] = {(char)('0' + from), '>', (char)('0' + to), 0};
			int want = 0;
			for (size_t i = 0; i < sizeof legal / sizeof *legal; i++)
				want |= strcmp(legal[i], pair) == 0;
			assert_int_equal(bs_fd_move_ok(from, to), want);
		}
	bs_fd_track(t, 3, BS_FD_CONNECTING, 1, 1, 1, NULL, 0);
	assert_true(bs_fd_set(t, 3, BS_FD_PARKED, 2));
	assert_true(bs_fd_set(t, 3, BS_FD_CONNECTING, 3));
	assert_true(bs_fd_set(t, 3, BS_FD_HEALTHY, 4));
	assert_false(bs_fd_set(t, 3, BS_FD_PARKED, 5)); /* a live connection is not parked */
	assert_int_equal(bs_fd_state(t, 3), BS_FD_HEALTHY);
	assert_int_equal(atomic_load(&t->slots[3].since), 4);
	bs_fd_track(t, 4, BS_FD_PROBATION, 1, 1, 1, NULL, 0);
	assert_false(bs_fd_set(t, 4, BS_FD_CONNECTING, 2));
	bs_fd_fail(t, 4, 111); /* nor is its error owed */
	assert_int_equal(bs_fd_state(t, 4), BS_FD_PROBATION);
	assert_false(bs_fd_set(t, 5, BS_FD_CONNECTING, 2)); /* untracked */
	assert_int_equal(bs_fd_state(t, 5), BS_FD_NONE);
	bs_fd_fail(t, 5, 111); /* an error read away from an untracked socket */
	assert_int_equal(bs_fd_state(t, 5), BS_FD_FAILED);
	assert_false(bs_fd_set(t, 5, BS_FD_CONNECTING, 2));
	assert_int_equal(bs_fd_take_err(t, 5), 111);
	assert_false(bs_fd_any_parked(t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_untracked_and_out_of_range, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_track, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_set_and_clear, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_pending_count, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_copy, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_copy_failed_keeps_err, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_clear_range, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_fail_and_take, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_read_dest, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_ident, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_moves, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_fresh_bound, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_fresh_track, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_extra_flag, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_drop_live, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_first_byte, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_renew, tab_setup, tab_teardown),
		cmocka_unit_test_setup_teardown(test_epoll_registrations, tab_setup, tab_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

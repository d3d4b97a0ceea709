/* Unit tests for table.c, the lock-free per-destination state table, single
 * threaded: find and claim, state and probe word packing, outcomes applied
 * only from the seen state, probes, reclaiming slots in a full table, a
 * million keys, capacity, and the keys a table cannot hold. Concurrent use is in test_table_threads.c. */
#include "table_helpers.h"

#include "mix.h"
#include "policy.h"
#include "table.h"

#include <errno.h>
#include <stdlib.h>

static void test_find_and_claim(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	const uint64_t keys[] = {1, 2, 42, BS_GOLDEN, UINT64_MAX, 1ull << 60};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		assert_null(bs_table_find(t, keys[i])); /* empty table */
	struct bs_entry *e = bs_table_claim(t, 42, NOW, IDLE);
	assert_non_null(e);
	assert_ptr_equal(bs_table_find(t, 42), e);
	assert_ptr_equal(bs_table_claim(t, 42, NOW + SEC, IDLE), e);
	assert_true(bs_table_owns(t, e, 42));
	assert_false(bs_table_owns(t, e, 43));
	assert_null(bs_table_find(t, 43));
	/* a new entry is healthy, with no probe, stamped with now */
	assert_int_equal(atomic_load(&e->state), 0);
	assert_int_equal(atomic_load(&e->probe), 0);
	assert_int_equal(atomic_load(&e->last_used), NOW);
	struct bs_entry *f = bs_table_claim(t, 43, NOW, IDLE);
	assert_non_null(f);
	assert_ptr_not_equal(e, f);
	assert_ptr_equal(bs_table_find(t, 43), f);
	free(t);
}

static void test_state_pack(void **state)
{
	(void)state;
	assert_int_equal(bs_state_make(0, 0), 0);
	/* ms rounding is upwards: never earlier than asked */
	const uint64_t ts[] = {1, MS - 1, MS, MS + 1, 1234567891, NOW, NOW + 1,
			       30ull * 86400 * SEC, (1ull << 62) + 7};
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		uint64_t s = bs_state_make(ts[i], 5);
		uint64_t back = bs_state_next_at(s);
		assert_true(back >= ts[i] && back - ts[i] < MS);
		assert_int_equal(back % MS, 0);
		assert_int_equal(bs_state_failures(s), 5);
	}
	/* failures saturate at BS_FAIL_MAX and never spill into the time */
	const uint32_t fs[] = {1, 2, BS_FAIL_MAX - 1, BS_FAIL_MAX, BS_FAIL_MAX + 1,
			       1u << 24, UINT32_MAX};
	for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		uint64_t s = bs_state_make(7 * MS, fs[i]);
		uint32_t want = fs[i] > BS_FAIL_MAX ? BS_FAIL_MAX : fs[i];
		assert_int_equal(bs_state_failures(s), want);
		assert_int_equal(bs_state_next_at(s), 7 * MS);
	}
	/* a failing state is never the healthy 0 */
	assert_true(bs_state_make(0, 1) != 0);
	/* huge times saturate (far future), never wrap to the past */
	const uint64_t big[] = {1ull << 63, UINT64_MAX - MS, UINT64_MAX - 1, UINT64_MAX};
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
		uint64_t s = bs_state_make(big[i], 3);
		assert_true(bs_state_next_at(s) >= 200ull * 365 * 86400 * SEC); /* centuries */
		assert_int_equal(bs_state_failures(s), 3);
	}
}

/* One step per outcome: attempts in flight when an outcome was published
 * fold into it, however many sockets learn of their failure later, and
 * whatever state they read when they did. */
static void test_one_step_per_outcome(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 9, NOW, IDLE);
	assert_non_null(e);
	/* eight attempts start at NOW..NOW+7; the first failure is published at
	 * NOW+100, the seven others are learned later, each from the current
	 * state (as a failure learned after the fact is) */
	assert_int_equal(bs_entry_fail(e, 0, NOW, NOW + SEC, 1, ECONNREFUSED, NOW + 100), 1);
	for (uint64_t i = 1; i < 8; i++) {
		uint64_t s = atomic_load(&e->state);
		assert_int_equal(bs_entry_fail(e, s, NOW + i, NOW + 100 + i + 2 * SEC,
					       bs_state_failures(s) + 1, ETIMEDOUT,
					       NOW + 100 + i), 0);
	}
	assert_int_equal(bs_state_failures(atomic_load(&e->state)), 1);
	assert_int_equal(atomic_load(&e->last_err), ECONNREFUSED);
	/* the next attempt, started after that outcome, is step 2 */
	uint64_t s1 = atomic_load(&e->state);
	assert_int_equal(bs_entry_fail(e, s1, NOW + SEC, NOW + 3 * SEC, 2, ETIMEDOUT, NOW + SEC + 5), 1);
	assert_int_equal(bs_state_failures(atomic_load(&e->state)), 2);
	/* a success is an outcome too: attempts that started before it fold */
	assert_int_equal(bs_entry_connected(e, NOW + 4 * SEC), 2);
	uint64_t s2 = atomic_load(&e->state);
	assert_int_equal(bs_entry_fail(e, s2, NOW + 4 * SEC - 1, NOW + 9 * SEC, 3, ETIMEDOUT,
				       NOW + 4 * SEC + 9), 0);
	assert_int_equal(atomic_load(&e->state), s2);
	free(t);
}

static void test_fail_from_seen(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 7, NOW, IDLE);
	assert_non_null(e);
	uint64_t s0 = atomic_load(&e->state);
	assert_int_equal(bs_entry_fail(e, s0, NOW, NOW + SEC, 1, ECONNREFUSED, NOW), 1);
	uint64_t s1 = atomic_load(&e->state);
	assert_int_equal(bs_state_failures(s1), 1);
	assert_int_equal(bs_state_next_at(s1), NOW + SEC);
	assert_int_equal(atomic_load(&e->last_err), ECONNREFUSED);
	assert_int_equal(atomic_load(&e->last_used), NOW);
	/* a second outcome computed from the old state loses and changes nothing */
	assert_int_equal(bs_entry_fail(e, s0, NOW + 1, NOW + 5 * SEC, 1, ETIMEDOUT, NOW + 1), 0);
	assert_int_equal(atomic_load(&e->state), s1);
	assert_int_equal(atomic_load(&e->last_err), ECONNREFUSED);
	/* from the current state it advances */
	assert_int_equal(bs_entry_fail(e, s1, NOW + 2, NOW + 3 * SEC, 2, ETIMEDOUT, NOW + 2), 1);
	uint64_t s2 = atomic_load(&e->state);
	assert_int_equal(bs_state_failures(s2), 2);
	assert_int_equal(atomic_load(&e->last_err), ETIMEDOUT);
	assert_int_equal(bs_entry_fail(e, s1, NOW, NOW + 9 * SEC, 2, EHOSTUNREACH, NOW), 0);
	assert_int_equal(atomic_load(&e->state), s2);
	/* ok clears and reports how many failures it cleared */
	assert_int_equal(bs_entry_ok(e), 2);
	assert_int_equal(atomic_load(&e->state), 0);
	assert_int_equal(bs_entry_ok(e), 0);
	/* a failure computed before the success is lost, as it should be */
	assert_int_equal(bs_entry_fail(e, s2, NOW, NOW + 9 * SEC, 3, ETIMEDOUT, NOW), 0);
	assert_int_equal(atomic_load(&e->state), 0);
	/* seq bumps */
	uint32_t q = atomic_load(&e->seq);
	assert_int_equal(bs_entry_bump(e), q + 1);
	assert_int_equal(atomic_load(&e->seq), q + 1);
	free(t);
}

/* The operator's view (address per slot) and reset. */
static void test_addr_and_reset(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 9, NOW, IDLE);
	assert_non_null(e);
	unsigned char addr[16] = {2, 0, 0x15, 0x38, 127, 0, 0, 1};
	unsigned char got[BS_TABLE_ADDR_MAX];
	size_t i = slot_of(t, e);
	assert_int_equal(bs_table_get_addr(t, (unsigned)i, got), 0);
	bs_table_set_addr(t, e, addr, sizeof addr);
	assert_int_equal(bs_table_get_addr(t, (unsigned)i, got), sizeof addr);
	assert_memory_equal(got, addr, sizeof addr);
	bs_table_set_addr(t, e, addr, BS_TABLE_ADDR_MAX + 1); /* too long: ignored */
	assert_int_equal(bs_table_get_addr(t, (unsigned)i, got), sizeof addr);
	assert_int_equal(bs_table_get_addr(t, BS_TABLE_SLOTS, got), 0);
	/* garbage in the length word reads as no address */
	atomic_store(&t->addrs[i][BS_TABLE_ADDR_WORDS - 1], ~0ull);
	assert_int_equal(bs_table_get_addr(t, (unsigned)i, got), 0);

	/* the processes waiting on it */
	bs_table_waiter_add(t, e, 41);
	bs_table_waiter_add(t, e, 42);
	assert_int_equal(atomic_load(&t->waiter_pids[i][0]), 41);
	assert_int_equal(atomic_load(&t->waiter_pids[i][1]), 42);
	bs_table_waiter_remove(t, e, 41);
	assert_int_equal(atomic_load(&t->waiter_pids[i][0]), 0);
	for (uint32_t pid = 100; pid < 100 + BS_TABLE_WAITER_PIDS + 3; pid++)
		bs_table_waiter_add(t, e, pid); /* more than the cells: the rest unlisted */
	bs_table_waiter_remove(t, e, 42);
	bs_table_waiter_remove(t, e, 999); /* not listed: nothing */
	unsigned listed = 0;
	for (unsigned k = 0; k < BS_TABLE_WAITER_PIDS; k++)
		listed += atomic_load(&t->waiter_pids[i][k]) != 0;
	assert_int_equal(listed, BS_TABLE_WAITER_PIDS - 1);

	uint64_t s = atomic_load(&e->state);
	assert_int_equal(bs_entry_fail(e, s, NOW, NOW + 5 * SEC, 3, 111, NOW), 1);
	bs_probe_take(e, 0, bs_probe_make(NOW + SEC, 7));
	atomic_store(&e->attempt_at, NOW);
	uint32_t seq = atomic_load(&e->seq);
	assert_int_equal(bs_entry_reset(e), seq + 1);
	assert_int_equal(atomic_load(&e->state), 0);
	assert_int_equal(atomic_load(&e->probe), 0);
	assert_int_equal(atomic_load(&e->attempt_at), 0);
	assert_int_equal(atomic_load(&e->resets), 1);
	free(t);
}

static void test_probe(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 9, NOW, IDLE);
	assert_non_null(e);
	uint64_t a = bs_probe_make(NOW + 20 * SEC, 1234);
	uint64_t b = bs_probe_make(NOW + 20 * SEC, 5678);
	assert_true(a != 0 && a != b);
	assert_int_equal(bs_probe_tid(a), 1234);
	uint64_t st = bs_probe_stale_at(a);
	assert_true(st >= NOW + 20 * SEC && st <= NOW + 20 * SEC + MS);
	/* stale time rounds up; a probe word is never 0, even at time 0 */
	assert_true(bs_probe_make(0, 0) != 0);
	assert_true(bs_probe_stale_at(bs_probe_make(MS + 1, 1)) >= MS + 1);
	/* tids are masked to BS_TID_BITS and never touch the time */
	uint64_t w = bs_probe_make(5 * SEC, UINT32_MAX);
	assert_int_equal(bs_probe_tid(w), (1u << BS_TID_BITS) - 1);
	assert_int_equal(bs_probe_stale_at(w), bs_probe_stale_at(bs_probe_make(5 * SEC, 0)));
	assert_int_equal(bs_probe_tid(bs_probe_make(5 * SEC, (1u << BS_TID_BITS) + 3)), 3);

	/* take succeeds only from the seen value; release only by the owner */
	assert_false(bs_probe_take(e, a, b));
	assert_true(bs_probe_take(e, 0, a));
	assert_int_equal(atomic_load(&e->probe), a);
	assert_false(bs_probe_take(e, 0, b));
	bs_probe_release(e, b); /* not ours: no effect */
	assert_int_equal(atomic_load(&e->probe), a);
	/* a stale probe may be taken over by naming it */
	assert_true(bs_probe_take(e, a, b));
	bs_probe_release(e, a);
	assert_int_equal(atomic_load(&e->probe), b);
	bs_probe_release(e, b);
	assert_int_equal(atomic_load(&e->probe), 0);
	free(t);
}

/* A table full of failing entries refuses a new key until one goes idle;
 * healthy entries and expired probes make way at once. */
static void test_reclaim(void **state)
{
	(void)state;
	static struct bs_entry *es[BS_TABLE_SLOTS];
	const uint64_t newkey = nth_key(BS_TABLE_SLOTS);
	uint64_t next = NOW + 10 * SEC;
	struct bs_table *t = fill_failing(es, next, NOW);
	/* every slot is taken by a recent failure */
	assert_null(bs_table_claim(t, newkey, NOW, IDLE));
	assert_null(bs_table_claim(t, newkey, next, IDLE));
	assert_null(bs_table_claim(t, newkey, next + IDLE, IDLE));
	assert_null(bs_table_find(t, newkey));
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		assert_ptr_equal(bs_table_find(t, nth_key(i)), es[i]);

	/* past next_at + idle one of them is reclaimed and reset */
	uint64_t later = next + IDLE + MS;
	struct bs_entry *n = bs_table_claim(t, newkey, later, IDLE);
	assert_non_null(n);
	assert_ptr_equal(bs_table_find(t, newkey), n);
	assert_int_equal(atomic_load(&n->state), 0);
	assert_int_equal(atomic_load(&n->last_used), later);
	unsigned gone = 0;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		gone += bs_table_find(t, nth_key(i)) == NULL;
	assert_int_equal(gone, 1);
	free(t);

	/* recent use (last_used after next_at) keeps an entry */
	t = fill_failing(es, next, next + 100 * SEC);
	assert_null(bs_table_claim(t, newkey, later, IDLE));
	assert_non_null(bs_table_claim(t, newkey, next + 100 * SEC + IDLE + 1, IDLE));
	free(t);

	/* a healthy (ok'ed) entry is reclaimed at once, and only that one */
	t = fill_failing(es, next, NOW);
	const unsigned k5 = 1234, k2 = 3000;
	assert_int_equal(bs_entry_ok(es[k5]), 3);
	assert_ptr_equal(bs_table_claim(t, newkey, NOW, IDLE), es[k5]);
	assert_null(bs_table_find(t, nth_key(k5)));
	assert_false(bs_table_owns(t, es[k5], nth_key(k5)));
	assert_true(bs_table_owns(t, es[k5], newkey));
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		if (i != k5)
			assert_ptr_equal(bs_table_find(t, nth_key(i)), es[i]);

	/* a probe in flight pins even a healthy entry until it goes stale */
	assert_int_equal(bs_entry_fail(es[k5], 0, NOW, next, 1, ECONNREFUSED, NOW), 1);
	assert_int_equal(bs_entry_ok(es[k2]), 3);
	uint64_t p = bs_probe_make(NOW + 20 * SEC, 77);
	assert_true(bs_probe_take(es[k2], 0, p));
	assert_null(bs_table_claim(t, nth_key(k5), NOW, IDLE));
	assert_ptr_equal(bs_table_claim(t, nth_key(k5), bs_probe_stale_at(p), IDLE), es[k2]);
	assert_int_equal(atomic_load(&es[k2]->probe), 0);
	/* the reclaimed slot was re-keyed in place: every other key is still
	 * found, wherever its probe sequence runs */
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		if (i != k2)
			assert_non_null(bs_table_find(t, nth_key(i)));
	free(t);
}

/* Keys the table cannot hold: 0 and values with the marker bits. */
static void test_invalid_keys(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	assert_non_null(bs_table_claim(t, 5, NOW, IDLE));
	const uint64_t bad[] = {0, BS_TABLE_RES, BS_TABLE_FREE, 5 | BS_TABLE_RES,
				5 | BS_TABLE_RES | BS_TABLE_DEAD, UINT64_MAX, BS_GOLDEN};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_null(bs_table_claim(t, bad[i], NOW, IDLE));
		assert_null(bs_table_find(t, bad[i]));
	}
	free(t);
}

/* A million destinations, each failing once then recovering: the fixed
 * table always has room, because healthy entries are reclaimed. */
static void test_million_keys(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *lo = t->entries, *hi = t->entries + BS_TABLE_SLOTS;
	unsigned nulls = 0, bad = 0;
	for (uint64_t k = 1; k <= 1000000; k++) {
		uint64_t now = NOW + k * MS;
		struct bs_entry *e = bs_table_claim(t, k, now, IDLE);
		if (!e) {
			nulls++;
			continue;
		}
		bad += e < lo || e >= hi;
		bad += !bs_entry_fail(e, 0, now, now + SEC, 1, ECONNREFUSED, now);
		bad += bs_entry_ok(e) != 1;
	}
	assert_int_equal(nulls, 0);
	assert_int_equal(bad, 0);
	/* the keys, the entries, their addresses, the reach of each group and
	 * a header line: nothing grows with use */
	assert_true(sizeof *t <= BS_TABLE_SLOTS * (sizeof(uint64_t) + sizeof(struct bs_entry) +
						   BS_TABLE_ADDR_WORDS * sizeof(uint64_t) +
						   BS_TABLE_WAITER_PIDS * sizeof(uint32_t)) +
					 BS_TABLE_GROUPS * sizeof(uint16_t) + 64);
	/* the most recent keys are still there */
	assert_non_null(bs_table_find(t, 1000000));
	free(t);
}

/* Distinct destinations that all keep failing (recent, not idle, nothing
 * reclaimable) fit until at least 90% of the table is taken: one crowded
 * neighbourhood of the hash never leaves a destination unpaced early. */
static void test_capacity(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	unsigned n = 0;
	for (uint64_t k = 1; n < BS_TABLE_SLOTS; k++, n++) {
		uint64_t key = k * 0x10001ull; /* any spread will do */
		struct bs_entry *e = bs_table_claim(t, key, NOW, IDLE);
		if (!e)
			break;
		assert_int_equal(bs_entry_fail(e, 0, NOW, NOW + 10 * SEC, 1, ECONNREFUSED, NOW), 1);
	}
	if (n < BS_TABLE_SLOTS * 9 / 10)
		fail_msg("only %u of %u destinations found room", n, BS_TABLE_SLOTS);
	/* every one of them is still found */
	for (uint64_t k = 1; k <= n; k++)
		assert_non_null(bs_table_find(t, k * 0x10001ull));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_and_claim),
		cmocka_unit_test(test_state_pack),
		cmocka_unit_test(test_fail_from_seen),
		cmocka_unit_test(test_one_step_per_outcome),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_addr_and_reset),
		cmocka_unit_test(test_reclaim),
		cmocka_unit_test(test_million_keys),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_invalid_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

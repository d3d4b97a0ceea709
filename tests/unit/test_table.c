/* Unit tests for table.c, the lock-free per-destination state table, single
 * threaded: find and claim, state and probe word packing, outcomes applied
 * only from the seen state, probes, reclaiming slots in a full bucket, and a
 * million keys. Concurrent use is in test_table_threads.c. */
#include "table_helpers.h"

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

static void test_fail_from_seen(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = bs_table_claim(t, 7, NOW, IDLE);
	assert_non_null(e);
	uint64_t s0 = atomic_load(&e->state);
	assert_int_equal(bs_entry_fail(e, s0, NOW + SEC, 1, ECONNREFUSED, NOW), 1);
	uint64_t s1 = atomic_load(&e->state);
	assert_int_equal(bs_state_failures(s1), 1);
	assert_int_equal(bs_state_next_at(s1), NOW + SEC);
	assert_int_equal(atomic_load(&e->last_err), ECONNREFUSED);
	assert_int_equal(atomic_load(&e->last_used), NOW);
	/* a second outcome computed from the old state loses and changes nothing */
	assert_int_equal(bs_entry_fail(e, s0, NOW + 5 * SEC, 1, ETIMEDOUT, NOW + 1), 0);
	assert_int_equal(atomic_load(&e->state), s1);
	assert_int_equal(atomic_load(&e->last_err), ECONNREFUSED);
	/* from the current state it advances */
	assert_int_equal(bs_entry_fail(e, s1, NOW + 3 * SEC, 2, ETIMEDOUT, NOW + 2), 1);
	uint64_t s2 = atomic_load(&e->state);
	assert_int_equal(bs_state_failures(s2), 2);
	assert_int_equal(atomic_load(&e->last_err), ETIMEDOUT);
	assert_int_equal(bs_entry_fail(e, s1, NOW + 9 * SEC, 2, EHOSTUNREACH, NOW), 0);
	assert_int_equal(atomic_load(&e->state), s2);
	/* ok clears and reports how many failures it cleared */
	assert_int_equal(bs_entry_ok(e), 2);
	assert_int_equal(atomic_load(&e->state), 0);
	assert_int_equal(bs_entry_ok(e), 0);
	/* a failure computed before the success is lost, as it should be */
	assert_int_equal(bs_entry_fail(e, s2, NOW + 9 * SEC, 3, ETIMEDOUT, NOW), 0);
	assert_int_equal(atomic_load(&e->state), 0);
	/* seq bumps */
	uint32_t q = atomic_load(&e->seq);
	assert_int_equal(bs_entry_bump(e), q + 1);
	assert_int_equal(atomic_load(&e->seq), q + 1);
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

/* Claim keys[0..WAYS) into a new table and fail each at `used`, until next. */
static struct bs_table *fill_failing(const uint64_t *keys, struct bs_entry **es,
				     uint64_t next, uint64_t used)
{
	struct bs_table *t = new_table();
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++) {
		es[i] = bs_table_claim(t, keys[i], NOW, IDLE);
		assert_non_null(es[i]);
		assert_int_equal(slot_of(t, es[i]) / BS_TABLE_WAYS,
				 slot_of(t, es[0]) / BS_TABLE_WAYS);
		assert_int_equal(bs_entry_fail(es[i], 0, next, 3, ECONNREFUSED, used), 1);
	}
	return t;
}

/* A full bucket of failing entries refuses a new key until they go idle;
 * healthy entries and expired probes make way at once. */
static void test_reclaim(void **state)
{
	(void)state;
	uint64_t keys[BS_TABLE_WAYS + 1];
	pick_keys(keys, BS_TABLE_WAYS + 1, 1, 1);
	const uint64_t newkey = keys[BS_TABLE_WAYS];
	struct bs_entry *es[BS_TABLE_WAYS];
	uint64_t next = NOW + 10 * SEC;
	struct bs_table *t = fill_failing(keys, es, next, NOW);
	/* every way is taken by a recent failure */
	assert_null(bs_table_claim(t, newkey, NOW, IDLE));
	assert_null(bs_table_claim(t, newkey, next, IDLE));
	assert_null(bs_table_claim(t, newkey, next + IDLE, IDLE));
	assert_null(bs_table_find(t, newkey));
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		assert_ptr_equal(bs_table_find(t, keys[i]), es[i]);

	/* past next_at + idle one of them is reclaimed and reset */
	uint64_t later = next + IDLE + MS;
	struct bs_entry *n = bs_table_claim(t, newkey, later, IDLE);
	assert_non_null(n);
	assert_ptr_equal(bs_table_find(t, newkey), n);
	assert_int_equal(atomic_load(&n->state), 0);
	assert_int_equal(atomic_load(&n->last_used), later);
	unsigned gone = 0;
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		gone += bs_table_find(t, keys[i]) == NULL;
	assert_int_equal(gone, 1);
	free(t);

	/* recent use (last_used after next_at) keeps an entry */
	t = fill_failing(keys, es, next, next + 100 * SEC);
	assert_null(bs_table_claim(t, newkey, later, IDLE));
	assert_non_null(bs_table_claim(t, newkey, next + 100 * SEC + IDLE + 1, IDLE));
	free(t);

	/* a healthy (ok'ed) entry is reclaimed at once, and only that one */
	t = fill_failing(keys, es, next, NOW);
	assert_int_equal(bs_entry_ok(es[5]), 3);
	assert_ptr_equal(bs_table_claim(t, newkey, NOW, IDLE), es[5]);
	assert_null(bs_table_find(t, keys[5]));
	assert_false(bs_table_owns(t, es[5], keys[5]));
	assert_true(bs_table_owns(t, es[5], newkey));
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		if (i != 5)
			assert_ptr_equal(bs_table_find(t, keys[i]), es[i]);

	/* a probe in flight pins even a healthy entry until it goes stale */
	assert_int_equal(bs_entry_fail(es[5], 0, next, 1, ECONNREFUSED, NOW), 1);
	assert_int_equal(bs_entry_ok(es[2]), 3);
	uint64_t p = bs_probe_make(NOW + 20 * SEC, 77);
	assert_true(bs_probe_take(es[2], 0, p));
	assert_null(bs_table_claim(t, keys[5], NOW, IDLE));
	assert_ptr_equal(bs_table_claim(t, keys[5], bs_probe_stale_at(p), IDLE), es[2]);
	assert_int_equal(atomic_load(&es[2]->probe), 0);
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
		bad += !bs_entry_fail(e, 0, now + SEC, 1, ECONNREFUSED, now);
		bad += bs_entry_ok(e) != 1;
	}
	assert_int_equal(nulls, 0);
	assert_int_equal(bad, 0);
	/* the keys, the entries and a header line: nothing grows with use */
	assert_true(sizeof *t <= BS_TABLE_SLOTS * (sizeof(uint64_t) + sizeof(struct bs_entry)) + 64);
	/* the most recent keys are still there */
	assert_non_null(bs_table_find(t, 1000000));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_and_claim),
		cmocka_unit_test(test_state_pack),
		cmocka_unit_test(test_fail_from_seen),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_reclaim),
		cmocka_unit_test(test_million_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

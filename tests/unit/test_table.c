/* Unit tests for table.c, the lock-free per-destination state table, single
 * threaded: find and claim, state and probe word packing, outcomes applied
 * only from the seen state, probes, a full bucket's eviction, damage, one
 * creator's share, forgetting, a million keys, capacity, and the keys a
 * table cannot hold. Concurrent use is in test_table_threads.c. */
#include "table_helpers.h"

#include "errname.h"
#include "mix.h"
#include "policy.h"
#include "table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_find_and_claim(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	const uint64_t keys[] = {1, 2, 42, BS_GOLDEN, UINT64_MAX, 1ull << 60};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		assert_null(bs_table_find(t, keys[i])); /* empty table */
	struct bs_entry *e = bs_table_claim_as(t, 42, NOW, IDLE, 0, 0, 0);
	assert_non_null(e);
	assert_ptr_equal(bs_table_find(t, 42), e);
	assert_ptr_equal(bs_table_claim_as(t, 42, NOW + SEC, IDLE, 0, 0, 0), e);
	assert_true(bs_table_owns(t, e, 42));
	assert_false(bs_table_owns(t, e, 43));
	assert_null(bs_table_find(t, 43));
	/* a new entry is healthy, with no probe, stamped with now */
	assert_int_equal(atomic_load(&e->state), 0);
	assert_int_equal(atomic_load(&e->probe), 0);
	assert_int_equal(atomic_load(&e->last_used), NOW);
	struct bs_entry *f = bs_table_claim_as(t, 43, NOW, IDLE, 0, 0, 0);
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
	struct bs_entry *e = bs_table_claim_as(t, 9, NOW, IDLE, 0, 0, 0);
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
	struct bs_entry *e = bs_table_claim_as(t, 7, NOW, IDLE, 0, 0, 0);
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
	struct bs_entry *e = bs_table_claim_as(t, 9, NOW, IDLE, 0, 0, 0);
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

	/* the processes waiting on it, and how many threads each */
	assert_int_equal(bs_table_waiter_add(t, e, 41), 0);
	assert_int_equal(bs_table_waiter_add(t, e, 42), 1);
	assert_int_equal(bs_table_waiter_add(t, e, 41), 0);
	assert_true(atomic_load(&t->waiters[i][0]) == (41ull << 32 | 2));
	assert_true(atomic_load(&t->waiters[i][1]) == (42ull << 32 | 1));
	bs_table_waiter_remove(t, e, 41);
	assert_true(atomic_load(&t->waiters[i][0]) == (41ull << 32 | 1));
	bs_table_waiter_remove(t, e, 41);
	assert_true(atomic_load(&t->waiters[i][0]) == 0);
	for (uint32_t pid = 100; pid < 100 + BS_TABLE_WAITER_PIDS + 3; pid++)
		bs_table_waiter_add(t, e, pid); /* more than the cells: the rest unlisted */
	assert_int_equal(bs_table_waiter_add(t, e, 999), -1);
	bs_table_waiter_remove(t, e, 42);
	bs_table_waiter_remove(t, e, 999); /* not listed: nothing */
	unsigned listed = 0;
	for (unsigned k = 0; k < BS_TABLE_WAITER_PIDS; k++)
		listed += atomic_load(&t->waiters[i][k]) != 0;
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
	struct bs_entry *e = bs_table_claim_as(t, 9, NOW, IDLE, 0, 0, 0);
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

/* n distinct valid keys that fall into bucket b, from nth_key(from) on. */
static unsigned keys_in_bucket(unsigned b, uint64_t *out, unsigned n, unsigned from)
{
	unsigned got = 0;
	for (unsigned i = from; got < n; i++)
		if (bs_table_bucket(nth_key(i)) == b)
			out[got++] = nth_key(i);
	return got;
}

/* A failing entry for key, its next attempt at next, last used at used. */
static struct bs_entry *failing(struct bs_table *t, uint64_t key, uint64_t next, uint64_t used)
{
	struct bs_entry *e = bs_table_claim_as(t, key, used, IDLE, 0, 0, 0);
	assert_non_null(e);
	assert_int_equal(bs_entry_fail(e, 0, used, next, 3, ECONNREFUSED, used), 1);
	return e;
}

/* A full bucket gives way in order: a healthy or idle entry, else the
 * longest-idle failing one (reported), never one with waiters or an
 * attempt in flight; a bucket of those refuses. */
static void test_full_bucket(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	uint64_t k[BS_TABLE_WAYS + 2];
	keys_in_bucket(5, k, BS_TABLE_WAYS + 2, 0);
	struct bs_entry *es[BS_TABLE_WAYS];
	uint64_t next = NOW + 10 * SEC;
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		es[i] = failing(t, k[i], next, NOW + i * SEC);
	/* a healthy one goes first, and nothing is reported */
	assert_int_equal(bs_entry_ok(es[3]), 3);
	struct bs_claim_note note;
	struct bs_entry *n = bs_table_claim_as(t, k[8], NOW, IDLE, 0, NULL, &note);
	assert_ptr_equal(n, es[3]);
	assert_int_equal(note.evicted, 0);
	assert_null(bs_table_find(t, k[3]));
	assert_int_equal(bs_entry_fail(n, 0, NOW, next, 1, ECONNREFUSED, NOW), 1);
	/* all failing: the longest idle goes, unless it has waiters */
	atomic_store(&es[0]->last_used, NOW + 50 * SEC);
	atomic_store(&es[0]->state, bs_state_make(NOW - 50 * SEC, 3));
	atomic_store(&es[0]->waiting, 1);
	n = bs_table_claim_as(t, k[9], NOW, IDLE, 0, NULL, &note);
	assert_non_null(n);
	assert_true(n != es[0]);
	assert_true(note.evicted != 0 && note.evicted != k[0]);
	assert_ptr_equal(bs_table_find(t, k[0]), es[0]);
	/* every way pinned (waiters, or an attempt in flight): refused */
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		atomic_store(&t->entries[bs_table_bucket(k[0]) * BS_TABLE_WAYS + i].waiting, 1);
	atomic_store(&es[1]->waiting, 0);
	assert_true(bs_probe_take(es[1], 0, bs_probe_make(NOW + 20 * SEC, 7)));
	uint64_t other[1];
	keys_in_bucket(5, other, 1, 100000);
	assert_null(bs_table_claim_as(t, other[0], NOW, IDLE, 0, NULL, &note));
	assert_int_equal(note.refused, 1);
	/* once the probe is stale, its way may go */
	assert_ptr_equal(bs_table_claim_as(t, other[0], NOW + 22 * SEC, IDLE, 0, NULL, &note),
			 es[1]);
	free(t);
}

/* Damaged ways (a key word whose check does not agree, garbage) are taken
 * first and counted; random bytes over the whole table crash nothing,
 * loop nowhere, and every claim still finds room. */
static void test_damage(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	struct bs_entry *e = failing(t, nth_key(1), NOW + 10 * SEC, NOW);
	size_t i = slot_of(t, e);
	atomic_store(&t->meta[i], 12345); /* its check no longer agrees */
	assert_null(bs_table_find(t, nth_key(1)));
	uint64_t k[1];
	keys_in_bucket(bs_table_bucket(nth_key(1)), k, 1, 2);
	struct bs_claim_note note;
	for (unsigned w = 0; w < BS_TABLE_WAYS; w++) /* fill the rest */
		if (atomic_load(&t->keys[i / BS_TABLE_WAYS * BS_TABLE_WAYS + w]) == 0)
			atomic_store(&t->keys[i / BS_TABLE_WAYS * BS_TABLE_WAYS + w], 77);
	assert_ptr_equal(bs_table_claim_as(t, k[0], NOW, IDLE, 0, NULL, &note), e);
	assert_true(note.damaged >= 1);
	free(t);

	t = new_table();
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned char *p = (unsigned char *)t;
	for (size_t b = 0; b < sizeof *t; b++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[b] = (unsigned char)x;
	}
	unsigned found = 0, room = 0;
	for (unsigned j = 0; j < 2000; j++) {
		found += bs_table_find(t, nth_key(j)) != NULL;
		struct bs_entry *c = bs_table_claim_as(t, nth_key(j), NOW, IDLE, 0, NULL, &note);
		room += c != NULL;
	}
	assert_int_equal(found, 0);
	assert_true(room > 1900);
	free(t);
}

/* One creator holds at most its share of the table: past it, its own
 * longest-idle entry makes way (reported); others' entries stay. */
static void test_share(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	uint32_t own = 0, mine = 0;
	struct bs_entry *theirs = bs_table_claim_as(t, nth_key(999999), NOW, IDLE, 9, &mine, NULL);
	assert_non_null(theirs);
	unsigned evicted = 0;
	for (unsigned j = 0; j < 3000; j++) {
		struct bs_claim_note note;
		uint64_t now = NOW + j * MS;
		struct bs_entry *e = bs_table_claim_as(t, nth_key(j), now, IDLE, 7, &own, &note);
		assert_non_null(e);
		assert_int_equal(bs_entry_fail(e, 0, now, now + 100 * SEC, 1, ECONNREFUSED, now), 1);
		evicted += note.evicted != 0;
		assert_true(own <= BS_TABLE_SHARE);
	}
	unsigned held = 0;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		held += (uint32_t)(atomic_load(&t->meta[i]) >> 32) == 7 &&
			bs_table_key_valid(atomic_load(&t->keys[i]));
	assert_true(held <= BS_TABLE_SHARE);
	assert_true(evicted >= 3000 - BS_TABLE_SHARE);
	assert_ptr_equal(bs_table_find(t, nth_key(999999)), theirs);
	/* the most recent are still there */
	assert_non_null(bs_table_find(t, nth_key(2999)));
	free(t);
}

/* A failing entry nobody attempted for `after` past its due time starts
 * over; a recent one, one on probation or one with a probe does not. */
static void test_forget_idle(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	uint64_t next = NOW + 10 * SEC, after = 144 * SEC;
	struct bs_entry *e = failing(t, nth_key(1), next, NOW);
	assert_false(bs_entry_forget_idle(e, next + after, after));
	uint64_t p = bs_probe_make(next + after + 5 * SEC, 3);
	assert_true(bs_probe_take(e, 0, p));
	assert_false(bs_entry_forget_idle(e, next + after + SEC, after));
	bs_probe_release(e, p);
	atomic_store(&e->attempt_at, next + 30 * SEC); /* attempted since: later */
	assert_false(bs_entry_forget_idle(e, next + after + SEC, after));
	assert_true(bs_entry_forget_idle(e, next + 30 * SEC + after + SEC, after));
	assert_int_equal(atomic_load(&e->state), 0);
	assert_false(bs_entry_forget_idle(e, UINT64_MAX / 2, after)); /* healthy */
	free(t);
}

/* Keys the table cannot hold: 0 and values with the marker bits. */
static void test_invalid_keys(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	assert_non_null(bs_table_claim_as(t, 5, NOW, IDLE, 0, 0, 0));
	const uint64_t bad[] = {0, BS_TABLE_RES, BS_TABLE_FREE, 5 | BS_TABLE_RES,
				5 | BS_TABLE_RES | BS_TABLE_DEAD, UINT64_MAX, BS_GOLDEN};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_null(bs_table_claim_as(t, bad[i], NOW, IDLE, 0, 0, 0));
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
		struct bs_entry *e = bs_table_claim_as(t, k, now, IDLE, 0, 0, 0);
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
	assert_non_null(bs_table_find(t, 1000000)); /* the most recent */
	free(t);
}

/* Distinct destinations that all keep failing, more than the table holds:
 * every claim finds room (a full bucket evicts its longest idle, and says
 * which), and every destination still held is found. */
static void test_capacity(void **state)
{
	(void)state;
	struct bs_table *t = new_table();
	unsigned evicted = 0;
	for (uint64_t k = 1; k <= 2 * BS_TABLE_SLOTS; k++) {
		struct bs_claim_note note;
		uint64_t now = NOW + k * MS;
		struct bs_entry *e = bs_table_claim_as(t, k * 0x10001ull, now, IDLE, 0, NULL, &note);
		assert_non_null(e);
		assert_int_equal(bs_entry_fail(e, 0, now, now + 10 * SEC, 1, ECONNREFUSED, now), 1);
		evicted += note.evicted != 0;
	}
	unsigned held = 0;
	for (uint64_t k = 1; k <= 2 * BS_TABLE_SLOTS; k++)
		held += bs_table_find(t, k * 0x10001ull) != NULL;
	assert_int_equal(held + evicted, 2 * BS_TABLE_SLOTS);
	assert_true(held > BS_TABLE_SLOTS * 9 / 10);
	free(t);
}

/* The last error is the table's word: a value no attempt ends with (a
 * forged 9999, a damaged word) is no error at all, not an invented one. */
static void test_last_err_is_validated(void **state)
{
	(void)state;
	struct bs_entry e;
	memset(&e, 0, sizeof e);
	static const struct {
		uint32_t stored;
		int read;
	} cases[] = {
		{0, 0},
		{ECONNREFUSED, ECONNREFUSED},
		{ETIMEDOUT, ETIMEDOUT},
		{BS_ERR_EAI(-2), BS_ERR_EAI(-2)},
		{9999, 0},
		{2147483653u, 0},
		{UINT32_MAX, 0},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		atomic_store(&e.last_err, cases[i].stored);
		assert_int_equal(bs_entry_last_err(&e), cases[i].read);
	}
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
		cmocka_unit_test(test_full_bucket),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_forget_idle),
		cmocka_unit_test(test_million_keys),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_invalid_keys),
		cmocka_unit_test(test_last_err_is_validated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

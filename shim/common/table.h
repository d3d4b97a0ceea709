/*
 * table: per-destination backoff state, shared by all threads of a process.
 *
 * Promise: fixed capacity, no allocation, no locks, no syscalls; every
 * operation is a bounded number of atomic loads and compare-and-swaps on
 * 64-bit words, so it is async-signal-safe and survives a longjmp out of any
 * point. Entries hold no pointers, so the table could live in shared memory.
 *
 * Only destinations that have failed are ever inserted: a lookup of a healthy
 * destination reads one cache line of keys and writes nothing. When a bucket
 * is full, entries that are healthy, or idle well past their next allowed
 * time, are reclaimed; if none is, claim() returns NULL and the caller goes
 * on untracked (it never fails the program's call).
 *
 * A racing reclaim can hand a slot to another key under a thread that still
 * holds it; callers re-check bs_table_owns() after each wait and treat a
 * mismatch as "look up again". The worst effect is one mis-timed wait.
 */
#ifndef BS_TABLE_H
#define BS_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

#define BS_TABLE_WAYS 8u      /* keys per bucket: one 64-byte line */
#define BS_TABLE_BUCKETS 512u /* 4096 entries */
#define BS_TABLE_SLOTS (BS_TABLE_WAYS * BS_TABLE_BUCKETS)

/* state word: next allowed attempt (ms, monotonic, rounded up) << 21 |
 * probation << 20 | consecutive failures (saturating at 2^20 - 1).
 * 0 = healthy. Probation: the last attempt connected but the connection has
 * not yet proved healthy (no byte from the peer yet); new attempts may go,
 * and a failure continues the count instead of starting over. */
#define BS_FAIL_BITS 20
#define BS_FAIL_MAX ((1u << BS_FAIL_BITS) - 1)
#define BS_PROBATION (1ull << BS_FAIL_BITS)
#define BS_STATE_SHIFT (BS_FAIL_BITS + 1)

/* probe word: 0 = no attempt in flight; else stale-at (ms) << 22 | tid. */
#define BS_TID_BITS 22

struct bs_entry { /* two cache lines */
	_Atomic uint64_t state;
	_Atomic uint64_t probe;
	_Atomic uint64_t last_used; /* ns */
	_Atomic uint32_t seq;       /* bumped on every published change; futex word */
	_Atomic uint32_t last_err;  /* errno of the last failed attempt */
	_Atomic uint64_t last_wait; /* ns: the wait drawn after it (decorrelated jitter) */
	/* the responsive policy's interval and counters */
	_Atomic uint64_t interval;  /* ns every connect waits */
	_Atomic uint32_t succ;      /* consecutive successes */
	_Atomic uint32_t n_calls, n_up, n_down, n_waits;
	_Atomic uint64_t waited;    /* ns waited in all */
	char pad[128 - 80];
};

struct bs_table {
	_Atomic uint32_t used; /* set once anything was ever inserted */
	_Alignas(64) _Atomic uint64_t keys[BS_TABLE_SLOTS];
	_Alignas(64) struct bs_entry entries[BS_TABLE_SLOTS];
};

/* Find key; NULL if it has no entry (the destination is healthy). Until a
 * first destination has failed this is a single load. */
struct bs_entry *bs_table_find(struct bs_table *t, uint64_t key);

/* Find or insert key. `idle` (ns) is how long past its next allowed time a
 * failing entry must sit untouched before it may be reclaimed. */
struct bs_entry *bs_table_claim(struct bs_table *t, uint64_t key, uint64_t now,
				uint64_t idle);

/* Does entry e still belong to key? */
int bs_table_owns(struct bs_table *t, const struct bs_entry *e, uint64_t key);

/* state word helpers */
uint64_t bs_state_make(uint64_t next_at_ns, uint32_t failures);
uint32_t bs_state_failures(uint64_t s);
uint64_t bs_state_next_at(uint64_t s); /* ns */
/* May a new attempt start without waiting (healthy or on probation)? */
int bs_state_open(uint64_t s);

/* Publish a failure if nobody published anything since `seen` was read.
 * Returns 1 if this call moved the state, 0 if another outcome won. */
int bs_entry_fail(struct bs_entry *e, uint64_t seen, uint64_t next_at_ns,
		  uint32_t failures, int err, uint64_t now);

/* Mark healthy. Returns the number of failures it cleared. */
uint32_t bs_entry_ok(struct bs_entry *e);

/* An attempt connected: put a failing destination on probation (failures
 * kept, no wait). Returns the failure count. */
uint32_t bs_entry_connected(struct bs_entry *e);

/* probe word helpers */
uint64_t bs_probe_make(uint64_t stale_at_ns, uint32_t tid);
uint64_t bs_probe_stale_at(uint64_t p); /* ns */
uint32_t bs_probe_tid(uint64_t p);
int bs_probe_take(struct bs_entry *e, uint64_t seen, uint64_t mine);
void bs_probe_release(struct bs_entry *e, uint64_t mine);

/* Bump the entry's seq (after any published change). Returns the new value;
 * the caller wakes waiters on &e->seq. */
uint32_t bs_entry_bump(struct bs_entry *e);

#endif

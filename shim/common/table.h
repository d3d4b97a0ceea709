/*
 * table: per-destination backoff state, shared by all threads of a process,
 * and by every process that maps the same shared table file (shtab.h).
 *
 * Promise: fixed capacity, no allocation, no locks, no syscalls; every
 * operation is a bounded number of atomic loads and compare-and-swaps on
 * 64-bit words, so it is async-signal-safe. Entries hold no pointers, so the
 * table could live in shared memory. An entry is fully initialised before
 * its key becomes visible: a thread that finds a key never sees the entry
 * being reset under it by the claim that created it.
 *
 * Only destinations that have failed are ever inserted: a lookup of a healthy
 * destination writes nothing and, until something has failed, is one load.
 *
 * Layout: open addressing with linear probing over the whole table. A key's
 * probe sequence starts at its home slot (a hash of the key) and wraps. Each
 * group of BS_TABLE_GROUP home slots records its reach: how far past their
 * home its keys were ever placed; a lookup reads at most that many key words
 * and stops at a never-used slot, so it stays short while the table is
 * sparsely used. A new key takes the first never-used or free slot of its
 * sequence; if there is none within a short window past the group's reach,
 * the first slot holding a reclaimable entry (healthy, or idle well past its
 * next allowed time, with no attempt in flight). The sequence runs over the
 * whole table, so every slot is usable by live destinations (the audit's
 * requirement is 90%). A reclaimed slot is re-keyed in place and never goes
 * back to never-used, so no probe sequence is ever cut. If no slot
 * qualifies, claim() returns NULL and the caller goes on untracked (it never
 * fails the program's call).
 *
 * Key words. A slot's key word is one of
 *   0            never used: ends every probe sequence; never comes back;
 *   BS_TABLE_FREE  free (a claim that lost a race gave it back); reusable,
 *                but does not end a probe sequence;
 *   RES(k) = k | BS_TABLE_RES   a claim of k is initialising the entry;
 *   RES(k) | BS_TABLE_DEAD      that claim was cancelled by a rival claim of k;
 *   k            the entry belongs to key k and is initialised.
 * Valid keys are therefore nonzero with the two top bits clear (addr.c's
 * keys are); find/claim of any other value return NULL.
 *
 * Claim protocol (k not found):
 *  1. Scan k's sequence. k found: return it. RES(k) found: another thread is
 *     creating k; spin a bounded while for it to become k (return it) or
 *     anything else (start over); if it stays, carry on. Note the first
 *     usable slot (0, free, or a reclaimable old key).
 *  2. Raise the group's reach to cover that slot, then CAS its word from the
 *     value seen to RES(k). Failing that, start over. Only the thread that
 *     made RES(k) touches the entry from here on: it resets every field.
 *  3. Scan again for rivals: a published k elsewhere means ours is given
 *     back (word := FREE) and theirs returned; a rival RES(k) is cancelled
 *     (CAS RES(k) -> RES(k)|DEAD).
 *  4. Publish: CAS RES(k) -> k (release: the reset happens-before any
 *     acquire load that sees k). If a rival cancelled us, the word becomes
 *     FREE and we start over.
 *  All CASes and the scans' loads are sequentially consistent: of two rivals
 *  that both reserved, at least one sees the other's reservation in step 3,
 *  so two copies of a key are never both published. Two rivals that cancel
 *  each other both start over; the number of rounds is bounded, after which
 *  claim() returns NULL (that call goes untracked).
 *  A claim abandoned between steps 2 and 4 (a handler that longjmps out)
 *  leaves its slot reserved: the table loses that one slot, nothing else.
 *
 * A racing reclaim can hand a slot to another key under a thread that still
 * holds it; callers re-check bs_table_owns() after each wait and treat a
 * mismatch as "look up again". The worst effect is one mis-timed wait.
 */
#ifndef BS_TABLE_H
#define BS_TABLE_H

#include <stdatomic.h>
#include <stdint.h>
#include "mix.h"

#define BS_TABLE_SLOTS_LOG2 12
#define BS_TABLE_SLOTS (1u << BS_TABLE_SLOTS_LOG2)
#define BS_TABLE_GROUP 8u    /* home slots sharing one reach: a line of keys */
#define BS_TABLE_GROUPS (BS_TABLE_SLOTS / BS_TABLE_GROUP)

#define BS_TABLE_ADDR_MAX 28 /* sockaddr_in6 */
#define BS_TABLE_ADDR_WORDS 4
#define BS_TABLE_WAITER_PIDS 8

/* key word markers (see above) */
#define BS_TABLE_RES (1ull << 63)
#define BS_TABLE_DEAD (1ull << 62)
#define BS_TABLE_FREE BS_TABLE_DEAD

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
	_Atomic uint64_t outcome_at; /* ns: when the last outcome was published */
	/* facts shared across processes (issue 10), and counters for the
	 * operator (backoffshim status) */
	_Atomic uint64_t attempt_at; /* ns: the start of the last attempt */
	_Atomic uint32_t resets;     /* bumped by backoffshim reset */
	_Atomic uint32_t waiting;    /* threads waiting now (blocking connects) */
	_Atomic uint32_t n_attempts, n_failures, n_giveups, n_waited;
	_Atomic uint32_t waited_ms;  /* ms waited in all (wraps after 49 days) */
	char pad[128 - 124];
};

struct bs_table {
	_Atomic uint32_t used; /* set once anything was ever inserted */
	/* per group of home slots: 1 + the farthest distance from its home
	 * at which a key of the group was ever placed (0: none ever was) */
	_Atomic uint16_t reach[BS_TABLE_GROUPS];
	_Alignas(64) _Atomic uint64_t keys[BS_TABLE_SLOTS];
	_Alignas(64) struct bs_entry entries[BS_TABLE_SLOTS];
	/* each entry's address, for the operator (backoffshim status): the
	 * sockaddr's first BS_TABLE_ADDR_MAX bytes, then its length */
	_Alignas(64) _Atomic uint64_t addrs[BS_TABLE_SLOTS][BS_TABLE_ADDR_WORDS];
	/* the pids of processes with a thread waiting on each entry (0: a
	 * free cell), for the operator; a process that finds no free cell is
	 * not listed */
	_Alignas(64) _Atomic uint32_t waiter_pids[BS_TABLE_SLOTS][BS_TABLE_WAITER_PIDS];
};

/* key's home slot: Fibonacci hashing (the product's top bits, which every
 * bit of the key reaches), two instructions on the fast path. */
static inline unsigned bs_table_home(uint64_t key)
{
	return (unsigned)((key * BS_GOLDEN) >> (64 - BS_TABLE_SLOTS_LOG2));
}

/* Was anything ever inserted? One load. */
static inline int bs_table_in_use(struct bs_table *t)
{
	return atomic_load_explicit(&t->used, memory_order_acquire) != 0;
}

/* Might key have an entry? 0 means it has none: nothing was ever placed
 * from its group of home slots (one load while the table is unused; then a
 * hash and one more). 1 means bs_table_lookup must tell. */
static inline int bs_table_may_hold(struct bs_table *t, uint64_t key)
{
	return bs_table_in_use(t) &&
	       atomic_load_explicit(&t->reach[bs_table_home(key) / BS_TABLE_GROUP],
				    memory_order_acquire) != 0;
}

/* Find key; NULL if it has no entry (the destination is healthy). Until a
 * first destination has failed this is a single load; after, one load of the
 * group's reach and at most that many key words. */
struct bs_entry *bs_table_lookup(struct bs_table *t, uint64_t key);
static inline struct bs_entry *bs_table_find(struct bs_table *t, uint64_t key)
{
	if (!atomic_load_explicit(&t->used, memory_order_acquire))
		return 0;
	return bs_table_lookup(t, key);
}

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
int bs_state_may_attempt(uint64_t s);

/* Publish the failure of an attempt that started at `started` (ns), as one
 * step of the schedule: only if the attempt started after the last
 * published outcome (one step per outcome: attempts in flight when a
 * failure was published fold into it) and nobody published anything since
 * `seen` was read. Returns 1 if this call moved the state, 0 if it folded
 * into another outcome. */
int bs_entry_fail(struct bs_entry *e, uint64_t seen, uint64_t started, uint64_t next_at_ns,
		  uint32_t failures, int err, uint64_t now);

/* Mark healthy. Returns the number of failures it cleared. */
uint32_t bs_entry_ok(struct bs_entry *e);

/* An attempt connected at `now`: an outcome (attempts in flight fold into
 * it); a failing destination goes on probation (failures kept, no wait).
 * Returns the failure count. */
uint32_t bs_entry_connected(struct bs_entry *e, uint64_t now);

/* probe word helpers */
uint64_t bs_probe_make(uint64_t stale_at_ns, uint32_t tid);
uint64_t bs_probe_stale_at(uint64_t p); /* ns */
uint32_t bs_probe_tid(uint64_t p);
int bs_probe_take(struct bs_entry *e, uint64_t seen, uint64_t mine);
void bs_probe_release(struct bs_entry *e, uint64_t mine);

/* Bump the entry's seq (after any published change). Returns the new value;
 * the caller wakes waiters on &e->seq. */
uint32_t bs_entry_bump(struct bs_entry *e);

/* Record the address of e (an entry of t) for the operator: a few stores,
 * skipped when it is already there. */
void bs_table_set_addr(struct bs_table *t, const struct bs_entry *e, const void *addr,
		       uint32_t len);
/* The address recorded for slot i into buf (BS_TABLE_ADDR_MAX bytes);
 * returns its length (0: none, or garbage). */
uint32_t bs_table_get_addr(const struct bs_table *t, unsigned i, void *buf);

/* List pid among the processes waiting on e, or take it off (its last
 * waiting thread is done). */
void bs_table_waiter_add(struct bs_table *t, const struct bs_entry *e, uint32_t pid);
void bs_table_waiter_remove(struct bs_table *t, const struct bs_entry *e, uint32_t pid);

/* An operator's reset (backoffshim reset): healthy, no probe, no recent
 * attempt, `resets` bumped so that woken waiters can say why. Returns the
 * new seq; the caller wakes waiters on &e->seq. */
uint32_t bs_entry_reset(struct bs_entry *e);

#endif

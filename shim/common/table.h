/*
 * table: per-destination backoff state, shared by all threads of a process,
 * and by every process that attaches the same shared table (shtab.h).
 *
 * Promise: fixed capacity, no allocation, no locks, no syscalls; every
 * operation is a bounded number of atomic loads and compare-and-swaps on
 * 64-bit words, so it is async-signal-safe. Entries hold no pointers, so the
 * table can live in shared memory. An entry is fully initialised before
 * its key becomes visible: a thread that finds a key never sees the entry
 * being reset under it by the claim that created it.
 *
 * Only destinations that have failed are ever inserted: a lookup of a healthy
 * destination writes nothing and, until something has failed, is one load.
 *
 * Untrusted: with a shared table any process of the user (or a bug) may
 * have written anything anywhere. Every word read is checked before it is
 * believed (a key word against its slot's check word, an errno against its
 * range); nothing read can make an operation loop or fail, and a slot whose
 * words do not agree counts as damaged and may be taken over.
 *
 * Layout: set-associative. A key's bucket (a hash of the key) is one cache
 * line of BS_TABLE_WAYS key words; a lookup tests the key's tag bit in its
 * bucket's tag word first (each key of the bucket sets one of 64) and reads
 * the key words only when it is set, so it costs the same at any fill. A
 * new key takes an empty or free way of its bucket; a full bucket gives
 * up, in this order, a damaged way, the longest-idle reclaimable entry
 * (healthy, or idle past `idle` after its next allowed time), or the
 * longest-idle entry with no waiter and no attempt in flight (its schedule
 * starts over; the caller is told, to say so). A bucket whose every way has
 * waiters or an attempt in flight refuses: claim() returns NULL and the
 * caller goes on untracked, after saying so. One creator (a process) may
 * hold at most a quarter of the table: past it, its own longest-idle entry
 * makes way.
 *
 * Key words. A slot's key word is one of
 *   0            empty;
 *   BS_TABLE_FREE  free (a claim that lost a race gave it back);
 *   RES(k) = k | BS_TABLE_RES   a claim of k is initialising the entry;
 *   RES(k) | BS_TABLE_DEAD      that claim was cancelled by a rival claim of k;
 *   k            the entry belongs to key k and is initialised.
 * Valid keys are therefore nonzero with the two top bits clear (addr.c's
 * keys are); find/claim of any other value return NULL.
 *
 * Claim protocol (k not found), within k's bucket:
 *  1. Scan the bucket. k found: return it. RES(k) found: another thread is
 *     creating k; spin a bounded while for it to settle. Pick the way to
 *     take (above).
 *  2. CAS its key word from the value seen to RES(k). Failing that, start
 *     over. Only the thread that made RES(k) touches the entry from here
 *     on: it resets every field, writes the slot's check word and creator
 *     and the bucket's tag.
 *  3. Scan the bucket again for rivals: a published k elsewhere means ours
 *     is given back (word := FREE) and theirs returned; a rival RES(k) is
 *     cancelled (CAS RES(k) -> RES(k)|DEAD).
 *  4. Publish: CAS RES(k) -> k. If a rival cancelled us, the word becomes
 *     FREE and we start over.
 *  All CASes and the scans' loads are sequentially consistent: of two rivals
 *  that both reserved, at least one sees the other's reservation in step 3,
 *  so two copies of a key are never both published. The number of rounds
 *  is bounded, after which claim() returns NULL (that call goes untracked).
 *  A claim abandoned between steps 2 and 4 (a handler that longjmps out)
 *  keeps its way: no claim takes a reservation (table.c's rank_of).
 *
 * A racing eviction can hand a slot to another key under a thread that
 * still holds it; callers re-check bs_table_owns() after each wait and
 * treat a mismatch as "look up again". The worst effect is one mis-timed
 * wait.
 */
#ifndef BS_TABLE_H
#define BS_TABLE_H

#include <stdatomic.h>
#include <stdint.h>
#include "mix.h"

#define BS_TABLE_SLOTS_LOG2 12
#define BS_TABLE_SLOTS (1u << BS_TABLE_SLOTS_LOG2)
#define BS_TABLE_WAYS 8u /* key words per bucket: one cache line */
#define BS_TABLE_BUCKETS (BS_TABLE_SLOTS / BS_TABLE_WAYS)
#define BS_TABLE_BUCKETS_LOG2 (BS_TABLE_SLOTS_LOG2 - 3)
#define BS_TABLE_SHARE (BS_TABLE_SLOTS / 4) /* entries one creator may hold */

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
	/* per bucket: the tag bits (bs_table_tag) of the keys in its ways, or
	 * more: a key whose bit is clear is not there */
	_Alignas(64) _Atomic uint64_t tags[BS_TABLE_BUCKETS];
	_Alignas(64) _Atomic uint64_t keys[BS_TABLE_SLOTS];
	/* per slot: its creator (high half) and a check of its key (low
	 * half): a key word without its check is damage, not a key */
	_Alignas(64) _Atomic uint64_t meta[BS_TABLE_SLOTS];
	_Alignas(64) struct bs_entry entries[BS_TABLE_SLOTS];
	/* each entry's address, for the operator (backoffshim status): the
	 * sockaddr's first BS_TABLE_ADDR_MAX bytes, then its length */
	_Alignas(64) _Atomic uint64_t addrs[BS_TABLE_SLOTS][BS_TABLE_ADDR_WORDS];
	/* the processes with threads waiting on each entry: pid << 32 |
	 * threads (0: a free cell), for the operator and for eviction; a
	 * process that finds no free cell is not listed */
	_Alignas(64) _Atomic uint64_t waiters[BS_TABLE_SLOTS][BS_TABLE_WAITER_PIDS];
};

/* A key a table may hold (see "Key words" above). */
static inline int bs_table_key_valid(uint64_t key)
{
	return key != 0 && !(key & (BS_TABLE_RES | BS_TABLE_DEAD));
}

/* key's bucket: Fibonacci hashing (the product's top bits, which every
 * bit of the key reaches); its tag: one bit of 64, chosen by the next 6. */
static inline unsigned bs_table_bucket(uint64_t key)
{
	return (unsigned)((key * BS_GOLDEN) >> (64 - BS_TABLE_BUCKETS_LOG2));
}

static inline uint64_t bs_table_tag(uint64_t key)
{
	return 1ull << ((key * BS_GOLDEN) >> (64 - BS_TABLE_BUCKETS_LOG2 - 6) & 63);
}

/* Might key have an entry? 0: none (its tag bit is clear in its bucket's
 * word); 1: bs_table_lookup must tell. */
static inline int bs_table_may_hold(struct bs_table *t, uint64_t key)
{
	return atomic_load_explicit(&t->used, memory_order_acquire) &&
	       (atomic_load_explicit(&t->tags[bs_table_bucket(key)], memory_order_acquire) &
		bs_table_tag(key)) != 0;
}

/* Find key; NULL if it has no entry (the destination is healthy). */
struct bs_entry *bs_table_lookup(struct bs_table *t, uint64_t key);
static inline struct bs_entry *bs_table_find(struct bs_table *t, uint64_t key)
{
	if (!atomic_load_explicit(&t->used, memory_order_acquire))
		return 0;
	return bs_table_lookup(t, key);
}

/* Find or insert key for creator `who` (a process id; 0: no share
 * limit). `idle` (ns) is how long past its next allowed time a failing
 * entry must sit untouched before it counts as reclaimable. *note says what
 * the claim did to others (may be NULL): the key it evicted from a live
 * schedule (0: none), how many damaged slots it passed, or why it refused.
 * `own` is the creator's count of entries it made (a hint it keeps; the
 * table recounts when it reaches the share). */
struct bs_claim_note {
	uint64_t evicted; /* a failing destination's key, its schedule lost */
	unsigned damaged; /* damaged ways seen in the bucket */
	int refused;      /* every way has waiters or an attempt in flight */
};
struct bs_entry *bs_table_claim_as(struct bs_table *t, uint64_t key, uint64_t now,
				   uint64_t idle, uint32_t who, uint32_t *own,
				   struct bs_claim_note *note);

/* Is slot i's key word a key whose check agrees? (status reads with it) */
int bs_table_slot_valid(struct bs_table *t, unsigned i, uint64_t *key);

int bs_table_owns(struct bs_table *t, const struct bs_entry *e, uint64_t key);

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

/* A failing entry that nobody attempted for `after` (max_backoff with
 * jitter) past its next allowed time is a stale fact: it starts a new
 * schedule (healthy again) unless an attempt is in flight. Returns 1 if it
 * did; the caller publishes. */
int bs_entry_forget_idle(struct bs_entry *e, uint64_t now, uint64_t after);

/* The error of the entry's last failure, if it is one an attempt can end
 * with (an errno or a lookup's error the errname table knows); else 0. It
 * is the table's word, and may be a forged or a damaged one. */
int bs_entry_last_err(const struct bs_entry *e);

/* Mark healthy. Returns the number of failures it cleared. */
uint32_t bs_entry_ok(struct bs_entry *e);

/* An attempt connected at `now`: an outcome (attempts in flight fold into
 * it); a failing destination goes on probation (failures kept, no wait).
 * Returns the failure count. */
uint32_t bs_entry_connected(struct bs_entry *e, uint64_t now);

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

/* One more (or one less) thread of process pid waits on e: its cell's
 * count moves, the cell is taken on the first and freed after the last.
 * Returns the cell, -1 if none was free (the process goes unlisted). */
int bs_table_waiter_add(struct bs_table *t, const struct bs_entry *e, uint32_t pid);
void bs_table_waiter_remove(struct bs_table *t, const struct bs_entry *e, uint32_t pid);

/* An operator's reset (backoffshim reset): healthy, no probe, no recent
 * attempt, `resets` bumped so that woken waiters can say why. Returns the
 * new seq; the caller wakes waiters on &e->seq. */
uint32_t bs_entry_reset(struct bs_entry *e);

#endif

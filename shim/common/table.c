/* table: lock-free per-destination state. See table.h. */
#include "table.h"

#include "mix.h"
#include "policy.h"
#include "util.h"

#include <stddef.h>
#include <string.h>

/* An entry is one 128-byte unit (two cache lines); pad makes it so. */
BS_STATIC_ASSERT(sizeof(struct bs_entry) == 128, "struct bs_entry is 128 bytes");

#define MASK (BS_TABLE_SLOTS - 1)
#define CLAIM_ROUNDS 8 /* start-overs before a claim gives up */
#define SPIN 4096      /* loads spent waiting for a rival's RES(k) to settle */
#define WINDOW 64      /* slots past reach searched for a free one before a
			* reclaimable entry is taken instead */

static unsigned home_of(uint64_t key)
{
	return bs_table_home(key);
}

static int key_valid(uint64_t key)
{
	return key != 0 && !(key & (BS_TABLE_RES | BS_TABLE_DEAD));
}

static uint64_t word(struct bs_table *t, unsigned i)
{
	return atomic_load(&t->keys[i & MASK]);
}

static unsigned reach_of(struct bs_table *t, unsigned home)
{
	return atomic_load(&t->reach[home / BS_TABLE_GROUP]);
}

uint64_t bs_state_make(uint64_t next_at_ns, uint32_t failures)
{
	uint64_t ms = next_at_ns / BS_NS_PER_MS + (next_at_ns % BS_NS_PER_MS != 0);
	if (ms >= (1ull << (64 - BS_STATE_SHIFT)))
		ms = (1ull << (64 - BS_STATE_SHIFT)) - 1;
	if (failures > BS_FAIL_MAX)
		failures = BS_FAIL_MAX;
	return ms << BS_STATE_SHIFT | failures;
}

uint32_t bs_state_failures(uint64_t s)
{
	return (uint32_t)(s & BS_FAIL_MAX);
}

uint64_t bs_state_next_at(uint64_t s)
{
	return (s >> BS_STATE_SHIFT) * BS_NS_PER_MS;
}

int bs_state_may_attempt(uint64_t s)
{
	return bs_state_failures(s) == 0 || (s & BS_PROBATION);
}

uint64_t bs_probe_make(uint64_t stale_at_ns, uint32_t tid)
{
	uint64_t ms = stale_at_ns / BS_NS_PER_MS + 1;
	if (ms >= (1ull << (64 - BS_TID_BITS)))
		ms = (1ull << (64 - BS_TID_BITS)) - 1;
	return ms << BS_TID_BITS | (tid & ((1u << BS_TID_BITS) - 1));
}

uint64_t bs_probe_stale_at(uint64_t p)
{
	return (p >> BS_TID_BITS) * BS_NS_PER_MS;
}

uint32_t bs_probe_tid(uint64_t p)
{
	return (uint32_t)(p & ((1u << BS_TID_BITS) - 1));
}

struct bs_entry *bs_table_lookup(struct bs_table *t, uint64_t key)
{
	if (!atomic_load_explicit(&t->used, memory_order_acquire) || !key_valid(key))
		return 0;
	unsigned h = home_of(key), n = reach_of(t, h);
	for (unsigned d = 0; d < n; d++) {
		uint64_t w = atomic_load_explicit(&t->keys[(h + d) & MASK],
						  memory_order_acquire);
		if (w == key)
			return &t->entries[(h + d) & MASK];
		if (w == 0)
			break; /* never used: the sequence ends here */
	}
	return 0;
}

int bs_table_owns(struct bs_table *t, const struct bs_entry *e, uint64_t key)
{
	size_t i = (size_t)(e - t->entries);
	return atomic_load_explicit(&t->keys[i], memory_order_acquire) == key;
}

static int reclaimable(struct bs_entry *e, uint64_t now, uint64_t idle)
{
	uint64_t p = atomic_load(&e->probe);
	if (p && bs_probe_stale_at(p) > now)
		return 0;
	uint64_t s = atomic_load(&e->state);
	if (bs_state_failures(s) == 0 && atomic_load(&e->interval) == 0)
		return 1;
	uint64_t next = bs_state_next_at(s);
	uint64_t used = atomic_load(&e->last_used);
	uint64_t quiet_since = next > used ? next : used;
	return now > quiet_since && now - quiet_since > idle;
}

static void reset(struct bs_entry *e, uint64_t now)
{
	atomic_store(&e->state, 0);
	atomic_store(&e->probe, 0);
	atomic_store(&e->last_err, 0);
	atomic_store(&e->last_wait, 0);
	atomic_store(&e->outcome_at, 0);
	atomic_store(&e->interval, 0);
	atomic_store(&e->succ, 0);
	atomic_store(&e->n_calls, 0);
	atomic_store(&e->n_up, 0);
	atomic_store(&e->n_down, 0);
	atomic_store(&e->n_waits, 0);
	atomic_store(&e->waited, 0);
	atomic_store(&e->attempt_at, 0);
	atomic_store(&e->waiting, 0);
	atomic_store(&e->n_attempts, 0);
	atomic_store(&e->n_failures, 0);
	atomic_store(&e->n_giveups, 0);
	atomic_store(&e->n_waited, 0);
	atomic_store(&e->waited_ms, 0);
	atomic_store(&e->last_used, now);
	atomic_fetch_add(&e->seq, 1);
}

/* Wait a bounded while for a rival's RES(key) in slot i to settle. Returns
 * the word it settled to, or RES(key) if it did not. */
static uint64_t settle(struct bs_table *t, unsigned i, uint64_t key)
{
	uint64_t w = key | BS_TABLE_RES;
	for (unsigned n = 0; n < SPIN && w == (key | BS_TABLE_RES); n++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		w = word(t, i);
	}
	return w;
}

enum scan { SCAN_FOUND, SCAN_SLOT, SCAN_FULL, SCAN_AGAIN };

/* Where a new key could go: the first free (or never-used) slot, else the
 * first reclaimable one, as distances from home; BS_TABLE_SLOTS if none. */
struct spot {
	unsigned free, old;
	uint64_t free_w, old_w;
};

static void note(struct bs_table *t, struct spot *p, unsigned d, uint64_t w, unsigned i,
		 uint64_t now, uint64_t idle)
{
	if (p->free < BS_TABLE_SLOTS)
		return;
	if (w == 0 || w == BS_TABLE_FREE)
		p->free = d, p->free_w = w;
	else if (p->old == BS_TABLE_SLOTS && key_valid(w) &&
		 reclaimable(&t->entries[i & MASK], now, idle))
		p->old = d, p->old_w = w;
}

/* Step 1: look for key along its sequence; else pick the slot to take (*at,
 * a distance from home) and the word it held (*seen). A free slot is
 * preferred: a reclaimable entry is taken only if none is found within
 * WINDOW slots past the group's reach. */
static enum scan scan(struct bs_table *t, uint64_t key, uint64_t now, uint64_t idle,
		      unsigned *at, uint64_t *seen)
{
	unsigned h = home_of(key), n = reach_of(t, h);
	struct spot p = {BS_TABLE_SLOTS, BS_TABLE_SLOTS, 0, 0};
	for (unsigned d = 0; d < BS_TABLE_SLOTS; d++) {
		uint64_t w = word(t, h + d);
		if (w == (key | BS_TABLE_RES)) {
			w = settle(t, h + d, key);
			if (w != key && w != (key | BS_TABLE_RES))
				return SCAN_AGAIN;
		}
		if (w == key)
			return *at = d, SCAN_FOUND;
		note(t, &p, d, w, h + d, now, idle);
		if (w == 0)
			break; /* the sequence ends */
		if (d + 1 >= n && (p.free < BS_TABLE_SLOTS ||
				   (p.old < BS_TABLE_SLOTS && d + 1 >= n + WINDOW)))
			break; /* past reach, with somewhere to go */
	}
	if (p.free < BS_TABLE_SLOTS)
		return *at = p.free, *seen = p.free_w, SCAN_SLOT;
	if (p.old < BS_TABLE_SLOTS)
		return *at = p.old, *seen = p.old_w, SCAN_SLOT;
	return SCAN_FULL;
}

static void raise_reach(struct bs_table *t, unsigned home, unsigned d)
{
	_Atomic uint16_t *r = &t->reach[home / BS_TABLE_GROUP];
	uint16_t old = atomic_load(r);
	while (old < d + 1 && !atomic_compare_exchange_weak(r, &old, (uint16_t)(d + 1)))
		;
}

/* Step 3: with slot `mine` reserved, deal with rivals. Returns the distance
 * of a published copy of key (ours is then to be given back), or
 * BS_TABLE_SLOTS if there is none. */
static unsigned rivals(struct bs_table *t, uint64_t key, unsigned mine)
{
	unsigned h = home_of(key), n = reach_of(t, h);
	for (unsigned d = 0; d < n; d++) {
		if (d == mine)
			continue;
		uint64_t w = word(t, h + d);
		if (w == (key | BS_TABLE_RES)) /* cancel it; on failure w is
						* what the slot became */
			atomic_compare_exchange_strong(&t->keys[(h + d) & MASK], &w,
						       key | BS_TABLE_RES | BS_TABLE_DEAD);
		if (w == key)
			return d;
	}
	return BS_TABLE_SLOTS;
}

/* One round of steps 2-4. Returns the entry, or NULL to start over. */
static struct bs_entry *take(struct bs_table *t, uint64_t key, unsigned d, uint64_t seen,
			     uint64_t now)
{
	unsigned h = home_of(key), i = (h + d) & MASK;
	raise_reach(t, h, d);
	if (!atomic_compare_exchange_strong(&t->keys[i], &seen, key | BS_TABLE_RES))
		return 0;
	atomic_store(&t->used, 1);
	reset(&t->entries[i], now);
	unsigned other = rivals(t, key, d);
	uint64_t res = key | BS_TABLE_RES;
	if (other == BS_TABLE_SLOTS && atomic_compare_exchange_strong(&t->keys[i], &res, key))
		return &t->entries[i];
	atomic_store(&t->keys[i], BS_TABLE_FREE); /* ours alone: give it back */
	return other == BS_TABLE_SLOTS ? 0 : &t->entries[(h + other) & MASK];
}

struct bs_entry *bs_table_claim(struct bs_table *t, uint64_t key, uint64_t now,
				uint64_t idle)
{
	struct bs_entry *e = bs_table_find(t, key);
	if (e || !key_valid(key))
		return e;
	for (int round = 0; round < CLAIM_ROUNDS; round++) {
		unsigned d = 0;
		uint64_t seen = 0;
		switch (scan(t, key, now, idle, &d, &seen)) {
		case SCAN_FOUND:
			return &t->entries[(home_of(key) + d) & MASK];
		case SCAN_FULL:
			return 0;
		case SCAN_AGAIN:
			continue;
		case SCAN_SLOT:
			if ((e = take(t, key, d, seen, now)))
				return e;
		}
	}
	return 0;
}

/* The step is this failure's unless an outcome was published after its
 * attempt started: then it folds into that one. Claimed before the state
 * moves, so of the failures that started before one outcome, one wins. */
static int claim_step(struct bs_entry *e, uint64_t started, uint64_t now)
{
	uint64_t o = atomic_load(&e->outcome_at);
	do {
		if (started < o)
			return 0;
	} while (!atomic_compare_exchange_weak(&e->outcome_at, &o, now > o ? now : o));
	return 1;
}

int bs_entry_fail(struct bs_entry *e, uint64_t seen, uint64_t started, uint64_t next_at_ns,
		  uint32_t failures, int err, uint64_t now)
{
	uint64_t want = bs_state_make(next_at_ns, failures);
	atomic_store(&e->last_used, now);
	if (!claim_step(e, started, now) ||
	    !atomic_compare_exchange_strong(&e->state, &seen, want))
		return 0;
	atomic_store(&e->last_err, (uint32_t)err);
	return 1;
}

uint32_t bs_entry_ok(struct bs_entry *e)
{
	uint64_t old = atomic_exchange(&e->state, 0);
	return bs_state_failures(old);
}

uint32_t bs_entry_connected(struct bs_entry *e, uint64_t now)
{
	uint64_t o = atomic_load(&e->outcome_at);
	while (o < now && !atomic_compare_exchange_weak(&e->outcome_at, &o, now))
		;
	uint64_t old = atomic_load(&e->state);
	while (bs_state_failures(old) &&
	       !atomic_compare_exchange_weak(&e->state, &old,
					     bs_state_failures(old) | BS_PROBATION))
		;
	return bs_state_failures(old);
}

int bs_probe_take(struct bs_entry *e, uint64_t seen, uint64_t mine)
{
	return atomic_compare_exchange_strong(&e->probe, &seen, mine);
}

void bs_probe_release(struct bs_entry *e, uint64_t mine)
{
	atomic_compare_exchange_strong(&e->probe, &mine, 0);
}

uint32_t bs_entry_bump(struct bs_entry *e)
{
	return atomic_fetch_add(&e->seq, 1) + 1;
}

uint32_t bs_entry_reset(struct bs_entry *e)
{
	atomic_store(&e->state, 0);
	atomic_store(&e->probe, 0);
	atomic_store(&e->attempt_at, 0);
	atomic_fetch_add(&e->resets, 1);
	return bs_entry_bump(e);
}

void bs_table_set_addr(struct bs_table *t, const struct bs_entry *e, const void *addr,
		       uint32_t len)
{
	size_t i = (size_t)(e - t->entries);
	uint64_t w[BS_TABLE_ADDR_WORDS] = {0, 0, 0, 0};
	if (i >= BS_TABLE_SLOTS || len > BS_TABLE_ADDR_MAX)
		return;
	memcpy(w, addr, len);
	w[BS_TABLE_ADDR_WORDS - 1] |= (uint64_t)len << 32;
	for (unsigned k = 0; k < BS_TABLE_ADDR_WORDS; k++)
		if (atomic_load_explicit(&t->addrs[i][k], memory_order_relaxed) != w[k])
			atomic_store_explicit(&t->addrs[i][k], w[k], memory_order_relaxed);
}

uint32_t bs_table_get_addr(const struct bs_table *t, unsigned i, void *buf)
{
	uint64_t w[BS_TABLE_ADDR_WORDS];
	if (i >= BS_TABLE_SLOTS)
		return 0;
	for (unsigned k = 0; k < BS_TABLE_ADDR_WORDS; k++)
		w[k] = atomic_load_explicit(&((struct bs_table *)(uintptr_t)t)->addrs[i][k],
					    memory_order_relaxed);
	uint32_t len = (uint32_t)(w[BS_TABLE_ADDR_WORDS - 1] >> 32);
	if (len > BS_TABLE_ADDR_MAX)
		return 0;
	memcpy(buf, w, BS_TABLE_ADDR_MAX);
	return len;
}

void bs_table_waiter_add(struct bs_table *t, const struct bs_entry *e, uint32_t pid)
{
	size_t i = (size_t)(e - t->entries);
	for (unsigned k = 0; i < BS_TABLE_SLOTS && k < BS_TABLE_WAITER_PIDS; k++) {
		uint32_t free_cell = 0;
		if (atomic_compare_exchange_strong(&t->waiter_pids[i][k], &free_cell, pid))
			return;
	}
}

void bs_table_waiter_remove(struct bs_table *t, const struct bs_entry *e, uint32_t pid)
{
	size_t i = (size_t)(e - t->entries);
	for (unsigned k = 0; i < BS_TABLE_SLOTS && k < BS_TABLE_WAITER_PIDS; k++) {
		uint32_t mine = pid;
		if (atomic_compare_exchange_strong(&t->waiter_pids[i][k], &mine, 0))
			return;
	}
}

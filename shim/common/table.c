/* table: lock-free per-destination state. See table.h. */
#include "table.h"

#include "errname.h"

#include "mix.h"
#include "policy.h"
#include "util.h"

#include <stddef.h>
#include <string.h>

_Static_assert(sizeof(struct bs_entry) == 128, "struct bs_entry is 128 bytes");

#define CLAIM_ROUNDS 8 /* start-overs before a claim gives up */
#define SPIN 4096      /* loads spent waiting for a rival's RES(k) to settle */

static uint64_t word(struct bs_table *t, unsigned i)
{
	return atomic_load(&t->keys[i]);
}

/* ms in a word's top 64 - shift bits, saturating. */
static uint64_t ms_above(uint64_t ms, unsigned shift)
{
	uint64_t max = (1ull << (64 - shift)) - 1;
	return (ms < max ? ms : max) << shift;
}

uint64_t bs_state_make(uint64_t next_at_ns, uint32_t failures)
{
	uint64_t ms = next_at_ns / BS_NS_PER_MS + (next_at_ns % BS_NS_PER_MS != 0);
	return ms_above(ms, BS_STATE_SHIFT) | (failures < BS_FAIL_MAX ? failures : BS_FAIL_MAX);
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
	return ms_above(ms, BS_TID_BITS) | (tid & ((1u << BS_TID_BITS) - 1));
}

uint64_t bs_probe_stale_at(uint64_t p)
{
	return (p >> BS_TID_BITS) * BS_NS_PER_MS;
}

uint32_t bs_probe_tid(uint64_t p)
{
	return (uint32_t)(p & ((1u << BS_TID_BITS) - 1));
}

/* A slot's check word for key (the low half of meta). */
static uint32_t check_of(uint64_t key)
{
	return (uint32_t)bs_mix64(key ^ 0x62736368656b6b31ull) | 1u;
}

/* Is w, read from slot i's key word, a key with its check? */
static int checked_key(struct bs_table *t, unsigned i, uint64_t w)
{
	return bs_table_key_valid(w) && (uint32_t)atomic_load(&t->meta[i]) == check_of(w);
}

int bs_table_slot_valid(struct bs_table *t, unsigned i, uint64_t *key)
{
	uint64_t w = i < BS_TABLE_SLOTS ? word(t, i) : 0;
	if (!checked_key(t, i, w))
		return 0;
	*key = w;
	return 1;
}

struct bs_entry *bs_table_lookup(struct bs_table *t, uint64_t key)
{
	if (!bs_table_may_hold(t, key) || !bs_table_key_valid(key))
		return 0;
	unsigned b = bs_table_bucket(key) * BS_TABLE_WAYS;
	for (unsigned w = 0; w < BS_TABLE_WAYS; w++) {
		if (atomic_load_explicit(&t->keys[b + w], memory_order_acquire) == key &&
		    checked_key(t, b + w, key))
			return &t->entries[b + w];
	}
	return 0;
}

int bs_table_owns(struct bs_table *t, const struct bs_entry *e, uint64_t key)
{
	size_t i = (size_t)(e - t->entries);
	return i < BS_TABLE_SLOTS && atomic_load_explicit(&t->keys[i], memory_order_acquire) == key;
}

/* When the entry was last busy: its next allowed time or last use. */
static uint64_t quiet_since(struct bs_entry *e)
{
	uint64_t next = bs_state_next_at(atomic_load(&e->state));
	uint64_t used = atomic_load(&e->last_used);
	return next > used ? next : used;
}

static int probe_live(struct bs_entry *e, uint64_t now)
{
	uint64_t p = atomic_load(&e->probe);
	return p && bs_probe_stale_at(p) > now;
}

static int has_waiters(struct bs_table *t, unsigned i)
{
	if (atomic_load(&t->entries[i].waiting))
		return 1;
	for (unsigned k = 0; k < BS_TABLE_WAITER_PIDS; k++)
		if (atomic_load(&t->waiters[i][k]))
			return 1;
	return 0;
}

/* Healthy, or failing but idle past `idle`: nothing lost if it goes. */
static int reclaimable(struct bs_entry *e, uint64_t now, uint64_t idle)
{
	if (bs_state_failures(atomic_load(&e->state)) == 0 && atomic_load(&e->interval) == 0)
		return 1;
	uint64_t q = quiet_since(e);
	return now > q && now - q > idle;
}

static void reset(struct bs_entry *e, uint64_t now)
{
	/* every field but seq, resets and last_used: zero */
	_Atomic uint64_t *w64[] = {&e->state,    &e->probe,  &e->last_wait, &e->outcome_at,
				   &e->interval, &e->waited, &e->attempt_at};
	_Atomic uint32_t *w32[] = {&e->last_err,   &e->succ,      &e->n_calls,  &e->n_up,
				   &e->n_down,     &e->n_waits,   &e->waiting,  &e->n_attempts,
				   &e->n_failures, &e->n_giveups, &e->n_waited, &e->waited_ms};
	for (unsigned i = 0; i < BS_ARRAY_SIZE(w64); i++)
		atomic_store(w64[i], 0);
	for (unsigned i = 0; i < BS_ARRAY_SIZE(w32); i++)
		atomic_store(w32[i], 0);
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

/* How good a way is to take, by what it holds (w, as read): lower is
 * better. A reservation is never taken (its claimer owns the entry until
 * it publishes or gives it back; one abandoned by a longjmp keeps its way).
 * Damage is judged from w itself: a word that changed since was a claim at
 * work, not damage. */
enum rank { R_EMPTY, R_DAMAGED, R_IDLE, R_LIVE, R_PINNED };

static enum rank rank_of(struct bs_table *t, unsigned i, uint64_t w, uint64_t now, uint64_t idle)
{
	if (w == 0 || w == BS_TABLE_FREE)
		return R_EMPTY;
	if (w & BS_TABLE_RES)
		return R_PINNED;
	if (!checked_key(t, i, w))
		return word(t, i) == w ? R_DAMAGED : R_PINNED;
	struct bs_entry *e = &t->entries[i];
	int idle_now = reclaimable(e, now, idle);
	/* (live waiters keep a failing entry from going idle: each wakes by
	 * the next due time, and its failures move it; the waiters of an idle
	 * one were killed) */
	if (probe_live(e, now) || (has_waiters(t, i) && !idle_now))
		return R_PINNED;
	return idle_now ? R_IDLE : R_LIVE;
}

enum scan { SCAN_FOUND, SCAN_SLOT, SCAN_FULL, SCAN_AGAIN };

/* Step 1: look for key in its bucket; else pick the way to take (*at) and
 * the word it held (*seen): the best rank, then the longest idle. */
static enum scan scan(struct bs_table *t, uint64_t key, uint64_t now, uint64_t idle,
		      unsigned *at, uint64_t *seen, struct bs_claim_note *note)
{
	unsigned b = bs_table_bucket(key) * BS_TABLE_WAYS;
	enum rank best = R_PINNED;
	uint64_t best_quiet = UINT64_MAX;
	for (unsigned w = 0; w < BS_TABLE_WAYS; w++) {
		uint64_t v = word(t, b + w);
		if (v == (key | BS_TABLE_RES)) {
			v = settle(t, b + w, key);
			if (v != key && v != (key | BS_TABLE_RES))
				return SCAN_AGAIN;
		}
		if (v == key && checked_key(t, b + w, key))
			return *at = b + w, SCAN_FOUND;
		enum rank r = rank_of(t, b + w, v, now, idle);
		note->damaged += r == R_DAMAGED;
		uint64_t q = r == R_IDLE || r == R_LIVE ? quiet_since(&t->entries[b + w]) : 0;
		if (r < best || (r == best && r != R_PINNED && q < best_quiet))
			best = r, best_quiet = q, *at = b + w, *seen = v;
	}
	return best == R_PINNED ? SCAN_FULL : SCAN_SLOT;
}

/* Bucket b's tag bits recomputed from the keys (and reservations) in its
 * ways, after one left. A claim that sets its bit meanwhile makes the swap
 * fail: the word is then left a superset, which is always safe. */
static uint64_t tags_of(struct bs_table *t, unsigned b)
{
	uint64_t want = 0;
	for (unsigned w = 0; w < BS_TABLE_WAYS; w++) {
		uint64_t k = word(t, b * BS_TABLE_WAYS + w) & ~(BS_TABLE_RES | BS_TABLE_DEAD);
		if (bs_table_key_valid(k))
			want |= bs_table_tag(k);
	}
	return want;
}

static void retag(struct bs_table *t, unsigned b)
{
	uint64_t old = atomic_load(&t->tags[b]);
	if (atomic_compare_exchange_strong(&t->tags[b], &old, tags_of(t, b)))
		/* a claim that published meanwhile, its bit already set, left the
		 * word unchanged: read the ways again and keep their bits */
		atomic_fetch_or(&t->tags[b], tags_of(t, b));
}

/* Step 3: with way `mine` reserved, deal with rivals. Returns the slot of
 * a published copy of key (ours is then to be given back), or
 * BS_TABLE_SLOTS if there is none. */
static unsigned rivals(struct bs_table *t, uint64_t key, unsigned mine)
{
	unsigned b = bs_table_bucket(key) * BS_TABLE_WAYS;
	for (unsigned i = b; i < b + BS_TABLE_WAYS; i++) {
		if (i == mine)
			continue;
		uint64_t w = word(t, i);
		if (w == (key | BS_TABLE_RES)) /* cancel it; on failure w is
						* what the slot became */
			atomic_compare_exchange_strong(&t->keys[i], &w,
						       key | BS_TABLE_RES | BS_TABLE_DEAD);
		if (w == key)
			return i;
	}
	return BS_TABLE_SLOTS;
}

/* Our reservation of slot i given back (free, its tag cleared), unless
 * another claim took the slot meanwhile. */
static void give_back(struct bs_table *t, unsigned i, uint64_t key)
{
	uint64_t res = key | BS_TABLE_RES, dead = res | BS_TABLE_DEAD;
	if (atomic_compare_exchange_strong(&t->keys[i], &res, BS_TABLE_FREE) ||
	    atomic_compare_exchange_strong(&t->keys[i], &dead, BS_TABLE_FREE))
		retag(t, i / BS_TABLE_WAYS);
}

/* One round of steps 2-4 on slot i. Returns the entry, or NULL to start
 * over. */
static struct bs_entry *take(struct bs_table *t, uint64_t key, unsigned i, uint64_t seen,
			     uint64_t now, uint32_t who)
{
	if (!atomic_compare_exchange_strong(&t->keys[i], &seen, key | BS_TABLE_RES))
		return 0;
	reset(&t->entries[i], now);
	atomic_store(&t->meta[i], (uint64_t)who << 32 | check_of(key));
	atomic_fetch_or(&t->tags[i / BS_TABLE_WAYS], bs_table_tag(key));
	atomic_store(&t->used, 1);
	unsigned other = rivals(t, key, i);
	uint64_t res = key | BS_TABLE_RES;
	if (other == BS_TABLE_SLOTS && atomic_compare_exchange_strong(&t->keys[i], &res, key))
		return &t->entries[i];
	give_back(t, i, key); /* ours alone */
	return other == BS_TABLE_SLOTS ? 0 : &t->entries[other];
}

/* Past its share, the creator's own longest-idle entry (no waiter, no
 * attempt in flight) makes way. Returns its key (0: none went), *own the
 * creator's recount. */
static uint64_t over_share(struct bs_table *t, uint32_t who, uint32_t *own, uint64_t now)
{
	unsigned n = 0, oldest = BS_TABLE_SLOTS;
	uint64_t oldest_quiet = UINT64_MAX, key = 0;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		if (atomic_load(&t->meta[i]) >> 32 != who || !bs_table_slot_valid(t, i, &key))
			continue;
		n++;
		struct bs_entry *e = &t->entries[i];
		if (!probe_live(e, now) && !has_waiters(t, i) && quiet_since(e) < oldest_quiet)
			oldest = i, oldest_quiet = quiet_since(e);
	}
	*own = n;
	if (n < BS_TABLE_SHARE || oldest == BS_TABLE_SLOTS)
		return 0;
	uint64_t w = word(t, oldest);
	if (!atomic_compare_exchange_strong(&t->keys[oldest], &w, BS_TABLE_FREE))
		return 0;
	retag(t, oldest / BS_TABLE_WAYS);
	*own = n - 1;
	return bs_state_failures(atomic_load(&t->entries[oldest].state)) ? w : 0;
}

struct bs_entry *bs_table_claim_as(struct bs_table *t, uint64_t key, uint64_t now,
				   uint64_t idle, uint32_t who, uint32_t *own,
				   struct bs_claim_note *note)
{
	struct bs_claim_note scratch;
	note = note ? note : &scratch;
	memset(note, 0, sizeof *note);
	struct bs_entry *e = bs_table_find(t, key);
	if (e || !bs_table_key_valid(key))
		return e;
	if (who && own && *own >= BS_TABLE_SHARE)
		note->evicted = over_share(t, who, own, now);
	for (int round = 0; round < CLAIM_ROUNDS; round++) {
		unsigned i = 0;
		uint64_t seen = 0;
		note->damaged = 0;
		switch (scan(t, key, now, idle, &i, &seen, note)) {
		case SCAN_FOUND: /* (its bit set again: a retag may have raced it) */
			atomic_fetch_or(&t->tags[i / BS_TABLE_WAYS], bs_table_tag(key));
			return &t->entries[i];
		case SCAN_FULL:
			note->refused = 1;
			return 0;
		case SCAN_AGAIN:
			continue;
		case SCAN_SLOT:
			break;
		}
		uint64_t old = 0;
		int live = bs_table_slot_valid(t, i, &old) && old == seen &&
			   bs_state_failures(atomic_load(&t->entries[i].state)) != 0;
		if ((e = take(t, key, i, seen, now, who))) {
			if (live && !note->evicted)
				note->evicted = old;
			if (own && e == &t->entries[i])
				++*own;
			return e;
		}
	}
	return 0;
}

int bs_entry_forget_idle(struct bs_entry *e, uint64_t now, uint64_t after)
{
	uint64_t s = atomic_load(&e->state);
	if (bs_state_failures(s) == 0 || (s & BS_PROBATION) || probe_live(e, now))
		return 0;
	uint64_t q = bs_state_next_at(s), at = atomic_load(&e->attempt_at);
	q = at > q ? at : q;
	if (now <= q || now - q <= after)
		return 0;
	return atomic_compare_exchange_strong(&e->state, &s, 0);
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
	return bs_state_failures(atomic_exchange(&e->state, 0));
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

/* The cell of pid among e's, or a free one (0); -1 if neither. */
static int cell_of(struct bs_table *t, size_t i, uint32_t pid, int or_free)
{
	int free_cell = -1;
	for (unsigned k = 0; i < BS_TABLE_SLOTS && k < BS_TABLE_WAITER_PIDS; k++) {
		uint64_t c = atomic_load(&t->waiters[i][k]);
		if (c >> 32 == pid)
			return (int)k;
		if (!c && free_cell < 0 && or_free)
			free_cell = (int)k;
	}
	return free_cell;
}

int bs_table_waiter_add(struct bs_table *t, const struct bs_entry *e, uint32_t pid)
{
	size_t i = (size_t)(e - t->entries);
	for (int round = 0; round < 8; round++) {
		int k = cell_of(t, i, pid, 1);
		if (k < 0)
			return -1;
		uint64_t c = atomic_load(&t->waiters[i][k]);
		uint64_t want = c >> 32 == pid ? c + 1 : (uint64_t)pid << 32 | 1;
		if ((c == 0 || c >> 32 == pid) && atomic_compare_exchange_strong(&t->waiters[i][k], &c, want))
			return k;
	}
	return -1;
}

void bs_table_waiter_remove(struct bs_table *t, const struct bs_entry *e, uint32_t pid)
{
	size_t i = (size_t)(e - t->entries);
	int k = cell_of(t, i, pid, 0);
	uint64_t c = k < 0 ? 0 : atomic_load(&t->waiters[i][k]);
	while (c >> 32 == pid &&
	       !atomic_compare_exchange_weak(&t->waiters[i][k], &c, (c & 0xffffffffu) > 1 ? c - 1 : 0))
		;
}

int bs_entry_last_err(const struct bs_entry *e)
{
	uint32_t v = atomic_load(&e->last_err);
	int err = v < 1u << 16 ? (int)v : 0;
	return err && (bs_errno_name(err) || BS_ERR_IS_EAI(err)) ? err : 0;
}

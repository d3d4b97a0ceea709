/* table: lock-free per-destination state. See table.h. */
#include "table.h"
#include "policy.h"

#include <stddef.h>

static unsigned bucket_of(uint64_t key)
{
	return (unsigned)(bs_mix64(key) % BS_TABLE_BUCKETS) * BS_TABLE_WAYS;
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

int bs_state_open(uint64_t s)
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

struct bs_entry *bs_table_find(struct bs_table *t, uint64_t key)
{
	if (!atomic_load_explicit(&t->used, memory_order_acquire))
		return 0;
	unsigned b = bucket_of(key);
	for (unsigned i = 0; i < BS_TABLE_WAYS; i++)
		if (atomic_load_explicit(&t->keys[b + i], memory_order_acquire) == key)
			return &t->entries[b + i];
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
	atomic_store(&e->interval, 0);
	atomic_store(&e->succ, 0);
	atomic_store(&e->n_calls, 0);
	atomic_store(&e->n_up, 0);
	atomic_store(&e->n_down, 0);
	atomic_store(&e->n_waits, 0);
	atomic_store(&e->waited, 0);
	atomic_store(&e->last_used, now);
	atomic_fetch_add(&e->seq, 1);
}

struct bs_entry *bs_table_claim(struct bs_table *t, uint64_t key, uint64_t now,
				uint64_t idle)
{
	struct bs_entry *e = bs_table_find(t, key);
	if (e)
		return e;
	unsigned b = bucket_of(key);
	/* Two passes: empty slots first, then reclaimable ones. */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < BS_TABLE_WAYS; i++) {
			_Atomic uint64_t *k = &t->keys[b + i];
			uint64_t old = atomic_load(k);
			if (old == key)
				return &t->entries[b + i];
			if (pass == 0 ? old != 0
				      : !reclaimable(&t->entries[b + i], now, idle))
				continue;
			if (!atomic_compare_exchange_strong(k, &old, key))
				continue;
			atomic_store(&t->used, 1);
			reset(&t->entries[b + i], now);
			/* If another thread inserted the same key at a lower
			 * index meanwhile, the lowest index wins: give ours back. */
			for (unsigned j = 0; j < i; j++) {
				if (atomic_load(&t->keys[b + j]) == key) {
					uint64_t mine = key;
					atomic_compare_exchange_strong(k, &mine, 0);
					return &t->entries[b + j];
				}
			}
			return &t->entries[b + i];
		}
	}
	return 0;
}

int bs_entry_fail(struct bs_entry *e, uint64_t seen, uint64_t next_at_ns,
		  uint32_t failures, int err, uint64_t now)
{
	uint64_t want = bs_state_make(next_at_ns, failures);
	atomic_store(&e->last_used, now);
	if (!atomic_compare_exchange_strong(&e->state, &seen, want))
		return 0;
	atomic_store(&e->last_err, (uint32_t)err);
	return 1;
}

uint32_t bs_entry_ok(struct bs_entry *e)
{
	uint64_t old = atomic_exchange(&e->state, 0);
	return bs_state_failures(old);
}

uint32_t bs_entry_connected(struct bs_entry *e)
{
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

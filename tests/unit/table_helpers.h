/* Helpers shared by test_table.c and test_table_threads.c: time shorthands,
 * a zeroed table on the heap, the slot/bucket an entry or key lands in, and
 * picking keys that share one bucket or each have their own. */
#ifndef BS_TABLE_HELPERS_H
#define BS_TABLE_HELPERS_H

#include "unit.h"

#include "policy.h"
#include "table.h"

#include <stdlib.h>

#define MS BS_NS_PER_MS
#define SEC BS_NS_PER_SEC
#define NOW (1000 * SEC)
#define IDLE (120 * SEC)

static inline struct bs_table *new_table(void)
{
	struct bs_table *t = calloc(1, sizeof *t);
	assert_non_null(t);
	return t;
}

static inline size_t slot_of(struct bs_table *t, const struct bs_entry *e)
{
	assert_true(e >= t->entries && e < t->entries + BS_TABLE_SLOTS);
	return (size_t)(e - t->entries);
}

/* The bucket a key lands in, found by claiming it in an empty scratch table
 * (it goes to the bucket's first slot) and taking it out again. */
static inline unsigned bucket_of(struct bs_table *scratch, uint64_t key)
{
	struct bs_entry *e = bs_table_claim(scratch, key, NOW, IDLE);
	assert_non_null(e);
	size_t i = slot_of(scratch, e);
	assert_int_equal(i % BS_TABLE_WAYS, 0);
	atomic_store(&scratch->keys[i], 0);
	return (unsigned)(i / BS_TABLE_WAYS);
}

/* Fill out[0..n) with keys from `first` on: all in first's bucket (same),
 * or each in a bucket of its own (!same). */
static inline void pick_keys(uint64_t *out, unsigned n, uint64_t first, int same)
{
	struct bs_table *scratch = new_table();
	unsigned char taken[BS_TABLE_BUCKETS] = {0};
	unsigned want = bucket_of(scratch, first), got = 0;
	for (uint64_t k = first; got < n; k++) {
		unsigned b = bucket_of(scratch, k);
		if (same ? b == want : !taken[b]) {
			taken[b] = 1;
			out[got++] = k;
		}
	}
	free(scratch);
}

#endif

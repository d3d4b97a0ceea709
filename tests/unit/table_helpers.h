/* Helpers shared by test_table.c and test_table_threads.c: time shorthands,
 * a zeroed table on the heap, the slot an entry sits in, and how many slots
 * hold a key. */
#ifndef BS_TABLE_HELPERS_H
#define BS_TABLE_HELPERS_H

#include "unit.h"
#include "unit_time.h"

#include "policy.h"
#include "table.h"

#include <errno.h>
#include <stdlib.h>

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

/* The i-th of a family of distinct valid keys. */
static inline uint64_t nth_key(unsigned i)
{
	return (1ull << 60) | (uint64_t)(i + 1) * 0x10001ull;
}

/* How many slots hold key. */
static inline unsigned copies(struct bs_table *t, uint64_t key)
{
	unsigned n = 0;
	for (size_t s = 0; s < BS_TABLE_SLOTS; s++)
		n += atomic_load(&t->keys[s]) == key;
	return n;
}

#endif

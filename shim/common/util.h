/*
 * util: small helpers for shim/common and its callers: the element count of
 * an array, min and max of two unsigned 64-bit values, and a compile-time
 * check (used for the layouts the code relies on: table.c, fdtab.c).
 */
#ifndef BS_UTIL_H
#define BS_UTIL_H

#include <stdint.h>

#define BS_ARRAY_SIZE(a) (sizeof (a) / sizeof (a)[0])

/* Fails the build, with msg, when cond is false. */
#define BS_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)

static inline uint64_t bs_min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static inline uint64_t bs_max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

#endif

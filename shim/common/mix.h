/*
 * mix: splitmix64, a stateless 64-bit mixer, used for hashing (inline: it
 * places table keys on the fast path) and for reproducible random streams:
 * bs_policy_unit(bs_mix64(seed + k * BS_GOLDEN)) is the k-th draw of one.
 */
#ifndef BS_MIX_H
#define BS_MIX_H

#include <stdint.h>

#define BS_GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t bs_mix64(uint64_t x)
{
	x += BS_GOLDEN;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif

/*
 * mix: splitmix64, a stateless 64-bit mixer (defined in policy.c), used for
 * hashing and for reproducible random streams:
 * bs_policy_unit(bs_mix64(seed + k * BS_GOLDEN)) is the k-th draw of one.
 */
#ifndef BS_MIX_H
#define BS_MIX_H

#include <stdint.h>

uint64_t bs_mix64(uint64_t x);
#define BS_GOLDEN 0x9e3779b97f4a7c15ull

#endif

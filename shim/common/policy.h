/*
 * policy: the gRPC connection-backoff schedule as pure arithmetic.
 *
 * Promise: no clock, no I/O, no global state. Time comes in as nanoseconds and
 * randomness as a number in [0, 1) supplied by the caller, so every result is
 * reproducible. No input (any step count, any finite parameters accepted by
 * config) produces overflow, NaN or a negative wait.
 *
 * The schedule (grpc doc/connection-backoff.md):
 *   the wait after the 1st consecutive failure is initial_backoff exactly;
 *   the wait after failure n >= 2 is min(initial * multiplier^(n-1), max_backoff)
 *   scaled by a uniform factor in [1 - jitter, 1 + jitter] (jitter after the cap);
 *   waits are counted from the start of the attempt that failed;
 *   an attempt may run for max(its own wait, min_connect_timeout).
 */
#ifndef BS_POLICY_H
#define BS_POLICY_H

#include <stdint.h>

#define BS_NS_PER_MS 1000000ull
#define BS_NS_PER_SEC 1000000000ull

struct bs_policy {
	uint64_t initial_backoff;     /* ns */
	double multiplier;            /* >= 1 */
	double jitter;                /* in [0, 1] */
	uint64_t max_backoff;         /* ns */
	uint64_t min_connect_timeout; /* ns */
};

/* The un-jittered backoff after `failures` consecutive failures (>= 1):
 * min(initial * multiplier^(failures-1), max_backoff). 0 failures gives 0. */
uint64_t bs_policy_backoff(const struct bs_policy *p, uint32_t failures);

/* The actual wait after `failures` consecutive failures, given u in [0, 1).
 * failures == 1 gives initial_backoff exactly (no jitter, per the spec). */
uint64_t bs_policy_delay(const struct bs_policy *p, uint32_t failures, double u);

/* How long an attempt whose own wait (if it fails) is `delay` may run. */
uint64_t bs_policy_attempt_timeout(const struct bs_policy *p, uint64_t delay);

/* Map a 64-bit random value to a double in [0, 1). */
double bs_policy_unit(uint64_t r);

/* splitmix64: a stateless mixer. bs_policy_unit(bs_mix64(seed + k * GOLDEN))
 * gives the k-th draw of a reproducible stream. */
uint64_t bs_mix64(uint64_t x);
#define BS_GOLDEN 0x9e3779b97f4a7c15ull

#endif

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

#include "units.h"

enum bs_policy_kind {
	BS_POLICY_GRPC = 0,        /* the default, as above */
	BS_POLICY_LIST = 1,        /* a fixed list of waits, jittered x[0.5, 1.5] */
	BS_POLICY_EXPONENTIAL = 2, /* initial * multiplier^n, no jitter, stops at max */
	BS_POLICY_OFF = 3,         /* pass-through */
	BS_POLICY_RESPONSIVE = 4,  /* adaptive pacing (see bs_responsive_*) */
};

/* How the grpc policy randomises a wait d (AWS "Exponential Backoff And
 * Jitter"): proportional is gRPC's d * [1 - J, 1 + J] (first wait exact);
 * full is U[0, d]; equal is d/2 + U[0, d/2]; decorrelated is
 * min(max_backoff, U[initial, 3 * previous wait]). */
enum bs_jitter_mode {
	BS_JITTER_PROPORTIONAL = 0,
	BS_JITTER_FULL = 1,
	BS_JITTER_EQUAL = 2,
	BS_JITTER_DECORRELATED = 3,
};

#define BS_DELAYS_MAX 32
/* No wait of any policy is shorter than this, after jitter (full and equal
 * jitter included): a retry loop never runs hotter than 100 attempts per
 * second. The only exception is an explicit 0 in a list policy's delays,
 * which is never the repeated last one (config refuses a list ending in 0,
 * and bs_policy_wait floors a repeated 0 anyway). */
#define BS_RETRY_FLOOR (10 * BS_NS_PER_MS)

/* bs_policy_wait()'s answer when no further attempt should be made. */
#define BS_STOP UINT64_MAX

struct bs_policy {
	uint64_t initial_backoff;     /* ns */
	double multiplier;            /* >= 1 */
	double jitter;                /* in [0, 1] */
	uint64_t max_backoff;         /* ns */
	uint64_t min_connect_timeout; /* ns */
	int kind;                     /* enum bs_policy_kind */
	int jitter_mode;              /* enum bs_jitter_mode */
	uint32_t ndelays;             /* list policy: 0 = the default list */
	uint64_t delays[BS_DELAYS_MAX];
	double up_multiplier;         /* responsive: growth on a failure */
	double down_multiplier;       /* responsive: shrink after successes */
	uint32_t down_threshold;      /* responsive: successes per shrink */
	double randomization_factor;  /* responsive: +- fraction */
	uint64_t max_randomization;   /* responsive: cap on the +- (ns) */
};

/* The un-jittered backoff after `failures` consecutive failures, as above
 * (0 failures gives 0). */
uint64_t bs_policy_backoff(const struct bs_policy *p, uint32_t failures);

/* That backoff jittered as above, given u in [0, 1). */
uint64_t bs_policy_delay(const struct bs_policy *p, uint32_t failures, double u);

/* The wait after `failures` (>= 1) consecutive failures under any policy.
 * `prev` is the previous actual wait (0 if none; used by decorrelated
 * jitter), u a random number in [0, 1). BS_STOP means: give up now (the
 * exponential policy once its next wait would reach max_backoff, and off).
 * Never below BS_RETRY_FLOOR but for a list's explicit, unrepeated 0. */
uint64_t bs_policy_wait(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			double u);

/* The range [*lo, *hi] of bs_policy_wait(p, failures, prev, u) over every
 * u, BS_RETRY_FLOOR included; exact (lo == hi) where the policy draws
 * nothing. For responsive, prev is the current interval and the range is
 * that of bs_responsive_up(p, prev, u). Meaningless where the answer is
 * BS_STOP (off gives 0, 0). */
void bs_policy_wait_range(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			  uint64_t *lo, uint64_t *hi);

/* responsive: the interval every connect to a destination waits. A failure
 * raises it (0 -> initial_backoff, then * up_multiplier, randomised by
 * +-randomization_factor with the randomisation capped at
 * max_randomization, capped at max_backoff); down_threshold consecutive
 * successes lower it (* down_multiplier, randomised; below
 * initial_backoff it drops to 0). u in [0, 1). */
uint64_t bs_responsive_up(const struct bs_policy *p, uint64_t interval, double u);
uint64_t bs_responsive_down(const struct bs_policy *p, uint64_t interval, double u);
/* An interval read from the shared table (another process's word, perhaps
 * forged), bounded by what these two could make of it: max_backoff. */
uint64_t bs_responsive_bounded(const struct bs_policy *p, uint64_t interval);

/* The list policy's default: 0, 10ms, 10ms, 100ms, 100ms, 500ms, 500ms, 3s,
 * 3s, 5s. */
extern const uint64_t bs_default_delays[10];

/* How long an attempt whose own wait (if it fails) is `delay` may run. */
uint64_t bs_policy_attempt_timeout(const struct bs_policy *p, uint64_t delay);

/* The longest wait the policy can ever draw: max_backoff (or the longest
 * listed delay) stretched by the jitter, plus 1 ms of rounding. Bounds every
 * wait a process takes from a shared table. */
uint64_t bs_policy_longest_wait(const struct bs_policy *p);

/* Map a 64-bit random value to a double in [0, 1) (see mix.h). */
double bs_policy_unit(uint64_t r);

#endif

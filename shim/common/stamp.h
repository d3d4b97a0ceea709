/*
 * stamp: a time stamp cheap enough for the connect fast path, turned into
 * CLOCK_MONOTONIC nanoseconds only where someone needs the time.
 *
 * Promise: pure; no allocation, no system call, async-signal-safe. The
 * caller reads the clock and the counter and passes them in.
 *
 * A stamp is one of two things:
 * - nanoseconds of CLOCK_MONOTONIC; bit 63 clear (no machine has been up
 *   for the 292 years that would set it);
 * - a reading of the CPU's constant-rate counter (x86-64: the TSC,
 *   aarch64: CNTVCT_EL0) with BS_STAMP_TICKS set. Only the caller knows
 *   whether that counter may be trusted (the kernel's own clock runs on
 *   it); where it may not, the caller makes nanosecond stamps instead.
 *
 * A counter stamp becomes nanoseconds through two reference readings of
 * (counter, clock): one taken at start-up and one taken now. The rate is
 * measured over that whole interval, which contains the interval being
 * converted, so the error of the result is about the gap between the two
 * reads of one pair (well under a microsecond), however short or long
 * the process has lived.
 */
#ifndef BS_STAMP_H
#define BS_STAMP_H

#include <stdint.h>

#define BS_STAMP_TICKS (1ull << 63)

/* The counter, or 0 on an architecture that has none here. */
static inline uint64_t bs_stamp_counter(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

/* A (counter, CLOCK_MONOTONIC ns) pair read together. */
struct bs_stamp_pair {
	uint64_t ticks, ns;
};

/* The nanoseconds of `stamp`, given the start-up pair `ref` and a pair
 * `now` read just before. A nanosecond stamp is returned as it is. A
 * counter stamp is placed between ref.ns and now.ns: a reading outside
 * [ref.ticks, now.ticks] (a counter that went backwards) is clamped. */
uint64_t bs_stamp_ns(uint64_t stamp, struct bs_stamp_pair ref, struct bs_stamp_pair now);

#endif

/* policy: gRPC backoff arithmetic. See policy.h for the promises. */
#include "policy.h"

/* Saturating conversion: anything at or above 2^63 (or NaN) becomes cap. */
static uint64_t to_ns(double v, uint64_t cap)
{
	if (!(v > 0.0))
		return 0; /* also catches NaN */
	if (v >= (double)cap)
		return cap;
	return (uint64_t)v;
}

uint64_t bs_policy_backoff(const struct bs_policy *p, uint32_t failures)
{
	if (failures == 0 || p->initial_backoff == 0)
		return 0;
	if (p->initial_backoff >= p->max_backoff)
		return p->max_backoff;
	if (!(p->multiplier > 1.0))
		return p->initial_backoff;

	/* initial * multiplier^(failures-1) by squaring, stopping as soon as the
	 * running product can only exceed the cap. All factors are >= 1, so the
	 * product is monotonic and the worst case is +inf, never NaN. */
	double limit = (double)p->max_backoff / (double)p->initial_backoff;
	double r = 1.0, x = p->multiplier;
	uint32_t e = failures - 1;
	while (e) {
		if (e & 1u) {
			r *= x;
			if (r >= limit)
				return p->max_backoff;
		}
		e >>= 1;
		if (e) {
			x *= x;
			if (x >= limit)
				x = limit; /* any further use already saturates */
		}
	}
	double v = (double)p->initial_backoff * r;
	return to_ns(v, p->max_backoff);
}

uint64_t bs_policy_delay(const struct bs_policy *p, uint32_t failures, double u)
{
	uint64_t b = bs_policy_backoff(p, failures);
	if (failures <= 1 || b == 0)
		return b;
	double j = p->jitter;
	if (!(j > 0.0))
		return b;
	if (j > 1.0)
		j = 1.0;
	if (!(u >= 0.0))
		u = 0.0;
	if (u >= 1.0)
		u = 0x1.fffffffffffffp-1;
	double f = 1.0 - j + 2.0 * j * u;
	/* b <= max_backoff <= ~2^62 by config limits; f <= 2: cannot overflow,
	 * but saturate anyway. */
	return to_ns((double)b * f, UINT64_MAX / 2);
}

uint64_t bs_policy_attempt_timeout(const struct bs_policy *p, uint64_t delay)
{
	return delay > p->min_connect_timeout ? delay : p->min_connect_timeout;
}

double bs_policy_unit(uint64_t r)
{
	return (double)(r >> 11) * 0x1.0p-53;
}

uint64_t bs_mix64(uint64_t x)
{
	x += BS_GOLDEN;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

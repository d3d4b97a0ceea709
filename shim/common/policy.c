/* policy: gRPC backoff arithmetic. See policy.h for the promises. */
#include "policy.h"
#include "util.h"

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
	double j = p->jitter > 1.0 ? 1.0 : p->jitter;
	if (!(j > 0.0)) /* (NaN too) */
		return b;
	u = !(u >= 0.0) ? 0.0 : u >= 1.0 ? 0x1.fffffffffffffp-1 : u;
	double f = 1.0 - j + 2.0 * j * u;
	/* b <= max_backoff <= ~2^62 by config limits; f <= 2: cannot overflow,
	 * but saturate anyway. */
	return to_ns((double)b * f, UINT64_MAX / 2);
}

const uint64_t bs_default_delays[10] = {
	0, 10 * BS_NS_PER_MS, 10 * BS_NS_PER_MS, 100 * BS_NS_PER_MS, 100 * BS_NS_PER_MS,
	500 * BS_NS_PER_MS, 500 * BS_NS_PER_MS, 3 * BS_NS_PER_SEC, 3 * BS_NS_PER_SEC,
	5 * BS_NS_PER_SEC,
};

/* a + u * (b - a) for a <= b, without overflow */
static uint64_t between(uint64_t a, uint64_t b, double u)
{
	if (b <= a)
		return a;
	return a + to_ns((double)(b - a) * u, b - a);
}

static uint64_t grpc_wait(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			  double u)
{
	uint64_t d = bs_policy_backoff(p, failures);
	switch (p->jitter_mode) {
	case BS_JITTER_FULL:
		return between(0, d, u);
	case BS_JITTER_EQUAL:
		return d / 2 + between(0, d - d / 2, u);
	case BS_JITTER_DECORRELATED: {
		uint64_t base = p->initial_backoff, hi;
		if (prev < base)
			prev = base;
		hi = prev > UINT64_MAX / 3 ? UINT64_MAX : 3 * prev;
		uint64_t w = between(base, hi, u);
		return w < p->max_backoff ? w : p->max_backoff;
	}
	default:
		return bs_policy_delay(p, failures, u);
	}
}

static uint64_t floored(uint64_t w)
{
	return w < BS_RETRY_FLOOR ? BS_RETRY_FLOOR : w;
}

uint64_t bs_policy_wait(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			double u)
{
	if (!(u >= 0.0) || u >= 1.0)
		u = 0.0;
	switch (p->kind) {
	case BS_POLICY_LIST: {
		const uint64_t *l = p->ndelays ? p->delays : bs_default_delays;
		uint32_t n = p->ndelays ? p->ndelays : 10;
		uint32_t i = failures == 0 ? 0 : (failures - 1 < n ? failures - 1 : n - 1);
		if (l[i] == 0 && i < n - 1)
			return 0; /* an explicit 0 that is not repeated */
		return floored(between(l[i] / 2, l[i] + l[i] / 2, u));
	}
	case BS_POLICY_EXPONENTIAL: {
		uint64_t d = bs_policy_backoff(p, failures);
		return d >= p->max_backoff ? BS_STOP : floored(d);
	}
	case BS_POLICY_OFF:
		return BS_STOP;
	default:
		return floored(grpc_wait(p, failures, prev, u));
	}
}

static uint64_t randomize(const struct bs_policy *p, double v, double u)
{
	double d = v * p->randomization_factor;
	if (d > (double)p->max_randomization)
		d = (double)p->max_randomization;
	if (!(d > 0.0))
		d = 0.0;
	return to_ns(v - d + 2.0 * d * u, UINT64_MAX / 2);
}

uint64_t bs_responsive_up(const struct bs_policy *p, uint64_t interval, double u)
{
	uint64_t v = interval == 0 ? p->initial_backoff
				   : randomize(p, (double)interval * p->up_multiplier, u);
	return floored(v < p->max_backoff ? v : p->max_backoff);
}

uint64_t bs_responsive_down(const struct bs_policy *p, uint64_t interval, double u)
{
	uint64_t v = randomize(p, (double)interval * p->down_multiplier, u);
	if (v > interval) /* a step down never goes up */
		v = interval;
	if (v > p->max_backoff)
		v = p->max_backoff;
	return v < p->initial_backoff ? 0 : v;
}

uint64_t bs_responsive_bounded(const struct bs_policy *p, uint64_t interval)
{
	uint64_t most = floored(p->max_backoff);
	return interval < most ? interval : most;
}

uint64_t bs_policy_attempt_timeout(const struct bs_policy *p, uint64_t delay)
{
	return delay > p->min_connect_timeout ? delay : p->min_connect_timeout;
}

double bs_policy_unit(uint64_t r)
{
	return (double)(r >> 11) * 0x1.0p-53;
}

/* --- the range of bs_policy_wait()'s answers (see policy.h) --- */

static uint64_t range_ns(double v)
{
	return !(v > 0.0) ? 0 : v >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)v;
}

static void unfloored_range(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			    uint64_t *lo, uint64_t *hi)
{
	uint64_t b = bs_policy_backoff(p, failures);
	switch (p->kind) {
	case BS_POLICY_LIST: { /* the failures-th wait (the last once past the end) */
		const uint64_t *l = p->ndelays ? p->delays : bs_default_delays;
		uint32_t n = p->ndelays ? p->ndelays : 10;
		uint64_t d = l[failures == 0 ? 0 : (failures - 1 < n ? failures - 1 : n - 1)];
		*lo = d / 2;
		*hi = d + d / 2;
		return;
	}
	case BS_POLICY_EXPONENTIAL:
		*lo = *hi = b;
		return;
	case BS_POLICY_OFF:
		*lo = *hi = 0;
		return;
	case BS_POLICY_RESPONSIVE: { /* prev is the current interval */
		double v = (double)prev * p->up_multiplier, r = v * p->randomization_factor;
		if (r > (double)p->max_randomization)
			r = (double)p->max_randomization;
		*lo = bs_min_u64(prev ? range_ns(v - r) : p->initial_backoff, p->max_backoff);
		*hi = bs_min_u64(prev ? range_ns(v + r) : p->initial_backoff, p->max_backoff);
		return;
	}
	}
	switch (p->jitter_mode) { /* the grpc policy */
	case BS_JITTER_FULL:
		*lo = 0;
		*hi = b;
		return;
	case BS_JITTER_EQUAL:
		*lo = b / 2;
		*hi = b;
		return;
	case BS_JITTER_DECORRELATED: {
		uint64_t pv = prev > p->initial_backoff ? prev : p->initial_backoff;
		*lo = bs_min_u64(p->initial_backoff, p->max_backoff);
		*hi = bs_min_u64(pv > UINT64_MAX / 3 ? UINT64_MAX : 3 * pv, p->max_backoff);
		return;
	}
	}
	double j = p->jitter > 1.0 ? 1.0 : p->jitter > 0.0 ? p->jitter : 0.0;
	if (failures <= 1 || b == 0 || j == 0.0) { /* none on the first wait */
		*lo = *hi = b;
		return;
	}
	*lo = range_ns((double)b * (1.0 - j));
	*hi = range_ns((double)b * (1.0 + j));
}

void bs_policy_wait_range(const struct bs_policy *p, uint32_t failures, uint64_t prev,
			  uint64_t *lo, uint64_t *hi)
{
	unfloored_range(p, failures, prev, lo, hi);
	if (p->kind == BS_POLICY_OFF || (p->kind == BS_POLICY_LIST && *hi == 0))
		return; /* no wait, or a list's explicit 0 */
	*lo = floored(*lo);
	*hi = floored(*hi);
}

uint64_t bs_policy_longest_wait(const struct bs_policy *p)
{
	uint64_t longest = p->max_backoff > BS_RETRY_FLOOR ? p->max_backoff : BS_RETRY_FLOOR;
	double jitter = p->jitter > p->randomization_factor ? p->jitter : p->randomization_factor;
	if (p->kind == BS_POLICY_LIST) { /* its own waits, jittered x[0.5, 1.5] */
		const uint64_t *l = p->ndelays ? p->delays : bs_default_delays;
		uint32_t n = p->ndelays ? p->ndelays : BS_ARRAY_SIZE(bs_default_delays);
		for (uint32_t i = 0; i < n && i < BS_DELAYS_MAX; i++)
			if (l[i] > longest)
				longest = l[i];
		if (jitter < 0.5)
			jitter = 0.5;
	}
	if (p->kind == BS_POLICY_RESPONSIVE && p->max_randomization > longest)
		longest = p->max_randomization;
	return (uint64_t)((double)longest * (1.0 + jitter)) + BS_NS_PER_MS;
}

/* timeout: see timeout.h. */
#include "timeout.h"

#include "units.h"

#define US_PER_SEC 1000000ull

int bs_timeout_ts_valid(const struct timespec *ts)
{
	return !ts || (ts->tv_sec >= 0 && ts->tv_nsec >= 0 &&
		       (uint64_t)ts->tv_nsec < BS_NS_PER_SEC);
}

int bs_timeout_tv_valid(const struct timeval *tv)
{
	return !tv || (tv->tv_sec >= 0 && tv->tv_usec >= 0);
}

/* now + sec seconds + sub units of unit_ns each, or BS_TIMEOUT_NONE if it
 * does not fit. */
static uint64_t deadline(uint64_t now, uint64_t sec, uint64_t sub, uint64_t unit_ns)
{
	uint64_t d, s;
	if (__builtin_mul_overflow(sec, BS_NS_PER_SEC, &d) ||
	    __builtin_mul_overflow(sub, unit_ns, &s) || __builtin_add_overflow(d, s, &d) ||
	    __builtin_add_overflow(d, now, &d))
		return BS_TIMEOUT_NONE;
	return d;
}

uint64_t bs_timeout_deadline_ms(uint64_t now, int ms)
{
	return ms < 0 ? BS_TIMEOUT_NONE : deadline(now, 0, (uint64_t)ms, BS_NS_PER_MS);
}

uint64_t bs_timeout_deadline_ts(uint64_t now, const struct timespec *ts)
{
	return ts ? deadline(now, (uint64_t)ts->tv_sec, (uint64_t)ts->tv_nsec, 1) : BS_TIMEOUT_NONE;
}

uint64_t bs_timeout_deadline_tv(uint64_t now, const struct timeval *tv)
{
	return tv ? deadline(now, (uint64_t)tv->tv_sec, (uint64_t)tv->tv_usec, 1000)
		  : BS_TIMEOUT_NONE;
}

uint64_t bs_timeout_sndtimeo(const struct timeval *tv)
{
	return tv->tv_sec || tv->tv_usec ? bs_timeout_deadline_tv(0, tv) : BS_TIMEOUT_NONE;
}

int bs_timeout_bound_is_programs(int user, int syncnt, int (*host)(void))
{
	return user > 0 || (syncnt > 0 && syncnt < 6 && syncnt < host());
}

int bs_timeout_syn_retries(const char *buf, long n)
{
	int v = 0;
	for (long i = 0; i < n && i < 8 && buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (buf[i] - '0');
	return v > 0 && v < 256 ? v : 6;
}

uint64_t bs_timeout_left(uint64_t now, uint64_t until)
{
	if (until == BS_TIMEOUT_NONE)
		return BS_TIMEOUT_NONE;
	return until > now ? until - now : 0;
}

int bs_timeout_ms(uint64_t ns)
{
	if (ns == BS_TIMEOUT_NONE)
		return -1;
	uint64_t ms = ns / BS_NS_PER_MS + (ns % BS_NS_PER_MS != 0);
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

struct timespec *bs_timeout_ts(uint64_t ns, struct timespec *ts)
{
	if (ns == BS_TIMEOUT_NONE)
		return 0;
	ts->tv_sec = (time_t)(ns / BS_NS_PER_SEC);
	ts->tv_nsec = (long)(ns % BS_NS_PER_SEC);
	return ts;
}

struct timeval *bs_timeout_tv(uint64_t ns, struct timeval *tv)
{
	if (ns == BS_TIMEOUT_NONE)
		return 0;
	uint64_t us = ns / 1000 + (ns % 1000 != 0);
	tv->tv_sec = (time_t)(us / US_PER_SEC);
	tv->tv_usec = (suseconds_t)(us % US_PER_SEC);
	return tv;
}

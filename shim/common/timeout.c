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

/* now + sec seconds + ns, or BS_TIMEOUT_NONE if it does not fit. */
static uint64_t saturating_deadline(uint64_t now, uint64_t sec, uint64_t ns)
{
	if (now >= BS_TIMEOUT_NONE)
		return BS_TIMEOUT_NONE;
	uint64_t room = BS_TIMEOUT_NONE - 1 - now;
	if (sec > room / BS_NS_PER_SEC)
		return BS_TIMEOUT_NONE;
	uint64_t total = sec * BS_NS_PER_SEC;
	if (ns > room - total)
		return BS_TIMEOUT_NONE;
	return now + total + ns;
}

uint64_t bs_timeout_deadline_ms(uint64_t now, int ms)
{
	if (ms < 0)
		return BS_TIMEOUT_NONE;
	return saturating_deadline(now, 0, (uint64_t)ms * BS_NS_PER_MS);
}

uint64_t bs_timeout_deadline_ts(uint64_t now, const struct timespec *ts)
{
	if (!ts)
		return BS_TIMEOUT_NONE;
	return saturating_deadline(now, (uint64_t)ts->tv_sec, (uint64_t)ts->tv_nsec);
}

uint64_t bs_timeout_deadline_tv(uint64_t now, const struct timeval *tv)
{
	if (!tv)
		return BS_TIMEOUT_NONE;
	uint64_t usec = (uint64_t)tv->tv_usec;
	uint64_t sec = (uint64_t)tv->tv_sec, more = usec / US_PER_SEC;
	if (sec > BS_TIMEOUT_NONE - more)
		return BS_TIMEOUT_NONE;
	return saturating_deadline(now, sec + more, usec % US_PER_SEC * 1000);
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

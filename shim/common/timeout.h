/*
 * timeout: the arithmetic of a readiness call's own timeout, which the shim
 * splits into rounds (park.h) and must never shorten, lengthen or refuse
 * differently from the kernel.
 *
 * Promise: pure functions over integers (no clock, no syscall).
 *  - A deadline is an absolute time in ns; BS_TIMEOUT_NONE means "wait
 *    forever". A timeout so large that now + timeout does not fit in 64
 *    bits saturates to BS_TIMEOUT_NONE, as the kernel saturates its own.
 *  - A timespec or timeval the kernel would refuse with EINVAL is reported
 *    invalid, so that the caller hands it to the real call untouched.
 *  - Converting the time left back to a call's unit never rounds down to a
 *    shorter wait, and keeps nanoseconds where the call takes them (a
 *    20 µs ppoll stays 20 µs).
 */
#ifndef BS_TIMEOUT_H
#define BS_TIMEOUT_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#define BS_TIMEOUT_NONE UINT64_MAX

/* Would the kernel accept it (NULL: no timeout, accepted)? timespec:
 * tv_sec >= 0 and 0 <= tv_nsec < 1e9 (ppoll, pselect, epoll_pwait2).
 * timeval: tv_sec >= 0 and tv_usec >= 0 (select folds a tv_usec of a
 * second or more into the seconds). */
int bs_timeout_ts_valid(const struct timespec *ts);
int bs_timeout_tv_valid(const struct timeval *tv);

/* The deadline of a timeout given at `now`: in ms (negative: none), as a
 * valid timespec or timeval (NULL: none). */
uint64_t bs_timeout_deadline_ms(uint64_t now, int ms);
uint64_t bs_timeout_deadline_ts(uint64_t now, const struct timespec *ts);
uint64_t bs_timeout_deadline_tv(uint64_t now, const struct timeval *tv);

/* A socket's SO_SNDTIMEO as the ns a blocking connect may take (a zero
 * timeval: none; one too large for 64 bits saturates to none). */
uint64_t bs_timeout_sndtimeo(const struct timeval *tv);

/* Does a handshake's ETIMEDOUT come from the program's own bound on it:
 * TCP_USER_TIMEOUT `user` set, or a TCP_SYNCNT `syncnt` below the host's
 * net.ipv4.tcp_syn_retries (asked of `host` only for a TCP_SYNCNT below
 * the kernel's default of 6: the value of a socket the program left
 * alone)? Then the timeout is the program's, as SO_SNDTIMEO's is. */
int bs_timeout_bound_is_programs(int user, int syncnt, int (*host)(void));
/* net.ipv4.tcp_syn_retries from the n bytes of its file in buf (n < 0:
 * unread): 6, the kernel's default, unless a number in 1..255 is there. */
int bs_timeout_syn_retries(const char *buf, long n);

/* The ns left from now until `until` (0 if passed; BS_TIMEOUT_NONE stays
 * none). */
uint64_t bs_timeout_left(uint64_t now, uint64_t until);

/* ns in a call's unit: ms rounded up, capped at INT32_MAX (-1: none); a
 * timespec (returns NULL for none, else ts); a timeval rounded up to the
 * µs (NULL for none, else tv). */
int bs_timeout_ms(uint64_t ns);
struct timespec *bs_timeout_ts(uint64_t ns, struct timespec *ts);
struct timeval *bs_timeout_tv(uint64_t ns, struct timeval *tv);

#endif

/*
 * select, pselect: as poll.c does, on copies of the sets with the bits of
 * parked sockets cleared. select reports a failed connect as readable and
 * writable, so a connecting socket reported ready is screened only if the
 * kernel says it failed (its error not read). nfds beyond FD_SETSIZE:
 * passed through, the parked sockets in its sets ended first (their last
 * error owed).
 */
#include "clock.h"
#include "defer.h"
#include "park.h"
#include "real.h"
#include "ret.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <string.h>

enum { R, W, E }; /* the read, write and exception sets */

struct sets {
	fd_set s[3];
};

struct call {
	int n;
	fd_set *set[3];     /* the program's (any may be NULL) */
	struct sets asked;  /* what the program asked, kept for every round */
	uint64_t deadline;  /* the program's, BS_TIMEOUT_NONE for none */
	const sigset_t *mask;
	int is_pselect;
};

static int real_wait(const struct call *c, struct sets *s, uint64_t ns)
{
	fd_set *p[3];
	for (int i = 0; i < 3; i++)
		p[i] = c->set[i] ? &s->s[i] : NULL;
	if (c->is_pselect) {
		struct timespec ts;
		return (int)BS_NEG(bs_real_pselect(c->n, p[R], p[W], p[E], bs_timeout_ts(ns, &ts),
						   c->mask));
	}
	struct timeval tv;
	return (int)BS_NEG(bs_real_select(c->n, p[R], p[W], p[E], bs_timeout_tv(ns, &tv)));
}

static int in_sets(const struct sets *s, int fd)
{
	return FD_ISSET(fd, &s->s[R]) + FD_ISSET(fd, &s->s[W]) + FD_ISSET(fd, &s->s[E]);
}

static void clear_fd(struct sets *s, int fd)
{
	for (int i = 0; i < 3; i++)
		FD_CLR(fd, &s->s[i]);
}

/* The round's sets: what the program asked, parked sockets cleared. */
static void hide_parked(const struct call *c, struct sets *s)
{
	*s = c->asked;
	for (int fd = 0; fd < c->n; fd++)
		if (in_sets(s, fd) && bs_park_is_parked(fd) && bs_park_holds(fd))
			clear_fd(s, fd);
}

/* Screen connecting sockets reported ready; returns the bits left set, or
 * -EINTR (a signal ended retry mode's wait). */
static int screen(const struct call *c, struct sets *s)
{
	int left = 0;
	for (int fd = 0; fd < c->n; fd++) {
		if (in_sets(s, fd) && bs_fd_state(bs_fds(), fd) == BS_FD_CONNECTING &&
		    bs_sock_has_failed(fd)) {
			enum bs_screen v = bs_defer_screen(fd);
			if (v == BS_SCREEN_EINTR)
				return -EINTR;
			if (v == BS_SCREEN_HIDE)
				clear_fd(s, fd);
			else if (v == BS_SCREEN_CONNECTED) {
				clear_fd(s, fd);
				if (FD_ISSET(fd, &c->asked.s[W]))
					FD_SET(fd, &s->s[W]);
			}
		}
		left += in_sets(s, fd);
	}
	return left;
}

static int wait_and_screen(void *call, uint64_t now, uint64_t wake)
{
	struct call *c = call;
	struct sets got;
	hide_parked(c, &got); /* (capped at wake even if none is the program's: poll.c) */
	int r = real_wait(c, &got, bs_defer_round_wait(now, c->deadline, wake));
	if (r >= 0)
		r = screen(c, &got);
	for (int i = 0; r >= 0 && i < 3; i++)
		if (c->set[i])
			*c->set[i] = got.s[i];
	return r;
}

static int deferred(struct call *c)
{
	int saved = errno;
	memset(&c->asked, 0, sizeof c->asked);
	for (int i = 0; i < 3; i++)
		if (c->set[i])
			c->asked.s[i] = *c->set[i];
	return bs_ret(bs_defer_rounds(c, c->deadline, c->mask, wait_and_screen), saved);
}

static int mine(int n)
{
	return n > 0 && n <= FD_SETSIZE && bs_fd_any_pending(bs_fds());
}

/* fd's bit in a set the program may have sized beyond FD_SETSIZE */
static int bit(const fd_set *set, int fd)
{
	const unsigned long *w = (const unsigned long *)(const void *)set;
	unsigned per = 8 * sizeof *w;
	return set && (w[(unsigned)fd / per] >> ((unsigned)fd % per) & 1);
}

/* More fds than the copies hold (see the top). */
static __attribute__((noinline)) void unscreened_in_sets(int n, fd_set *r, fd_set *w, fd_set *e)
{
	for (int fd = 0; fd < n; fd++)
		if (bs_fd_state_in_flight(bs_fd_state(bs_fds(), fd)) &&
		    (bit(r, fd) || bit(w, fd) || bit(e, fd)))
			bs_park_unscreened(fd);
}

static __attribute__((noinline)) int select_watched(int n, fd_set *r, fd_set *w, fd_set *e,
						    struct timeval *tv)
{
	struct call c = {.n = n, .set = {r, w, e}, .deadline = bs_timeout_deadline_tv(bs_now(), tv)};
	int res = deferred(&c);
	/* Linux's select writes the time left into the program's timeval (a
	 * timeout too large to end is left as it is) */
	if (tv && c.deadline != BS_TIMEOUT_NONE) {
		uint64_t left = bs_timeout_left(bs_now(), c.deadline);
		tv->tv_sec = (time_t)(left / BS_NS_PER_SEC);
		tv->tv_usec = (suseconds_t)(left % BS_NS_PER_SEC / 1000);
	}
	return res;
}

static __attribute__((noinline)) int pselect_watched(int n, fd_set *r, fd_set *w, fd_set *e,
						     const struct timespec *ts,
						     const sigset_t *mask)
{
	struct call c = {.n = n, .set = {r, w, e}, .deadline = bs_timeout_deadline_ts(bs_now(), ts),
			 .mask = mask, .is_pselect = 1};
	return deferred(&c);
}

/* Not the shim's to screen (nfds out of range, nothing in flight, or an
 * invalid timeout: EINVAL as it is): the call goes through as it is. */
static int passed_on(int n, fd_set *r, fd_set *w, fd_set *e, int ours)
{
	if (!ours && n > FD_SETSIZE && bs_fd_any_pending(bs_fds()))
		unscreened_in_sets(n, r, w, e);
	return !ours;
}

BS_API int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	if (passed_on(n, r, w, e, mine(n) && bs_timeout_tv_valid(tv)))
		return bs_real_select(n, r, w, e, tv);
	return select_watched(n, r, w, e, tv);
}

BS_API int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		   const sigset_t *mask)
{
	if (passed_on(n, r, w, e, mine(n) && bs_timeout_ts_valid(ts)))
		return bs_real_pselect(n, r, w, e, ts, mask);
	return pselect_watched(n, r, w, e, ts, mask);
}

/*
 * poll/ppoll: while no socket of the process is connecting or parked, a
 * straight call (one load added). Otherwise:
 *  - parked sockets (defer mode, park.h) are hidden: the call runs on a
 *    copy of the program's array on the stack, their entries negated (~fd:
 *    poll ignores negative fds), and its timeout is capped so that a due
 *    socket is reconnected and a success elsewhere noticed; the call then
 *    goes on waiting for the rest of the program's own timeout;
 *  - a connecting socket reported with POLLERR/POLLHUP is screened
 *    (bs_defer_screen): parked and hidden in defer mode, retried here in
 *    retry mode (the calling thread blocks, as in every retry-mode wait).
 * With more entries than the copy holds, nothing is hidden or screened:
 * the sockets in flight among them are never parked (custody.h), and the
 * parked ones end, their last error owed to the program.
 */
#include "clock.h"
#include "defer.h"
#include "outcome.h"
#include "park.h"
#include "real.h"
#include "ret.h"
#include "shim.h"

#include <errno.h>

#define POLL_COPY 256 /* entries copied to the stack: 2 KiB */

struct call {
	struct pollfd *fds;
	nfds_t n;
	uint64_t deadline; /* the program's, BS_TIMEOUT_NONE for none */
	const sigset_t *mask;
	int is_ppoll;
	struct pollfd *copy; /* POLL_COPY entries on the stack */
};

static int real_wait(const struct call *c, struct pollfd *set, uint64_t ns)
{
	if (!c->is_ppoll)
		return (int)BS_NEG(bs_real_poll(set, c->n, bs_timeout_ms(ns)));
	struct timespec ts;
	return (int)BS_NEG(bs_real_ppoll(set, c->n, bs_timeout_ts(ns, &ts), c->mask));
}

/* The copy, parked entries hidden. Returns how many were. */
static int hide_parked(const struct call *c, struct pollfd *set)
{
	int hidden = 0;
	for (nfds_t i = 0; i < c->n; i++) {
		set[i] = c->fds[i];
		if (bs_park_is_parked(set[i].fd) && bs_park_holds(set[i].fd)) {
			set[i].fd = ~set[i].fd;
			hidden++;
		}
	}
	return hidden;
}

/* What the program is told of entry p; sets *intr on a signal (retry). */
static short screened(const struct pollfd *p, int *intr)
{
	if (p->fd < 0 || !(p->revents & (POLLERR | POLLHUP)))
		return p->fd < 0 ? 0 : p->revents;
	if (bs_owed_holds(p->fd))
		return p->revents | POLLERR; /* its error was read away: owed */
	switch (bs_defer_screen(p->fd)) {
	case BS_SCREEN_EINTR:
		*intr = 1;
		/* fall through */
	case BS_SCREEN_HIDE:
		return 0;
	case BS_SCREEN_CONNECTED:
		return p->events & (POLLOUT | POLLWRNORM);
	default:
		return p->revents;
	}
}

/* Screen the copy's reports and hand them to the program. Returns how
 * many entries have something to report, or -EINTR. */
static int report(const struct call *c, const struct pollfd *set)
{
	int r = 0, intr = 0;
	for (nfds_t i = 0; i < c->n; i++) {
		c->fds[i].revents = screened(&set[i], &intr);
		r += c->fds[i].revents != 0;
	}
	return intr ? -EINTR : r;
}

/* One round: on the program's own array unless one of its entries is
 * parked (its reports screened in place), else on the copy with parked
 * entries hidden. While a socket of the process is parked, the wait is
 * capped either way: one parked out of an epoll set polled here, or
 * watched by a thread that is not waiting now, is reconnected by these
 * rounds. */
static int wait_and_screen(void *call, uint64_t now, uint64_t wake)
{
	struct call *c = call;
	struct pollfd *set = c->fds;
	if (wake != BS_TIMEOUT_NONE && hide_parked(c, c->copy))
		set = c->copy;
	int r = real_wait(c, set, bs_defer_round_wait(now, c->deadline, wake));
	return r < 0 ? r : report(c, set);
}

static int deferred(struct call *c)
{
	struct pollfd copy[POLL_COPY];
	int saved = errno;
	c->copy = copy;
	return bs_ret(bs_defer_rounds(c, c->deadline, c->mask, wait_and_screen), saved);
}

/* Too many entries to copy (see the top)? Then 1, the in-flight sockets
 * among them unscreened. */
static int unscreened(const struct pollfd *fds, nfds_t n)
{
	if (n <= POLL_COPY)
		return 0;
	for (nfds_t i = 0; i < n; i++)
		if (bs_fd_state_in_flight(bs_fd_state(bs_fds(), fds[i].fd)))
			bs_park_unscreened(fds[i].fd);
	return 1;
}

/* (the slow paths are kept out of line: a straight call sets up no frame) */
static __attribute__((noinline)) int poll_watched(struct pollfd *fds, nfds_t n, int timeout)
{
	if (unscreened(fds, n))
		return bs_real_poll(fds, n, timeout);
	struct call c = {fds, n, bs_timeout_deadline_ms(bs_now(), timeout), NULL, 0, NULL};
	return deferred(&c);
}

static int do_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!bs_fd_any_pending(bs_fds()))
		return bs_real_poll(fds, n, timeout);
	return poll_watched(fds, n, timeout);
}

static __attribute__((noinline)) int ppoll_watched(struct pollfd *fds, nfds_t n,
						   const struct timespec *ts, const sigset_t *mask)
{
	/* (an invalid timeout: EINVAL, as without the shim) */
	if (!bs_timeout_ts_valid(ts) || unscreened(fds, n))
		return bs_real_ppoll(fds, n, ts, mask);
	struct call c = {fds, n, bs_timeout_deadline_ts(bs_now(), ts), mask, 1, NULL};
	return deferred(&c);
}

static int do_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	if (!bs_fd_any_pending(bs_fds()))
		return bs_real_ppoll(fds, n, ts, mask);
	return ppoll_watched(fds, n, ts, mask);
}

BS_API int poll(struct pollfd *fds, nfds_t n, int timeout) { return do_poll(fds, n, timeout); }

BS_API int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	return do_ppoll(fds, n, ts, mask);
}

/* _FORTIFY_SOURCE builds call these; the size check is libc's own. */
BS_API int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return do_poll(fds, n, timeout);
}

BS_API int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		       const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof *fds < n)
		__chk_fail();
	return do_ppoll(fds, n, ts, mask);
}

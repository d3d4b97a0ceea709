/*
 * epoll_ctl, epoll_wait, epoll_pwait, epoll_pwait2.
 *
 * epoll_ctl records the program's registration of each fd in its slot
 * (a few stores), so that a parked socket (park.h) can leave its set and
 * come back with the program's own events and data. A program's MOD, DEL
 * or ADD on a socket the shim took out of its set is answered as if it were
 * still there.
 *
 * The waits, as poll.c's: due sockets are reconnected (and put back in
 * their sets), and a reported EPOLLERR/EPOLLHUP of a connecting socket is
 * screened: dropped from the results if parked.
 */
#include "clock.h"
#include "defer.h"
#include "outcome.h"
#include "park.h"
#include "real.h"
#include "ret.h"
#include "shim.h"

#include <errno.h>

/* ---- registrations ---- */

static void record(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct bs_fdtab *t = bs_fds();
	if (op == EPOLL_CTL_ADD && ev)
		bs_fd_ep_added(t, epfd, fd, ev->events, ev->data.u64);
	else if (op == EPOLL_CTL_MOD && ev)
		bs_fd_ep_modified(t, epfd, fd, ev->events, ev->data.u64);
	else if (op == EPOLL_CTL_DEL)
		bs_fd_ep_deleted(t, epfd, fd);
}

/* A call on a parked socket's registration, answered here: 1 if so, its
 * result (0 or -errno) in *ret. */
static int answered_for_parked(int epfd, int op, int fd, const struct epoll_event *ev,
			       int *ret)
{
	struct bs_fdtab *t = bs_fds();
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s || !bs_park_is_parked(fd) || !bs_park_holds(fd))
		return 0;
	if (!(atomic_load(&s->flags) & BS_FDF_EP_REMOVED) && atomic_load(&s->ep_set))
		return 0; /* in its set: the kernel answers */
	if (atomic_load(&s->ep_set) && !bs_fd_ep_in(t, epfd, fd)) {
		bs_park_end(fd); /* a second set: the illusion ends here */
		return 0;
	}
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return 0;
	if (bs_fd_ep_in(t, epfd, fd) != (op != EPOLL_CTL_ADD)) /* ADD: not in it; else in it */
		return *ret = op == EPOLL_CTL_ADD ? -EEXIST : -ENOENT, 1;
	if (op != EPOLL_CTL_DEL && !ev)
		return *ret = -EFAULT, 1;
	/* the kernel modifies no exclusive registration, and makes none */
	if (op == EPOLL_CTL_MOD && ((atomic_load(&s->ep_events) | ev->events) & EPOLLEXCLUSIVE))
		return *ret = -EINVAL, 1;
	record(epfd, op, fd, ev);
	if (op == EPOLL_CTL_ADD)
		atomic_fetch_or(&s->flags, BS_FDF_EP_REMOVED); /* joins when it reconnects */
	return *ret = 0, 1;
}

BS_API int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int ret;
	if (bs_fd_any_parked(bs_fds()) && answered_for_parked(epfd, op, fd, ev, &ret))
		return bs_ret(ret, errno);
	ret = bs_real_epoll_ctl(epfd, op, fd, ev);
	if (ret == 0)
		record(epfd, op, fd, ev);
	return ret;
}

/* ---- waits ---- */

struct call {
	int epfd, max;
	struct epoll_event *ev;
	uint64_t deadline; /* the program's, BS_TIMEOUT_NONE for none */
	const sigset_t *mask;
	int kind; /* 0 epoll_wait, 1 epoll_pwait, 2 epoll_pwait2 */
};

static int real_wait(const struct call *c, uint64_t ns)
{
	struct timespec ts;
	if (c->kind == 0)
		return (int)BS_NEG(bs_real_epoll_wait(c->epfd, c->ev, c->max, bs_timeout_ms(ns)));
	if (c->kind == 1)
		return (int)BS_NEG(bs_real_epoll_pwait(c->epfd, c->ev, c->max, bs_timeout_ms(ns),
						       c->mask));
	return (int)BS_NEG(bs_real_epoll_pwait2(c->epfd, c->ev, c->max, bs_timeout_ts(ns, &ts),
						c->mask));
}

/* What the program is told of event e: 1 to keep it, 0 to drop it, -1 for
 * EINTR (a signal ended retry mode's wait). */
static int screened(const struct call *c, struct epoll_event *e)
{
	if (!(e->events & (EPOLLERR | EPOLLHUP)))
		return 1;
	int fd = bs_fd_ep_find(bs_fds(), c->epfd, e->data.u64, BS_FD_CONNECTING);
	if (fd == BS_FD_EP_AMBIGUOUS) {
		/* whose event is it? The program's report as it is, and no
		 * failure of those sockets hidden from their SO_ERROR either */
		bs_fd_ep_share(bs_fds(), c->epfd, e->data.u64);
		return 1;
	}
	if (fd < 0) {
		/* a connect whose parking ended: its error was read away (owed),
		 * so the kernel shows only OUT|HUP; say it failed */
		int owed = bs_fd_ep_find(bs_fds(), c->epfd, e->data.u64, BS_FD_FAILED);
		if (owed >= 0 && bs_owed_holds(owed))
			e->events |= EPOLLERR;
		return 1;
	}
	switch (bs_defer_screen(fd)) {
	case BS_SCREEN_HIDE:
		return 0;
	case BS_SCREEN_EINTR:
		return -1;
	case BS_SCREEN_CONNECTED:
		e->events = atomic_load(&bs_fd_slot(bs_fds(), fd)->ep_events) & EPOLLOUT;
		return e->events != 0;
	default:
		return 1;
	}
}

/* One round: the wait, then its n reports screened, the hidden ones
 * dropped. Returns how many are left, or -errno (-EINTR from a screen). */
static int wait_and_screen(void *call, uint64_t now, uint64_t wake)
{
	const struct call *c = call;
	int n = real_wait(c, bs_defer_round_wait(now, c->deadline, wake)), kept = 0;
	for (int i = 0; i < n; i++) {
		int k = screened(c, &c->ev[i]);
		if (k < 0)
			return -EINTR;
		if (k)
			c->ev[kept++] = c->ev[i];
	}
	return n < 0 ? n : kept;
}

static __attribute__((noinline)) int wait_watched(int epfd, struct epoll_event *ev, int max,
						  int timeout, const struct timespec *ts,
						  const sigset_t *mask, int kind)
{
	uint64_t now = bs_now();
	uint64_t deadline = kind == 2 ? bs_timeout_deadline_ts(now, ts)
				      : bs_timeout_deadline_ms(now, timeout);
	struct call c = {epfd, max, ev, deadline, mask, kind};
	int saved = errno;
	return bs_ret(bs_defer_rounds(&c, deadline, mask, wait_and_screen), saved);
}

BS_API int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (!bs_fd_any_pending(bs_fds()))
		return bs_real_epoll_wait(epfd, ev, max, timeout);
	return wait_watched(epfd, ev, max, timeout, NULL, NULL, 0);
}

BS_API int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	if (!bs_fd_any_pending(bs_fds()))
		return bs_real_epoll_pwait(epfd, ev, max, timeout, mask);
	return wait_watched(epfd, ev, max, timeout, NULL, mask, 1);
}

BS_API int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	if (!bs_fd_any_pending(bs_fds()) || !bs_timeout_ts_valid(ts))
		return bs_real_epoll_pwait2(epfd, ev, max, ts, mask); /* (EINVAL as it is) */
	return wait_watched(epfd, ev, max, 0, ts, mask, 2);
}

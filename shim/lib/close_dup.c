/* close, dup, dup2, dup3, fcntl (F_DUPFD, F_DUPFD_CLOEXEC, F_SETFL with
 * O_ASYNC), close_range, closefrom: keep the fd table in step with the
 * program's descriptors. Untracked fds cost one load; other fcntl commands
 * one compare. */
#include "custody.h"
#include "outcome.h"
#include "park.h"
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>

/* close() of an fd the shim tracks, but for the common case below (out
 * of line: that one costs a few checks and a jump to libc). */
static __attribute__((noinline)) int close_tracked(int fd)
{
	/* a slot that says more than "a connection" (connecting, parked, an
	 * error owed, an epoll set) is the parent's if this is a vfork child:
	 * only the owner changes it (custody.h); the common close of a live
	 * connection asks nothing */
	unsigned st = bs_fd_state(bs_fds(), fd);
	if (st == BS_FD_EPOLL)
		bs_park_end_out_of_sets((unsigned)fd, (unsigned)fd);
	if ((!bs_fd_state_is_pending(st) && st != BS_FD_EPOLL) || bs_custody_here())
		bs_outcome_closed(fd); /* before the number can be reused */
	return bs_real_close(fd);
}

BS_API int close(int fd)
{
	struct bs_fdslot *s;
	if (__builtin_expect((unsigned)fd >= bs_fds()->cap ||
				     bs_fd_slot_state(s = bs_fd_slot_at(bs_fds(), fd)) == BS_FD_NONE,
			     1) ||
	    bs_fd_drop_live(s, bs_tab()))
		return bs_real_close(fd);
	return close_tracked(fd);
}

/* dup2/dup3 onto a tracked number closes what it named, as close() does
 * (only if the call can succeed: `from` is open). */
static void replacing(int from, int to)
{
	if (from != to && bs_fd_state(bs_fds(), to) != BS_FD_NONE && bs_sock_is_open(from) &&
	    bs_custody_here()) {
		if (bs_fd_state(bs_fds(), to) == BS_FD_EPOLL)
			bs_park_end_out_of_sets((unsigned)to, (unsigned)to);
		bs_outcome_closed(to);
	}
}

/* `to` now names what `from` names: one socket, two numbers, even before
 * its connect. A parked socket can no longer be hidden (each number would
 * have to tell the same story): its parking ends first, and its last error
 * is owed through both; while both numbers live, it is not parked again
 * (BS_FDF_TWIN). */
static void copied(int from, int to)
{
	if (!bs_custody_here())
		return; /* a vfork child's: the parent's table stays as it is */
	if (bs_park_is_parked(from))
		bs_park_end(from);
	bs_fd_copy(bs_fds(), from, to);
}

/* The number a dup returned (dup2 and dup3 return `to`) names what `from`
 * names. */
static int duplicated(int from, int r)
{
	if (r >= 0)
		copied(from, r);
	return r;
}

/* after a successful F_SETFL on a tracked fd that sets O_ASYNC (its
 * signals would tell) or clears O_NONBLOCK (a blocking connect or read on
 * it would wait for an outcome, which a parked socket cannot give: it got
 * EALREADY or EAGAIN, which the kernel never gives a blocking socket): no
 * parking from now on, and a parked one's refusal is owed */
static __attribute__((noinline)) void cannot_hide_now(int fd)
{
	struct bs_fdslot *s = bs_fd_slot(bs_fds(), fd);
	if (!bs_custody_here() || !s)
		return;
	atomic_fetch_or(&s->flags, BS_FDF_NO_PARK);
	if (bs_park_is_parked(fd))
		bs_park_end(fd);
}

static int do_fcntl(int (*real)(int, int, unsigned long), int fd, int cmd, unsigned long arg)
{
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return duplicated(fd, real(fd, cmd, arg));
	if (cmd != F_SETFL || bs_fd_state(bs_fds(), fd) == BS_FD_NONE)
		return real(fd, cmd, arg);
	int r = real(fd, cmd, arg);
	if (r >= 0 && ((arg & O_ASYNC) || !(arg & O_NONBLOCK)))
		cannot_hide_now(fd);
	return r;
}

/* fds lo..hi are closed: the probes their connects held are let go, then
 * their slots renewed. */
static void closed_range(unsigned lo, unsigned hi)
{
	struct bs_fdtab *t = bs_fds();
	unsigned high = atomic_load(&t->high);
	for (unsigned fd = lo; fd <= hi && fd < high && fd < t->cap; fd++)
		if (bs_fd_state_in_flight(bs_fd_state(t, (int)fd)))
			bs_outcome_probe_learned((int)fd);
	bs_fd_clear_range(t, lo, hi);
}

BS_API int close_range(unsigned first, unsigned last, int flags)
{
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		bs_park_end_out_of_sets(first, last);
	int r = bs_real_close_range(first, last, flags);
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && bs_custody_here())
		closed_range(first, last);
	return r;
}

BS_API void closefrom(int lowfd)
{
	if (lowfd >= 0)
		bs_park_end_out_of_sets((unsigned)lowfd, ~0u);
	bs_real_closefrom(lowfd);
	if (lowfd >= 0 && bs_custody_here())
		closed_range((unsigned)lowfd, ~0u);
}

BS_API int dup(int fd) { return duplicated(fd, bs_real_dup(fd)); }

BS_API int dup2(int from, int to)
{
	replacing(from, to);
	return duplicated(from, bs_real_dup2(from, to));
}

BS_API int dup3(int from, int to, int flags)
{
	replacing(from, to);
	return duplicated(from, bs_real_dup3(from, to, flags));
}

/* fcntl and fcntl64 are variadic: the optional argument is read as one
 * register (every fcntl argument fits one), as libc reads it itself. */
#define FCNTL(name)                                                       \
	BS_API int name(int fd, int cmd, ...)                             \
	{                                                                 \
		va_list ap;                                               \
		va_start(ap, cmd);                                        \
		unsigned long arg = va_arg(ap, unsigned long);            \
		va_end(ap);                                               \
		return do_fcntl(bs_real_##name, fd, cmd, arg);            \
	}
FCNTL(fcntl)
FCNTL(fcntl64)

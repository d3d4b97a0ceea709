/*
 * poll/ppoll: some clients (curl) decide a non-blocking connect failed from
 * POLLERR/POLLHUP alone. In retry mode, a connecting socket reported so is
 * retried here (the calling thread blocks, as in every retry-mode wait) and
 * reported writable once connected; if the budget runs out, the events stay
 * and the error is kept for the program's getsockopt(SO_ERROR). Other modes
 * and untracked fds are untouched: the cost is a scan of the returned set
 * while any socket is tracked.
 */
#include "clock.h"
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>

static int fix(struct pollfd *fds, nfds_t n, int r)
{
	const struct bs_config *cfg;
	if (r <= 0 || !atomic_load_explicit(&bs_fds()->high, memory_order_relaxed) ||
	    !(cfg = bs_active()) || cfg->nonblocking != BS_NB_RETRY)
		return r;
	int saved = errno;
	for (nfds_t i = 0; i < n; i++) {
		struct pollfd *p = &fds[i];
		if (!(p->revents & (POLLERR | POLLHUP)) ||
		    bs_fd_state(bs_fds(), p->fd) != BS_FD_CONNECTING)
			continue;
		/* read the error away only if a retry will follow: the
		 * destination is known, retry mode applies to it, and the
		 * program has no other address of the name to go to */
		uint64_t key;
		struct sockaddr_storage ss;
		socklen_t len = 0;
		if (!bs_fd_read_dest(bs_fds(), p->fd, &key, &ss, &len) || !len ||
		    bs_cfg_for(cfg, (const struct sockaddr *)&ss, len)->nonblocking !=
			    BS_NB_RETRY ||
		    bs_res_has_alternative(bs_res(), key, bs_now(), BS_RES_FALLBACK))
			continue;
		int err;
		struct bs_sock_ident id;
		if (!bs_sock_ident(p->fd, &id) || (err = bs_sock_take_error(p->fd)) <= 0)
			continue;
		int res = bs_nb_outcome(cfg, p->fd, err);
		if (res == 0)
			p->revents = p->events & (POLLOUT | POLLWRNORM);
		else /* owed to this very socket: see bs_owed_take() */
			bs_owe(p->fd, &id, res);
	}
	r = 0;
	for (nfds_t i = 0; i < n; i++)
		r += fds[i].revents != 0;
	errno = saved;
	return r;
}

static int do_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return fix(fds, n, bs_real_poll(fds, n, timeout));
}

static int do_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		    const sigset_t *mask)
{
	return fix(fds, n, bs_real_ppoll(fds, n, ts, mask));
}

BS_API int poll(struct pollfd *fds, nfds_t n, int timeout) { return do_poll(fds, n, timeout); }

BS_API int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	return do_ppoll(fds, n, ts, mask);
}

/* _FORTIFY_SOURCE builds call these; the size check is libc's own. */
extern void __chk_fail(void) __attribute__((noreturn));

/* (the static functions, not poll/ppoll: those would bind back to this
 * library's own exports through the PLT) */
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

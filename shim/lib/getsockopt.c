/* getsockopt(SO_ERROR): where most clients (curl, libpq, CPython, libuv)
 * learn the outcome of a non-blocking connect. */
#include "clock.h"
#include "defer.h"
#include "nonblock.h"
#include "outcome.h"
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>

BS_API int getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
	int r = bs_real_getsockopt(fd, level, opt, val, len);
	if (r != 0 || level != SOL_SOCKET || opt != SO_ERROR || !val || !len ||
	    *len < (socklen_t)sizeof(int))
		return r;
	unsigned st = bs_fd_state(bs_fds(), fd);
	if (st == BS_FD_PARKED) /* still connecting, to the program */
		st = bs_defer_run_fd(fd, bs_now());
	if (st == BS_FD_FAILED && *(int *)val == 0) {
		*(int *)val = bs_owed_take(fd); /* read away by poll() */
		return r;
	}
	if (st != BS_FD_CONNECTING)
		return r;
	const struct bs_config *cfg = bs_active();
	int err = *(int *)val;
	/* 0 means connected, or still connecting: only a peer tells. */
	if (!cfg || (err == 0 && !bs_sock_has_peer(fd)))
		return r;
	int saved = errno, res = bs_nb_outcome(cfg, fd, err, 0);
	*(int *)val = res == BS_NB_PARKED_NOW ? 0 : res; /* parked: still connecting */
	errno = saved;
	return r;
}

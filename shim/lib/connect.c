/* connect(): the interposed entry point. Classifies the call and hands
 * destinations the shim cares about to the engine; everything else goes
 * straight to libc. A repeated connect() on a socket whose non-blocking
 * connect is in flight is how some clients (hiredis) learn its outcome. */
#include "addr.h"
#include "clock.h"
#include "log.h"
#include "park.h"
#include "real.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <sys/socket.h>

static int repeated(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		    socklen_t len)
{
	int r = bs_real_connect(fd, addr, len);
	int err = errno;
	if (r == 0 || err == EISCONN) {
		bs_nb_outcome(cfg, fd, 0, 0);
	} else if (err != EALREADY && err != EINPROGRESS && err != EINTR) {
		int res = bs_nb_outcome(cfg, fd, err, 0);
		/* reconnected: say so the way the kernel says "connected";
		 * parked: still connecting */
		err = res == BS_NB_PARKED_NOW ? EALREADY : res ? res : EISCONN;
	}
	errno = err;
	return r;
}

/* A connect the shim leaves alone (debug says so: "is it working?"). */
static __attribute__((noinline)) int say_passed(int fd, const struct sockaddr *addr,
						socklen_t len, const char *why)
{
	int r = bs_real_connect(fd, addr, len), saved = errno;
	char name[128] = "?";
	bs_addr_format(addr, len, name, sizeof name);
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "pass");
	bs_line_fields(&l, name, 0, UINT64_MAX, 0);
	bs_line_str(&l, "connect ");
	bs_line_str(&l, name);
	bs_line_str(&l, ": passed through (");
	bs_line_str(&l, why);
	bs_line_str(&l, ")");
	bs_line_emit(&l, BS_LOG_DEBUG);
	errno = saved;
	return r;
}

static int pass(int fd, const struct sockaddr *addr, socklen_t len, const char *why)
{
	if (bs_log_enabled(BS_LOG_DEBUG))
		return say_passed(fd, addr, len, why);
	return bs_real_connect(fd, addr, len);
}

static __attribute__((noinline)) int do_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	const struct bs_config *cfg = bs_active();
	if (!cfg)
		return bs_real_connect(fd, addr, len);
	unsigned st = bs_fd_state(bs_fds(), fd);
	if (st == BS_FD_PARKED) {
		/* still connecting, to the program (its retry sent if due) */
		st = bs_park_run_fd(fd, bs_now());
		if (st == BS_FD_PARKED || st == BS_FD_CONNECTING)
			return errno = EALREADY, -1;
	}
	if (st == BS_FD_FAILED) {
		/* poll() read the error away; the kernel would report
		 * ECONNABORTED. Whatever the new destination, the slot is
		 * settled here and never outlives this connect. */
		int err = bs_owed_take(fd);
		if (err)
			return errno = err, -1;
		st = BS_FD_NONE;
	}
	switch (bs_addr_kind(addr, len)) {
	case BS_ADDR_INET:
		break;
	case BS_ADDR_UNIX:
		if (cfg->unix_sockets)
			break;
		return pass(fd, addr, len, "unix sockets are off");
	default:
		return pass(fd, addr, len, "not an internet address");
	}
	cfg = bs_cfg_for(cfg, addr, len);
	if (cfg->policy.kind == BS_POLICY_OFF)
		return pass(fd, addr, len, "policy off");
	uint64_t key = bs_addr_key(addr, len);
	if (st == BS_FD_CONNECTING &&
	    atomic_load(&bs_fd_slot(bs_fds(), fd)->key) == key)
		return repeated(cfg, fd, addr, len);
	if (cfg->policy.kind == BS_POLICY_RESPONSIVE)
		return bs_sock_is_stream(fd) ? bs_responsive_connect(cfg, fd, addr, len, key)
					     : bs_real_connect(fd, addr, len);
	return bs_engine_connect(cfg, fd, addr, len, key);
}

/* The common case, in few instructions: an IPv4 destination the
 * table holds nothing about (it never failed, from this process or, with a
 * shared table, any other), on a socket the shim is not tracking, under
 * settings fresh_path_fits() (init.c) accepted. The program's connect,
 * then the fd's slot if it connected; a failure goes on into the engine
 * exactly as do_connect would have taken it. */
static __attribute__((noinline)) int connect_fresh(int fd, const struct sockaddr *addr,
						     socklen_t len, uint64_t key,
						     const struct bs_config *cfg)
{
	if (bs_table_find(bs_tab(), key)) /* it has failed: the full path */
		return do_connect(fd, addr, len);
	int saved = errno;
	uint64_t t0 = bs_now();
	if (bs_real_connect(fd, addr, len) != 0)
		return bs_engine_first_failed(cfg, fd, addr, len, key, t0, errno, saved);
	if (__builtin_expect(bs_table_find(bs_tab(), key) != NULL, 0)) {
		/* it failed elsewhere meanwhile: the full publication */
		struct bs_dest d = {key, addr, len};
		bs_outcome_connected(cfg, &d, fd, t0);
	} else {
		bs_fd_track_connected(bs_fds(), fd, key, t0, addr);
	}
	errno = saved;
	return 0;
}

/* Only checks and tail calls, so that no frame is set up here. */
BS_API int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	const struct bs_config *cfg = atomic_load_explicit(&bs_fresh_cfg_g, memory_order_acquire);
	uint64_t key;
	if (cfg && bs_fd_state(bs_fds(), fd) == BS_FD_NONE &&
	    (key = bs_addr_v4_key(addr, len)) != 0)
		return connect_fresh(fd, addr, len, key, cfg);
	return do_connect(fd, addr, len);
}

/* connect(): the interposed entry point. Classifies the call and hands
 * destinations the shim cares about to the engine; everything else goes
 * straight to libc. A repeated connect() on a socket whose non-blocking
 * connect is in flight is how some clients (hiredis) learn its outcome.
 * shutdown() is here too: like connect(AF_UNSPEC) or a connect elsewhere,
 * it is how a program leaves a connect behind. */
#include "addr.h"
#include "clock.h"
#include "custody.h"
#include "defer.h"
#include "engine.h"
#include "log.h"
#include "nonblock.h"
#include "outcome.h"
#include "park.h"
#include "real.h"
#include "responsive.h"
#include "ret.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <sys/socket.h>

static int repeated(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		    socklen_t len)
{
	int r = (int)BS_NEG(bs_real_connect(fd, addr, len));
	if (r == 0 || r == -EISCONN) {
		bs_nb_outcome(cfg, fd, 0, 0);
	} else if (r != -EALREADY && r != -EINPROGRESS && r != -EINTR) {
		int res = bs_nb_outcome(cfg, fd, -r, 0);
		/* reconnected: say so the way the kernel says "connected";
		 * parked: still connecting */
		r = -(res == BS_NB_PARKED_NOW ? EALREADY : res ? res : EISCONN);
	}
	return r;
}

/* A connect the shim leaves alone (debug says so: "is it working?"). */
static __attribute__((noinline)) int pass_and_say(int fd, const struct sockaddr *addr,
						  socklen_t len, const char *why)
{
	int r = (int)BS_NEG(bs_real_connect(fd, addr, len));
	bs_outcome_log_passed(r != -EFAULT ? addr : NULL, len, why, 0);
	return r;
}

static int pass(int fd, const struct sockaddr *addr, socklen_t len, const char *why)
{
	if (bs_log_enabled(BS_LOG_DEBUG))
		return pass_and_say(fd, addr, len, why);
	return (int)BS_NEG(bs_real_connect(fd, addr, len));
}

/* The program leaves the connect the shim follows on fd behind: it
 * dissolves the association (connect to AF_UNSPEC), connects the socket
 * elsewhere, or shuts it down. From here the socket is the program's, and
 * the shim makes no connection on it. A parked socket's hidden refusal is
 * owed to the program, since the kernel would still hold it; a connect in
 * flight is forgotten, its outcome the kernel's to tell. Returns fd's
 * state now. */
static unsigned left_behind(int fd, unsigned st)
{
	if (!bs_fd_state_in_flight(st) || !bs_custody_here())
		return st;
	if (st == BS_FD_PARKED) {
		bs_park_end(fd);
	} else {
		bs_outcome_probe_learned(fd);
		bs_outcome_forget(fd);
	}
	return bs_fd_state(bs_fds(), fd);
}

/* A connect() on a tracked fd that leaves its connect behind. The
 * kernel's answer is then about the old connect (its refusal, EALREADY,
 * EISCONN) or the dissolution, so it goes to the program untouched and is
 * blamed on no destination; a parked socket's owed refusal answers a
 * connect elsewhere instead (below). Returns 1 with the answer in *r, 0 if
 * the call goes on as any other. */
static int leaves_behind(int fd, unsigned st, const struct sockaddr *addr, socklen_t len,
			 int *r)
{
	if (bs_addr_plausible(addr) && len >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC) {
		left_behind(fd, st);
	} else if (!bs_fd_state_in_flight(st) ||
		   atomic_load(&bs_fd_slot(bs_fds(), fd)->key) == bs_addr_key(addr, len) ||
		   left_behind(fd, st) == BS_FD_FAILED) {
		return 0;
	}
	*r = (int)BS_NEG(bs_real_connect(fd, addr, len));
	return 1;
}

static int connect_slow(int fd, const struct sockaddr *addr, socklen_t len)
{
	const struct bs_config *cfg = bs_active();
	if (!cfg) {
		bs_passing_through();
		return (int)BS_NEG(bs_real_connect(fd, addr, len));
	}
	bs_first_connect();
	unsigned st = bs_fd_state(bs_fds(), fd);
	int r;
	if (st != BS_FD_NONE && leaves_behind(fd, st, addr, len, &r))
		return r;
	st = bs_fd_state(bs_fds(), fd);
	if (st == BS_FD_PARKED) {
		/* still connecting, to the program (its retry sent if due) */
		st = bs_defer_run_fd(fd, bs_now());
		if (st == BS_FD_PARKED || st == BS_FD_CONNECTING)
			return -EALREADY;
	}
	if (st == BS_FD_FAILED) {
		/* poll() read the error away; the kernel would report
		 * ECONNABORTED. Whatever the new destination, the slot is
		 * settled here and never outlives this connect. */
		int err = bs_owed_take(fd);
		if (err)
			return -err;
		st = BS_FD_NONE;
	}
	enum bs_addr_kind kind = bs_addr_kind(addr, len);
	if (kind == BS_ADDR_UNIX && !cfg->unix_sockets)
		return pass(fd, addr, len, "unix sockets are off");
	if (kind == BS_ADDR_OTHER)
		return pass(fd, addr, len, "not an internet address");
	cfg = bs_cfg_for(cfg, addr, len);
	if (cfg->policy.kind == BS_POLICY_OFF)
		return pass(fd, addr, len, "policy off");
	uint64_t key = bs_addr_key(addr, len);
	if (st == BS_FD_CONNECTING &&
	    atomic_load(&bs_fd_slot(bs_fds(), fd)->key) == key)
		return repeated(cfg, fd, addr, len);
	if (cfg->policy.kind == BS_POLICY_RESPONSIVE)
		return bs_sock_is_stream(fd) ? bs_responsive_connect(cfg, fd, addr, len, key)
					     : (int)BS_NEG(bs_real_connect(fd, addr, len));
	return bs_engine_connect(cfg, fd, addr, len, key);
}

static __attribute__((noinline)) int do_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int saved = errno;
	return bs_ret(connect_slow(fd, addr, len), saved);
}

/* What the fresh path keeps in memory across the program's connect, for
 * its rare paths. The destination and the start are in the slot too, but
 * while the connect blocks, another thread may close the number and
 * connect a new socket on it: what this call learns is read from here. */
struct fresh_call {
	const struct sockaddr *addr;
	uint64_t key, t0;
	socklen_t len;
	int saved; /* errno as the program had it */
};

static int fd_of(struct bs_fdslot *s)
{
	return (int)(s - bs_fds()->slots);
}

/* The program's connect failed: the engine takes it from there, exactly
 * as do_connect would have. */
static __attribute__((noinline, cold)) int fresh_failed(const struct fresh_call *f,
							 struct bs_fdslot *s)
{
	int r = bs_engine_first_failed(bs_fresh_cfg_g, fd_of(s), f->addr, f->len, f->key, f->t0,
				       *bs_errno());
	return bs_ret(r, f->saved);
}

/* It connected while the table may hold its destination: if it does (it
 * failed elsewhere meanwhile), the full publication; else the slot is
 * published as on the fast path. */
static __attribute__((noinline)) int fresh_with_table(const struct fresh_call *f,
							struct bs_fdslot *s)
{
	if (bs_table_lookup(bs_tab(), f->key)) {
		struct bs_dest d = {f->key, f->addr, f->len};
		bs_outcome_connected(&d, fd_of(s), f->t0);
	} else {
		bs_fd_publish_fresh(s);
	}
	return 0;
}

/* The common case, in few instructions: an IPv4 destination the table
 * holds nothing about (it never failed, from this process or, with a
 * shared table, any other), on a socket the shim is not tracking, under
 * settings fresh_path_fits() (init.c) accepted. The slot is written before
 * the program's connect and published after it if it connected; a failure
 * goes on into the engine, which tracks the socket afresh. Across the
 * program's connect only the slot is held in a register; the rest is in f,
 * for the rare paths. The attempt's start is a clock read. */
static __attribute__((noinline)) int fresh_connect(int fd, const struct sockaddr *addr,
						     socklen_t len, struct bs_fdslot *s,
						     uint64_t key)
{
	struct fresh_call f = {addr, key, bs_now(), len, *bs_errno()};
	bs_fd_prepare_fresh(s, key, f.t0);
	if (__builtin_expect(bs_real_connect(fd, addr, len) != 0, 0))
		return fresh_failed(&f, s);
	if (__builtin_expect(bs_table_may_hold(bs_tab(), f.key), 0))
		return fresh_with_table(&f, s);
	bs_fd_publish_fresh(s);
	return 0;
}

/* Only checks and tail calls, so that no frame is set up here. */
BS_API int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct bs_fdslot *s;
	uint64_t key;
	if (!bs_fd_fresh_below(bs_fds(), fd) ||
	    !bs_fd_fresh_ready(s = bs_fd_slot_at(bs_fds(), fd)) ||
	    !(key = bs_addr_v4_key(addr, len)) || bs_table_may_hold(bs_tab(), key))
		return do_connect(fd, addr, len);
	return fresh_connect(fd, addr, len, s, key);
}

BS_API int shutdown(int fd, int how)
{
	unsigned st = bs_fd_state(bs_fds(), fd);
	if (__builtin_expect(bs_fd_state_in_flight(st), 0)) {
		int saved = errno;
		left_behind(fd, st);
		errno = saved;
	}
	return bs_real_shutdown(fd, how);
}

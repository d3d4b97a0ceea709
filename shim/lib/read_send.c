/*
 * read_send: the read side (read, readv, recv, recvfrom, recvmsg and their
 * _FORTIFY_SOURCE variants) and the send side (write, writev, send, sendto,
 * sendmsg). An fd the shim does not watch costs one load. A watched fd:
 *  - connecting (non-blocking): the call may be where the program learns
 *    the outcome;
 *  - on probation: the first byte proves the destination healthy; EOF or a
 *    reset before it counts as a failure. To a destination the table holds
 *    no entry for (the common case), the first byte only moves the slot to
 *    healthy (bs_fd_first_byte) and a send that went through changes
 *    nothing: EOF, a reset and a send error take the full path;
 *  - send errors (EPIPE, ECONNRESET, ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH)
 *    on a TCP socket record a failure so the next reconnect is paced. Data
 *    is never resent. A datagram socket's errors are returned as they are
 *    and never touch a destination's state.
 * sendmmsg, recvmmsg, splice and sendfile are not followed, but a parked
 * socket's kernel connect was aborted: the kernel would answer them as for
 * an unconnected socket (EPIPE with SIGPIPE, ENOTCONN). On a parked socket
 * they say what a connecting one says (EAGAIN), or its owed refusal.
 */
#include "addr.h"
#include "attempt.h"
#include "clock.h"
#include "defer.h"
#include "nonblock.h"
#include "outcome.h"
#include "real.h"
#include "role.h"
#include "ret.h"
#include "shared.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <fcntl.h>

enum op_kind { OP_WRITE, OP_WRITEV, OP_SEND, OP_SENDTO, OP_SENDMSG,
	       OP_READ, OP_READV, OP_RECV, OP_RECVFROM, OP_RECVMSG };

struct op { /* a call, so that it can be made again */
	enum op_kind kind;
	int fd, flags, cnt;
	const void *buf; /* (the read side's is writable) */
	size_t n;
	const struct iovec *iov;
	const struct msghdr *msg;
	const struct sockaddr *addr;
	socklen_t alen, *ralen;
};

static ssize_t redo_libc(const struct op *o)
{
	switch (o->kind) {
	case OP_WRITE: return bs_real_write(o->fd, o->buf, o->n);
	case OP_WRITEV: return bs_real_writev(o->fd, o->iov, o->cnt);
	case OP_SEND: return bs_real_send(o->fd, o->buf, o->n, o->flags);
	case OP_SENDTO: return bs_real_sendto(o->fd, o->buf, o->n, o->flags, o->addr, o->alen);
	case OP_SENDMSG: return bs_real_sendmsg(o->fd, o->msg, o->flags);
	case OP_READ: return bs_real_read(o->fd, (void *)o->buf, o->n);
	case OP_READV: return bs_real_readv(o->fd, o->iov, o->cnt);
	case OP_RECV: return bs_real_recv(o->fd, (void *)o->buf, o->n, o->flags);
	case OP_RECVFROM:
		return bs_real_recvfrom(o->fd, (void *)o->buf, o->n, o->flags,
					(struct sockaddr *)o->addr, o->ralen);
	case OP_RECVMSG: return bs_real_recvmsg(o->fd, (struct msghdr *)o->msg, o->flags);
	}
	return -1;
}

/* The call itself: what it returns, or -errno. */
static ssize_t redo(const struct op *o)
{
	return BS_NEG(redo_libc(o));
}

/* The read side's failures that end a connection (with EOF: closed early). */
static int read_reset(int err)
{
	return err == ECONNRESET || err == ETIMEDOUT || err == EPIPE || err == ECONNREFUSED;
}

/* After a read-side call on a connecting or probation fd (r: what it
 * returned, or -errno): report what the call showed (outcome.c decides
 * what follows). */
static ssize_t read_done(int fd, unsigned st, ssize_t r)
{
	int err = r < 0 ? (int)-r : 0;
	const struct bs_config *cfg = bs_active();
	if (!cfg || !bs_fd_slot(bs_fds(), fd))
		return r;
	if (st == BS_FD_CONNECTING) {
		if (r >= 0)
			bs_nb_outcome(cfg, fd, 0, 0);
		else if (err != EAGAIN && err != EINTR && bs_config_retries(cfg, err)) {
			int res = bs_nb_outcome(cfg, fd, err, 0);
			/* reconnected or parked: still connecting, nothing yet */
			return -(res > 0 ? res : EAGAIN);
		}
		if (r <= 0)
			return r;
	}
	if (r > 0 && bs_outcome_first_byte_calm(fd))
		return r; /* nothing to publish: the fast track's move */
	if (!bs_sock_is_stream(fd)) {
		/* datagrams (and SEQPACKET) never touch a destination's state */
		bs_outcome_forget(fd);
		return r;
	}
	struct sockaddr_storage ss;
	struct bs_dest d = bs_fd_dest(fd, &ss);
	if (d.addr)
		cfg = bs_cfg_for(cfg, d.addr, d.len);
	if (r > 0)
		bs_outcome_first_byte(cfg, fd, &d);
	else if (r == 0 || read_reset(err))
		bs_outcome_closed_early(cfg, fd, &d, r == 0 ? 0 : err);
	else
		bs_outcome_lived(cfg, fd, d.key);
	return r;
}

/* What a send-side call on a connected fd (state st) showed (r: what it
 * returned, or -errno): on probation, a send that went through may prove
 * it healthy (healthy_after); a send error may be a failure (outcome.c). */
static ssize_t send_seen(const struct bs_config *cfg, int fd, unsigned st, ssize_t r)
{
	if (r >= 0) {
		if (st == BS_FD_PROBATION)
			bs_outcome_sent(cfg, fd);
	} else if (read_reset((int)-r) || r == -EHOSTUNREACH) {
		bs_outcome_send_error(cfg, fd, (int)-r);
	}
	return r;
}

/* After a send-side call that failed, or on a connecting/probation fd
 * (r: what it returned, or -errno). */
static ssize_t send_done(const struct op *o, unsigned st, ssize_t r)
{
	int err = r < 0 ? (int)-r : 0;
	const struct bs_config *cfg = bs_active();
	if (!cfg || !bs_fd_slot(bs_fds(), o->fd))
		return r;
	if (st == BS_FD_CONNECTING) {
		if (r >= 0) {
			bs_nb_outcome(cfg, o->fd, 0, 0);
			return r;
		}
		if (err == EAGAIN || err == EINTR || !bs_config_retries(cfg, err))
			return r;
		if ((err = bs_nb_outcome(cfg, o->fd, err, 0)) != 0) /* parked: not yet */
			return -(err == BS_NB_PARKED_NOW ? EAGAIN : err);
		return redo(o); /* now connected: nothing was ever sent */
	}
	return send_seen(cfg, o->fd, st, r);
}

/* ---- the read side ---- */

/* The shim read a failed connect's error away (poll): the program's next
 * call on that socket gets it, as the kernel would have given it, unless
 * the number now names something else: then the call goes through. */
static ssize_t owed_or_redo(const struct op *o)
{
	int err = bs_owed_take(o->fd);
	return err ? -err : redo(o);
}

/* A parked socket (defer mode) is still connecting to the program: its
 * retry is sent if due, and the call says "nothing yet", unless the
 * parking just ended (its error is then owed), or the shim does not hold
 * the socket (custody.h): then the call goes through. */
static ssize_t parked(const struct op *o)
{
	unsigned st = bs_defer_run_fd(o->fd, bs_now());
	if (st == BS_FD_NONE)
		return redo(o);
	int err = st == BS_FD_FAILED ? bs_owed_take(o->fd) : 0;
	return err ? -err : -EAGAIN;
}

/* A read-side call on an fd the shim watches (out of line: see WATCHED). */
static __attribute__((noinline)) ssize_t read_watched(const struct op *o)
{
	unsigned st = bs_fd_state(bs_fds(), o->fd);
	if (st == BS_FD_FAILED)
		return owed_or_redo(o);
	if (st == BS_FD_PARKED)
		return parked(o);
	if (st != BS_FD_CONNECTING && st != BS_FD_PROBATION)
		return redo(o);
	return read_done(o->fd, st, redo(o));
}

static inline int unwatched(int fd)
{
	return __builtin_expect(bs_fd_state(bs_fds(), fd) == BS_FD_NONE, 1);
}

/* ---- the fast track: on probation, to a destination with no entry ---- */

/* (fd is watched, so in the table's range) */
static inline int fresh(int fd)
{
	return bs_fd_fresh_probation(bs_fd_slot_at(bs_fds(), fd), bs_tab());
}

/* The rest of the read side's look, when the fast track's call showed
 * more than data (r: what it returned; errno as libc left it). */
static __attribute__((noinline, cold)) ssize_t read_fresh_rest(int fd, ssize_t r)
{
	int saved = errno;
	return bs_ret_long(read_done(fd, BS_FD_PROBATION, r < 0 ? -saved : r), saved);
}

/* A read-side call on the fast track returned r. Data on a stream: the
 * slot says healthy, nothing else. An error that is no reset (EAGAIN,
 * EINTR): nothing (whether it lived healthy_after matters only to a
 * destination with an entry, and EOF, a reset and close still ask). EOF,
 * a reset, a datagram's or an unknown type's data: the full path. */
static inline ssize_t read_fresh(int fd, ssize_t r)
{
	if (r > 0 ? bs_fd_first_byte(bs_fd_slot_at(bs_fds(), fd))
		  : r < 0 && !read_reset(errno))
		return r;
	return read_fresh_rest(fd, r);
}

/* The send side's call on the fast track failed (errno as libc set it). */
static __attribute__((noinline, cold)) ssize_t send_fresh_failed(int fd)
{
	int err = errno;
	const struct bs_config *cfg = bs_active();
	return bs_ret_long(cfg ? send_seen(cfg, fd, BS_FD_PROBATION, -err) : -err, err);
}

/* A send-side call on the fast track returned r: through, nothing to say
 * (the healthy_after test waits for EOF, a reset or the close, which make
 * it anyway); failed: the full path's look at the error. */
static inline ssize_t send_fresh(int fd, ssize_t r)
{
	return r >= 0 ? r : send_fresh_failed(fd);
}

/* Each wrapper is "unwatched? then libc's call" and otherwise a call to
 * its out-of-line watched_NAME, with the same arguments: both are tail
 * calls that leave the argument registers as they came, so an unwatched
 * fd costs the check and one indirect jump (docs/performance.md). A
 * watched fd on the fast track (fresh) costs the check of its state and
 * key, libc's call, and a look at what it returned (read_fresh,
 * send_fresh); any other goes the full way (full_NAME, side_watched),
 * whose frame the fast track does without. */
#define WATCHED(side, name, params, args, ...)                            \
	static __attribute__((noinline)) ssize_t full_##name params       \
	{                                                                 \
		int saved = errno;                                        \
		struct op o = {__VA_ARGS__};                              \
		return bs_ret_long(side##_watched(&o), saved);            \
	}                                                                 \
	static __attribute__((noinline)) ssize_t watched_##name params    \
	{                                                                 \
		if (!fresh(fd))                                           \
			return full_##name args;                          \
		return side##_fresh(fd, bs_real_##name args);             \
	}
#define FAST(name, args)                                                  \
	if (unwatched(fd))                                                \
		return bs_real_##name args;                               \
	return watched_##name args

WATCHED(read, read, (int fd, void *b, size_t n), (fd, b, n), .kind = OP_READ, .fd = fd,
	.buf = b, .n = n)
WATCHED(read, readv, (int fd, const struct iovec *v, int c), (fd, v, c), .kind = OP_READV,
	.fd = fd, .iov = v, .cnt = c)
WATCHED(read, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f), .kind = OP_RECV,
	.fd = fd, .buf = b, .n = n, .flags = f)
WATCHED(read, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *al),
	(fd, b, n, f, a, al), .kind = OP_RECVFROM, .fd = fd, .buf = b, .n = n, .flags = f,
	.addr = a, .ralen = al)
WATCHED(read, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f), .kind = OP_RECVMSG,
	.fd = fd, .msg = m, .flags = f)

BS_API ssize_t read(int fd, void *b, size_t n) { FAST(read, (fd, b, n)); }
BS_API ssize_t readv(int fd, const struct iovec *v, int c) { FAST(readv, (fd, v, c)); }
BS_API ssize_t recv(int fd, void *b, size_t n, int f) { FAST(recv, (fd, b, n, f)); }
BS_API ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *al)
{
	FAST(recvfrom, (fd, b, n, f, a, al));
}
BS_API ssize_t recvmsg(int fd, struct msghdr *m, int f) { FAST(recvmsg, (fd, m, f)); }

/* _FORTIFY_SOURCE builds call these instead; a failed size check ends the
 * program exactly as libc's own would. */
BS_API ssize_t __read_chk(int fd, void *b, size_t n, size_t bl)
{
	if (n > bl)
		__chk_fail();
	FAST(read, (fd, b, n));
}
BS_API ssize_t __recv_chk(int fd, void *b, size_t n, size_t bl, int f)
{
	if (n > bl)
		__chk_fail();
	FAST(recv, (fd, b, n, f));
}
BS_API ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t bl, int f, struct sockaddr *a,
			      socklen_t *al)
{
	if (n > bl)
		__chk_fail();
	FAST(recvfrom, (fd, b, n, f, a, al));
}

/* ---- TCP Fast Open ---- */

/* sendto(MSG_FASTOPEN) to addr, a connect and a send in one call, paced as
 * a connect() to addr would be: a blocking socket waits until the
 * destination is due; a non-blocking one never waits and fails at once
 * inside the backoff window (it cannot be parked: its data is part of the
 * call), unless its mode is off. Returns the bytes sent or -errno. */
static __attribute__((noinline)) ssize_t fastopen(const struct bs_config *cfg, int fd,
						 const void *buf, size_t n, int flags,
						 const struct sockaddr *addr, socklen_t len)
{
	uint64_t key = bs_addr_key(addr, len), now = bs_now();
	cfg = bs_cfg_for(cfg, addr, len);
	if (cfg->policy.kind == BS_POLICY_OFF)
		return BS_NEG(bs_real_sendto(fd, buf, n, flags, addr, len));
	struct bs_entry *e = key ? bs_table_find(bs_tab(), key) : NULL;
	if (e)
		bs_shared_forget_stale(cfg, e);
	struct bs_dest d = {key, addr, len};
	if (e && !bs_state_may_attempt(atomic_load(&e->state))) {
		int nb = bs_sock_has_flag(fd, O_NONBLOCK);
		if (nb && bs_nb_mode(cfg) != BS_NB_OFF &&
		    bs_attempt_no_wait(atomic_load(&e->state), 0, 0, now) == BS_NW_WINDOW)
			return -bs_nb_last_err(key); /* a non-blocking call never waits */
		int r = nb ? 0 : bs_nb_wait_due(cfg, fd, &d, now);
		if (r < 0)
			return r;
	}
	now = bs_now();
	ssize_t r = BS_NEG(bs_real_sendto(fd, buf, n, flags, addr, len));
	if (key) {
		if (r >= 0)
			bs_outcome_connected(&d, fd, now);
		else if (r == -EINPROGRESS)
			bs_outcome_started(cfg, fd, addr, len, key, now);
		else if (bs_config_retries(cfg, (int)-r) && !bs_sock_error_is_final(fd, addr, (int)-r))
			bs_outcome_failed_later(cfg, &d, now, (int)-r, UINT64_MAX);
	}
	return r;
}

/* ---- the send side ---- */

/* A send-side call on an fd the shim watches (out of line: see WATCHED). */
static __attribute__((noinline)) ssize_t send_watched(const struct op *o)
{
	unsigned st = bs_fd_state(bs_fds(), o->fd);
	if (st == BS_FD_NONE)
		return redo(o);
	if (st == BS_FD_FAILED)
		return owed_or_redo(o);
	if (st == BS_FD_PARKED)
		return parked(o);
	ssize_t r = redo(o);
	if (r >= 0 && st == BS_FD_HEALTHY)
		return r;
	return send_done(o, st, r);
}

WATCHED(send, write, (int fd, const void *b, size_t n), (fd, b, n), .kind = OP_WRITE, .fd = fd,
	.buf = b, .n = n)
WATCHED(send, writev, (int fd, const struct iovec *v, int c), (fd, v, c), .kind = OP_WRITEV,
	.fd = fd, .iov = v, .cnt = c)
WATCHED(send, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f), .kind = OP_SEND,
	.fd = fd, .buf = b, .n = n, .flags = f)
WATCHED(send, sendto, (int fd, const void *b, size_t n, int f, const struct sockaddr *a,
		       socklen_t al),
	(fd, b, n, f, a, al), .kind = OP_SENDTO, .fd = fd, .buf = b, .n = n, .flags = f,
	.addr = a, .alen = al)
WATCHED(send, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f), .kind = OP_SENDMSG,
	.fd = fd, .msg = m, .flags = f)

BS_API ssize_t write(int fd, const void *b, size_t n) { FAST(write, (fd, b, n)); }
BS_API ssize_t writev(int fd, const struct iovec *v, int c) { FAST(writev, (fd, v, c)); }
BS_API ssize_t send(int fd, const void *b, size_t n, int f) { FAST(send, (fd, b, n, f)); }
BS_API ssize_t sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a,
		      socklen_t al)
{
	const struct bs_config *cfg;
	if ((f & MSG_FASTOPEN) && a && (cfg = bs_active()) &&
	    bs_addr_kind(a, al) == BS_ADDR_INET) {
		int saved = errno;
		return bs_ret_long(fastopen(cfg, fd, b, n, f, a, al), saved);
	}
	FAST(sendto, (fd, b, n, f, a, al));
}
BS_API ssize_t sendmsg(int fd, const struct msghdr *m, int f) { FAST(sendmsg, (fd, m, f)); }

/* ---- calls the shim does not follow ---- */

/* What a call not followed gets on fd: 0 to go to the kernel, else -errno
 * (a parked socket: still connecting; its parking just ended or its error
 * was read away: the owed error). */
static __attribute__((noinline)) int unfollowed_watched(int fd)
{
	unsigned st = bs_fd_state(bs_fds(), fd);
	if (st == BS_FD_PARKED && (st = bs_defer_run_fd(fd, bs_now())) == BS_FD_PARKED)
		return -EAGAIN;
	return st == BS_FD_FAILED ? -bs_owed_take(fd) : 0;
}

static inline int unfollowed(int fd)
{
	return unwatched(fd) ? 0 : unfollowed_watched(fd);
}

/* The same for a call on descriptors a and b (the same for one): with
 * two, both must be open, as the kernel checks that first (EBADF). */
static int unfollowed_pair(int a, int b)
{
	if (b == a || (unwatched(a) && unwatched(b)))
		return unfollowed(a);
	if (BS_SYS(SYS_fcntl, a, F_GETFD) < 0 || BS_SYS(SYS_fcntl, b, F_GETFD) < 0)
		return 0;
	int r = unfollowed(a);
	return r ? r : unfollowed(b);
}

#define UNFOLLOWED(fd1, fd2, name, args)                             \
	int r_ = unfollowed_pair(fd1, fd2);                               \
	if (r_) {                                                         \
		errno = -r_;                                              \
		return -1;                                                \
	}                                                                 \
	return bs_real_##name args

BS_API int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int fl)
{
	UNFOLLOWED(fd, fd, sendmmsg, (fd, v, n, fl));
}

BS_API int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int fl, struct timespec *ts)
{
	UNFOLLOWED(fd, fd, recvmmsg, (fd, v, n, fl, ts));
}

BS_API ssize_t splice(int in, loff_t *oin, int out, loff_t *oout, size_t n, unsigned fl)
{
	UNFOLLOWED(in, out, splice, (in, oin, out, oout, n, fl));
}

BS_API ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	UNFOLLOWED(out, in, sendfile, (out, in, off, n));
}

BS_API ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	UNFOLLOWED(out, in, sendfile64, (out, in, off, n));
}

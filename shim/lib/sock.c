/* sock: socket-level mechanics of a retry. See sock.h for the kernel facts. */
#include "sock.h"

#include "addr.h"
#include "attempt.h"
#include "budget.h"
#include "clock.h"
#include "real.h"
#include "ret.h"
#include "timeout.h"

#include <errno.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <time.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw syscalls: the shim's own socket calls must never land in a wrapper.
 * 0 or -errno. */
static int sys_getsockopt(int fd, int lvl, int opt, void *v, socklen_t *l)
{
	return (int)BS_SYS(SYS_getsockopt, fd, lvl, opt, v, l);
}

/* fd's SO_COOKIE into *cookie: 0, or -errno of the query. */
static int cookie_of(int fd, uint64_t *cookie)
{
	uint64_t c = 0;
	socklen_t l = sizeof c;
	int r = sys_getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &l);
	if (r || l != sizeof c || !c)
		return r ? r : -ENOTSOCK;
	*cookie = c;
	return 0;
}

/* An int option of fd at SOL_SOCKET, or -errno. */
static int sol_int(int fd, int opt)
{
	int v = 0;
	socklen_t l = sizeof v;
	int r = sys_getsockopt(fd, SOL_SOCKET, opt, &v, &l);
	return r ? r : v;
}

int bs_sock_is_stream(int fd)
{
	return sol_int(fd, SO_TYPE) == SOCK_STREAM;
}

/* fcntl(F_GETFL): the flags, or -errno. */
static long get_fl(int fd)
{
	return BS_SYS(SYS_fcntl, fd, F_GETFL);
}

int bs_sock_has_flag(int fd, int flag)
{
	long fl = get_fl(fd);
	return fl >= 0 && (fl & flag);
}

int bs_sock_has_failed(int fd)
{
	struct pollfd p = {fd, 0, 0};
	struct timespec zero = {0, 0};
	return BS_SYS(SYS_ppoll, &p, 1, &zero, NULL, 0) == 1 && (p.revents & POLLERR);
}

int bs_sock_is_open(int fd)
{
	return BS_SYS(SYS_fcntl, fd, F_GETFD) >= 0;
}

int bs_sock_is_listening(int fd)
{
	return sol_int(fd, SO_ACCEPTCONN) > 0;
}

int bs_sock_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = {.events = events, .data.u64 = data};
	return (int)BS_SYS(SYS_epoll_ctl, epfd, op, fd, &ev);
}

int bs_sock_is_blocking_stream(int fd)
{
	if (!bs_sock_is_stream(fd))
		return 0;
	long fl = get_fl(fd);
	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* A socket's state as TCP's states name it: tcp_info's for TCP; for
 * another stream socket (AF_UNIX), connected (TCP_ESTABLISHED) or
 * listening (TCP_LISTEN), else not known (-1). */
static int stream_state(int fd)
{
	uint8_t state; /* (tcp_info's first byte) */
	socklen_t l = sizeof state;
	if (!sys_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &state, &l))
		return state;
	enum { ESTABLISHED = 1, LISTEN = 10 }; /* (the kernel's TCP_ESTABLISHED, TCP_LISTEN) */
	return bs_sock_has_peer(fd) ? ESTABLISHED : bs_sock_is_listening(fd) ? LISTEN : -1;
}

int bs_sock_answers_at_once(int fd, const struct sockaddr *addr)
{
	return addr && bs_addr_answered_at_once(addr, sol_int(fd, SO_DOMAIN), stream_state(fd));
}

int bs_sock_take_error(int fd)
{
	return sol_int(fd, SO_ERROR);
}

int bs_sock_has_peer(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	return BS_SYS(SYS_getpeername, fd, &ss, &l) == 0;
}

int bs_sock_peer_is(int fd, uint64_t key)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	long r = BS_SYS(SYS_getpeername, fd, &ss, &l);
	if (r == 0)
		return bs_addr_key((struct sockaddr *)&ss, l) == key;
	/* a reset socket has no peer any more (ENOTCONN); a file or pipe that
	 * took the number over says ENOTSOCK */
	return r == -ENOTCONN;
}

/* net.ipv4.tcp_syn_retries, read once (bs_timeout_syn_retries). */
static int host_syn_retries(void)
{
	static _Atomic int known;
	int v = atomic_load_explicit(&known, memory_order_relaxed);
	if (v)
		return v;
	char buf[16];
	long n = -1;
	int fd = (int)BS_SYS(SYS_openat, AT_FDCWD, "/proc/sys/net/ipv4/tcp_syn_retries",
			     O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = BS_SYS(SYS_read, fd, buf, sizeof buf - 1);
		BS_SYS(SYS_close, fd);
	}
	v = bs_timeout_syn_retries(buf, n);
	atomic_store_explicit(&known, v, memory_order_relaxed);
	return v;
}

static int int_option(void *fd, int level, int name)
{
	int v = 0;
	socklen_t l = sizeof v;
	return sys_getsockopt((int)(intptr_t)fd, level, name, &v, &l) ? 0 : v;
}

int bs_sock_error_is_final(int fd, const struct sockaddr *addr, int err)
{
	/* (a connected or listening socket's refusal: no retry connects it) */
	return bs_attempt_error_is_final(err, addr, int_option, (void *)(intptr_t)fd,
					 host_syn_retries) ||
	       bs_sock_answers_at_once(fd, addr);
}

uint64_t bs_sock_sndtimeo_ns(int fd)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof tv;
	return sys_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) ? BS_BUDGET_NO_TIMEOUT
								     : bs_timeout_sndtimeo(&tv);
}

void bs_sock_abort(int fd)
{
	struct sockaddr sa = {.sa_family = AF_UNSPEC};
	BS_SYS(SYS_connect, fd, &sa, sizeof sa);
	bs_sock_take_error(fd);
}

void bs_sock_as_refused(int fd)
{
	BS_SYS(SYS_shutdown, fd, SHUT_RDWR);
}

/* Start a connect without blocking (0 or -errno), O_NONBLOCK and the
 * signal mask as sock.h says. The raw syscall is no cancellation point, so
 * a thread is never cancelled there; the wait that follows is one. */
static int start_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	uint64_t all = ~0ull, old;
	BS_SYS(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof old);
	long fl = get_fl(fd);
	int flip = fl >= 0 && !(fl & O_NONBLOCK);
	if (flip)
		BS_SYS(SYS_fcntl, fd, F_SETFL, fl | O_NONBLOCK);
	int r = (int)BS_SYS(SYS_connect, fd, addr, len);
	if (flip)
		BS_SYS(SYS_fcntl, fd, F_SETFL, fl);
	BS_SYS(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
	return r;
}

/* Wait until fd's handshake ends or `deadline` passes: 1 when it ended,
 * 0 at the deadline, -EINTR when a signal handler ran. libc's
 * ppoll, so that pthread_cancel acts here as it would in connect(). */
static int wait_handshake(int fd, uint64_t deadline)
{
	uint64_t now = bs_now();
	if (now >= deadline)
		return 0;
	struct pollfd p = {fd, POLLOUT, 0};
	uint64_t left = deadline - now;
	struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
	int r = (int)BS_NEG(bs_real_ppoll(&p, 1, &ts, NULL));
	return r < 0 ? r : r > 0;
}

/* The outcome of a handshake in flight on fd (its socket's `cookie`), by
 * `deadline`. */
static enum bs_sock_outcome await_handshake(int fd, uint64_t cookie, uint64_t deadline,
					    int prog_cut, const struct bs_intr *intr, int *err)
{
	for (;;) {
		int w = wait_handshake(fd, deadline);
		if (bs_sock_cookie(fd) != cookie) {
			/* closed by another thread (maybe reused): the kernel
			 * finishes the attempt on a socket nobody can name */
			*err = EBADF;
			return BS_ATT_FAIL;
		}
		if (w == -EINTR) {
			/* the kernel's own connect() would decide the same way */
			if (bs_intr_returns_eintr(intr))
				return BS_ATT_EINTR;
			continue;
		}
		if (w != 0) { /* (w < 0: no wait can be made; the outcome may be in) */
			int e = bs_sock_take_error(fd); /* (a failed read: no error) */
			if (e > 0) {
				/* back to the unconnected state a failed blocking
				 * connect() leaves, so the program may connect again */
				bs_sock_abort(fd);
				*err = e;
				return BS_ATT_FAIL;
			}
			if (bs_sock_has_peer(fd))
				return BS_ATT_OK;
			if (w > 0 && bs_now() < deadline)
				continue; /* woken without an outcome yet */
		}
		/* the deadline (or a wait that cannot be made: ENOMEM, a seccomp
		 * filter's EPERM...) */
		if (bs_sock_has_peer(fd))
			return BS_ATT_OK; /* completed as the time ran out: keep it */
		if (prog_cut)
			return BS_ATT_PROG_TIMEOUT; /* left running, as the kernel does */
		bs_sock_abort(fd);
		return BS_ATT_CUT;
	}
}

/* A full AF_UNIX listen queue: a blocking connect() waits in the kernel's
 * queue, bounded only by the program's SO_SNDTIMEO, as without the shim. */
static enum bs_sock_outcome unix_queue_full(int fd, const struct sockaddr *addr, socklen_t len,
				       const struct bs_intr *intr, int *err)
{
	for (;;) {
		int r = (int)BS_NEG(bs_real_connect(fd, addr, len));
		if (r == 0 || r == -EISCONN)
			return BS_ATT_OK;
		if (r == -EINTR && !bs_intr_returns_eintr(intr))
			continue;
		if (r == -EINTR)
			return BS_ATT_EINTR;
		if (r == -EAGAIN && intr->has_timeout)
			return BS_ATT_PROG_TIMEOUT; /* the program's own timeout */
		*err = -r;
		return BS_ATT_FAIL;
	}
}

enum bs_sock_outcome bs_sock_attempt(int fd, const struct sockaddr *addr, socklen_t len,
				uint64_t deadline, int prog_cut, const struct bs_intr *intr, int *err)
{
	uint64_t cookie = 0;
	int r = cookie_of(fd, &cookie);
	if (r < 0) {
		*err = -r;
		return BS_ATT_FAIL;
	}
	r = start_connect(fd, addr, len);
	if (r == -ECONNABORTED) /* a failure already consumed: afresh */
		r = start_connect(fd, addr, len);
	if (r == 0)
		return BS_ATT_OK;
	if (r == -EAGAIN && addr->sa_family == AF_UNIX)
		return unix_queue_full(fd, addr, len, intr, err);
	if (r != -EINPROGRESS && r != -EALREADY) {
		*err = -r;
		return BS_ATT_FAIL;
	}
	return await_handshake(fd, cookie, deadline, prog_cut, intr, err);
}

int bs_sock_peer_took_all(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	int unsent = -1, r = sys_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l);
	if (r)
		return r == -EOPNOTSUPP || r == -ENOPROTOOPT; /* not TCP: AF_UNIX */
	if (l < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked ||
	    BS_SYS(SYS_ioctl, fd, SIOCOUTQ, &unsent))
		return 0;
	return ti.tcpi_bytes_acked > 1 && unsent == 0 && !bs_sock_has_failed(fd);
}

int bs_sock_was_established(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) ||
	    l < offsetof(struct tcp_info, tcpi_segs_in) + sizeof ti.tcpi_segs_in)
		return 0;
	return ti.tcpi_segs_in >= 2;
}

uint64_t bs_sock_cookie(int fd)
{
	uint64_t c;
	return cookie_of(fd, &c) == 0 ? c : 0;
}

uint32_t bs_gettid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

int bs_thread_alive(uint32_t tid)
{
	long r = BS_SYS(SYS_tgkill, getpid(), (pid_t)tid, 0);
	return r == 0 || r == -EPERM;
}

/* sock: socket-level mechanics of a retry. See sock.h for the kernel facts. */
#include "sock.h"
#include "clock.h"
#include "real.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <poll.h>
#include <time.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw syscalls: the shim's own socket calls must never land in a wrapper. */
static int sys_getsockopt(int fd, int lvl, int opt, void *v, socklen_t *l)
{
	return (int)syscall(SYS_getsockopt, fd, lvl, opt, v, l);
}

int bs_sock_is_stream(int fd)
{
	int type = 0;
	socklen_t l = sizeof type;
	return sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_STREAM;
}

int bs_sock_is_blocking_stream(int fd)
{
	int type = 0;
	socklen_t l = sizeof type;
	if (sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) || type != SOCK_STREAM)
		return 0;
	long fl = syscall(SYS_fcntl, fd, F_GETFL);
	return fl >= 0 && !(fl & O_NONBLOCK);
}

int bs_sock_sndtimeo(int fd, struct timeval *tv)
{
	socklen_t l = sizeof *tv;
	memset(tv, 0, sizeof *tv);
	if (sys_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, tv, &l))
		return 0;
	return tv->tv_sec || tv->tv_usec;
}

/* Abort a handshake left running by a timed-out connect, and read away the
 * ECONNRESET that the abort leaves pending. */
void bs_sock_abort(int fd)
{
	struct sockaddr sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_family = AF_UNSPEC;
	syscall(SYS_connect, fd, &sa, sizeof sa);
	int e;
	socklen_t l = sizeof e;
	sys_getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
}

/* Is fd connected (a peer to name)? */
static int handshake_done(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof ss;
	return syscall(SYS_getpeername, fd, &ss, &l) == 0;
}

/* Start a connect without blocking while leaving the socket as the program
 * set it: O_NONBLOCK is on only for the one connect() call, with every
 * signal blocked in this thread, so no handler (and no longjmp out of one)
 * can ever see the socket in a state the program did not choose. */
static int start_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	uint64_t all = ~0ull, old;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, sizeof old);
	long fl = syscall(SYS_fcntl, fd, F_GETFL);
	int flip = fl >= 0 && !(fl & O_NONBLOCK);
	if (flip)
		syscall(SYS_fcntl, fd, F_SETFL, fl | O_NONBLOCK);
	int r = bs_real_connect(fd, addr, len), e = errno;
	if (flip)
		syscall(SYS_fcntl, fd, F_SETFL, fl);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
	errno = e;
	return r;
}

/* Wait until fd's handshake ends or `deadline` passes: 1 when it ended,
 * 0 at the deadline, -1 with errno EINTR when a signal handler ran. */
static int wait_handshake(int fd, uint64_t deadline)
{
	uint64_t now = bs_now();
	if (now >= deadline)
		return 0;
	struct pollfd p = {fd, POLLOUT, 0};
	uint64_t left = deadline - now;
	struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
	long r = syscall(SYS_ppoll, &p, 1, &ts, NULL, 8);
	return r < 0 ? -1 : r > 0;
}

enum bs_attempt bs_sock_attempt(int fd, const struct sockaddr *addr, socklen_t len,
				uint64_t deadline, int prog_cut, int prog_has_tv, int *err)
{
	int r = start_connect(fd, addr, len);
	if (r < 0 && errno == ECONNABORTED) /* a failure already consumed: afresh */
		r = start_connect(fd, addr, len);
	if (r == 0 || errno == EISCONN)
		return BS_ATT_OK;
	if (errno != EINPROGRESS && errno != EALREADY) {
		*err = errno;
		return BS_ATT_FAIL;
	}
	for (;;) {
		int w = wait_handshake(fd, deadline);
		if (w < 0 && errno != EINTR)
			w = 0; /* cannot wait (ENOMEM...): treat as the deadline */
		if (w < 0) {
			/* the kernel's own connect() would decide the same way */
			if (bs_intr_returns_eintr(prog_has_tv))
				return BS_ATT_EINTR;
			continue;
		}
		if (w > 0) {
			int e = 0;
			socklen_t l = sizeof e;
			sys_getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
			if (e == 0 && handshake_done(fd))
				return BS_ATT_OK;
			if (e == 0)
				continue; /* woken without an outcome yet */
			/* back to the unconnected state a failed blocking
			 * connect() leaves, so the program may connect again */
			bs_sock_abort(fd);
			*err = e;
			return BS_ATT_FAIL;
		}
		if (handshake_done(fd))
			return BS_ATT_OK; /* completed as the time ran out: keep it */
		if (prog_cut)
			return BS_ATT_PROG_TIMEOUT; /* left running, as the kernel does */
		bs_sock_abort(fd);
		return BS_ATT_CUT;
	}
}

int bs_sock_peer_took_all(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof ti;
	int unsent = -1, err = -1;
	socklen_t el = sizeof err;
	if (sys_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) ||
	    l < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked ||
	    syscall(SYS_ioctl, fd, SIOCOUTQ, &unsent) || sys_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el))
		return 0;
	/* bytes_acked counts the SYN as 1: more means data of ours was acked */
	return ti.tcpi_bytes_acked > 1 && unsent == 0 && err == 0;
}

int bs_sock_ident(int fd, struct bs_sock_ident *id)
{
	struct stat st;
	if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISSOCK(st.st_mode))
		return 0;
	id->dev = (uint64_t)st.st_dev;
	id->ino = (uint64_t)st.st_ino;
	return 1;
}

uint32_t bs_gettid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

int bs_thread_alive(uint32_t tid)
{
	int saved = errno;
	long r = syscall(SYS_tgkill, getpid(), (pid_t)tid, 0);
	int alive = r == 0 || errno == EPERM;
	errno = saved;
	return alive;
}

/* sock: socket-level mechanics of a retry. See sock.h for the kernel facts. */
#include "sock.h"
#include "clock.h"
#include "real.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw syscalls: the shim's own socket calls must never land in a wrapper. */
static int sys_getsockopt(int fd, int lvl, int opt, void *v, socklen_t *l)
{
	return (int)syscall(SYS_getsockopt, fd, lvl, opt, v, l);
}

static int sys_setsockopt(int fd, int lvl, int opt, const void *v, socklen_t l)
{
	return (int)syscall(SYS_setsockopt, fd, lvl, opt, v, l);
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

static void set_timeout(int fd, uint64_t ns)
{
	struct timeval tv;
	if (ns < 1000)
		ns = 1000; /* a zero timeval would mean "forever" */
	tv.tv_sec = (time_t)(ns / 1000000000ull);
	tv.tv_usec = (suseconds_t)(ns % 1000000000ull / 1000);
	sys_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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

enum bs_attempt bs_sock_attempt(int fd, const struct sockaddr *addr, socklen_t len,
				uint64_t deadline, int prog_cut,
				const struct timeval *prog_tv, int prog_has_tv,
				int *err)
{
	enum bs_attempt res;
	int aborted_once = 0;
	for (;;) {
		uint64_t now = bs_now();
		set_timeout(fd, deadline > now ? deadline - now : 0);
		int r = bs_real_connect(fd, addr, len);
		int e = errno;
		if (r == 0 || e == EISCONN) {
			res = BS_ATT_OK;
			break;
		}
		if (e == EINPROGRESS || e == EALREADY) {
			if (bs_now() < deadline)
				continue; /* woke early; keep waiting on the handshake */
			if (handshake_done(fd)) {
				/* it completed as the time ran out (a SYN
				 * retransmitted right at the deadline): keep it */
				res = BS_ATT_OK;
				break;
			}
			if (prog_cut) {
				res = BS_ATT_PROG_TIMEOUT;
				break;
			}
			bs_sock_abort(fd);
			res = BS_ATT_CUT;
			break;
		}
		if (e == EINTR) {
			/* With a timeout set the kernel never restarts connect();
			 * decide as the program's own connect would have. */
			if (bs_intr_returns_eintr(prog_has_tv)) {
				res = BS_ATT_EINTR;
				break;
			}
			continue; /* SA_RESTART: resume waiting on the handshake */
		}
		if (e == ECONNABORTED && !aborted_once) {
			aborted_once = 1; /* failure already consumed: try afresh */
			continue;
		}
		*err = e;
		res = BS_ATT_FAIL;
		break;
	}
	sys_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, prog_tv, sizeof *prog_tv);
	return res;
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

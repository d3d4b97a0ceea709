/* guard: see guard.h. */
#include "guard.h"

#include "proc.h"
#include "scm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define HELD_MAX 1024

struct msg {
	uint64_t id;   /* a socket's, or (WATCH) the program's pid */
	uint32_t hold; /* 1: hold (with the socket), 0: let go, WATCH */
};

enum { WATCH = 2, WATCH_END = 3, WATCH_EVERY_MS = 50 };

/* The supervisor stops with the program: while it is stopped and the
 * program runs again (or is gone), continue it (after a shell's fg it runs
 * already). Until it says it runs on: a message, WATCH_END or another. */
static void watch_stop(int sock, pid_t program)
{
	static pid_t supervisor;
	if (!supervisor)
		supervisor = getppid(); /* (the guard's first parent; a later one,
					 * once it is gone, is not to be woken) */
	struct pollfd p = {sock, POLLIN, 0};
	while (poll(&p, 1, WATCH_EVERY_MS) == 0 || (p.revents & POLLIN) == 0) {
		if (getppid() == supervisor && bs_proc_stopped(supervisor) &&
		    !bs_proc_stopped(program))
			kill(supervisor, SIGCONT);
		if (p.revents & (POLLHUP | POLLERR))
			return;
	}
}

static void guard_main(int sock)
{
	static struct {
		uint64_t id;
		int fd;
	} held[HELD_MAX];
	unsigned n = 0;
	for (;;) {
		struct msg m;
		int fd;
		ssize_t got = bs_scm_recv(sock, &m, sizeof m, &fd);
		if (got <= 0)
			break; /* the supervisor is gone */
		if (got == sizeof m && m.hold == WATCH) {
			watch_stop(sock, (pid_t)m.id);
			continue;
		}
		if (got == sizeof m && m.hold && fd >= 0 && n < HELD_MAX) {
			held[n].id = m.id, held[n++].fd = fd;
			continue;
		}
		if (fd >= 0)
			close(fd);
		for (unsigned i = 0; got == sizeof m && !m.hold && i < n; i++)
			if (held[i].id == m.id) {
				close(held[i].fd);
				held[i] = held[--n];
				break;
			}
	}
	for (unsigned i = 0; i < n; i++)
		shutdown(held[i].fd, SHUT_RDWR); /* (wakes the socket's waiters) */
	_exit(0);
}

static pid_t guard_pid;

int bs_guard_start(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]), close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		for (int i = 0; i < 3 && null >= 0; i++)
			dup2(null, i);
		if (dup2(sv[1], 3) != 3)
			_exit(0);
		syscall(SYS_close_range, 4, ~0u, 0);
		prctl(PR_SET_NAME, "backoffshim-grd");
		guard_main(3);
	}
	close(sv[1]);
	guard_pid = pid;
	return sv[0];
}

/* How long the supervisor waits, at its end, for the guard to go. */
#define STOP_WAIT_MS 1000

void bs_guard_stop(int guard)
{
	if (guard < 0 || guard_pid <= 0)
		return;
	close(guard); /* its end of the pair reads EOF: it exits */
	int pidfd = (int)syscall(SYS_pidfd_open, guard_pid, 0);
	if (pidfd >= 0) {
		struct pollfd p = {pidfd, POLLIN, 0};
		while (poll(&p, 1, STOP_WAIT_MS) < 0 && errno == EINTR)
			;
		close(pidfd);
	}
	if (waitpid(guard_pid, NULL, WNOHANG) == guard_pid)
		guard_pid = 0;
}

void bs_guard_watch_stop(int guard, pid_t program)
{
	struct msg m = {(uint64_t)program, program > 0 ? WATCH : WATCH_END};
	if (guard >= 0)
		bs_scm_send(guard, &m, sizeof m, -1, MSG_DONTWAIT);
}

void bs_guard_hold(int guard, uint64_t id, int sock)
{
	struct msg m = {id, sock >= 0};
	if (guard >= 0)
		bs_scm_send(guard, &m, sizeof m, sock, MSG_DONTWAIT);
}

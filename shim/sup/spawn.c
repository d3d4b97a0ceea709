/* spawn: the seccomp engine's process shell (see sup.h): the availability
 * check, the child that installs the filter and execs the program, and
 * the parent's one event loop. */
#include "sup.h"

#include "clock.h"
#include "guard.h"
#include "proc.h"
#include "scm.h"
#include "sfilter.h"
#include "units.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* (6.6; older headers lack them) */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

enum { EV_LISTENER = 1, EV_SIGNAL = 2, EV_CHILD = 3 };

static int may_skip_no_new_privs(void)
{
	/* CAP_SYS_ADMIN lets a filter in without no_new_privs (seccomp(2)) */
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	return (d[CAP_SYS_ADMIN / 32].effective >> (CAP_SYS_ADMIN % 32)) & 1;
}

/* In the child: the filter, its listener returned (or -1, errno). */
static int install_filter(void)
{
	struct sock_filter code[BS_SFILTER_MAX];
	struct sock_fprog prog = {(unsigned short)bs_sfilter_build(code, 1), code};
	if (!may_skip_no_new_privs() && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			    &prog);
}

/* A byte the availability check reads in its child (the same address
 * there, after fork). */
static const char probe_byte = 'p';

/* The calls the engine makes on a traced process, made on `child` (which
 * holds its end of the socketpair as fd `theirs`): the first refused, as a
 * phrase with its fix, or NULL. (A Yama ptrace_scope or a container
 * profile refuses them on another process, not on oneself.) */
static const char *try_calls(pid_t child, int theirs)
{
	int pidfd = (int)syscall(SYS_pidfd_open, child, PIDFD_THREAD);
	if (pidfd < 0)
		return errno == EINVAL || errno == ENOSYS ? "pidfd_open(PIDFD_THREAD) needs Linux 6.9 or later"
				       : "pidfd_open is refused";
	int dup = (int)syscall(SYS_pidfd_getfd, pidfd, theirs, 0);
	close(pidfd);
	if (dup < 0)
		return "pidfd_getfd is refused (in a container: allow it, or add CAP_SYS_PTRACE)";
	int same = bs_proc_same_file(child, theirs, dup);
	close(dup);
	if (same != 1)
		return "kcmp is refused (in a container: allow it, or add CAP_SYS_PTRACE)";
	char byte = 0;
	if (bs_proc_read(child, (uint64_t)(uintptr_t)&probe_byte, &byte, 1) != 0 || byte != probe_byte)
		return "process_vm_readv is refused (in a container: allow it, or add CAP_SYS_PTRACE)";
	struct io_uring_params params = {0};
	int ring = (int)syscall(SYS_io_uring_setup, 1, &params);
	if (ring < 0)
		return "io_uring is refused (sysctl kernel.io_uring_disabled, or the container's profile)";
	close(ring);
	return NULL;
}

static const char *filter_refused(int err)
{
	static char text[160];
	if (err == EBUSY)
		return "another seccomp supervisor already watches this process (it retries the connects)";
	if (err == EINVAL)
		return "the kernel lacks seccomp user notification (Linux 6.9 or later is needed)";
	snprintf(text, sizeof text, "a seccomp filter cannot be installed: %s", strerror(err));
	return text;
}

const char *bs_sup_unavailable(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return "socketpair failed";
	pid_t pid = fork();
	if (pid == 0) { /* the filter, its errno told; then wait to be examined */
		close(sv[0]);
		int err = install_filter() >= 0 ? 0 : errno;
		char go;
		if (write(sv[1], &err, sizeof err) == sizeof err)
			(void)!read(sv[1], &go, 1);
		_exit(0);
	}
	close(sv[1]);
	int err = -1;
	const char *why = pid < 0 ? "fork failed" : NULL;
	if (!why && read(sv[0], &err, sizeof err) != sizeof err)
		why = "the check's child died";
	else if (!why && err)
		why = filter_refused(err);
	else if (!why)
		why = try_calls(pid, sv[1]);
	close(sv[0]); /* (the child's read ends) */
	while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return why;
}

/* A 0, 1 or 2 the program was given closed would be taken by the
 * supervisor's first descriptors, which let_go_of_stdio and the guard then
 * overwrite (the loop spun on an epoll set that was /dev/null): each is
 * held open on /dev/null until the program's exec, which finds it closed
 * as it was given. Returns the held ones, a bit each. */
static unsigned hold_closed_stdio(void)
{
	unsigned held = 0;
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) == fd)
			held |= 1u << fd;
	return held;
}

static void close_held(unsigned held)
{
	for (int fd = 0; fd < 3; fd++)
		if (held & (1u << fd))
			close(fd);
}

static void child(char **argv, int sock, pid_t parent, const sigset_t *old,
		  const struct sigaction *old_chld, unsigned held)
{
	/* the program dies with its supervisor rather than wait forever on
	 * connects no one answers (docs/seccomp-engine.md) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(125);
	int l = install_filter();
	if (l < 0) /* (the check passed a moment ago: run it as it is) */
		fprintf(stderr, "backoffshim run: warning: cannot install the seccomp filter (%s); "
				"running %s as it is\n", strerror(errno), argv[0]);
	char byte = 'L'; /* (the listener rides on a byte; the parent's go is one) */
	if (l >= 0 && (bs_scm_send(sock, &byte, 1, l, 0) != 1 || read(sock, &byte, 1) != 1))
		_exit(125);
	if (l >= 0)
		close(l);
	close(sock);
	sigaction(SIGCHLD, old_chld, NULL);
	sigprocmask(SIG_SETMASK, old, NULL);
	close_held(held);
	execvp(argv[0], argv);
	int err = errno;
	fprintf(stderr, "backoffshim run: cannot run '%s': %s\n", argv[0], strerror(err));
	_exit(err == ENOENT ? 127 : 126);
}

/* ---- the parent ---- */

struct loop {
	int ep, sigfd, pidfd, listener, guard;
	pid_t child;
	int status, signo, exited, listener_gone; /* (signo: the one that killed it) */
	struct bs_sup *sup;
};

/* Should a signal the supervisor got go to the program? A terminal's
 * signal (SI_KERNEL) reached the program's process group already, except
 * a hangup, which only a session leader gets. */
static int for_the_program(const struct signalfd_siginfo *si)
{
	if (si->ssi_code != SI_KERNEL)
		return 1;
	return si->ssi_signo == SIGHUP && getsid(0) == getpid();
}

/* Did the program send this signal to its parent (the supervisor) alone?
 * sigqueue and tgkill name one process; a kill() does too when the program
 * is in another process group. A kill(0) or killpg of the program's own
 * group reaches the supervisor as well, and must go no further. */
static int sent_to_the_parent(const struct loop *l, const struct signalfd_siginfo *si)
{
	if ((pid_t)si->ssi_pid != l->child)
		return 0;
	if (si->ssi_code == SI_QUEUE || si->ssi_code == SI_TKILL)
		return 1;
	pid_t group = getpgid(l->child);
	return group > 0 && group != getpgrp();
}

/* Stop as the program stopped for job control (Ctrl-Z, a suspend it asked
 * for itself, a read from the terminal in the background), so that the
 * shell that waits for the supervisor sees its job stop and continues the
 * group; once continued, continue the program if nothing else did. */
static void stop_like(struct loop *l, int sig)
{
	/* (the guard continues the supervisor if the program is continued
	 * alone: kill -CONT of its pid, which no shell's fg would undo) */
	bs_guard_watch_stop(l->guard, l->child);
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigaction(sig, &dfl, &old);
	raise(sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL); /* (stops here, unless an orphaned group's) */
	sigprocmask(SIG_BLOCK, &one, NULL);
	sigaction(sig, &old, NULL);
	bs_guard_watch_stop(l->guard, 0);
	if (bs_proc_stopped(l->child))
		kill(l->child, SIGCONT);
}

/* A SIGSTOP comes from a tool that continues the pid it stopped (kill,
 * cpulimit, a debugger), never the supervisor: it is not copied. */
static int is_job_stop(int sig)
{
	return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static void follow_a_stop(struct loop *l)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (!l->exited && waitid(P_PID, (id_t)l->child, &si, WSTOPPED | WNOHANG) == 0 &&
	    si.si_pid == l->child && si.si_code == CLD_STOPPED && is_job_stop(si.si_status))
		stop_like(l, si.si_status);
}

static void forward(struct loop *l)
{
	struct signalfd_siginfo si;
	while (read(l->sigfd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGCHLD) {
			follow_a_stop(l);
			continue;
		}
		if (l->exited || !for_the_program(&si))
			continue;
		if (is_job_stop((int)si.ssi_signo))
			continue; /* (the program's to take, from the group: a
				   * second one, forwarded, would stop it twice) */
		if (si.ssi_signo == SIGCONT) {
			if ((pid_t)si.ssi_pid != l->child && bs_proc_stopped(l->child))
				kill(l->child, SIGCONT); /* (one it had is not sent twice) */
		} else if (sent_to_the_parent(l, &si)) {
			if (getppid() > 1) /* (0: a container's pid 1 has no parent to tell) */
				kill(getppid(), (int)si.ssi_signo);
		} else if ((pid_t)si.ssi_pid != l->child) {
			kill(l->child, (int)si.ssi_signo);
		}
	}
}

static void reap(struct loop *l)
{
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)l->child, &si, WEXITED | WNOHANG) != 0 || si.si_pid != l->child) {
		if (errno == ECHILD) /* (reaped by someone else: no status to give) */
			l->exited = 1, l->status = 0;
		return;
	}
	l->exited = 1;
	l->signo = si.si_code == CLD_EXITED ? 0 : si.si_status;
	l->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	epoll_ctl(l->ep, EPOLL_CTL_DEL, l->pidfd, NULL);
}

static int wait_ms(struct loop *l)
{
	uint64_t due = bs_sup_next_due(l->sup), now = bs_now();
	if (due == UINT64_MAX)
		return -1;
	return due <= now ? 0 : (int)((due - now) / BS_NS_PER_MS + 1);
}

static void run_loop(struct loop *l)
{
	while (!l->exited || !l->listener_gone) {
		struct epoll_event ev[16];
		int n = epoll_wait(l->ep, ev, 16, wait_ms(l));
		for (int i = 0; i < n; i++) {
			uint64_t d = ev[i].data.u64;
			if (d == EV_SIGNAL)
				forward(l);
			else if (d == EV_CHILD)
				reap(l);
			else if (d == EV_LISTENER && (ev[i].events & EPOLLIN))
				bs_sup_on_notification(l->sup);
			else if (d == EV_LISTENER) { /* no process is under the filter */
				l->listener_gone = 1;
				epoll_ctl(l->ep, EPOLL_CTL_DEL, l->listener, NULL);
			} else
				bs_sup_on_event(l->sup, d);
		}
		bs_sup_on_time(l->sup, bs_now());
	}
}

static void watch(int ep, int fd, uint64_t data)
{
	struct epoll_event ev = {EPOLLIN, {.u64 = data}};
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* The supervisor keeps no end of the program's stdin and stdout open: a
 * writer into the program's stdin gets its SIGPIPE when the program
 * exits, and a reader of its stdout its EOF, even while a daemonised
 * grandchild keeps the supervisor alive. (stderr stays: the log's.) */
static void let_go_of_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return;
	dup2(null, 0);
	dup2(null, 1);
	if (null > 1)
		close(null);
}

/* The signals the supervisor reads: every one a process can catch but
 * SIGPIPE (its own writes'). It forwards them, but job control's, which the
 * program decides on: the supervisor stops when the program stops
 * (SIGCHLD tells) and then continues it. */
static void forwarded(sigset_t *set)
{
	sigfillset(set);
	static const int kept[] = {SIGKILL, SIGSTOP, SIGPIPE};
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
		sigdelset(set, kept[i]);
}

/* End as the program ended: a program killed by a signal makes the
 * supervisor die of the same signal (as timeout(1) does), without a core
 * file of its own; exit status 128+N only if that signal does not kill. */
static int end_like(int status, int signo)
{
	if (signo <= 0)
		return status;
	struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none);
	signal(signo, SIG_DFL);
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, signo);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	raise(signo);
	return status;
}

int bs_sup_run(char **argv, const struct bs_config *cfg)
{
	struct loop l = {.status = 125};
	unsigned held = hold_closed_stdio();
	l.ep = epoll_create1(EPOLL_CLOEXEC);
	l.sup = l.ep >= 0 ? bs_sup_open(l.ep, cfg) : NULL;
	int sv[2];
	if (!l.sup || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return close_held(held), -1; /* (nothing started: the caller runs the program as it is) */
	sigset_t set, old;
	forwarded(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	int guard = l.guard = bs_guard_start(); /* (before the program: it holds none of its fds) */
	struct sigaction dfl = {.sa_handler = SIG_DFL}, old_chld;
	sigaction(SIGCHLD, &dfl, &old_chld); /* (an inherited SIG_IGN would reap it for us) */
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		bs_guard_stop(guard);
		return perror("backoffshim run: fork"), 125;
	}
	if (pid == 0) {
		close(sv[0]);
		child(argv, sv[1], parent, &old, &old_chld, held);
	}
	close(sv[1]);
	let_go_of_stdio();
	l.child = pid;
	l.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	l.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	char byte;
	bs_scm_recv(sv[0], &byte, 1, &l.listener); /* (-1: the child runs the program as it is) */
	if (l.listener >= 0) {
		ioctl(l.listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
		bs_sup_listen(l.sup, l.listener, guard);
		watch(l.ep, l.listener, EV_LISTENER);
	}
	watch(l.ep, l.sigfd, EV_SIGNAL);
	watch(l.ep, l.pidfd, EV_CHILD);
	l.listener_gone = l.listener < 0;
	(void)!write(sv[0], "g", 1); /* (if the child died early, its status tells) */
	close(sv[0]);
	run_loop(&l);
	bs_guard_stop(guard);
	return end_like(l.status, l.signo);
}

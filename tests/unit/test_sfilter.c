/* Unit tests for sfilter: the seccomp program of the supervisor engine.
 *
 * Two halves. The first runs the program on a small classic-BPF
 * interpreter (no system call, so it runs the same under valgrind): every
 * instruction is one the filter may use, every jump lands forward inside
 * the program, every path ends in a return, and the answers are the
 * promised ones: connect() with an address length of 16 or 28 goes to the
 * supervisor and no other length does; getsockopt(SOL_SOCKET, SO_ERROR)
 * only when asked for, no other level or option; prctl(BS_SUP_PRCTL_OPTION)
 * (the library announcing itself) sent to the supervisor; another architecture's
 * calls (i386, x32) and every other call allowed.
 *
 * The second installs the program in a child (no_new_privs,
 * SECCOMP_FILTER_FLAG_NEW_LISTENER, the listener passed back over
 * SCM_RIGHTS) and checks with the kernel which calls reach the listener:
 * the parent answers each one EXDEV, and the child reports what every call
 * returned. The calls use a descriptor of /dev/null, so nothing that is
 * let through touches a network (ENOTSOCK). The child is this test binary
 * exec'd again with --sfilter-child: valgrind (3.19 knows no seccomp())
 * does not follow an exec unless told to, so the child runs natively and
 * the parent's side still runs under memcheck. Where the kernel or the
 * process cannot install a filter with a listener (seccomp off, another
 * supervisor's listener: EBUSY), that half says why and is skipped. */
#include "unit.h"

#include "scm.h"
#include "sfilter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE AUDIT_ARCH_X86_64
#define OTHER_ARCH AUDIT_ARCH_I386
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define NATIVE AUDIT_ARCH_AARCH64
#define OTHER_ARCH AUDIT_ARCH_ARM
#endif

#define ALLOW SECCOMP_RET_ALLOW
#define NOTIF SECCOMP_RET_USER_NOTIF
#define HI32 (1ull << 32)

/* prctl(BS_SUP_PRCTL_OPTION): the library announcing itself, sent to the
 * supervisor (which answers BS_SUP_PRCTL_ERRNO) */
#define PRCTL_ANSWER NOTIF

/* ---- the program, judged and run without the kernel ---- */

struct prog {
	struct sock_filter code[BS_SFILTER_MAX];
	unsigned n;
};

static void build(struct prog *p, int trap_so_error)
{
	/* poison past the end: the length must cover every instruction used */
	memset(p->code, 0xa5, sizeof p->code);
	p->n = bs_sfilter_build(p->code, trap_so_error);
}

/* Only what the filter needs: word loads of seccomp_data, equality jumps
 * on constants, constant returns. */
static int known_op(const struct sock_filter *f)
{
	return f->code == (BPF_LD | BPF_W | BPF_ABS) || f->code == (BPF_JMP | BPF_JEQ | BPF_K) ||
	       f->code == (BPF_RET | BPF_K);
}

static uint32_t run(const struct prog *p, const struct seccomp_data *d)
{
	uint32_t a = 0;
	unsigned pc = 0, steps = 0;
	while (pc < p->n && steps++ <= p->n) {
		const struct sock_filter *f = &p->code[pc];
		assert_true(known_op(f));
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(f->k % 4 == 0 && f->k + 4 <= sizeof *d);
			memcpy(&a, (const char *)d + f->k, 4);
			pc++;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += 1 + (a == f->k ? f->jt : f->jf);
			break;
		default: /* BPF_RET | BPF_K */
			return f->k;
		}
	}
	fail_msg("the program ran off its end (pc %u of %u)", pc, p->n);
	return 0;
}

/* The shape the kernel's checker (and our interpreter) needs: in bounds,
 * forward jumps only, a return at the end. */
static void check_shape(const struct prog *p)
{
	assert_true(p->n > 0 && p->n <= BS_SFILTER_MAX);
	for (unsigned i = 0; i < p->n; i++) {
		const struct sock_filter *f = &p->code[i];
		assert_true(known_op(f));
		if (f->code == (BPF_JMP | BPF_JEQ | BPF_K))
			assert_true(i + 1 + f->jt < p->n && i + 1 + f->jf < p->n);
	}
	assert_int_equal(p->code[p->n - 1].code, BPF_RET | BPF_K);
	assert_int_equal(p->code[p->n - 1].k, ALLOW);
}

static uint32_t judge(const struct prog *p, uint32_t arch, int nr, uint64_t a0, uint64_t a1,
		      uint64_t a2)
{
	struct seccomp_data d;
	memset(&d, 0, sizeof d);
	d.arch = arch, d.nr = nr;
	d.instruction_pointer = 0x401000;
	d.args[0] = a0, d.args[1] = a1, d.args[2] = a2;
	d.args[3] = 0x7ffc0000, d.args[4] = 0x7ffc0010;
	return run(p, &d);
}

static void test_shape(void **state)
{
	(void)state;
	struct prog p;
	build(&p, 1);
	check_shape(&p);
	unsigned with = p.n;
	build(&p, 0);
	check_shape(&p);
	assert_true(p.n < with); /* the getsockopt part is left out */
}

static void test_connect_lengths(void **state)
{
	(void)state;
	for (int trap = 0; trap <= 1; trap++) {
		struct prog p;
		build(&p, trap);
		/* IPv4 and IPv6 address lengths: to the supervisor */
		assert_int_equal(judge(&p, NATIVE, SYS_connect, 3, 0x7000, 16), NOTIF);
		assert_int_equal(judge(&p, NATIVE, SYS_connect, 3, 0x7000, 28), NOTIF);
		/* the kernel reads the length as an int: so does the filter */
		assert_int_equal(judge(&p, NATIVE, SYS_connect, 3, 0x7000, HI32 | 16), NOTIF);
		/* any other length: AF_UNSPEC resets, AF_UNIX paths, whole
		 * sockaddr_storage, nonsense */
		static const uint64_t other[] = {0, 2, 8, 12, 15, 17, 24, 27, 29, 32, 110, 112, 128,
						 0xffffffff, HI32, HI32 | 17};
		for (size_t i = 0; i < sizeof other / sizeof *other; i++)
			assert_int_equal(judge(&p, NATIVE, SYS_connect, 3, 0x7000, other[i]), ALLOW);
		/* the file descriptor and address do not matter to the filter */
		assert_int_equal(judge(&p, NATIVE, SYS_connect, 0xffffffff, 0, 28), NOTIF);
	}
}

static void test_getsockopt(void **state)
{
	(void)state;
	struct prog with, without;
	build(&with, 1);
	build(&without, 0);
	assert_int_equal(judge(&with, NATIVE, SYS_getsockopt, 5, SOL_SOCKET, SO_ERROR), NOTIF);
	assert_int_equal(judge(&without, NATIVE, SYS_getsockopt, 5, SOL_SOCKET, SO_ERROR), ALLOW);
	/* other options of SOL_SOCKET */
	static const int opts[] = {SO_TYPE, SO_PROTOCOL, SO_SNDTIMEO, SO_RCVBUF, SO_PEERCRED, 0};
	for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
		assert_int_equal(judge(&with, NATIVE, SYS_getsockopt, 5, SOL_SOCKET, opts[i]), ALLOW);
	/* the same option number at another level (IPPROTO_TCP 4 is
	 * TCP_KEEPIDLE, IPPROTO_IP 4 is IP_OPTIONS) */
	static const int levels[] = {IPPROTO_IP, IPPROTO_TCP, IPPROTO_IPV6, SOL_IP, 0xffff};
	for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
		assert_int_equal(judge(&with, NATIVE, SYS_getsockopt, 5, levels[i], SO_ERROR), ALLOW);
	/* a level with bits above 32 goes to the kernel (which reads an int:
	 * SOL_SOCKET; letting it through is the safe side) */
	assert_int_equal(judge(&with, NATIVE, SYS_getsockopt, 5, HI32 | SOL_SOCKET, SO_ERROR), ALLOW);
	/* setsockopt is never trapped */
	assert_int_equal(judge(&with, NATIVE, SYS_setsockopt, 5, SOL_SOCKET, SO_ERROR), ALLOW);
	/* connect's filter still works after the getsockopt part */
	assert_int_equal(judge(&with, NATIVE, SYS_connect, 5, 0x7000, 16), NOTIF);
}

static void test_prctl(void **state)
{
	(void)state;
	for (int trap = 0; trap <= 1; trap++) {
		struct prog p;
		build(&p, trap);
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, BS_SUP_PRCTL_OPTION, 0, 0), PRCTL_ANSWER);
		/* the kernel reads the option as an int */
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, HI32 | BS_SUP_PRCTL_OPTION, 0, 0),
				 PRCTL_ANSWER);
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, PR_SET_NAME, 0x7000, 0), ALLOW);
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, PR_GET_DUMPABLE, 0, 0), ALLOW);
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0), ALLOW);
		assert_int_equal(judge(&p, NATIVE, SYS_prctl, BS_SUP_PRCTL_OPTION + 1, 0, 0), ALLOW);
		/* a process that sandboxes itself is told to the supervisor */
		assert_int_equal(judge(&p, NATIVE, BS_SYS_LANDLOCK_RESTRICT_SELF, 3, 0, 0), NOTIF);
		assert_int_equal(judge(&p, NATIVE, BS_SYS_LANDLOCK_RESTRICT_SELF - 2, 0, 0, 0), ALLOW);
		/* the option number in another call's first argument */
		assert_int_equal(judge(&p, NATIVE, SYS_read, BS_SUP_PRCTL_OPTION, 0, 0), ALLOW);
		assert_int_equal(judge(&p, NATIVE, SYS_ioctl, BS_SUP_PRCTL_OPTION, 0, 0), ALLOW);
	}
	/* an answer no prctl gives on its own, and a real errno value */
	assert_true(BS_SUP_PRCTL_ERRNO > 0 && BS_SUP_PRCTL_ERRNO <= SECCOMP_RET_DATA);
	assert_int_equal(BS_SUP_PRCTL_ERRNO, EHWPOISON);
}

static void test_other_calls_and_arches(void **state)
{
	(void)state;
	struct prog p;
	build(&p, 1);
	static const int calls[] = {SYS_read, SYS_write, SYS_socket, SYS_sendto, SYS_accept4,
				    SYS_bind, SYS_close, SYS_epoll_wait, SYS_execve};
	for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
		assert_int_equal(judge(&p, NATIVE, calls[i], 3, SOL_SOCKET, 16), ALLOW);
		assert_int_equal(judge(&p, NATIVE, calls[i], 3, SOL_SOCKET, SO_ERROR), ALLOW);
	}
	/* another architecture's numbers mean other calls: all allowed, even
	 * those whose numbers and arguments match the native ones */
	assert_int_equal(judge(&p, OTHER_ARCH, SYS_connect, 3, 0x7000, 16), ALLOW);
	assert_int_equal(judge(&p, OTHER_ARCH, SYS_getsockopt, 3, SOL_SOCKET, SO_ERROR), ALLOW);
	assert_int_equal(judge(&p, OTHER_ARCH, SYS_prctl, BS_SUP_PRCTL_OPTION, 0, 0), ALLOW);
	assert_int_equal(judge(&p, 0, SYS_connect, 3, 0x7000, 16), ALLOW);
	assert_int_equal(judge(&p, ~NATIVE, SYS_connect, 3, 0x7000, 28), ALLOW);
#ifdef X32_BIT
	/* x32's calls carry the native arch with a high bit in the number */
	assert_int_equal(judge(&p, NATIVE, (int)(X32_BIT | SYS_connect), 3, 0x7000, 16), ALLOW);
	assert_int_equal(judge(&p, NATIVE, (int)(X32_BIT | SYS_getsockopt), 3, SOL_SOCKET, SO_ERROR),
			 ALLOW);
	assert_int_equal(judge(&p, NATIVE, (int)(X32_BIT | SYS_prctl), BS_SUP_PRCTL_OPTION, 0, 0),
			 ALLOW);
#endif
}

/* ---- the program in the kernel: a child under it, the parent its listener ---- */

/* The calls the child makes, on a descriptor of /dev/null (ENOTSOCK when
 * the kernel runs them), and whether each must reach the listener. */
enum {
	C16, C28, C0, C15, C17, C110, C128, CHI16,
	G_ERR, G_TYPE, G_TCP, G_HILEVEL,
	P_OPT, P_OPT_HI, P_DUMP,
	X32_CONNECT,
	NCALLS
};

struct child_report {
	int install_errno; /* 0: the filter is in */
	int err[NCALLS];   /* errno of each call (0: it succeeded) */
};

static long call(int i, int fd, const void *addr, void *val, socklen_t *vlen)
{
	static const unsigned long lens[] = {[C16] = 16, [C28] = 28, [C0] = 0, [C15] = 15,
					     [C17] = 17, [C110] = 110, [C128] = 128,
					     [CHI16] = HI32 | 16};
	switch (i) {
	case C16: case C28: case C0: case C15: case C17: case C110: case C128: case CHI16:
		return syscall(SYS_connect, fd, addr, lens[i]);
	case G_ERR:
		return syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_ERROR, val, vlen);
	case G_TYPE:
		return syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, val, vlen);
	case G_TCP:
		return syscall(SYS_getsockopt, fd, IPPROTO_TCP, SO_ERROR, val, vlen);
	case G_HILEVEL:
		return syscall(SYS_getsockopt, fd, HI32 | SOL_SOCKET, SO_ERROR, val, vlen);
	case P_OPT:
		return syscall(SYS_prctl, BS_SUP_PRCTL_OPTION, 0, 0, 0, 0);
	case P_OPT_HI:
		return syscall(SYS_prctl, HI32 | BS_SUP_PRCTL_OPTION, 0, 0, 0, 0);
	case P_DUMP:
		return syscall(SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0);
#ifdef X32_BIT
	case X32_CONNECT:
		return syscall(X32_BIT | SYS_connect, fd, addr, 16);
#endif
	default:
		return errno = ENOSYS, -1;
	}
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

static __attribute__((noreturn)) void child_main(int sock, int trap_so_error)
{
	struct child_report r;
	memset(&r, 0, sizeof r);
	struct prog p;
	build(&p, trap_so_error);
	struct sock_fprog fp = {(unsigned short)p.n, p.code};
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int l = -1;
	if (null < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		r.install_errno = errno ? errno : EBADF;
	else if ((l = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
				   SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp)) < 0)
		r.install_errno = errno;
	if (r.install_errno) {
		char no = 'N';
		_exit(write_all(sock, &no, 1) || write_all(sock, &r, sizeof r) ? 3 : 0);
	}
	if (bs_scm_send(sock, "L", 1, l, 0) != 1)
		_exit(4);
	close(l);
	char addr[128];
	memset(addr, 0, sizeof addr);
	addr[0] = AF_INET; /* (family and port as a little-endian sockaddr_in) */
	for (int i = 0; i < NCALLS; i++) {
		int val = -1;
		socklen_t vlen = sizeof val;
		errno = 0;
		r.err[i] = call(i, null, addr, &val, &vlen) < 0 ? errno : 0;
	}
	_exit(write_all(sock, &r, sizeof r) ? 5 : 0);
}

static int read_full(int fd, void *buf, size_t n, int ms)
{
	char *p = buf;
	while (n) {
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, ms) != 1)
			return -1;
		ssize_t got = read(fd, p, n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got, n -= (size_t)got;
	}
	return 0;
}

/* The notifications the parent saw, by call number and length. */
struct seen {
	unsigned n;
	int nr[64];
	uint64_t arg2[64];
	uint32_t arch[64];
};

static int now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int)(t.tv_sec * 1000 + t.tv_nsec / 1000000);
}

/* Serve the listener until the child's report comes: each notification
 * answered EXDEV. 0 and *r filled; 1 if the filter could not be
 * installed (r->install_errno says why); -1 on a failure. */
static int serve(int sock, int listener, struct child_report *r, struct seen *s)
{
	/* (no SECCOMP_GET_NOTIF_SIZES: valgrind would refuse it; the kernel
	 * copies its own sizes, which the 256-byte buffers hold) */
	int deadline = now_ms() + 10000;
	for (;;) {
		int left = deadline - now_ms();
		if (left <= 0)
			return -1;
		struct pollfd pf[2] = {{listener, POLLIN, 0}, {sock, POLLIN, 0}};
		int n = poll(pf, 2, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		if (pf[0].revents & POLLIN) {
			union {
				struct seccomp_notif n;
				char buf[256];
			} u;
			union {
				struct seccomp_notif_resp r;
				char buf[256];
			} a;
			memset(&u, 0, sizeof u);
			if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &u.n) != 0)
				continue; /* (ENOENT: gone before we read it) */
			if (s->n < 64) {
				s->nr[s->n] = u.n.data.nr;
				s->arg2[s->n] = u.n.data.args[2];
				s->arch[s->n] = u.n.data.arch;
				s->n++;
			}
			memset(&a, 0, sizeof a);
			a.r.id = u.n.id, a.r.error = -EXDEV;
			ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &a.r);
			continue;
		}
		if (pf[1].revents & (POLLIN | POLLHUP))
			return read_full(sock, r, sizeof *r, 2000) == 0 ? 0 : -1;
	}
}

static char self[4096]; /* this binary, for the child's exec */

static void kernel_run(int trap_so_error, struct child_report *r, struct seen *s, int *skipped)
{
	int sv[2];
	*skipped = 0;
	memset(r, 0, sizeof *r);
	memset(s, 0, sizeof *s);
	assert_true(self[0] != '\0');
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	char fdarg[16], traparg[4];
	snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
	snprintf(traparg, sizeof traparg, "%d", trap_so_error);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		fcntl(sv[1], F_SETFD, 0); /* the child's end crosses the exec */
		execl(self, self, "--sfilter-child", fdarg, traparg, (char *)NULL);
		_exit(6);
	}
	close(sv[1]);
	char tag = 0;
	int listener = -1; /* (none: the child's report follows, its tag says why) */
	bs_scm_recv(sv[0], &tag, 1, &listener);
	int ok;
	if (listener < 0 && tag == 'N') {
		ok = read_full(sv[0], r, sizeof *r, 5000) == 0 ? 1 : -1;
	} else if (listener < 0) {
		ok = -1;
	} else {
		ok = serve(sv[0], listener, r, s);
		close(listener);
	}
	close(sv[0]);
	if (ok < 0)
		kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (ok == 1) {
		fprintf(stderr,
			"test_sfilter: SKIP the kernel half: a filter with a listener cannot be "
			"installed here (%s)%s\n",
			strerror(r->install_errno),
			r->install_errno == EBUSY ? " (already under a seccomp supervisor)" : "");
		*skipped = 1;
		return;
	}
	assert_int_equal(ok, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_kernel(void **state)
{
	(void)state;
	for (int trap = 0; trap <= 1; trap++) {
		struct child_report r;
		struct seen s;
		int skipped;
		kernel_run(trap, &r, &s, &skipped);
		if (skipped) {
			skip();
			return;
		}
		/* what reached the supervisor is answered EXDEV; the rest ran in
		 * the kernel on /dev/null */
		assert_int_equal(r.err[C16], EXDEV);
		assert_int_equal(r.err[C28], EXDEV);
		assert_int_equal(r.err[CHI16], EXDEV);
		static const int untouched[] = {C0, C15, C17, C110, C128};
		for (size_t i = 0; i < sizeof untouched / sizeof *untouched; i++)
			assert_int_not_equal(r.err[untouched[i]], EXDEV);
		assert_int_equal(r.err[C17], ENOTSOCK);
		assert_int_equal(r.err[G_ERR], trap ? EXDEV : ENOTSOCK);
		assert_int_equal(r.err[G_TYPE], ENOTSOCK);
		assert_int_equal(r.err[G_TCP], ENOTSOCK);
		assert_int_equal(r.err[G_HILEVEL], ENOTSOCK);
		/* the prctl: answered by the supervisor */
		assert_int_equal(r.err[P_OPT], EXDEV);
		assert_int_equal(r.err[P_OPT_HI], EXDEV);
		assert_int_equal(r.err[P_DUMP], 0);
		assert_int_not_equal(r.err[X32_CONNECT], EXDEV);
		/* exactly the trapped calls reached the listener, in order,
		 * with the native architecture */
		unsigned want = (trap ? 4 : 3) + 2;
		assert_int_equal(s.n, want);
		assert_int_equal(s.nr[0], SYS_connect);
		assert_int_equal(s.arg2[0], 16);
		assert_int_equal(s.nr[1], SYS_connect);
		assert_int_equal(s.arg2[1], 28);
		assert_int_equal(s.nr[2], SYS_connect);
		assert_int_equal(s.arg2[2], HI32 | 16);
		if (trap) {
			assert_int_equal(s.nr[3], SYS_getsockopt);
			assert_int_equal(s.arg2[3], SO_ERROR);
		}
		for (unsigned i = trap ? 4 : 3; i < s.n; i++)
			assert_int_equal(s.nr[i], SYS_prctl);
		for (unsigned i = 0; i < s.n; i++)
			assert_int_equal(s.arch[i], NATIVE);
	}
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--sfilter-child") == 0)
		child_main(atoi(argv[2]), atoi(argv[3]));
	/* (under valgrind, /proc/self/exe reads as the program, not the tool) */
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0)
		self[n] = '\0';
	else if (argc > 0 && strlen(argv[0]) < sizeof self)
		strcpy(self, argv[0]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shape),
		cmocka_unit_test(test_connect_lengths),
		cmocka_unit_test(test_getsockopt),
		cmocka_unit_test(test_prctl),
		cmocka_unit_test(test_other_calls_and_arches),
		cmocka_unit_test(test_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

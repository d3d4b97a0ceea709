/*
 * parkedge: the corners of a program that waits on connecting sockets, each
 * printing what the program sees, so that a test can compare a run with the
 * shim and one without.
 *   parkedge CASE PORT
 * PORT is a loopback port with nothing listening. Every case starts with a
 * non-blocking connect to it ("the socket"), so that the shim has a socket
 * connecting or parked while the case runs. Cases:
 *   fork      the socket (close-on-exec) is parked by a 300 ms epoll wait;
 *             a child waits in poll() on a pipe 10 times 100 ms and exits, while
 *             the parent waits on its epoll set (up to 2 s) and prints its
 *             pid, the first event and SO_ERROR:
 *             "parent=PID events=0xE so_error=N"
 *   samedata  a pipe (write end closed: EPOLLHUP) and the socket are in one
 *             epoll set with the same data; prints each event and, after
 *             the wait, SO_ERROR: "n=K events=0x..,0x.. so_error=N"
 *   huge      select, pselect, ppoll and epoll_pwait2 on a pipe, each with
 *             a timeout too large to end, each ended by alarm(1): prints
 *             "CALL rc=R errno=E ms=T" (T the wall time, 0.1 s granularity)
 *   invalid   the same calls with timeouts the kernel refuses (negative,
 *             tv_nsec >= 1e9, tv_usec < 0): "CALL rc=R errno=E tv=S.U"
 *   submillis 20 calls each of ppoll, pselect, select and epoll_pwait2 on a
 *             pipe with a 20 µs timeout (a test reads their timeouts with
 *             strace); prints "done"
 *   dup       the socket is parked by a 300 ms poll; then for each of dup,
 *             fcntl(F_DUPFD), fcntl(F_DUPFD_CLOEXEC) and dup2, poll on the
 *             new number (1 s) and SO_ERROR through it:
 *             "HOW revents=0xR so_error=N"
 *   bigselect the socket is parked by a 300 ms poll; then select() with nfds
 *             1501 (fd 1500 a pipe, the sets sized for it) waits 1 s for it
 *             to be writable: "n=N so_error=E" ("skip" if the fd limit
 *             cannot reach 1500)
 *   pollepoll the socket is in an epoll set, parked by a 300 ms epoll_wait;
 *             then ("waiting" if that wait saw nothing), up to 5 s, poll()
 *             on the epoll fd and, when it is readable, epoll_wait(0):
 *             "events=0xE so_error=N" for the first event, or "timeout"
 *   selectepoll the same with select() on the epoll fd
 *   epolldup  the socket is in an epoll set, parked by a 300 ms epoll_wait;
 *             the epoll fd is dup()ed and closed; epoll_wait on the copy
 *             (up to 5 s): "events=0xE so_error=N", or "timeout"
 *   writable  PORT listens: the socket connects; poll(POLLOUT) up to 2 s,
 *             then poll(POLLIN) up to 3 s (no SO_ERROR read in between, as
 *             a client of a server that speaks first), then recv():
 *             "out=0xR in=0xR recv=N errno=E"; the same with epoll
 *             ("epoll out=... in=...") on a second connection
 * Exit 0, or 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port;

static int connecting_socket(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || (connect(s, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)) {
		perror("connect");
		exit(2);
	}
	return s;
}

static int so_error(int fd)
{
	int e = 0;
	socklen_t l = sizeof e;
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0 ? -errno : e;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* a pipe's read end with nothing to read (the write end stays open) */
static int quiet_pipe(void)
{
	static int p[2];
	if (!p[0] && pipe(p) < 0)
		exit(2);
	return p[0];
}

static void on_alarm(int sig) { (void)sig; }

static void only(fd_set *set, int fd)
{
	FD_ZERO(set);
	FD_SET(fd, set);
}

static int case_fork(void)
{
	int s = connecting_socket(), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = 42}, got[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
	int n = epoll_wait(ep, got, 4, 300);
	pid_t pid = fork();
	if (pid == 0) {
		struct pollfd p = {quiet_pipe(), POLLIN, 0};
		for (int i = 0; i < 10; i++)
			poll(&p, 1, 100);
		_exit(0);
	}
	for (int i = 0; i < 20 && n == 0; i++)
		n = epoll_wait(ep, got, 4, 100);
	printf("parent=%d events=0x%x so_error=%d\n", (int)getpid(), n > 0 ? got[0].events : 0,
	       so_error(s));
	waitpid(pid, NULL, 0);
	return 0;
}

static int case_samedata(void)
{
	int s = connecting_socket(), p[2], ep = epoll_create1(EPOLL_CLOEXEC);
	if (pipe(p) < 0)
		return 2;
	close(p[1]);
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7}, got[4];
	epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	ev.events = EPOLLOUT;
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
	usleep(100000); /* the refusal has arrived (loopback) */
	int n = epoll_wait(ep, got, 4, 300);
	unsigned e[2] = {0, 0};
	for (int i = 0; i < n && i < 2; i++)
		e[i] = got[i].events;
	if (e[0] > e[1]) { /* the kernel's order is not the point */
		unsigned t = e[0];
		e[0] = e[1];
		e[1] = t;
	}
	printf("n=%d events=0x%x,0x%x so_error=%d\n", n, e[0], e[1], so_error(s));
	return 0;
}

static void report_interrupted(const char *call, int rc, double t0)
{
	int err = errno;
	printf("%s rc=%d errno=%d ms=%d\n", call, rc, rc < 0 ? err : 0,
	       (int)((now_ms() - t0) / 100 + 0.5) * 100);
}

static int case_huge(void)
{
	connecting_socket();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm; /* no SA_RESTART: the wait ends with EINTR */
	sigaction(SIGALRM, &sa, NULL);
	int q = quiet_pipe(), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN}, got[1];
	epoll_ctl(ep, EPOLL_CTL_ADD, q, &ev);
	time_t huge = (time_t)18446744074LL; /* * 1e9 wraps 64 bits */
	fd_set r;
	double t0;
	alarm(1), t0 = now_ms();
	only(&r, q);
	struct timeval tv = {huge, 0};
	report_interrupted("select", select(q + 1, &r, NULL, NULL, &tv), t0);
	struct timespec ts = {huge, 0};
	alarm(1), t0 = now_ms();
	only(&r, q);
	report_interrupted("pselect", pselect(q + 1, &r, NULL, NULL, &ts, NULL), t0);
	struct pollfd p = {q, POLLIN, 0};
	alarm(1), t0 = now_ms();
	report_interrupted("ppoll", ppoll(&p, 1, &ts, NULL), t0);
	alarm(1), t0 = now_ms();
	report_interrupted("epoll_pwait2", epoll_pwait2(ep, got, 1, &ts, NULL), t0);
	return 0;
}

static void report_refused(const char *call, int rc, const struct timeval *tv)
{
	int err = errno;
	printf("%s rc=%d errno=%d tv=%ld.%ld\n", call, rc, rc < 0 ? err : 0,
	       tv ? (long)tv->tv_sec : 0L, tv ? (long)tv->tv_usec : 0L);
}

static int case_invalid(void)
{
	connecting_socket();
	int q = quiet_pipe(), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN}, got[1];
	epoll_ctl(ep, EPOLL_CTL_ADD, q, &ev);
	fd_set r;
	struct timeval bad_tv[] = {{0, -1}, {-1, 0}};
	for (int i = 0; i < 2; i++) {
		only(&r, q);
		report_refused("select", select(q + 1, &r, NULL, NULL, &bad_tv[i]), &bad_tv[i]);
	}
	struct timespec bad_ts[] = {{0, 1000000000}, {-1, 0}, {0, -1}};
	for (int i = 0; i < 3; i++) {
		only(&r, q);
		report_refused("pselect", pselect(q + 1, &r, NULL, NULL, &bad_ts[i], NULL), NULL);
		struct pollfd p = {q, POLLIN, 0};
		report_refused("ppoll", ppoll(&p, 1, &bad_ts[i], NULL), NULL);
		report_refused("epoll_pwait2", epoll_pwait2(ep, got, 1, &bad_ts[i], NULL), NULL);
	}
	return 0;
}

static int case_submillis(void)
{
	connecting_socket();
	int q = quiet_pipe(), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN}, got[1];
	epoll_ctl(ep, EPOLL_CTL_ADD, q, &ev);
	for (int i = 0; i < 20; i++) {
		struct timespec ts = {0, 20000};
		struct timeval tv = {0, 20};
		struct pollfd p = {q, POLLIN, 0};
		fd_set r;
		ppoll(&p, 1, &ts, NULL);
		only(&r, q);
		pselect(q + 1, &r, NULL, NULL, &ts, NULL);
		only(&r, q);
		select(q + 1, &r, NULL, NULL, &tv);
		epoll_pwait2(ep, got, 1, &ts, NULL);
	}
	puts("done");
	return 0;
}

static void report_copy(const char *how, int fd)
{
	struct pollfd p = {fd, POLLOUT, 0};
	int n = poll(&p, 1, 1000);
	printf("%s revents=0x%x so_error=%d\n", how, n > 0 ? p.revents : 0, so_error(fd));
}

static int case_dup(void)
{
	const char *how[] = {"dup", "F_DUPFD", "F_DUPFD_CLOEXEC", "dup2"};
	for (int i = 0; i < 4; i++) {
		int s = connecting_socket(), copy = -1;
		struct pollfd p = {s, POLLOUT, 0};
		poll(&p, 1, 300);
		switch (i) {
		case 0: copy = dup(s); break;
		case 1: copy = fcntl(s, F_DUPFD, 100); break;
		case 2: copy = fcntl(s, F_DUPFD_CLOEXEC, 100); break;
		case 3: copy = dup2(s, 200); break;
		}
		report_copy(how[i], copy);
		close(copy);
		close(s);
	}
	return 0;
}

/* fd_set sized for BIG_FD + 1 descriptors */
#define BIG_FD 1500
#define BIG_WORDS (BIG_FD / (8 * sizeof(unsigned long)) + 1)

static int case_bigselect(void)
{
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	if (rl.rlim_max <= BIG_FD || setrlimit(RLIMIT_NOFILE, &rl) < 0 ||
	    dup2(quiet_pipe(), BIG_FD) < 0) {
		puts("skip");
		return 0;
	}
	int s = connecting_socket();
	struct pollfd p = {s, POLLOUT, 0};
	poll(&p, 1, 300);
	unsigned long w[BIG_WORDS];
	memset(w, 0, sizeof w);
	w[s / (8 * sizeof *w)] |= 1ul << (s % (8 * sizeof *w));
	struct timeval tv = {1, 0};
	int n = select(BIG_FD + 1, NULL, (fd_set *)(void *)w, NULL, &tv);
	printf("n=%d so_error=%d\n", n, so_error(s));
	return 0;
}

/* The socket in an epoll set (EPOLLOUT, data 42), parked by a 300 ms wait
 * (no event: the refusal is hidden; without the shim, the refusal). */
static int parked_in_set(int *ep, struct epoll_event *first)
{
	int s = connecting_socket();
	struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = 42};
	*ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(*ep, EPOLL_CTL_ADD, s, &ev);
	if (epoll_wait(*ep, first, 1, 300) != 1)
		first->events = 0;
	return s;
}

static void report_event(int n, const struct epoll_event *ev, int s)
{
	if (n > 0)
		printf("events=0x%x so_error=%d\n", ev->events, so_error(s));
	else
		puts("timeout");
}

/* Wait on the epoll set through poll() (use_select 0) or select(). */
static int case_epoll_inside(int use_select)
{
	int ep;
	struct epoll_event ev;
	int s = parked_in_set(&ep, &ev), n = ev.events ? 1 : 0;
	double end = now_ms() + 5000;
	if (!n)
		puts("waiting");
	while (!n && now_ms() < end) {
		int left = (int)(end - now_ms()), ready;
		if (use_select) {
			fd_set r;
			only(&r, ep);
			struct timeval tv = {left / 1000, left % 1000 * 1000};
			ready = select(ep + 1, &r, NULL, NULL, &tv);
		} else {
			struct pollfd p = {ep, POLLIN, 0};
			ready = poll(&p, 1, left);
		}
		if (ready > 0)
			n = epoll_wait(ep, &ev, 1, 0);
	}
	report_event(n, &ev, s);
	return 0;
}

static int case_pollepoll(void) { return case_epoll_inside(0); }
static int case_selectepoll(void) { return case_epoll_inside(1); }

static int case_epolldup(void)
{
	int ep;
	struct epoll_event ev;
	int s = parked_in_set(&ep, &ev), n = ev.events ? 1 : 0;
	int copy = dup(ep);
	close(ep);
	if (!n)
		n = epoll_wait(copy, &ev, 1, 5000);
	report_event(n, &ev, s);
	return 0;
}

static int case_writable(void)
{
	char b[16];
	int s = connecting_socket();
	struct pollfd p = {s, POLLOUT, 0};
	int out = poll(&p, 1, 2000) > 0 ? p.revents : 0;
	p.events = POLLIN;
	int in = poll(&p, 1, 3000) > 0 ? p.revents : 0;
	ssize_t r = recv(s, b, sizeof b, 0);
	printf("out=0x%x in=0x%x recv=%zd errno=%d\n", out, in, r, r < 0 ? errno : 0);
	close(s);
	s = connecting_socket();
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = 7};
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
	out = epoll_wait(ep, &ev, 1, 2000) > 0 ? (int)ev.events : 0;
	ev.events = EPOLLIN;
	epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
	in = epoll_wait(ep, &ev, 1, 3000) > 0 ? (int)ev.events : 0;
	r = recv(s, b, sizeof b, 0);
	printf("epoll out=0x%x in=0x%x recv=%zd errno=%d\n", out, in, r, r < 0 ? errno : 0);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(void);
	} cases[] = {{"fork", case_fork},       {"samedata", case_samedata},
		     {"huge", case_huge},       {"invalid", case_invalid},
		     {"submillis", case_submillis}, {"dup", case_dup},
		     {"bigselect", case_bigselect}, {"pollepoll", case_pollepoll},
		     {"selectepoll", case_selectepoll}, {"epolldup", case_epolldup},
		     {"writable", case_writable}};
	if (argc != 3 || (port = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: parkedge CASE PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		if (!strcmp(argv[1], cases[i].name))
			return cases[i].run();
	fprintf(stderr, "parkedge: unknown case %s\n", argv[1]);
	return 2;
}

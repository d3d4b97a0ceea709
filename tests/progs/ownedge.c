/*
 * ownedge: a connecting socket whose number or whose kernel object the
 * program shares with something the shim does not see (a vfork child's
 * close_range, a forked child's waits on a shared epoll set, libc's own
 * close inside fclose, a poll set too large to copy, io_uring, an
 * EPOLLEXCLUSIVE registration, a number libc freed that dup() gives to a
 * connected socket). Each case prints what the program sees, so
 * that a test can compare a run with the shim and one without.
 *   ownedge CASE PORT
 * PORT is a loopback port with nothing listening. Every case starts with a
 * non-blocking connect to it ("the socket"); where it says "parked", a
 * first wait of 300 ms (epoll or poll, as named) sees the refusal, which
 * the shim hides by parking the socket. Events print as names:
 * "OUT|ERR|HUP", "-" for none. Lines with "tenths=T" carry the time the
 * last wait took (0.1 s granularity); a test compares it loosely.
 * Cases:
 *   vfork-epoll  the socket (in an epoll set) is parked; vfork(), the child
 *                calls close_range(3, ~0U, 0) and execs /bin/true; the
 *                parent reaps it, then waits on its epoll set up to 3 s:
 *                "events=E so_error=N peer=yes|no tenths=T"
 *   vfork-poll   the same, every wait a poll() for POLLOUT
 *   fork-shared-epoll
 *                the socket (close-on-exec) is in an epoll set, not yet
 *                waited on; fork(); the child waits on the shared set for
 *                300 ms (the shim may park the socket then), reads
 *                SO_ERROR and exits: "child events=E so_error=N"; the
 *                parent reaps it, then waits on the set up to 3 s:
 *                "parent events=E so_error=N peer=yes|no tenths=T"
 *   fclose-file  the socket is parked (poll); fclose(fdopen(socket, "r+"))
 *                closes it inside libc; a temporary file opened with open()
 *                takes its number: "same-number=yes", "write rc=R errno=E",
 *                "read rc=R errno=E data=D", "poll n=N revents=E"
 *   fclose-pipe  the socket is parked (epoll, data 42); fclose(fdopen()) as
 *                above; a pipe takes its number, holds one byte, and its
 *                read end is added to the epoll set (data 7):
 *                "same-number=yes", "add rc=R errno=E", then one 1 s wait:
 *                "n=N data=D events=E ..." and "read rc=R data=D"
 *   poll300      poll() on 300 entries (299 quiet pipe ends, the socket
 *                last) until the socket has a report (up to 3 s):
 *                "revents=E so_error=N peer=yes|no tenths=T"
 *   iouring      an io_uring IORING_OP_POLL_ADD (raw system calls) for
 *                POLLOUT on the socket, its completion awaited (alarm(5)
 *                bounds it): "res=E so_error=N peer=yes|no" ("skip" when
 *                io_uring_setup fails)
 *   uring-window a process with an io_uring instance: socket A's connect
 *                is watched by POLL_ADD and fails ("A res=E so_error=N");
 *                A is closed and socket B connects to the same port at
 *                once (inside the shim's backoff window); B is watched the
 *                same way: "B res=E so_error=N peer=yes|no", then one
 *                write: "B write rc=R errno=E" (SIGPIPE ignored)
 *   stale-dup    the socket is closed inside libc (fclose(fdopen())) right
 *                after its connect; dup() of an accepted socket (over a
 *                loopback listener of the program's own) takes its number:
 *                "same-number=yes"; the peer resets the connection (close
 *                with SO_LINGER 0); poll for POLLIN up to 2 s: "poll n=N
 *                revents=E", then one read: "read rc=R errno=E"
 *   epoll-exclusive-mod
 *                the socket is registered with EPOLLOUT|EPOLLEXCLUSIVE and
 *                parked (epoll); EPOLL_CTL_MOD to EPOLLOUT|EPOLLIN:
 *                "mod rc=R errno=E"; then a wait up to 3 s: "events=E
 *                so_error=N tenths=T"
 * Exit 0, or 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static int connecting_socket(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || (connect(s, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS))
		die("connect");
	return s;
}

static int so_error(int fd)
{
	int e = 0;
	socklen_t l = sizeof e;
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0 ? -errno : e;
}

static const char *peer(int fd)
{
	struct sockaddr_storage a;
	socklen_t l = sizeof a;
	return getpeername(fd, (struct sockaddr *)&a, &l) == 0 ? "yes" : "no";
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int tenths_since(double t0)
{
	return (int)((now_ms() - t0) / 100);
}

/* "IN|OUT|ERR|HUP" (poll and epoll share these bit values), "-" for none */
static const char *names(unsigned ev)
{
	static char buf[64];
	static const struct {
		unsigned bit;
		const char *name;
	} bits[] = {{POLLIN, "IN"}, {POLLPRI, "PRI"}, {POLLOUT, "OUT"}, {POLLERR, "ERR"},
		    {POLLHUP, "HUP"}, {POLLNVAL, "NVAL"}, {POLLRDHUP, "RDHUP"}};
	buf[0] = 0;
	for (size_t i = 0; i < sizeof bits / sizeof *bits; i++)
		if (ev & bits[i].bit) {
			if (buf[0])
				strcat(buf, "|");
			strcat(buf, bits[i].name);
			ev &= ~bits[i].bit;
		}
	if (ev)
		snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s0x%x", buf[0] ? "|" : "",
			 ev);
	return buf[0] ? buf : "-";
}

/* a pipe's read end with nothing to read (the write end stays open) */
static int quiet_pipe(void)
{
	static int p[2];
	if (!p[0] && pipe(p) < 0)
		die("pipe");
	return p[0];
}

static int new_epoll_with(int fd, unsigned events, uint64_t data)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = events, .data.u64 = data};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll");
	return ep;
}

/* Up to `rounds` waits of 100 ms on ep; the first event's mask, 0 if none. */
static unsigned epoll_first(int ep, int rounds)
{
	struct epoll_event got[4];
	for (int i = 0; i < rounds; i++)
		if (epoll_wait(ep, got, 4, 100) > 0)
			return got[0].events;
	return 0;
}

/* The same with poll() on fd for POLLOUT. */
static unsigned poll_first(int fd, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		struct pollfd p = {fd, POLLOUT, 0};
		if (poll(&p, 1, 100) > 0)
			return (unsigned)p.revents;
	}
	return 0;
}

/* The socket's first wait: 300 ms, which sees the refusal (the shim hides
 * it and parks the socket). */
static void first_wait_epoll(int ep)
{
	struct epoll_event got[4];
	epoll_wait(ep, got, 4, 300);
}

static void first_wait_poll(int fd)
{
	struct pollfd p = {fd, POLLOUT, 0};
	poll(&p, 1, 300);
}

/* vfork(); the child closes every descriptor from 3 up (as CPython's
 * subprocess and posix_spawn-style launchers do) and execs /bin/true. */
static void vfork_true(void)
{
	pid_t pid = vfork();
	if (pid == 0) {
		close_range(3, ~0U, 0);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		die("vfork");
	waitpid(pid, NULL, 0);
}

static int case_vfork_epoll(void)
{
	int s = connecting_socket(), ep = new_epoll_with(s, EPOLLOUT, 42);
	first_wait_epoll(ep);
	vfork_true();
	double t0 = now_ms();
	unsigned ev = epoll_first(ep, 30);
	int t = tenths_since(t0);
	printf("events=%s so_error=%d peer=%s tenths=%d\n", names(ev), so_error(s), peer(s), t);
	return 0;
}

static int case_vfork_poll(void)
{
	int s = connecting_socket();
	first_wait_poll(s);
	vfork_true();
	double t0 = now_ms();
	unsigned ev = poll_first(s, 30);
	int t = tenths_since(t0);
	printf("events=%s so_error=%d peer=%s tenths=%d\n", names(ev), so_error(s), peer(s), t);
	return 0;
}

static int case_fork_shared_epoll(void)
{
	int s = connecting_socket(), ep = new_epoll_with(s, EPOLLOUT, 42);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		unsigned ev = epoll_first(ep, 3);
		printf("child events=%s so_error=%d\n", names(ev), so_error(s));
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	double t0 = now_ms();
	unsigned ev = epoll_first(ep, 30);
	int t = tenths_since(t0);
	printf("parent events=%s so_error=%d peer=%s tenths=%d\n", names(ev), so_error(s), peer(s),
	       t);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 2;
}

/* close fd the way stdio does: inside libc, not through close() */
static void fclose_number(int fd)
{
	FILE *f = fdopen(fd, "r+");
	if (!f)
		die("fdopen");
	fclose(f);
}

static int case_fclose_file(void)
{
	int s = connecting_socket();
	first_wait_poll(s);
	fclose_number(s);
	char path[64];
	snprintf(path, sizeof path, "/tmp/ownedge-%d", (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die("open");
	unlink(path);
	printf("same-number=%s\n", fd == s ? "yes" : "no");
	errno = 0;
	ssize_t w = write(fd, "hello", 5);
	printf("write rc=%zd errno=%d\n", w, w < 0 ? errno : 0);
	lseek(fd, 0, SEEK_SET);
	char buf[16] = "";
	errno = 0;
	ssize_t r = read(fd, buf, sizeof buf - 1);
	printf("read rc=%zd errno=%d data=%s\n", r, r < 0 ? errno : 0, r > 0 ? buf : "-");
	struct pollfd p = {fd, POLLIN | POLLOUT, 0};
	int n = poll(&p, 1, 1000);
	printf("poll n=%d revents=%s\n", n, names(n > 0 ? (unsigned)p.revents : 0));
	return 0;
}

static int case_fclose_pipe(void)
{
	int s = connecting_socket(), ep = new_epoll_with(s, EPOLLOUT, 42), p[2];
	first_wait_epoll(ep);
	fclose_number(s);
	if (pipe(p) < 0)
		die("pipe");
	printf("same-number=%s\n", p[0] == s ? "yes" : "no");
	if (write(p[1], "x", 1) != 1)
		die("write");
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7}, got[4];
	int rc = epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
	printf("add rc=%d errno=%d\n", rc, rc < 0 ? errno : 0);
	int n = epoll_wait(ep, got, 4, 1000);
	printf("n=%d", n);
	for (int i = 0; i < n; i++)
		printf(" data=%llu events=%s", (unsigned long long)got[i].data.u64,
		       names(got[i].events));
	printf("\n");
	char c = 0;
	ssize_t r = read(p[0], &c, 1);
	printf("read rc=%zd data=%c\n", r, r == 1 ? c : '-');
	return 0;
}

#define BIG_POLL 300

static int case_poll300(void)
{
	int s = connecting_socket(), q = quiet_pipe();
	struct pollfd set[BIG_POLL];
	for (int i = 0; i < BIG_POLL - 1; i++)
		set[i] = (struct pollfd){q, POLLIN, 0};
	set[BIG_POLL - 1] = (struct pollfd){s, POLLOUT, 0};
	double t0 = now_ms();
	unsigned ev = 0;
	for (int i = 0; i < 30 && !ev; i++)
		if (poll(set, BIG_POLL, 100) > 0)
			ev = (unsigned)set[BIG_POLL - 1].revents;
	int t = tenths_since(t0);
	printf("revents=%s so_error=%d peer=%s tenths=%d\n", names(ev), so_error(s), peer(s), t);
	return 0;
}

static void on_alarm(int sig) { (void)sig; }

/* An io_uring instance driven by raw system calls (the shim sees none of
 * its operations). */
static struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
} ring;

/* Sets up `ring`; 0, or -1 with errno when io_uring_setup fails. */
static int ring_open(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	ring.fd = (int)syscall(__NR_io_uring_setup, 4, &p);
	if (ring.fd < 0)
		return -1;
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		sq_len = cq_len = sq_len > cq_len ? sq_len : cq_len;
	char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring.fd,
			IORING_OFF_SQ_RING);
	char *cq = (p.features & IORING_FEAT_SINGLE_MMAP)
			   ? sq
			   : mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				  ring.fd, IORING_OFF_CQ_RING);
	ring.sqes = mmap(NULL, p.sq_entries * sizeof *ring.sqes, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, ring.fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || ring.sqes == MAP_FAILED)
		die("mmap io_uring");
	ring.sq_tail = (unsigned *)(sq + p.sq_off.tail);
	ring.sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	ring.sq_array = (unsigned *)(sq + p.sq_off.array);
	ring.cq_head = (unsigned *)(cq + p.cq_off.head);
	ring.cq_tail = (unsigned *)(cq + p.cq_off.tail);
	ring.cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	ring.cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm; /* no SA_RESTART: a wait that never ends gets EINTR */
	sigaction(SIGALRM, &sa, NULL);
	return 0;
}

/* An IORING_OP_POLL_ADD for POLLOUT on fd, its completion awaited (alarm(5)
 * bounds the wait). Prints "no completion ..." and returns 0 when there is
 * none; else 1 with the completion's result in *res. */
static int ring_poll_out(int fd, int *res)
{
	unsigned tail = *ring.sq_tail, idx = tail & *ring.sq_mask;
	struct io_uring_sqe *e = &ring.sqes[idx];
	memset(e, 0, sizeof *e);
	e->opcode = IORING_OP_POLL_ADD;
	e->fd = fd;
	e->poll32_events = POLLOUT;
	e->user_data = 1;
	ring.sq_array[idx] = idx;
	__atomic_store_n(ring.sq_tail, tail + 1, __ATOMIC_RELEASE);

	alarm(5);
	long rc = syscall(__NR_io_uring_enter, ring.fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0);
	alarm(0);
	unsigned head = *ring.cq_head;
	if (rc < 0 || head == __atomic_load_n(ring.cq_tail, __ATOMIC_ACQUIRE)) {
		printf("no completion rc=%ld errno=%d\n", rc, rc < 0 ? errno : 0);
		return 0;
	}
	*res = ring.cqes[head & *ring.cq_mask].res;
	__atomic_store_n(ring.cq_head, head + 1, __ATOMIC_RELEASE);
	return 1;
}

/* "res=E" ("res=-N" for an error) for a completion's result */
static const char *res_names(int res)
{
	static char buf[80];
	if (res < 0)
		snprintf(buf, sizeof buf, "res=-%d", -res);
	else
		snprintf(buf, sizeof buf, "res=%s", names((unsigned)res));
	return buf;
}

static int case_iouring(void)
{
	if (ring_open() < 0) {
		printf("skip io_uring_setup: %s\n", strerror(errno));
		return 0;
	}
	int s = connecting_socket(), res;
	if (ring_poll_out(s, &res))
		printf("%s so_error=%d peer=%s\n", res_names(res), so_error(s), peer(s));
	return 0;
}

static int case_uring_window(void)
{
	if (ring_open() < 0) {
		printf("skip io_uring_setup: %s\n", strerror(errno));
		return 0;
	}
	signal(SIGPIPE, SIG_IGN); /* a write to a failed socket: EPIPE, not death */
	int a = connecting_socket(), res;
	if (!ring_poll_out(a, &res))
		return 0;
	printf("A %s so_error=%d\n", res_names(res), so_error(a));
	close(a);
	int b = connecting_socket();
	if (!ring_poll_out(b, &res))
		return 0;
	printf("B %s so_error=%d peer=%s\n", res_names(res), so_error(b), peer(b));
	errno = 0;
	ssize_t w = write(b, "x", 1);
	printf("B write rc=%zd errno=%d\n", w, w < 0 ? errno : 0);
	return 0;
}

/* A connected pair over a loopback listener of its own (an ephemeral port):
 * *client and *accepted. */
static void connected_pair(int *client, int *accepted)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0)
		die("listener");
	*client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*client < 0 || connect(*client, (struct sockaddr *)&a, sizeof a) < 0)
		die("connect to own listener");
	*accepted = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*accepted < 0)
		die("accept");
	close(l);
}

static int case_stale_dup(void)
{
	int client, accepted;
	connected_pair(&client, &accepted);
	int s = connecting_socket();
	fclose_number(s);
	int d = dup(accepted);
	printf("same-number=%s\n", d == s ? "yes" : "no");
	/* the peer resets the connection */
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	if (setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
		die("SO_LINGER");
	close(client);
	struct pollfd p = {d, POLLIN, 0};
	int n = poll(&p, 1, 2000);
	printf("poll n=%d revents=%s\n", n, names(n > 0 ? (unsigned)p.revents : 0));
	char buf[8];
	errno = 0;
	ssize_t r = read(d, buf, sizeof buf);
	printf("read rc=%zd errno=%d\n", r, r < 0 ? errno : 0);
	return 0;
}

static int case_epoll_exclusive_mod(void)
{
	int s = connecting_socket(), ep = new_epoll_with(s, EPOLLOUT | EPOLLEXCLUSIVE, 42);
	first_wait_epoll(ep);
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u64 = 42};
	int rc = epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
	printf("mod rc=%d errno=%d\n", rc, rc < 0 ? errno : 0);
	double t0 = now_ms();
	unsigned got = epoll_first(ep, 30);
	int t = tenths_since(t0);
	printf("events=%s so_error=%d tenths=%d\n", names(got), so_error(s), t);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(void);
	} cases[] = {{"vfork-epoll", case_vfork_epoll},
		     {"vfork-poll", case_vfork_poll},
		     {"fork-shared-epoll", case_fork_shared_epoll},
		     {"fclose-file", case_fclose_file},
		     {"fclose-pipe", case_fclose_pipe},
		     {"poll300", case_poll300},
		     {"iouring", case_iouring},
		     {"uring-window", case_uring_window},
		     {"stale-dup", case_stale_dup},
		     {"epoll-exclusive-mod", case_epoll_exclusive_mod}};
	if (argc != 3 || (port = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: ownedge CASE PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		if (!strcmp(argv[1], cases[i].name))
			return cases[i].run();
	fprintf(stderr, "ownedge: unknown case %s\n", argv[1]);
	return 2;
}

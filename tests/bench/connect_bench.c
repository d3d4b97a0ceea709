/*
 * connect_bench: cost of the shim as a ratio (with shim / without shim).
 *
 *   connect_bench LIB            run everything, print one line per workload
 *   connect_bench --worker W N   (internal) run workload W with N ops once,
 *                                write the loop's elapsed ns to stdout
 *
 * Each workload runs ROUNDS rounds; a round runs the worker once plain
 * (LD_PRELOAD unset) and once with LD_PRELOAD=LIB, the order alternating per
 * round so drift cancels. A preload only takes effect at exec, hence
 * fork+exec of this binary. The reported ratio is the median over rounds of
 * (shim time / plain time) for the pair; the us/op figures are the medians
 * of each side. Nothing else in the environment is changed.
 *
 * Each worker pins itself (both its threads) to one CPU, the last it may
 * use: on a small VM, cross-CPU wakeups otherwise swing a run by +-25% (and
 * the ping-pong by 10x), drowning the per-call cost being measured.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 11
#define CONNECTS 20000
#define PINGPONGS 200000
#define EPOLL_ECHOES 200000
#define WORKER_LIMIT_S 60 /* per worker process */
#define TOTAL_LIMIT_S 300 /* whole benchmark */
#define TARGET 1.01

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "connect_bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- worker: connect+close against our own listener ---- */

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0)
			close(c);
		else if (errno != EINTR && errno != ECONNABORTED)
			return NULL; /* listener shut down */
	}
}

/* (never inlined: tests/bench/counts.py counts the instructions inside it,
 * i.e. the client's socket, connect, setsockopt and close) */
static __attribute__((noinline)) int connect_once(const struct sockaddr_in *sa)
{
	static const struct linger lg = {1, 0}; /* RST on close: no TIME_WAIT */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* A loopback listener served by `serve`, on the port BENCH_PORT names
 * (counts.py chooses it: the same for both lengths of a slope) or an
 * ephemeral one. */
static void listen_local(struct sockaddr_in *sa, pthread_t *t, void *(*serve)(void *), int *lfd)
{
	static const int on = 1;
	socklen_t len = sizeof *sa;
	const char *port = getenv("BENCH_PORT");
	*sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				   .sin_port = htons(port ? (uint16_t)atoi(port) : 0)};
	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (*lfd < 0 || setsockopt(*lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 || bind(*lfd, (struct sockaddr *)sa, sizeof *sa) != 0 ||
	    listen(*lfd, SOMAXCONN) != 0 || getsockname(*lfd, (struct sockaddr *)sa, &len) != 0)
		die("listener");
	if (pthread_create(t, NULL, serve, lfd) != 0)
		die("pthread_create");
}

static uint64_t work_connect(long n)
{
	struct sockaddr_in sa;
	pthread_t t;
	int lfd;
	listen_local(&sa, &t, acceptor, &lfd);
	for (long i = 0; i < n / 20; i++) /* warm-up, untimed */
		if (connect_once(&sa) != 0)
			die("connect (warm-up)");
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (connect_once(&sa) != 0)
			die("connect");
	uint64_t el = now_ns() - t0;
	shutdown(lfd, SHUT_RDWR); /* wakes accept() */
	pthread_join(t, NULL);
	close(lfd);
	return el;
}

/* ---- worker: a short request connection (issue 21) ---- */

#define REQ_BYTES 16

/* Exactly n bytes (recv), or -1. */
static int recv_all(int fd, char *b, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, b, n, 0);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The server's side: accept, read the 16-byte request, write 16 bytes
 * back, then wait for the client's close (EOF or its reset) and close:
 * the client closes first, with a reset, so neither side keeps TIME_WAIT. */
static void *request_server(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		char b[REQ_BYTES];
		int c = accept(lfd, NULL, NULL);
		if (c < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				return NULL; /* listener shut down */
			continue;
		}
		if (recv_all(c, b, sizeof b) == 0 && send(c, b, sizeof b, 0) == (ssize_t)sizeof b)
			while (recv(c, b, sizeof b, 0) > 0)
				;
		close(c);
	}
}

/* (never inlined, as connect_once: the client's socket, connect,
 * setsockopt, send, recv and close) */
static __attribute__((noinline)) int request_once(const struct sockaddr_in *sa)
{
	static const struct linger lg = {1, 0}; /* RST on close: no TIME_WAIT */
	char b[REQ_BYTES] = "0123456789abcde";
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0 ||
	    send(fd, b, sizeof b, 0) != (ssize_t)sizeof b || recv_all(fd, b, sizeof b) != 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static uint64_t work_request(long n)
{
	struct sockaddr_in sa;
	pthread_t t;
	int lfd;
	listen_local(&sa, &t, request_server, &lfd);
	for (long i = 0; i < n / 20; i++) /* warm-up, untimed */
		if (request_once(&sa) != 0)
			die("request (warm-up)");
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (request_once(&sa) != 0)
			die("request");
	uint64_t el = now_ns() - t0;
	shutdown(lfd, SHUT_RDWR); /* wakes accept() */
	pthread_join(t, NULL);
	close(lfd);
	return el;
}

/* ---- worker: 1-byte ping-pong over a socketpair ---- */

struct pong {
	int fd;
	long n;
};

/* (never inlined, as connect_once) */
static __attribute__((noinline)) int xfer(int fd, int sending)
{
	char b = 'x';
	ssize_t r;
	do
		r = sending ? send(fd, &b, 1, 0) : recv(fd, &b, 1, 0);
	while (r < 0 && errno == EINTR);
	return r == 1 ? 0 : -1;
}

static void *ponger(void *arg)
{
	const struct pong *p = arg;
	for (long i = 0; i < p->n; i++)
		if (xfer(p->fd, 0) != 0 || xfer(p->fd, 1) != 0)
			break;
	return NULL;
}

static uint64_t work_pingpong(long n)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die("socketpair");
	long warm = n / 20;
	struct pong p = {sv[1], warm + n};
	pthread_t t;
	if (pthread_create(&t, NULL, ponger, &p) != 0)
		die("pthread_create");
	for (long i = 0; i < warm; i++)
		if (xfer(sv[0], 1) != 0 || xfer(sv[0], 0) != 0)
			die("ping-pong (warm-up)");
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (xfer(sv[0], 1) != 0 || xfer(sv[0], 0) != 0)
			die("ping-pong");
	uint64_t el = now_ns() - t0;
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
	return el;
}

/* An event loop's turn: epoll_wait for the echo, then recv it and send
 * the next byte (the ponger thread echoes each one back). */
static int epoll_turn(int ep, int fd)
{
	struct epoll_event ev;
	int r;
	do
		r = epoll_wait(ep, &ev, 1, 5000);
	while (r < 0 && errno == EINTR);
	return r == 1 && xfer(fd, 0) == 0 && xfer(fd, 1) == 0 ? 0 : -1;
}

static uint64_t work_epoll(long n)
{
	int sv[2], ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die("epoll/socketpair");
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = sv[0]};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev) != 0)
		die("epoll_ctl");
	long warm = n / 20;
	struct pong p = {sv[1], warm + n + 1};
	pthread_t t;
	if (pthread_create(&t, NULL, ponger, &p) != 0)
		die("pthread_create");
	if (xfer(sv[0], 1) != 0)
		die("first byte");
	for (long i = 0; i < warm; i++)
		if (epoll_turn(ep, sv[0]) != 0)
			die("epoll echo (warm-up)");
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (epoll_turn(ep, sv[0]) != 0)
			die("epoll echo");
	uint64_t el = now_ns() - t0;
	xfer(sv[0], 0); /* the last echo */
	pthread_join(t, NULL);
	close(sv[0]);
	close(sv[1]);
	close(ep);
	return el;
}

static void pin_last_cpu(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set)) {
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			sched_setaffinity(0, sizeof set, &set); /* best effort */
			return;
		}
}

static int worker(const char *what, const char *count)
{
	alarm(WORKER_LIMIT_S); /* default action kills us; parent sees it */
	pin_last_cpu(); /* before any thread exists: threads inherit it */
	long n = strtol(count, NULL, 10);
	if (n <= 0 || n > 10000000)
		return 2;
	uint64_t el;
	if (strcmp(what, "connect") == 0)
		el = work_connect(n);
	else if (strcmp(what, "pingpong") == 0)
		el = work_pingpong(n);
	else if (strcmp(what, "epoll") == 0)
		el = work_epoll(n);
	else if (strcmp(what, "request") == 0)
		el = work_request(n);
	else
		return 2;
	/* Say whether connect() resolves to something other than libc's, so
	 * the parent can check the preload really took effect (or did not). */
	Dl_info di;
	void *sym = dlsym(RTLD_DEFAULT, "connect");
	int shim = sym && dladdr(sym, &di) && di.dli_fname &&
		   !strstr(di.dli_fname, "libc.so");
	printf("%llu %d\n", (unsigned long long)el, shim);
	return fflush(stdout) == 0 ? 0 : 2;
}

/* ---- parent ---- */

/* One worker run; returns its elapsed ns, exits on any failure. */
static uint64_t run_one(const char *self, const char *lib, const char *what,
			long n)
{
	char count[32];
	snprintf(count, sizeof count, "%ld", n);
	int pfd[2];
	if (pipe(pfd) != 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		if (lib)
			setenv("LD_PRELOAD", lib, 1);
		else
			unsetenv("LD_PRELOAD");
		execl(self, self, "--worker", what, count, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char buf[64] = "";
	size_t got = 0;
	for (ssize_t r = 1;
	     got < sizeof buf - 1 && (r > 0 || (r < 0 && errno == EINTR));)
		if ((r = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0)
			got += (size_t)r;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	unsigned long long el = 0;
	int shim = -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(buf, "%llu %d", &el, &shim) != 2 || el == 0) {
		fprintf(stderr, "connect_bench: %s worker (%s) failed (status 0x%x)\n",
			what, lib ? "shim" : "plain", st);
		exit(2);
	}
	if (shim != (lib != NULL)) {
		fprintf(stderr, "connect_bench: %s worker: preload %s\n", what,
			lib ? "did not take effect" : "present in plain run");
		exit(2);
	}
	return el;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench(const char *self, const char *lib, const char *what, long n,
		  const char *label, const char *unit, uint64_t deadline)
{
	double plain[ROUNDS], shim[ROUNDS], ratio[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		if (now_ns() > deadline) {
			fprintf(stderr, "connect_bench: over %d s, giving up\n",
				TOTAL_LIMIT_S);
			exit(2);
		}
		if (r % 2 == 0) {
			plain[r] = (double)run_one(self, NULL, what, n);
			shim[r] = (double)run_one(self, lib, what, n);
		} else {
			shim[r] = (double)run_one(self, lib, what, n);
			plain[r] = (double)run_one(self, NULL, what, n);
		}
		ratio[r] = shim[r] / plain[r];
	}
	double q = median(ratio, ROUNDS);
	printf("%s: %ld %s x %d rounds: plain %.2f us/op, shim %.2f us/op, "
	       "ratio %.3f (median)%s\n",
	       label, n, unit, ROUNDS, median(plain, ROUNDS) / n / 1e3,
	       median(shim, ROUNDS) / n / 1e3, q, q > TARGET ? ", above target 1.01" : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--worker") == 0)
		return worker(argv[2], argv[3]);
	if (argc != 2)
		return fprintf(stderr, "usage: %s path/to/libbackoffshim.so\n", argv[0]), 2;
	char *lib = realpath(argv[1], NULL);
	if (!lib || access(lib, R_OK) != 0)
		die(argv[1]);
	char *self = realpath("/proc/self/exe", NULL);
	if (!self)
		die("/proc/self/exe");
	alarm(TOTAL_LIMIT_S + 30); /* backstop; the deadline check comes first */
	uint64_t deadline = now_ns() + (uint64_t)TOTAL_LIMIT_S * 1000000000u;
	bench(self, lib, "connect", CONNECTS, "connect+close loop", "connects",
	      deadline);
	bench(self, lib, "request", CONNECTS, "request loop (connect, send 16 B, recv 16 B, close)",
	      "requests", deadline);
	bench(self, lib, "pingpong", PINGPONGS, "send+recv 1-byte loop",
	      "round trips", deadline);
	bench(self, lib, "epoll", EPOLL_ECHOES, "epoll_wait+recv+send echo loop",
	      "turns", deadline);
	free(lib);
	free(self);
	return 0;
}

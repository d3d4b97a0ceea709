/*
 * conntest: a blocking TCP client with knobs, for the integration tests.
 *   conntest [-b LPORT] [-c] [-t THREADS] [-s SNDTIMEO_MS] [-a ALARM_MS [-r] [-j]]
 *            [-H PORT] HOST PORT
 *  -b  bind() to HOST:LPORT first; afterwards the local address (and, if
 *      LPORT is not 0, the port) must be the one bound. A kernel-chosen
 *      port (LPORT 0) is released by a failed connect, shim or not.
 *  -c  set FD_CLOEXEC, SO_KEEPALIVE and TCP_NODELAY first; afterwards they,
 *      the fd's identity and its blocking mode must be unchanged
 *  -t  connect from this many threads at once (each its own socket)
 *  -s  SO_SNDTIMEO on the socket
 *  -a  a SIGALRM handler (SA_RESTART with -r) fires after ALARM_MS; with -j
 *      it siglongjmps out of connect(), like alarm()-based timeouts do
 *  -H  the handler itself connects to HOST:PORT (async-signal-safe calls)
 *  -n  do the whole thing N times in a row (the alarm only on the first);
 *      "next" is printed between rounds
 *  -S  crash handlers (SIGSEGV, SIGABRT, no SA_RESTART) and a SIGCHLD
 *      handler with SA_RESTART; a child that exits after 150 ms is forked
 *      before connect
 *  With -j -c, the socket is checked after the jump too: flags and
 *  SO_SNDTIMEO as the program set them.
 * Prints one line per connect: "ok ms=N", "fail errno=NAME ms=N" or
 * "jumped ms=N" (and "handler connect ok|fail" for -H). Exit 0 if every
 * connect succeeded, 1 if one failed, 3 if a -b/-c check found a change.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct addrinfo *dest, *hdest;
static int opt_bind, opt_lport, opt_check, opt_jump, opt_restart, opt_sigs;
static long opt_sndtimeo, opt_alarm, opt_rounds = 1;
static sigjmp_buf jb;
static volatile sig_atomic_t handler_result = -1;
static int checks_failed;

static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static void on_alarm(int sig)
{
	(void)sig;
	if (hdest) {
		int fd = socket(hdest->ai_family, SOCK_STREAM, 0);
		handler_result = connect(fd, hdest->ai_addr, hdest->ai_addrlen) == 0;
		close(fd);
	}
	if (opt_jump)
		siglongjmp(jb, 1);
}

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("check failed: %s\n", what);
		checks_failed = 1;
	}
}

static void *one(void *arg)
{
	(void)arg;
	volatile int fd = socket(dest->ai_family, SOCK_STREAM | (opt_check ? SOCK_CLOEXEC : 0), 0);
	int on = 1;
	struct stat st0, st1;
	struct sockaddr_storage bound;
	socklen_t blen = sizeof bound;
	if (opt_check) {
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
		fstat(fd, &st0);
	}
	if (opt_sndtimeo) {
		struct timeval tv = {opt_sndtimeo / 1000, opt_sndtimeo % 1000 * 1000};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	}
	if (opt_bind) {
		struct sockaddr_storage a;
		memcpy(&a, dest->ai_addr, dest->ai_addrlen);
		((struct sockaddr_in *)&a)->sin_port = htons((uint16_t)opt_lport); /* v6: same offset */
		if (bind(fd, (struct sockaddr *)&a, dest->ai_addrlen))
			perror("bind");
		getsockname(fd, (struct sockaddr *)&bound, &blen);
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (opt_alarm) {
		struct itimerval it = {{0, 0}, {opt_alarm / 1000, opt_alarm % 1000 * 1000}};
		setitimer(ITIMER_REAL, &it, NULL);
	}
	int r, e;
	if (opt_jump && sigsetjmp(jb, 1)) {
		printf("jumped ms=%ld\n", ms_since(&t0));
		if (opt_check) {
			struct timeval tv;
			socklen_t l = sizeof tv;
			getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l);
			check(tv.tv_sec * 1000 + tv.tv_usec / 1000 == opt_sndtimeo,
			      "SO_SNDTIMEO kept after the jump");
			check(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "still blocking after the jump");
		}
		close(fd);
		return (void *)1;
	}
	r = connect(fd, dest->ai_addr, dest->ai_addrlen);
	e = errno;
	long ms = ms_since(&t0);
	if (r == 0)
		printf("ok ms=%ld\n", ms);
	else
		printf("fail errno=%s ms=%ld\n", strerrorname_np(e), ms);
	if (opt_bind && r == 0) {
		struct sockaddr_storage now;
		socklen_t nlen = sizeof now;
		getsockname(fd, (struct sockaddr *)&now, &nlen);
		if (opt_lport)
			check(((struct sockaddr_in *)&now)->sin_port == htons((uint16_t)opt_lport),
			      "bound port kept");
		if (now.ss_family == AF_INET)
			check(((struct sockaddr_in *)&now)->sin_addr.s_addr ==
			      ((struct sockaddr_in *)&bound)->sin_addr.s_addr, "bound address kept");
		else
			check(!memcmp(&((struct sockaddr_in6 *)&now)->sin6_addr,
				      &((struct sockaddr_in6 *)&bound)->sin6_addr, 16),
			      "bound address kept");
	}
	if (opt_check) {
		int v = 0;
		socklen_t l = sizeof v;
		fstat(fd, &st1);
		check(st0.st_ino == st1.st_ino && st0.st_dev == st1.st_dev, "same socket");
		check(fcntl(fd, F_GETFD) == FD_CLOEXEC, "FD_CLOEXEC kept");
		check(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "still blocking");
		getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &l);
		check(v == 1, "SO_KEEPALIVE kept");
		getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l);
		check(v == 1, "TCP_NODELAY kept");
		struct timeval tv;
		l = sizeof tv;
		getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &l);
		check(tv.tv_sec * 1000 + tv.tv_usec / 1000 == opt_sndtimeo, "SO_SNDTIMEO kept");
		if (r != 0) {
			/* a failed connect must leave no stale error behind */
			l = sizeof v;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l);
			check(v == 0, "no pending SO_ERROR");
		}
	}
	close(fd);
	return (void *)(long)(r != 0);
}

static void on_fault(int sig)
{
	(void)sig;
	_exit(99);
}

static void on_child(int sig)
{
	(void)sig;
}

static void crash_and_child_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fault; /* crash handlers: no SA_RESTART */
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGABRT, &sa, NULL);
	sa.sa_handler = on_child;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	if (fork() == 0) {
		usleep(150000);
		_exit(0);
	}
}

static struct addrinfo *resolve(const char *h, const char *p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
	if (getaddrinfo(h, p, &hints, &ai)) {
		fprintf(stderr, "conntest: bad address %s %s\n", h, p);
		exit(2);
	}
	return ai;
}

int main(int argc, char **argv)
{
	int c, threads = 0;
	const char *hport = NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "b:ct:s:a:rjH:n:S")) != -1) {
		switch (c) {
		case 'b': opt_bind = 1; opt_lport = atoi(optarg); break;
		case 'c': opt_check = 1; break;
		case 't': threads = atoi(optarg); break;
		case 's': opt_sndtimeo = atol(optarg); break;
		case 'a': opt_alarm = atol(optarg); break;
		case 'r': opt_restart = 1; break;
		case 'j': opt_jump = 1; break;
		case 'H': hport = optarg; break;
		case 'n': opt_rounds = atol(optarg); break;
		case 'S': opt_sigs = 1; break;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		return 2;
	dest = resolve(argv[optind], argv[optind + 1]);
	if (hport)
		hdest = resolve(argv[optind], hport);
	if (opt_alarm) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sa.sa_flags = opt_restart ? SA_RESTART : 0;
		sigaction(SIGALRM, &sa, NULL);
	}
	if (opt_sigs)
		crash_and_child_handlers();
	long failed = 0;
	for (long round = 0; round < opt_rounds; round++) {
	if (round) {
		printf("next\n");
		opt_alarm = 0;
	}
	if (threads > 0) {
		pthread_t t[64];
		if (threads > 64)
			threads = 64;
		for (int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, one, NULL);
		for (int i = 0; i < threads; i++) {
			void *r;
			pthread_join(t[i], &r);
			failed |= (long)r;
		}
	} else {
		failed |= (long)one(NULL);
	}
	}
	if (hdest)
		printf("handler connect %s\n", handler_result == 1 ? "ok" : handler_result == 0 ? "fail" : "none");
	freeaddrinfo(dest);
	if (hdest)
		freeaddrinfo(hdest);
	return checks_failed ? 3 : failed ? 1 : 0;
}

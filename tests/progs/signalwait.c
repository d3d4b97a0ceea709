/*
 * signalwait: a program whose signals meet a connect the shim backs off,
 * printing what it sees, so that a test can compare a run with the shim
 * and one without.
 *   signalwait CASE PORT       (PORT: dead)
 * Cases:
 *   ppoll, pselect, epoll_pwait
 *             a non-blocking connect to PORT, polled 300 ms (the shim
 *             parks it; a socket whose refusal came is closed); then CASE
 *             waits 3 s on an empty pipe and the socket, if still open,
 *             with a mask that blocks SIGUSR1. Another thread sends it 300 ms into the
 *             wait and writes to the pipe a second later, which ends the
 *             wait: "sent=1 inside=0" (sent: before the wait returned;
 *             inside: the handler ran before the write, so inside the
 *             wait)
 *   resethand SIGALRM caught by a handler installed with SA_RESETHAND and
 *             no SA_RESTART (glibc's signal() under -std=c99); alarm(1);
 *             a blocking connect to PORT: "connect=E secs=S"
 *   cancel    a thread loops on blocking connects to PORT; once a line is
 *             read from stdin, it is cancelled (deferred) and joined:
 *             "joined ms=N"
 *   jumped    alarm(1), whose handler siglongjmps out of a blocking
 *             connect to PORT (or out of the pause that follows one that
 *             failed): "async=N", the thread's cancel type then
 *   nested    as jumped, but the handler first makes a blocking connect
 *             of its own to PORT, bounded by a 700 ms SO_SNDTIMEO, then
 *             jumps: "async=N"
 *   badmask   as ppoll, but the mask pointer is 8: "ppoll=R ERRNAME"
 * Exit 0, or 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in dead;
static atomic_int sent, wrote, ran_before_write = -1;
static int pipe_in;
static pthread_t main_thread;

static double secs(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void caught(int sig)
{
	(void)sig;
	atomic_store(&ran_before_write, !atomic_load(&wrote));
}

static void *send_later(void *unused)
{
	(void)unused;
	usleep(300000);
	atomic_store(&sent, 1);
	pthread_kill(main_thread, SIGUSR1);
	sleep(1);
	atomic_store(&wrote, 1);
	(void)!write(pipe_in, "x", 1);
	return NULL;
}

static int masked_wait(const char *how)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), p[2];
	if (s < 0 || pipe(p) != 0)
		return 2;
	pipe_in = p[1];
	connect(s, (struct sockaddr *)&dead, sizeof dead);
	struct pollfd one = {s, POLLOUT, 0};
	if (poll(&one, 1, 300) > 0) {
		close(s); /* refused */
		s = -1;
	}
	struct sigaction sa = {.sa_handler = caught};
	sigaction(SIGUSR1, &sa, NULL);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	pthread_t t;
	main_thread = pthread_self();
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the sender blocks it all */
	pthread_create(&t, NULL, send_later, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	struct timespec three = {3, 0};
	if (!strcmp(how, "ppoll")) {
		struct pollfd in[2] = {{p[0], POLLIN, 0}, {s, POLLOUT, 0}};
		ppoll(in, 2, &three, &m);
	} else if (!strcmp(how, "pselect")) {
		fd_set r, w;
		FD_ZERO(&r);
		FD_ZERO(&w);
		FD_SET(p[0], &r);
		if (s >= 0)
			FD_SET(s, &w);
		pselect((s > p[0] ? s : p[0]) + 1, &r, &w, NULL, &three, &m);
	} else {
		int ep = epoll_create1(0);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = p[0]}, out;
		epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
		ev = (struct epoll_event){.events = EPOLLOUT, .data.fd = s};
		if (s >= 0)
			epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
		epoll_pwait(ep, &out, 1, 3000, &m);
	}
	int was_sent = atomic_load(&sent);
	pthread_join(t, NULL);
	printf("sent=%d inside=%d\n", was_sent, atomic_load(&ran_before_write));
	return 0;
}

static void nothing(int sig)
{
	(void)sig;
}

static int reset_handler(void)
{
	struct sigaction sa = {.sa_handler = nothing, .sa_flags = SA_RESETHAND | SA_NODEFER};
	sigaction(SIGALRM, &sa, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return 2;
	double t0 = secs();
	alarm(1);
	int r = connect(s, (struct sockaddr *)&dead, sizeof dead);
	int e = errno;
	printf("connect=%s secs=%.2f\n", r ? strerror(e) : "0", secs() - t0);
	return 0;
}

static void *connect_forever(void *unused)
{
	(void)unused;
	for (;;) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		connect(s, (struct sockaddr *)&dead, sizeof dead);
		close(s);
	}
	return NULL;
}

static int cancelled(void)
{
	pthread_t t;
	char line[16];
	pthread_create(&t, NULL, connect_forever, NULL);
	if (!fgets(line, sizeof line, stdin))
		return 2;
	double t0 = secs();
	pthread_cancel(t);
	pthread_join(t, NULL);
	printf("joined ms=%.0f\n", (secs() - t0) * 1000);
	return 0;
}

static sigjmp_buf out;

static void jump_out(int sig)
{
	(void)sig;
	siglongjmp(out, 1);
}

static void connect_then_jump_out(int sig)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct timeval bound = {0, 700000};
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
	connect(s, (struct sockaddr *)&dead, sizeof dead);
	close(s);
	jump_out(sig);
}

static int jumped(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler};
	sigaction(SIGALRM, &sa, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return 2;
	if (!sigsetjmp(out, 1)) {
		alarm(1);
		connect(s, (struct sockaddr *)&dead, sizeof dead);
		for (;;)
			pause();
	}
	int type;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &type);
	printf("async=%d\n", type == PTHREAD_CANCEL_ASYNCHRONOUS);
	return 0;
}

static int bad_mask(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s < 0)
		return 2;
	connect(s, (struct sockaddr *)&dead, sizeof dead);
	struct pollfd one = {s, POLLOUT, 0};
	if (poll(&one, 1, 300) > 0)
		one.fd = -1; /* refused: only a parked socket is still watched */
	struct timespec ts = {0, 100000000};
	int r = ppoll(&one, 1, &ts, (const sigset_t *)8);
	printf("ppoll=%d %s\n", r, r < 0 ? strerrorname_np(errno) : "");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	dead.sin_family = AF_INET;
	dead.sin_port = htons((unsigned short)atoi(argv[2]));
	dead.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "resethand"))
		return reset_handler();
	if (!strcmp(argv[1], "cancel"))
		return cancelled();
	if (!strcmp(argv[1], "jumped"))
		return jumped(jump_out);
	if (!strcmp(argv[1], "nested"))
		return jumped(connect_then_jump_out);
	if (!strcmp(argv[1], "badmask"))
		return bad_mask();
	return masked_wait(argv[1]);
}

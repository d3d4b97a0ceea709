/*
 * evloop: a small poll()-based server that also keeps trying to reach a dead
 * upstream, the way a naive proxy does.
 *   evloop LISTEN_PORT UPSTREAM_PORT SECONDS
 * It listens on 127.0.0.1:LISTEN_PORT and answers each line "ping" from any
 * client with "pong\n" (non-blocking, up to 61 clients). In the same poll set
 * it watches a non-blocking connect to 127.0.0.1:UPSTREAM_PORT: whenever none
 * is in flight it starts one (socket, O_NONBLOCK, connect); on POLLOUT/POLLERR
 * it reads SO_ERROR and, on failure, closes and starts again at the next turn
 * (a tight retry). Every call that goes to the shim (connect, getsockopt,
 * close, read, write) and every whole loop turn is timed with CLOCK_MONOTONIC.
 * After SECONDS (at most 30) it prints
 *   upstream_calls=N refused_fast=M max_call_ms=X max_turn_ms=Y
 * (N = upstream connect() calls, M = those that returned -1 ECONNREFUSED at
 * once) and exits 0. Exit 2 on bad usage or setup failure.
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 64            /* listener + upstream + clients */
#define POLL_MS 10          /* poll timeout per turn */
#define MAX_TURNS 100000000 /* a bound on the loop besides the clock */

struct client {
	char in[256], out[1024];
	size_t inlen, outlen;
};

static struct pollfd pfd[MAXFD]; /* [0] listener, [1] upstream, [2..] clients */
static struct client cl[MAXFD];
static double max_call_ms;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void took(double t0)
{
	double d = now_ms() - t0;
	if (d > max_call_ms)
		max_call_ms = d;
}

/* The calls the shim interposes, each timed. errno is kept. */
static int t_connect(int fd, const struct sockaddr *a, socklen_t l)
{
	double t0 = now_ms();
	int r = connect(fd, a, l), e = errno;
	took(t0);
	errno = e;
	return r;
}

static int t_getsockopt_err(int fd)
{
	int err = 0;
	socklen_t l = sizeof err;
	double t0 = now_ms();
	int r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l), e = errno;
	took(t0);
	return r ? e : err;
}

static void t_close(int fd)
{
	double t0 = now_ms();
	close(fd);
	took(t0);
}

static ssize_t t_read(int fd, void *b, size_t n)
{
	double t0 = now_ms();
	ssize_t r = read(fd, b, n);
	int e = errno;
	took(t0);
	errno = e;
	return r;
}

static ssize_t t_write(int fd, const void *b, size_t n)
{
	double t0 = now_ms();
	ssize_t r = write(fd, b, n);
	int e = errno;
	took(t0);
	errno = e;
	return r;
}

static void drop(int i)
{
	t_close(pfd[i].fd);
	pfd[i].fd = -1;
	pfd[i].events = 0;
}

/* Send what is queued; 0 if the client is still fine. */
static int flush_out(int i)
{
	struct client *c = &cl[i];
	while (c->outlen) {
		ssize_t w = t_write(pfd[i].fd, c->out, c->outlen);
		if (w < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		memmove(c->out, c->out + w, c->outlen - (size_t)w);
		c->outlen -= (size_t)w;
	}
	return 0;
}

/* Read what is there and queue a pong per ping line; 0 if still fine. */
static int serve(int i)
{
	struct client *c = &cl[i];
	ssize_t r = t_read(pfd[i].fd, c->in + c->inlen, sizeof c->in - c->inlen);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return -1;
	if (r > 0)
		c->inlen += (size_t)r;
	char *nl;
	while ((nl = memchr(c->in, '\n', c->inlen))) {
		size_t n = (size_t)(nl - c->in);
		if (n == 4 && !memcmp(c->in, "ping", 4)) {
			if (c->outlen + 5 > sizeof c->out)
				return -1; /* a client that never reads */
			memcpy(c->out + c->outlen, "pong\n", 5);
			c->outlen += 5;
		}
		memmove(c->in, nl + 1, c->inlen - n - 1);
		c->inlen -= n + 1;
	}
	if (c->inlen == sizeof c->in)
		return -1; /* a line too long */
	return flush_out(i);
}

static void accept_all(int lfd)
{
	for (int k = 0; k < MAXFD; k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int i = 2;
		while (i < MAXFD && pfd[i].fd >= 0)
			i++;
		if (i == MAXFD) {
			t_close(fd); /* full */
			continue;
		}
		pfd[i].fd = fd;
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
		memset(&cl[i], 0, sizeof cl[i]);
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: evloop LISTEN_PORT UPSTREAM_PORT SECONDS\n");
		return 2;
	}
	long lport = atol(argv[1]), uport = atol(argv[2]);
	double secs = atof(argv[3]);
	if (lport < 1 || lport > 65535 || uport < 1 || uport > 65535 || !(secs > 0 && secs <= 30)) {
		fprintf(stderr, "evloop: ports 1-65535, 0 < SECONDS <= 30\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons((uint16_t)lport)};
	struct sockaddr_in ua = {.sin_family = AF_INET, .sin_port = htons((uint16_t)uport)};
	la.sin_addr.s_addr = ua.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(lfd, (struct sockaddr *)&la, sizeof la) || listen(lfd, 64)) {
		perror("evloop: listen");
		return 2;
	}
	for (int i = 0; i < MAXFD; i++)
		pfd[i].fd = -1;
	pfd[0].fd = lfd;
	pfd[0].events = POLLIN;

	long calls = 0, refused_fast = 0;
	double max_turn_ms = 0, end = now_ms() + secs * 1e3;
	for (long turn = 0; turn < MAX_TURNS; turn++) {
		double t0 = now_ms();
		if (t0 >= end)
			break;
		if (pfd[1].fd < 0) { /* no upstream attempt in flight: start one */
			int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
				perror("evloop: upstream socket");
				return 2;
			}
			calls++;
			if (t_connect(fd, (struct sockaddr *)&ua, sizeof ua) == 0 || errno != EINPROGRESS) {
				if (errno == ECONNREFUSED)
					refused_fast++;
				t_close(fd); /* failed at once (or connected): again next turn */
			} else {
				pfd[1].fd = fd;
				pfd[1].events = POLLOUT;
			}
		}
		int left = (int)(end - t0) + 1;
		int n = poll(pfd, MAXFD, left < POLL_MS ? left : POLL_MS);
		if (n < 0 && errno != EINTR) {
			perror("evloop: poll");
			return 2;
		}
		if (n > 0) {
			if (pfd[0].revents & POLLIN)
				accept_all(lfd);
			if (pfd[1].fd >= 0 && pfd[1].revents & (POLLOUT | POLLERR | POLLHUP)) {
				t_getsockopt_err(pfd[1].fd); /* either way: close, retry */
				drop(1);
			}
			for (int i = 2; i < MAXFD; i++) {
				if (pfd[i].fd < 0 || !pfd[i].revents)
					continue;
				int bad = pfd[i].revents & (POLLERR | POLLNVAL);
				if (!bad && pfd[i].revents & (POLLIN | POLLHUP))
					bad = serve(i);
				if (!bad && pfd[i].revents & POLLOUT)
					bad = flush_out(i);
				if (bad)
					drop(i);
				else
					pfd[i].events = POLLIN | (cl[i].outlen ? POLLOUT : 0);
			}
		}
		double d = now_ms() - t0;
		if (d > max_turn_ms)
			max_turn_ms = d;
	}
	printf("upstream_calls=%ld refused_fast=%ld max_call_ms=%.3f max_turn_ms=%.3f\n", calls,
	       refused_fast, max_call_ms, max_turn_ms);
	return 0;
}

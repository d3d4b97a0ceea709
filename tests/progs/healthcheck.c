/*
 * healthcheck: a proxy's connect-only health check, as HAProxy's "check"
 * without "option tcp-check" does it. The process listens (a proxy has its
 * frontend), so the shim treats it as a server. Every CHECK_MS it opens a
 * non-blocking socket, connects to 127.0.0.1:BACKEND, waits for the
 * outcome with epoll_wait (at most CHECK_MS) and closes the socket:
 *   EPOLLOUT alone         -> up (the success is learned from the event
 *                             only: SO_ERROR is NOT read);
 *   EPOLLERR/EPOLLHUP      -> down, the error read with SO_ERROR;
 *   connect() fails at once-> down, with its errno;
 *   no event in CHECK_MS   -> down (timeout).
 * The backend is declared UP after RISE consecutive successful checks (as
 * HAProxy's "rise"); checks run on a fixed cadence (start + n*CHECK_MS).
 *   healthcheck BACKEND CHECK_MS RISE LIMIT_MS
 * One line per check: "check N up|down ERR t=SECONDS" (CLOCK_MONOTONIC,
 * Python's time.monotonic()), then "UP t=SECONDS" and exit 0, or "LIMIT"
 * and exit 1 after LIMIT_MS; exit 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	for (int i = 0; i < 1000; i++) {
		double left = t - mono();
		if (left <= 0)
			return;
		struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

static const char *errname(int e)
{
	switch (e) {
	case 0: return "OK";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNRESET: return "ECONNRESET";
	case ENETUNREACH: return "ENETUNREACH";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	default: return "EOTHER";
	}
}

/* One check: 0 if up, else the error (ETIMEDOUT for no event). */
static int check_once(const struct sockaddr_in *a, int ep, int check_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	int err = 0;
	if (connect(fd, (const struct sockaddr *)a, sizeof *a) == 0) {
		close(fd);
		return 0;
	}
	if (errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return err;
	}
	struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		err = errno;
		close(fd);
		return err;
	}
	struct epoll_event got;
	int n = epoll_wait(ep, &got, 1, check_ms);
	if (n <= 0)
		err = ETIMEDOUT;
	else if (got.events & (EPOLLERR | EPOLLHUP)) {
		socklen_t l = sizeof err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0 || err == 0)
			err = ECONNRESET;
	} else if (!(got.events & EPOLLOUT))
		err = ETIMEDOUT;
	/* EPOLLOUT alone: up, nothing more is asked of the socket */
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	return err;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int port = atoi(argv[1]), check_ms = atoi(argv[2]), rise = atoi(argv[3]),
	    limit_ms = atoi(argv[4]);
	if (port <= 0 || port > 65535 || check_ms <= 0 || rise <= 0 || limit_ms <= 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* the proxy's frontend: a listening socket makes this a server */
	int lst = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in la = {.sin_family = AF_INET};
	la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lst < 0 || bind(lst, (struct sockaddr *)&la, sizeof la) != 0 || listen(lst, 16) != 0)
		return 2;

	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int ep = epoll_create1(0);
	if (ep < 0)
		return 2;
	double start = mono(), end = start + limit_ms / 1000.0;
	int ok = 0;
	for (int n = 0; n < 100000; n++) {
		double at = start + n * (check_ms / 1000.0);
		if (at >= end)
			break;
		sleep_until(at);
		int err = check_once(&a, ep, check_ms);
		double t = mono();
		printf("check %d %s %s t=%.6f\n", n + 1, err ? "down" : "up", errname(err), t);
		ok = err ? 0 : ok + 1;
		if (ok >= rise) {
			printf("UP t=%.6f\n", t);
			return 0;
		}
	}
	printf("LIMIT\n");
	return 1;
}

/*
 * answered: a connect the kernel answers at once, whatever the destination
 * does, made to a destination that is backing off, so that a test can
 * compare a run with the shim and one without.
 *   answered CASE DEAD LIVE
 * First a non-blocking connect to 127.0.0.1:DEAD, polled 300 ms, closed
 * (with the shim, DEAD is then backing off). Then a socket that CASE
 * makes connects to 127.0.0.1:DEAD:
 *   connected     blocking, connected to 127.0.0.1:LIVE first
 *   nb_connected  non-blocking, connected to LIVE first (polled 2 s)
 *   family        an AF_INET6 socket, given the AF_INET address
 * "connect=R ERRNAME peer=P" (P: live, none, or getpeername's port).
 *   unspec        a blocking connect to DEAD that alarm(1) may interrupt
 *                 (a handler without SA_RESTART), then connect(AF_UNSPEC):
 *                 "unspec=R ERRNAME ms=N" (N: that call's time)
 * Exit 0, or 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in at(const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(port)),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	return a;
}

static int connected_to(struct sockaddr_in live, int flags)
{
	int s = socket(AF_INET, SOCK_STREAM | flags, 0);
	connect(s, (struct sockaddr *)&live, sizeof live);
	struct pollfd p = {s, POLLOUT, 0};
	poll(&p, 1, 2000);
	return s;
}

static void nothing(int sig)
{
	(void)sig;
}

static int unspec_after_alarm(struct sockaddr_in dead)
{
	struct sigaction sa = {.sa_handler = nothing};
	sigaction(SIGALRM, &sa, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	alarm(1);
	connect(s, (struct sockaddr *)&dead, sizeof dead);
	alarm(0);
	struct sockaddr none = {.sa_family = AF_UNSPEC};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = connect(s, &none, sizeof(struct sockaddr_in));
	int e = errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("unspec=%d %s ms=%ld\n", r, r ? strerrorname_np(e) : "",
	       (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct sockaddr_in dead = at(argv[2]), live = at(argv[3]);
	if (!strcmp(argv[1], "unspec"))
		return unspec_after_alarm(dead);
	int first = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	connect(first, (struct sockaddr *)&dead, sizeof dead);
	struct pollfd p = {first, POLLOUT, 0};
	poll(&p, 1, 300);
	close(first);
	int s;
	if (!strcmp(argv[1], "connected"))
		s = connected_to(live, 0);
	else if (!strcmp(argv[1], "nb_connected"))
		s = connected_to(live, SOCK_NONBLOCK);
	else if (!strcmp(argv[1], "family"))
		s = socket(AF_INET6, SOCK_STREAM, 0);
	else
		return 2;
	if (s < 0)
		return 2;
	int r = connect(s, (struct sockaddr *)&dead, sizeof dead);
	int e = errno;
	struct sockaddr_in peer = {0};
	socklen_t l = sizeof peer;
	getpeername(s, (struct sockaddr *)&peer, &l);
	char other[8];
	snprintf(other, sizeof other, "%d", ntohs(peer.sin_port));
	printf("connect=%d %s peer=%s\n", r, r ? strerrorname_np(e) : "",
	       !peer.sin_port ? "none" : peer.sin_port == live.sin_port ? "live" : other);
	return 0;
}

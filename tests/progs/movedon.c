/*
 * movedon: a program that moves on from a connect, printing what it sees,
 * so that a test can compare a run with the shim and one without.
 *   movedon CASE PORT [PORT2]
 * Every case starts with a non-blocking connect to 127.0.0.1:PORT ("the
 * socket"). Where PORT is dead, a 300 ms poll() that prints nothing lets
 * the shim park the socket. Cases:
 *   unspec_connected  PORT listens: poll(POLLOUT) up to 2 s, no SO_ERROR
 *             read; connect(AF_UNSPEC); poll up to 1 s; SO_ERROR; write
 *             one byte: "unspec=R/E events=0xE so_error=N write=R/E"
 *   unspec_parked     PORT dead: connect(AF_UNSPEC): "unspec=R/E", then
 *             "moved on"; poll up to 1 s: "events=0xE so_error=N"
 *   shutdown_parked   PORT dead: shutdown(SHUT_RDWR): "shutdown=R/E", then
 *             "moved on"; poll up to 1 s: "events=0xE so_error=N"
 *   elsewhere_parked  PORT dead, PORT2 listens: connect() the socket to
 *             PORT2 until it is connected (at most 5 times, each pending
 *             one polled up to 2 s): "connect=R/E" each, then
 *             "peer=PORT2" or "peer=none"; then 5 fresh sockets connect to
 *             PORT2: "fresh=N/5"
 *   stale_elsewhere   as elsewhere_parked, after a 50 ms sleep instead of
 *             the poll (the refusal unread)
 *   fork_child_reads  PORT dead: fork(); the child polls up to 1 s and
 *             reads SO_ERROR: "child events=0xE so_error=N"; the parent
 *             waits for it
 *   blocking_connect  PORT dead: the socket made blocking (F_SETFL), then
 *             connect() to PORT again: "connect=E"
 *   blocking_read     PORT dead: the socket made blocking, then read():
 *             "read=R/E" (alarm(5) ends a read that would hang)
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in to(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int connect_to(int fd, int port)
{
	struct sockaddr_in a = to(port);
	return connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
}

static int start(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		exit(2);
	connect_to(fd, port);
	return fd;
}

static short wait_for(int fd, short events, int ms)
{
	struct pollfd p = {fd, events, 0};
	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

static int so_error(int fd)
{
	int err = -1;
	socklen_t len = sizeof err;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err;
}

static void say_look(const char *who, int fd)
{
	short ev = wait_for(fd, POLLIN | POLLOUT, 1000);
	printf("%sevents=0x%x so_error=%d\n", who, ev, so_error(fd));
}

static int unspec(int fd)
{
	struct sockaddr sa = {.sa_family = AF_UNSPEC};
	return connect(fd, &sa, sizeof sa) == 0 ? 0 : errno;
}

static int peer_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	return getpeername(fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : 0;
}

static void connect_elsewhere(int fd, int port2)
{
	for (int i = 0; i < 5 && !peer_port(fd); i++) {
		int err = connect_to(fd, port2);
		printf("connect=%d\n", err);
		if (err == EINPROGRESS || err == EALREADY)
			wait_for(fd, POLLOUT, 2000);
	}
	if (peer_port(fd))
		printf("peer=%d\n", peer_port(fd));
	else
		printf("peer=none\n");
	int fresh = 0;
	for (int i = 0; i < 5; i++) {
		int s = start(port2);
		fresh += (wait_for(s, POLLOUT, 2000) & POLLOUT) && so_error(s) == 0;
		close(s);
	}
	printf("fresh=%d/5\n", fresh);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void moved_on(void)
{
	printf("moved on\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *c = argv[1];
	int port = atoi(argv[2]), port2 = argc > 3 ? atoi(argv[3]) : 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd = start(port);
	if (!strcmp(c, "unspec_connected")) {
		wait_for(fd, POLLOUT, 2000);
		int u = unspec(fd);
		short ev = wait_for(fd, POLLIN | POLLOUT, 1000);
		int err = so_error(fd);
		int w = send(fd, "x", 1, MSG_NOSIGNAL) == 1 ? 0 : errno;
		printf("unspec=%d events=0x%x so_error=%d write=%d\n", u, ev, err, w);
		return 0;
	}
	if (!strcmp(c, "stale_elsewhere")) {
		usleep(50000);
		connect_elsewhere(fd, port2);
		return 0;
	}
	wait_for(fd, POLLOUT, 300);
	if (!strcmp(c, "unspec_parked")) {
		printf("unspec=%d\n", unspec(fd));
		moved_on();
		say_look("", fd);
	} else if (!strcmp(c, "shutdown_parked")) {
		printf("shutdown=%d\n", shutdown(fd, SHUT_RDWR) == 0 ? 0 : errno);
		moved_on();
		say_look("", fd);
	} else if (!strcmp(c, "blocking_connect") || !strcmp(c, "blocking_read")) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		signal(SIGALRM, on_alarm);
		alarm(5);
		if (!strcmp(c, "blocking_connect")) {
			printf("connect=%d\n", connect_to(fd, port));
		} else {
			char b;
			printf("read=%d\n", read(fd, &b, 1) < 0 ? errno : 0);
		}
	} else if (!strcmp(c, "elsewhere_parked")) {
		connect_elsewhere(fd, port2);
	} else if (!strcmp(c, "fork_child_reads")) {
		pid_t pid = fork();
		if (pid == 0) {
			say_look("child ", fd);
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
	} else {
		return 2;
	}
	return 0;
}

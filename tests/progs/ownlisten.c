/*
 * ownlisten: a process is refused by an address, then listens there itself
 * and connects again. Each case prints what the program sees, so that a
 * test can compare a run with the shim and one without.
 *   ownlisten CASE ARG
 * Cases:
 *   unix PATH    a unix stream socket is bound to PATH (not listening); a
 *                blocking connect to PATH is refused: "first rc=R errno=E";
 *                the bound socket then listens, and a second blocking
 *                connect to PATH: "second rc=R errno=E ms=M" (M: the
 *                milliseconds the second connect took)
 *   wildcard PORT
 *                a non-blocking connect to 127.0.0.2:PORT (nothing listens)
 *                and a poll for its outcome (up to 3 s): "first rc=R
 *                errno=E so_error=N"; the program then listens on
 *                0.0.0.0:PORT, and a second non-blocking connect to
 *                127.0.0.2:PORT: "second rc=R errno=E so_error=N peer=yes|no"
 *                (so_error and peer after a poll of up to 3 s when the
 *                connect is in progress), then "queued=yes|no" (whether a
 *                connection waits in the listener's queue)
 * Exit 0, or 2 on bad usage or a setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

static int case_unix(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path)
		die("path too long");
	strcpy(a.sun_path, path);
	unlink(path);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0)
		die("bind");

	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		die("socket");
	errno = 0;
	int rc = connect(c, (struct sockaddr *)&a, sizeof a);
	printf("first rc=%d errno=%d\n", rc, rc < 0 ? errno : 0);
	close(c);

	if (listen(l, 16) < 0)
		die("listen");
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		die("socket");
	double t0 = now_ms();
	errno = 0;
	rc = connect(c, (struct sockaddr *)&a, sizeof a);
	int err = rc < 0 ? errno : 0;
	printf("second rc=%d errno=%d ms=%d\n", rc, err, (int)(now_ms() - t0));
	unlink(path);
	return 0;
}

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
		die("inet_pton");
	return a;
}

/* A non-blocking connect to 127.0.0.2:port; prints "WHAT rc=R errno=E
 * so_error=N" (so_error after a poll of up to 3 s if it is in progress),
 * and " peer=yes|no" if with_peer. Returns the socket. */
static int try_connect(const char *what, int port, int with_peer)
{
	struct sockaddr_in a = addr_of("127.0.0.2", port);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c < 0)
		die("socket");
	errno = 0;
	int rc = connect(c, (struct sockaddr *)&a, sizeof a);
	int err = rc < 0 ? errno : 0, soerr = 0;
	if (err == EINPROGRESS) {
		struct pollfd p = {c, POLLOUT, 0};
		poll(&p, 1, 3000);
		soerr = so_error(c);
	}
	printf("%s rc=%d errno=%d so_error=%d", what, rc, err, soerr);
	if (with_peer)
		printf(" peer=%s", peer(c));
	printf("\n");
	return c;
}

static int case_wildcard(int port)
{
	close(try_connect("first", port, 0));

	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in any = addr_of("0.0.0.0", port);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(l, (struct sockaddr *)&any, sizeof any) < 0 || listen(l, 16) < 0)
		die("listen");
	int c = try_connect("second", port, 1);
	/* the connection, if made, waits in the listener's queue */
	struct pollfd p = {l, POLLIN, 0};
	printf("queued=%s\n", poll(&p, 1, 0) == 1 ? "yes" : "no");
	close(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ownlisten unix PATH | ownlisten wildcard PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "unix"))
		return case_unix(argv[2]);
	if (!strcmp(argv[1], "wildcard") && atoi(argv[2]) > 0)
		return case_wildcard(atoi(argv[2]));
	fprintf(stderr, "ownlisten: unknown case %s\n", argv[1]);
	return 2;
}

/*
 * logharm: a plain program for the tests of what the shim's own log lines
 * and config files may do to a program (tests/integration/test_harm_log.py).
 * It never writes to stderr unless told to.
 *   logharm connect HOST PORT
 *       one blocking connect(); on success sends "ping\n", shuts down its
 *       sending side and reads the reply until EOF. Prints "fd=N" (the
 *       socket's number) and then "fail ERRNAME" or "got REPLY" on stdout.
 *       Exit 0 either way.
 *   logharm write
 *       writes "out\n" to fd 1 and "err\n" to fd 2; the exit status says
 *       which writes succeeded: bit 0 fd 1, bit 1 fd 2; bit 2 is set if fd 0
 *       is open.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EPIPE: return "EPIPE";
	case EBADF: return "EBADF";
	default: return "other";
	}
}

static int do_connect(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	if (getaddrinfo(host, port, &hints, &ai))
		return 2;
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	char out[512];
	int n = snprintf(out, sizeof out, "fd=%d\n", fd);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		n += snprintf(out + n, sizeof out - (size_t)n, "fail %s\n", errname(errno));
	} else {
		char buf[256];
		size_t got = 0;
		ssize_t r;
		if (send(fd, "ping\n", 5, MSG_NOSIGNAL) != 5)
			return 4;
		shutdown(fd, SHUT_WR);
		while (got < sizeof buf - 1 && (r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
			got += (size_t)r;
		buf[got] = '\0';
		n += snprintf(out + n, sizeof out - (size_t)n, "got %s", buf);
	}
	close(fd);
	freeaddrinfo(ai);
	/* One write to fd 1, which the tests keep open. */
	return write(1, out, (size_t)n) == n ? 0 : 5;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "connect"))
		return do_connect(argv[2], argv[3]);
	if (argc == 2 && !strcmp(argv[1], "write")) {
		int st = 0;
		if (write(1, "out\n", 4) == 4)
			st |= 1;
		if (write(2, "err\n", 4) == 4)
			st |= 2;
		if (fcntl(0, F_GETFD) != -1)
			st |= 4;
		return st;
	}
	return 2;
}

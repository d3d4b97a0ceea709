/*
 * wideaddr: a non-blocking client that passes its address with a
 * sockaddr_storage's length, as many programs do, to a port where nothing
 * listens: three sockets in turn, each connected, polled for up to 3 s,
 * its SO_ERROR read and closed. Prints one line per socket.
 *
 *   wideaddr 4|6 PORT     (6: an IPv4-mapped IPv6 address on an AF_INET6 socket)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int target(int v6, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &a->sin6_addr);
		return AF_INET6;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return AF_INET;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return fprintf(stderr, "usage: wideaddr 4|6 PORT\n"), 2;
	struct sockaddr_storage ss;
	int family = target(atoi(argv[1]) == 6, atoi(argv[2]), &ss);
	for (int i = 0; i < 3; i++) {
		int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return perror("socket"), 1;
		int r = connect(fd, (struct sockaddr *)&ss, sizeof ss);
		int cerr = r == 0 ? 0 : errno;
		struct pollfd p = {fd, POLLOUT, 0};
		int n = poll(&p, 1, 3000);
		int err = 0;
		socklen_t len = sizeof err;
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
		printf("connect=%s ready=%d so_error=%s\n", cerr ? strerror(cerr) : "0", n,
		       err ? strerror(err) : "0");
		close(fd);
	}
	return 0;
}

/*
 * unfollowed: the calls on a socket's data that the shim does not follow,
 * made on a socket still connecting, printing what they return, so that a
 * test can compare a socket the shim parked with one the kernel holds in
 * its handshake.
 *   unfollowed CALL PORT
 * A non-blocking connect to 127.0.0.1:PORT, polled 300 ms ("poll=N"), then
 * CALL: sendmmsg, recvmmsg, splice_out (pipe to socket), splice_in (socket
 * to pipe), sendfile (a file to the socket) or listen: "CALL=R ERRNAME".
 * SIGPIPE keeps its default action. Exit 0, or 2 on bad usage or a setup
 * failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

static long call(const char *what, int s)
{
	char buf[4] = "abc";
	struct iovec iov = {buf, 3};
	struct mmsghdr m = {.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
	int p[2];
	if (pipe(p) != 0 || write(p[1], buf, 3) != 3)
		return -2;
	if (!strcmp(what, "sendmmsg"))
		return sendmmsg(s, &m, 1, 0);
	if (!strcmp(what, "recvmmsg"))
		return recvmmsg(s, &m, 1, 0, NULL);
	if (!strcmp(what, "splice_out"))
		return splice(p[0], NULL, s, NULL, 3, SPLICE_F_NONBLOCK);
	if (!strcmp(what, "splice_in"))
		return splice(s, NULL, p[1], NULL, 3, SPLICE_F_NONBLOCK);
	if (!strcmp(what, "sendfile")) {
		int f = open("/proc/self/exe", O_RDONLY);
		return f < 0 ? -2 : sendfile(s, f, NULL, 3);
	}
	if (!strcmp(what, "listen"))
		return listen(s, 1);
	return -2;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s < 0)
		return 2;
	connect(s, (struct sockaddr *)&a, sizeof a);
	struct pollfd one = {s, POLLOUT, 0};
	printf("poll=%d\n", poll(&one, 1, 300));
	fflush(stdout);
	errno = 0;
	long r = call(argv[1], s);
	if (r == -2)
		return 2;
	printf("%s=%ld %s\n", argv[1], r, r < 0 ? strerrorname_np(errno) : "");
	return 0;
}

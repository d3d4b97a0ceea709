/*
 * owedfd: a non-blocking connect to PORT on 127.0.0.1 that fails, learned
 * through poll(); the socket was fdopen()ed and is fclose()d (libc closes it
 * internally, past any wrapper); FILE is then opened and gets the same fd
 * number; read() on it must return the file's bytes.
 *   owedfd PORT FILE
 * Prints "poll revents=0xN", "same fd: yes|no", then "read N: TEXT" or
 * "read -1 errno=NAME". Exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno != EINPROGRESS) {
		printf("connect: %s\n", strerror(errno));
		return 1;
	}
	FILE *f = fdopen(fd, "r+");
	struct pollfd p = {fd, POLLOUT, 0};
	poll(&p, 1, 5000);
	printf("poll revents=0x%x\n", (unsigned)p.revents);
	fclose(f);
	int file = open(argv[2], O_RDONLY);
	printf("same fd: %s\n", file == fd ? "yes" : "no");
	char buf[64];
	ssize_t r = read(file, buf, sizeof buf - 1);
	if (r < 0) {
		printf("read -1 errno=%s\n", strerrorname_np(errno));
	} else {
		buf[r] = 0;
		printf("read %zd: %s\n", r, buf);
	}
	return 0;
}

/*
 * herdnb: one client of a herd with a non-blocking socket. ONE connect to
 * 127.0.0.1:PORT, then poll(POLLOUT) for at most TIMEOUT_MS and the
 * outcome from SO_ERROR; no retries of its own.
 *   herdnb PORT TIMEOUT_MS
 * Prints "connected t=SECONDS" (CLOCK_MONOTONIC) and exits 0, or
 * "failed ERRNO t=SECONDS" and exits 1; 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0)
		return 2;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 2;
	int err = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		err = errno;
		if (err == EINPROGRESS) {
			struct pollfd p = {fd, POLLOUT, 0};
			int n = poll(&p, 1, atoi(argv[2]));
			socklen_t l = sizeof err;
			if (n <= 0)
				err = ETIMEDOUT;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
				err = errno;
		}
	}
	if (err)
		printf("failed %d t=%.6f\n", err, mono());
	else
		printf("connected t=%.6f\n", mono());
	close(fd);
	return err ? 1 : 0;
}

/*
 * tightloop: a deliberately naive client that reconnects in a tight loop.
 *   tightloop HOST PORT MAX_ATTEMPTS MAX_SECONDS
 * Each round: socket(), connect(), close() on failure, again at once (no
 * sleep). Once connected it reads the server's greeting; a connection the
 * server closes before saying anything counts as a failed round too. On a
 * greeting it prints "connected after N attempts: GREETING" and exits 0;
 * after MAX_ATTEMPTS rounds or MAX_SECONDS it prints "gave up after N
 * attempts" and exits 1.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: tightloop HOST PORT MAX_ATTEMPTS MAX_SECONDS\n");
		return 2;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai)) {
		fprintf(stderr, "tightloop: bad address\n");
		return 2;
	}
	long max = atol(argv[3]);
	double until = now() + atof(argv[4]);
	long n = 0;
	int last = 0;
	while (n < max && now() < until) {
		int fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0)
			return 2;
		n++;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			char buf[128];
			ssize_t r = read(fd, buf, sizeof buf - 1);
			if (r > 0) {
				buf[r] = '\0';
				printf("connected after %ld attempts: %s", n, buf);
				close(fd);
				freeaddrinfo(ai);
				return 0;
			}
			last = r == 0 ? ECONNRESET : errno;
			close(fd);
			continue;
		}
		last = errno;
		close(fd);
	}
	printf("gave up after %ld attempts: %s\n", n, strerror(last));
	freeaddrinfo(ai);
	return 1;
}

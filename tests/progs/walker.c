/*
 * walker: a client that walks its own list of hosts, as libpq (host=A,B),
 * pgJDBC and gRPC's ipv4:A,B do: a non-blocking connect to each in turn,
 * bounded by its own timeout, until one connects.
 *   walker TIMEOUT_MS ROUNDS ADDR:PORT...
 * Per round prints "round N ADDR:PORT MS" (the host it reached and the
 * round's time in ms) or "round N none MS". Exit 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 1 if a connect to host:port completes within timeout ms */
static int try_one(const char *spec, int timeout)
{
	char host[64];
	const char *colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof host)
		return 0;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
	inet_pton(AF_INET, host, &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int ok = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
		ok = 1;
	} else if (errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int err = 0;
		socklen_t l = sizeof err;
		if (poll(&p, 1, timeout) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 &&
		    err == 0)
			ok = 1;
	}
	close(fd);
	return ok;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int timeout = atoi(argv[1]), rounds = atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int r = 1; r <= rounds; r++) {
		double t0 = now_ms();
		const char *reached = "none";
		for (int i = 3; i < argc; i++)
			if (try_one(argv[i], timeout)) {
				reached = argv[i];
				break;
			}
		printf("round %d %s %.0f\n", r, reached, now_ms() - t0);
	}
	return 0;
}

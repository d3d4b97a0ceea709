/*
 * cstatic: a blocking TCP client linked with -static (build/static/cstatic),
 * for the seccomp engine (issue 23): LD_PRELOAD cannot reach it.
 *   cstatic [-r] HOST PORT
 * HOST is a literal IPv4 or IPv6 address (a static program's getaddrinfo
 * would need the shared NSS modules). One socket(), one blocking connect();
 * with -r, then reads the server's first line (SO_RCVTIMEO 2 s).
 * Prints one line: "connected ms=N" (with -r: " greeting=LINE") or
 * "error errno=NAME ms=N". Exit 0 if connected, 1 if not, 2 for usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

static int usage(void)
{
	fprintf(stderr, "usage: cstatic [-r] HOST PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	int opt_read = 0;
	if (argc > 1 && strcmp(argv[1], "-r") == 0) {
		opt_read = 1;
		argc--;
		argv++;
	}
	if (argc != 3)
		return usage();
	char *end;
	long port = strtol(argv[2], &end, 10);
	if (*end || port < 1 || port > 65535)
		return usage();
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, argv[1], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((unsigned short)port);
		len = sizeof *s4;
	} else if (inet_pton(AF_INET6, argv[1], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((unsigned short)port);
		len = sizeof *s6;
	} else {
		return usage();
	}

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
		int e = errno;
		printf("error errno=%s ms=%ld\n", strerrorname_np(e) ? strerrorname_np(e) : "?",
		       ms_since(&t0));
		return 1;
	}
	long ms = ms_since(&t0);
	if (!opt_read) {
		printf("connected ms=%ld\n", ms);
		return 0;
	}
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char buf[256];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	printf("connected ms=%ld greeting=%s\n", ms, buf);
	close(fd);
	return 0;
}

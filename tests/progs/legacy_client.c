/*
 * legacy_client: the kind of program backoffshim is for. It connects once,
 * with a plain blocking connect(), prints the server's greeting and exits.
 * If the server is not up yet it fails, like many real clients do.
 *   legacy_client HOST PORT
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: legacy_client HOST PORT\n");
		return 2;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	int rc = getaddrinfo(argv[1], argv[2], &hints, &ai);
	if (rc) {
		fprintf(stderr, "legacy_client: %s\n", gai_strerror(rc));
		return 2;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		fprintf(stderr, "legacy_client: connect to %s:%s failed: %s\n", argv[1],
			argv[2], strerror(errno));
		freeaddrinfo(ai);
		return 1;
	}
	char buf[256];
	ssize_t r = read(fd, buf, sizeof buf - 1);
	buf[r > 0 ? r : 0] = '\0';
	printf("legacy_client: connected; server says: %s", buf);
	close(fd);
	freeaddrinfo(ai);
	return 0;
}

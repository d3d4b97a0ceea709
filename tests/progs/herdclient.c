/*
 * herdclient: the simplest client of a herd. One blocking connect to
 * 127.0.0.1:PORT, no sleeps, no retries of its own.
 *   herdclient PORT
 * Exit 0 once connected, 1 if the connect failed, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2 || atoi(argv[1]) <= 0)
		return 2;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
		return 1;
	close(fd);
	return 0;
}

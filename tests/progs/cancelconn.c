/*
 * cancelconn: a thread makes a blocking connect() to 127.0.0.1:PORT (a dead
 * port: with the shim, a retried one) and is cancelled after 300 ms.
 *   cancelconn PORT
 * Prints "canceled=0|1 nonblocking=0|1": whether the thread ended by
 * cancellation, and whether the socket was left O_NONBLOCK. Exit 0.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int port, fd = -1;

static void *client(void *arg)
{
	(void)arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	fd = socket(AF_INET, SOCK_STREAM, 0);
	connect(fd, (struct sockaddr *)&a, sizeof a);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	port = atoi(argv[1]);
	pthread_t t;
	void *res = NULL;
	pthread_create(&t, NULL, client, NULL);
	usleep(300000);
	pthread_cancel(t);
	pthread_join(t, &res);
	printf("canceled=%d nonblocking=%d\n", res == PTHREAD_CANCELED,
	       fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
	return 0;
}

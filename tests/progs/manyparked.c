/*
 * manyparked: N threads, each with a non-blocking connect of its own to
 * 127.0.0.1:PORT, each waiting for its outcome with poll() (up to 20 s) and
 * reading SO_ERROR, as a connection pool starting up would.
 *   manyparked PORT N
 * Prints "connected=C refused=R other=O" and exits 0 if all connected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int port;
static atomic_int connected, refused, other;

static void *one(void *arg)
{
	(void)arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int err = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
	if (err == EINPROGRESS) {
		struct pollfd p = {fd, POLLOUT, 0};
		socklen_t len = sizeof err;
		err = poll(&p, 1, 20000) == 1 ? 0 : ETIMEDOUT;
		if (!err)
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	}
	atomic_fetch_add(err == 0 ? &connected : err == ECONNREFUSED ? &refused : &other, 1);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	port = atoi(argv[1]);
	int n = atoi(argv[2]);
	pthread_t *t = calloc((size_t)n, sizeof *t);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 * 1024);
	int made = 0;
	while (made < n && pthread_create(&t[made], &at, one, NULL) == 0)
		made++;
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	printf("connected=%d refused=%d other=%d\n", atomic_load(&connected),
	       atomic_load(&refused), atomic_load(&other) + n - made);
	return atomic_load(&connected) == n ? 0 : 1;
}

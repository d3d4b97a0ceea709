/*
 * waiters: a program whose second thread acts while its first waits in a
 * blocking connect, so that a test can compare a run with the shim (the
 * wait is the shim's backoff) and one without (no wait at all).
 *   waiters CASE PORT
 * A thread connects a blocking TCP socket to 127.0.0.1:PORT and prints
 * "thread fd=N r=R errno=E". The main thread reads one line from stdin (the
 * test sends it once the thread waits), then:
 *   socket    socket(): "main socket=N errno=E"
 *   rlimit    the same, the fd limit at 5 from the start
 *   closefrom closefrom(4), then a pipe; after the thread ends, a byte
 *             through it: "pipe=R,W write=N read=N"
 *   reuse     close()s the thread's socket and makes a new one (it gets the
 *             number), binds it and listens on it; after the thread ends,
 *             asks its peer: "new=N bind=R listen=R peer=R"
 * Exit 0, or 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static int port, tfd = -1;

static struct sockaddr_in loopback(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)p)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static void *connector(void *arg)
{
	(void)arg;
	struct sockaddr_in a = loopback(port);
	int r = connect(tfd, (struct sockaddr *)&a, sizeof a);
	printf("thread fd=%d r=%d errno=%d\n", tfd, r, r ? errno : 0);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (port = atoi(argv[2])) <= 0)
		return fprintf(stderr, "usage: waiters CASE PORT\n"), 2;
	const char *c = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(c, "rlimit")) {
		struct rlimit rl = {5, 5};
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	tfd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t t;
	pthread_create(&t, NULL, connector, NULL);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 2;
	if (!strcmp(c, "socket") || !strcmp(c, "rlimit")) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		printf("main socket=%d errno=%d\n", s, s < 0 ? errno : 0);
		pthread_join(t, NULL);
	} else if (!strcmp(c, "closefrom")) {
		int p[2];
		closefrom(4);
		if (pipe(p) != 0)
			return 2;
		pthread_join(t, NULL);
		char b = 'x';
		ssize_t w = write(p[1], &b, 1), r = read(p[0], &b, 1);
		printf("pipe=%d,%d write=%zd read=%zd\n", p[0], p[1], w, r);
	} else if (!strcmp(c, "reuse")) {
		close(tfd);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = loopback(0), peer;
		socklen_t l = sizeof peer;
		int b = bind(s, (struct sockaddr *)&a, sizeof a), li = listen(s, 5);
		pthread_join(t, NULL);
		int g = getpeername(s, (struct sockaddr *)&peer, &l);
		printf("new=%d bind=%d listen=%d peer=%d\n", s, b, li, g);
	} else {
		return 2;
	}
	return 0;
}

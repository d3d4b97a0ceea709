/*
 * fastedge: edges of the connect fast path that a preloaded library must
 * not turn into harm. Prints one line per step; the output and the exit
 * status are compared with the same run without the shim.
 *
 *   fastedge badaddr PORT       warm connects, then connect() with a NULL
 *                               and a kernel-half address: EFAULT
 *   fastedge reuse SLOW PORT    thread A's blocking connect to SLOW (a full
 *                               accept queue) is in flight when the main
 *                               thread closes its fd and connects a new
 *                               socket, which takes the same number, to
 *                               PORT; SLOW then refuses A. Prints how long a
 *                               later connect to PORT takes, in tenths of a
 *                               second (A's failure belongs to SLOW)
 *
 * The listeners are made with raw system calls, so the shim sees only the
 * client side.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int raw_listen(int port, int backlog)
{
	int l = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = loopback(port);
	syscall(SYS_setsockopt, l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (syscall(SYS_bind, l, &a, sizeof a) || syscall(SYS_listen, l, backlog)) {
		perror("listen");
		exit(3);
	}
	return l;
}

/* socket + connect + close through libc (the shim's wrappers) */
static int connect_once(int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(port);
	int r = connect(s, (struct sockaddr *)&a, sizeof a);
	int err = r ? errno : 0;
	close(s);
	return err;
}

static void warm(int listener, int port)
{
	for (int i = 0; i < 3; i++) {
		if (connect_once(port))
			exit(4);
		syscall(SYS_close, (int)syscall(SYS_accept4, listener, NULL, NULL, 0));
	}
}

static int badaddr(int port)
{
	int l = raw_listen(port, 16);
	warm(l, port);
	const void *bad[] = {NULL, (const void *)-1L, (const void *)-4096L};
	for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		errno = 0;
		int r = connect(s, bad[i], sizeof(struct sockaddr_in));
		printf("bad address %u: %d %s\n", i, r, strerror(errno));
		close(s);
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct slow {
	int fd, port;
	pid_t tid;
};

static void *connect_slow(void *p)
{
	struct slow *s = p;
	__atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	struct sockaddr_in a = loopback(s->port);
	connect(s->fd, (struct sockaddr *)&a, sizeof a); /* its result is racy */
	return NULL;
}

/* Is thread tid inside connect() (the system call's number first in
 * /proc/.../syscall)? */
static int in_connect(pid_t tid)
{
	if (!tid)
		return 0;
	char path[64], buf[64] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = fgets(buf, sizeof buf, f) != NULL;
	fclose(f);
	return n && atoi(buf) == SYS_connect;
}

static int reuse(int slow_port, int port)
{
	int slow = raw_listen(slow_port, 0), l = raw_listen(port, 16);
	int fill = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = loopback(slow_port);
	syscall(SYS_connect, fill, &a, sizeof a); /* the accept queue is full */
	warm(l, port);
	struct slow s = {socket(AF_INET, SOCK_STREAM, 0), slow_port, 0};
	pthread_t t;
	pthread_create(&t, NULL, connect_slow, &s);
	for (int i = 0; i < 5000 && !in_connect(__atomic_load_n(&s.tid, __ATOMIC_SEQ_CST)); i++)
		usleep(1000);
	close(s.fd);
	int again = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in b = loopback(port);
	int r = connect(again, (struct sockaddr *)&b, sizeof b);
	printf("new socket on the same number: %s, connect: %d\n",
	       again == s.fd ? "yes" : "no", r);
	syscall(SYS_close, slow); /* A's next SYN is refused */
	syscall(SYS_close, fill);
	for (int i = 0; i < 5000 && in_connect(s.tid); i++) /* refused: out of the kernel's connect */
		usleep(1000);
	double t0 = now();
	int err = connect_once(port);
	printf("later connect: %s in %d tenths\n", strerror(err), (int)((now() - t0) * 10));
	pthread_join(t, NULL);
	close(again);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && !strcmp(argv[1], "badaddr"))
		return badaddr(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "reuse"))
		return reuse(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: fastedge badaddr PORT | reuse SLOW PORT\n");
	return 2;
}

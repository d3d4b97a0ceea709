/*
 * harmprog: small programs for test_noharm.py, each run the same way with
 * and without the shim so that everything they do can be compared.
 *
 *   harmprog stderr N DEADPORT
 *       two threads take turns writing N long numbered lines to stderr
 *       (one fprintf each, paced 0.5 ms apart) while the main thread makes
 *       two blocking connects to 127.0.0.1:DEADPORT; prints the errnos.
 *   harmprog closed012 FILE_A FILE_B LIVEPORT DEADPORT
 *       meant to start with fds 0, 1 and 2 closed: opens FILE_A (fd 0) and
 *       FILE_B (fd 1) for writing, connects a socket to LIVEPORT (fd 2),
 *       then connects another socket to DEADPORT; finally writes its own
 *       marker lines to fds 0, 1 and 2. Exit 0 if the fds were 0/1/2 and
 *       the dead connect failed, 4 + something otherwise.
 *   harmprog emfile LIMIT LIVEPORT DEADPORT
 *       lowers RLIMIT_NOFILE to LIMIT, opens /dev/null until EMFILE and
 *       prints what socket(), dup(), connect() and getaddrinfo() do from
 *       there, errno included (also errno left by successful calls).
 *   harmprog vfork LIVEPORT DEADPORT
 *       vfork()ed child connects to LIVEPORT and to DEADPORT, then _exit()s
 *       with a code saying what happened; the parent prints the status,
 *       then does the same connects itself.
 *   harmprog goconnect DEADPORT
 *       waits for a line on stdin, then connects to DEADPORT once and prints
 *       the outcome on stdout (never writes stderr itself).
 *   harmprog fdnum
 *       prints the fd numbers that open() and socket() return first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in loop_addr(int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* connect a fresh TCP socket; returns the fd (connected) or -errno */
static int tcp_to(int port, int *fdout)
{
	struct sockaddr_in a = loop_addr(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fdout)
		*fdout = fd;
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = errno;
		if (!fdout)
			close(fd);
		return -e;
	}
	return fd;
}

static const char *en(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "0";
}

/* ---- stderr ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, nlines;
static atomic_int written;
static struct timespec t_start;

static void *writer(void *arg)
{
	int me = (int)(long)arg;
	char pad[301];
	for (;;) {
		pthread_mutex_lock(&mu);
		while (turn < nlines && turn % 2 != me)
			pthread_cond_wait(&cv, &mu);
		int i = turn;
		pthread_mutex_unlock(&mu);
		if (i >= nlines)
			return NULL;
		/* paced: line i no earlier than 0.5 ms * i after the start */
		struct timespec at = t_start;
		at.tv_nsec += (long)i * 500000L;
		at.tv_sec += at.tv_nsec / 1000000000L;
		at.tv_nsec %= 1000000000L;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
		int len = 40 + (i * 37) % 260;
		for (int k = 0; k < len; k++)
			pad[k] = (char)('a' + (i + k) % 26);
		pad[len] = 0;
		fprintf(stderr, "thread %c line %05d %s end\n", 'A' + me, i, pad);
		atomic_fetch_add(&written, 1);
		pthread_mutex_lock(&mu);
		turn++;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
}

static int do_stderr(int n, int dead)
{
	pthread_t t[2];
	nlines = n;
	clock_gettime(CLOCK_MONOTONIC, &t_start);
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	while (atomic_load(&written) < 10) /* the writers are running */
		sched_yield();
	for (int k = 0; k < 2; k++)
		printf("connect %d: %s\n", k, en(-tcp_to(dead, NULL)));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("lines %d\n", atomic_load(&written));
	return 0;
}

/* ---- closed012 ---- */

static int do_closed012(const char *fa, const char *fb, int live, int dead)
{
	int bad = 0;
	int a = open(fa, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int b = open(fb, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int s, r = tcp_to(live, &s);
	if (a != 0 || b != 1 || s != 2 || r != 2)
		bad |= 1;
	int d = tcp_to(dead, NULL);
	if (d != -ECONNREFUSED)
		bad |= 2;
	static const char ma[] = "program line for fd 0\n", mb[] = "program line for fd 1\n",
			  ms[] = "program line for fd 2\n";
	if (write(0, ma, sizeof ma - 1) != (ssize_t)sizeof ma - 1 ||
	    write(1, mb, sizeof mb - 1) != (ssize_t)sizeof mb - 1 ||
	    write(2, ms, sizeof ms - 1) != (ssize_t)sizeof ms - 1)
		bad |= 4;
	shutdown(2, SHUT_WR);
	char buf[64];
	while (read(2, buf, sizeof buf) > 0) /* until the server closes */
		;
	return bad ? 4 + bad : 0;
}

/* ---- emfile ---- */

static int do_emfile(int limit, int live, int dead)
{
	struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = (rlim_t)limit;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		perror("setrlimit");
		return 2;
	}
	int n = 0, last = -1, fd;
	while ((fd = open("/dev/null", O_RDONLY)) >= 0) {
		last = fd;
		n++;
	}
	printf("opened %d, last fd %d, then %s\n", n, last, en(errno));
	errno = 0;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	printf("socket at limit: %d %s\n", fd, en(errno));
	errno = 0;
	fd = dup(0);
	printf("dup at limit: %d %s\n", fd, en(errno));
	int sv[2];
	errno = 0;
	fd = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	printf("socketpair at limit: %d %s\n", fd, en(errno));

	/* one free slot: a socket, a failing connect, a succeeding one */
	close(last);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	printf("socket in the freed slot: %s\n", s == last ? "same number" : "other number");
	struct sockaddr_in da = loop_addr(dead), la = loop_addr(live);
	errno = 0;
	int r = connect(s, (struct sockaddr *)&da, sizeof da);
	printf("connect dead at limit: %d %s\n", r, en(errno));
	errno = EMFILE; /* a successful call must leave errno alone */
	r = connect(s, (struct sockaddr *)&la, sizeof la);
	printf("connect live at limit: %d errno after %s\n", r, en(errno));
	char buf[64];
	errno = EMFILE;
	ssize_t got = recv(s, buf, sizeof buf, 0);
	printf("recv: %zd errno after %s\n", got, en(errno));
	errno = 0;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	printf("socket at limit again: %d %s\n", fd, en(errno));
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	errno = 0;
	int g = getaddrinfo("localhost", "80", &hints, &ai);
	printf("getaddrinfo at limit: %s\n", g == 0 ? "ok" : gai_strerror(g));
	if (g == 0)
		freeaddrinfo(ai);
	close(s);
	/* a non-blocking connect to the dead port with all fds in use */
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	errno = 0;
	r = connect(s, (struct sockaddr *)&da, sizeof da);
	printf("nonblocking connect dead: %d %s\n", r, en(errno));
	fflush(stdout);
	return 0;
}

/* ---- vfork ---- */

static int do_vfork(int live, int dead)
{
	pid_t pid = vfork();
	if (pid == 0) {
		int r1 = tcp_to(live, NULL);
		int r2 = tcp_to(dead, NULL);
		_exit((r1 >= 0 ? 100 : 0) + (r2 == -ECONNREFUSED ? 10 : r2 >= 0 ? 20 : 30));
	}
	if (pid < 0) {
		perror("vfork");
		return 2;
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st))
		printf("child exited %d\n", WEXITSTATUS(st));
	else
		printf("child status 0x%x\n", st);
	int r1 = tcp_to(live, NULL);
	printf("parent live: %s\n", r1 >= 0 ? "ok" : en(-r1));
	int r2 = tcp_to(dead, NULL);
	printf("parent dead: %s\n", r2 >= 0 ? "ok" : en(-r2));
	/* descriptors the parent opens now may take numbers the child used */
	int p[2];
	if (pipe(p) == 0) {
		errno = 0;
		ssize_t w = write(p[1], "xy", 2);
		char b[2];
		ssize_t rd = read(p[0], b, 2);
		printf("pipe after vfork: write %zd read %zd errno %s\n", w, rd, en(errno));
	}
	return 0;
}

/* ---- goconnect ---- */

static int do_goconnect(int dead)
{
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 2;
	int r = tcp_to(dead, NULL);
	printf("connect: %s\n", r >= 0 ? "ok" : en(-r));
	fflush(stdout);
	return r >= 0 ? 0 : 1;
}

/* ---- fdnum ---- */

static int do_fdnum(void)
{
	int a = open("/dev/null", O_RDONLY);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int b = dup(0);
	printf("open %d socket %d dup %d\n", a, s, b);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	const char *c = argv[1];
	if (!strcmp(c, "stderr") && argc == 4)
		return do_stderr(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(c, "closed012") && argc == 6)
		return do_closed012(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
	if (!strcmp(c, "emfile") && argc == 5)
		return do_emfile(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(c, "vfork") && argc == 4)
		return do_vfork(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(c, "goconnect") && argc == 3)
		return do_goconnect(atoi(argv[2]));
	if (!strcmp(c, "fdnum") && argc == 2)
		return do_fdnum();
	return 2;
}

/*
 * sclient: a static C program with signal knobs (build/static/sclient), for
 * the seccomp engine's tests (issue 23): what a program's own signal
 * handlers, timers and threads do to a held blocking connect, and what a
 * supervisor forwards to it. HOST is a literal IPv4 or IPv6 address.
 *
 *   sclient [-a MS [-r]] [-u] [-t N] HOST PORT
 *      One blocking connect (with -t, N threads at once, each its own
 *      socket). -a: a SIGALRM handler (SA_RESTART with -r) and a timer that
 *      fires once after MS (the alarm()-style timeout of C programs). -u: a
 *      SIGUSR1 handler with SA_RESTART that counts (for a signal storm).
 *      Prints one line:
 *        connected ms=N alarms=A usr1=U          (exit 0)
 *        error errno=NAME ms=N alarms=A usr1=U   (exit 1)
 *      and with -t:  connected=K of=N ms=T [errno=NAME:COUNT ...]
 *      (exit 0 if all connected, else 1).
 *   sclient -w
 *      Counts SIGUSR1, SIGINT and SIGHUP (handlers without SA_RESTART),
 *      printing "ready pid=P" first and "usr1=U int=I hup=H" after each
 *      signal handled, until SIGTERM: then prints "term usr1=U int=I
 *      hup=H" and exits 0. Gives up after 30 s (exit 3).
 *   sclient -k SIG
 *      Kills itself with signal SIG (its default action).
 * Exit 2 for usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms, usr1, ints, hups, term;
static struct timespec t0;
static struct sockaddr_storage ss;
static socklen_t sslen;

static long ms_since(const struct timespec *from)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - from->tv_sec) * 1000 + (t.tv_nsec - from->tv_nsec) / 1000000;
}

static const char *ename(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "?";
}

static int usage(void)
{
	fprintf(stderr, "usage: sclient [-a MS [-r]] [-u] [-t N] HOST PORT | sclient -w | "
			"sclient -k SIG\n");
	return 2;
}

static void on_signal(int sig)
{
	if (sig == SIGALRM)
		alarms++;
	else if (sig == SIGUSR1)
		usr1++;
	else if (sig == SIGINT)
		ints++;
	else if (sig == SIGHUP)
		hups++;
	else if (sig == SIGTERM)
		term = 1;
}

static void handle(int sig, int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static int wait_mode(void)
{
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1), sigaddset(&block, SIGINT), sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	handle(SIGUSR1, 0), handle(SIGINT, 0), handle(SIGHUP, 0), handle(SIGTERM, 0);
	alarm(30); /* (default action: the test's bound) */
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	int seen = 0;
	while (!term) {
		sigsuspend(&old); /* handlers run only here */
		int now = usr1 + ints + hups;
		if (now != seen && !term) {
			printf("usr1=%d int=%d hup=%d\n", (int)usr1, (int)ints, (int)hups);
			fflush(stdout);
		}
		seen = now;
	}
	printf("term usr1=%d int=%d hup=%d\n", (int)usr1, (int)ints, (int)hups);
	return 0;
}

static int one_connect(int *err)
{
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, sslen) < 0) {
		*err = errno;
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

#define MAX_THREADS 64
static int results[MAX_THREADS];

static void *thread_main(void *arg)
{
	int *res = arg, err = 0;
	int fd = one_connect(&err);
	*res = fd >= 0 ? 0 : err;
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int threads_mode(int n)
{
	pthread_t th[MAX_THREADS];
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, thread_main, &results[i]) != 0)
			return fprintf(stderr, "sclient: pthread_create failed\n"), 1;
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	long ms = ms_since(&t0);
	int ok = 0;
	printf("connected=");
	for (int i = 0; i < n; i++)
		ok += results[i] == 0;
	printf("%d of=%d ms=%ld", ok, n, ms);
	/* errors by name, in order of first appearance */
	for (int i = 0; i < n; i++) {
		int e = results[i], first = 1, count = 0;
		for (int j = 0; j < i; j++)
			first &= results[j] != e;
		if (!e || !first)
			continue;
		for (int j = i; j < n; j++)
			count += results[j] == e;
		printf(" errno=%s:%d", ename(e), count);
	}
	printf("\n");
	return ok == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	long alarm_ms = 0, nthreads = 0;
	int restart = 0, count_usr1 = 0, c;
	while ((c = getopt(argc, argv, "a:rut:wk:")) != -1) {
		switch (c) {
		case 'a':
			alarm_ms = atol(optarg);
			break;
		case 'r':
			restart = 1;
			break;
		case 'u':
			count_usr1 = 1;
			break;
		case 't':
			nthreads = atol(optarg);
			if (nthreads < 1 || nthreads > MAX_THREADS)
				return usage();
			break;
		case 'w':
			return wait_mode();
		case 'k':
			signal(atoi(optarg), SIG_DFL);
			raise(atoi(optarg));
			return 4;
		default:
			return usage();
		}
	}
	if (argc - optind != 2)
		return usage();
	char *end;
	long port = strtol(argv[optind + 1], &end, 10);
	if (*end || port < 1 || port > 65535)
		return usage();
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, argv[optind], &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET, s4->sin_port = htons((unsigned short)port);
		sslen = sizeof *s4;
	} else if (inet_pton(AF_INET6, argv[optind], &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6, s6->sin6_port = htons((unsigned short)port);
		sslen = sizeof *s6;
	} else {
		return usage();
	}
	if (count_usr1)
		handle(SIGUSR1, SA_RESTART);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (nthreads)
		return threads_mode((int)nthreads);
	if (alarm_ms) {
		handle(SIGALRM, restart ? SA_RESTART : 0);
		struct itimerval it = {{0, 0}, {alarm_ms / 1000, (alarm_ms % 1000) * 1000}};
		setitimer(ITIMER_REAL, &it, NULL);
	}
	int err = 0, fd = one_connect(&err);
	long ms = ms_since(&t0);
	if (fd < 0) {
		printf("error errno=%s ms=%ld alarms=%d usr1=%d\n", ename(err), ms, (int)alarms,
		       (int)usr1);
		return 1;
	}
	printf("connected ms=%ld alarms=%d usr1=%d\n", ms, (int)alarms, (int)usr1);
	close(fd);
	return 0;
}

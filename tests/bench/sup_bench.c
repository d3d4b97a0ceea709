/*
 * sup_bench: the cost of the seccomp engine (issue 23, item 6), side by
 * side in one run: a healthy loopback connect+close, a system call the
 * filter does not trap (getppid), and the one other call it traps
 * (getsockopt(SOL_SOCKET, SO_ERROR)), each in four settings.
 *
 *   sup_bench CLI [ROUNDS]          run every setting ROUNDS times (11),
 *                                   print per-operation medians and ratios
 *   sup_bench --worker MODE N M     (internal) N connect+close, M getppid
 *                                   and M/50 getsockopt(SO_ERROR); prints
 *                                   the three loops' elapsed ns
 *
 * The settings (MODE):
 *   plain   the worker alone;
 *   filter  the worker under the engine's own filter (bs_sfilter_build),
 *           each SECCOMP_RET_USER_NOTIF turned into ALLOW, and no
 *           supervisor: what the kernel's filter costs by itself;
 *   bare    the engine's filter and a minimal supervisor (this program)
 *           that answers every notification "continue" at once
 *           (SECCOMP_USER_NOTIF_FLAG_CONTINUE), from an epoll loop with
 *           SYNC_WAKE_UP as the engine's: the floor of any engine that
 *           sees each connect (the notification's round trip);
 *   engine  `CLI run --engine seccomp -- sup_bench --worker engine N M`.
 *
 * A round runs each setting once, in an order that rotates from round to
 * round so that drift cancels; the ratios are medians over rounds of the
 * ratio within a round. The whole tree (this program, the workers, their
 * accepting threads, the engine's supervisor) is pinned to one CPU, the
 * last it may use, as connect_bench pins its workers: on a small VM,
 * cross-CPU wake-ups otherwise swing a run by tens of percent
 * (SUP_BENCH_PIN=0 leaves the scheduler free, to compare).
 *
 * The targets (issue 23): engine/plain at most 2 for the connect, and for
 * getppid nothing beyond the filter (engine/filter 1). They are printed and
 * at most warned about: this never fails on a loaded machine. A worker that
 * fails (a refused connect, a worker in the wrong setting, its time limit)
 * is reported and its round left out; if the engine cannot run here, the
 * line says SKIPPED. It exits non-zero only for a usage error, or if it
 * cannot start a worker at all (pipe, fork). Outside a
 * network namespace this host intercepts outgoing TCP: run it in one, with
 * lo up (`make bench` does).
 */
#include "scm.h"
#include "sfilter.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

#define ROUNDS 11
#define MAX_ROUNDS 64
#define CONNECTS 4000
#define CALLS 500000
#define SO_ERROR_SHARE 50 /* M/50 getsockopt(SO_ERROR): each is a round trip */
#define WORKER_LIMIT_S 60
#define TOTAL_LIMIT_S 300
#define CONNECT_TARGET 2.0 /* engine / plain */
#define CALL_TARGET 1.10   /* engine / filter: 1, and 10% for the noise */

enum mode { PLAIN, FILTER, BARE, ENGINE, NMODES };
static const char *const mode_name[NMODES] = {"plain", "filter", "bare", "engine"};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "sup_bench: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- the filter ---- */

static unsigned engine_filter(struct sock_filter *code, int notify)
{
	unsigned n = bs_sfilter_build(code, 1); /* as the engine installs it */
	if (!notify)
		for (unsigned i = 0; i < n; i++)
			if (code[i].code == (BPF_RET | BPF_K) && code[i].k == SECCOMP_RET_USER_NOTIF)
				code[i].k = SECCOMP_RET_ALLOW;
	return n;
}

/* The filter installed on this process; with notify, its listener. */
static int install(int notify)
{
	struct sock_filter code[BS_SFILTER_MAX];
	struct sock_fprog prog = {(unsigned short)engine_filter(code, notify), code};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
}

/* Is this process under a seccomp filter (the engine's, in these runs)? */
static int under_filter(void)
{
	return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2;
}

/* ---- the worker ---- */

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0)
			close(c);
		else if (errno != EINTR && errno != ECONNABORTED)
			return NULL; /* the listener shut down */
	}
}

/* A blocking connect, held by the engine; the close resets (SO_LINGER 0),
 * so that no TIME_WAIT builds up, as in connect_bench. */
static int connect_once(const struct sockaddr_in *sa)
{
	static const struct linger lg = {1, 0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static uint64_t work_connect(long n)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sa;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(lfd, SOMAXCONN) != 0 || getsockname(lfd, (struct sockaddr *)&sa, &len) != 0)
		die("listener");
	pthread_t t;
	if (pthread_create(&t, NULL, acceptor, &lfd) != 0)
		die("pthread_create");
	for (long i = 0; i < n / 10; i++) /* warm-up, untimed */
		if (connect_once(&sa) != 0)
			die(errno == ENETUNREACH ? "connect (is lo up?)" : "connect (warm-up)");
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (connect_once(&sa) != 0)
			die("connect");
	uint64_t el = now_ns() - t0;
	shutdown(lfd, SHUT_RDWR); /* wakes accept() */
	pthread_join(t, NULL);
	close(lfd);
	return el;
}

/* n getppid in ten slices; the fastest slice, times ten: a call's own
 * cost, without the slices another process's turn on the CPU stretched. */
static uint64_t work_calls(long n)
{
	uint64_t best = UINT64_MAX;
	for (long i = 0; i < n / 10; i++)
		syscall(SYS_getppid);
	for (int k = 0; k < 10; k++) {
		uint64_t t0 = now_ns();
		for (long i = 0; i < n / 10; i++)
			syscall(SYS_getppid);
		uint64_t el = now_ns() - t0;
		best = el < best ? el : best;
	}
	return best * 10;
}

/* getsockopt(SO_ERROR) on a TCP socket no connect of which is under way:
 * the engine lets it through (a notification and its answer). */
static uint64_t work_so_error(long n)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	int v;
	socklen_t len = sizeof v;
	for (long i = 0; i < n / 10; i++)
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len);
	uint64_t t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (len = sizeof v, getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len) != 0 || v)
			die("getsockopt(SO_ERROR)");
	uint64_t el = now_ns() - t0;
	close(fd);
	return el;
}

static int worker(const char *what, long n, long m)
{
	alarm(WORKER_LIMIT_S);
	int mode = -1;
	for (int i = 0; i < NMODES; i++)
		if (!strcmp(what, mode_name[i]))
			mode = i;
	if (mode < 0 || n <= 0 || m <= 0)
		return 2;
	if (mode == FILTER && install(0) < 0)
		die("the filter");
	if (under_filter() != (mode != PLAIN)) {
		fprintf(stderr, "sup_bench: %s worker: %s the engine's filter\n", what,
			mode == PLAIN ? "under" : "not under");
		return 3;
	}
	uint64_t c = work_connect(n);
	uint64_t g = work_calls(m);
	uint64_t e = work_so_error(m / SO_ERROR_SHARE);
	printf("%llu %llu %llu\n", (unsigned long long)c, (unsigned long long)g, (unsigned long long)e);
	return fflush(stdout) == 0 ? 0 : 2;
}

/* ---- the minimal supervisor (mode bare) ---- */

/* Every notification answered "continue", until no process is under the
 * filter (the listener hangs up). */
static void serve_bare(int listener)
{
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) != 0 || sz.seccomp_notif > 256)
		die("SECCOMP_GET_NOTIF_SIZES");
	ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {EPOLLIN, {.u64 = 1}};
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) != 0)
		die("epoll");
	char buf[256] __attribute__((aligned(8)));
	struct seccomp_notif *n = (struct seccomp_notif *)buf;
	for (;;) {
		int k = epoll_wait(ep, &ev, 1, -1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k != 1 || (ev.events & (EPOLLHUP | EPOLLERR)) || !(ev.events & EPOLLIN))
			break;
		memset(buf, 0, sz.seccomp_notif);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, n) != 0)
			continue;
		struct seccomp_notif_resp r = {.id = n->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
		ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
	}
	close(ep);
}

/* ---- the parent ---- */

/* One worker run in mode m: 1 and its three elapsed times; 0 if the
 * engine is not available here (the worker ran outside the filter); -1 if
 * the worker failed (said on stderr). */
static int run_one(const char *self, const char *cli, enum mode m, long n, long calls,
		   uint64_t out[3])
{
	char count[32], ncalls[32];
	snprintf(count, sizeof count, "%ld", n);
	snprintf(ncalls, sizeof ncalls, "%ld", calls);
	int pfd[2], sv[2] = {-1, -1};
	if (pipe(pfd) != 0)
		die("pipe");
	if (m == BARE && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		unsetenv("LD_PRELOAD");
		if (m == BARE) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int l = install(1);
			if (l < 0 || bs_scm_send(sv[1], "L", 1, l, 0) != 1)
				_exit(126);
			close(l);
			close(sv[1]);
		}
		if (m == ENGINE)
			execl(cli, cli, "run", "--engine", "seccomp", "--", self, "--worker",
			      mode_name[m], count, ncalls, (char *)NULL);
		else
			execl(self, self, "--worker", mode_name[m], count, ncalls, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (m == BARE) {
		close(sv[1]);
		char byte;
		int l = -1;
		bs_scm_recv(sv[0], &byte, 1, &l); /* (l stays -1 if none came) */
		close(sv[0]);
		if (l >= 0) {
			serve_bare(l);
			close(l);
		}
	}
	char buf[128] = "";
	size_t got = 0;
	for (ssize_t r = 1; got < sizeof buf - 1 && (r > 0 || (r < 0 && errno == EINTR));)
		if ((r = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0)
			got += (size_t)r;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	unsigned long long c = 0, g = 0, e = 0;
	if (m == ENGINE && WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return 0; /* `run` fell back to running it plainly (it said why) */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(buf, "%llu %llu %llu", &c, &g, &e) != 3 || !c || !g || !e) {
		fprintf(stderr, "sup_bench: warning: the %s worker failed (status 0x%x); "
				"its round is left out\n", mode_name[m], st);
		return -1;
	}
	out[0] = c, out[1] = g, out[2] = e;
	return 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_ROUNDS];
	memcpy(s, v, (size_t)n * sizeof *v);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void pin_last_cpu(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set)) {
			CPU_ZERO(&set);
			CPU_SET(c, &set);
			sched_setaffinity(0, sizeof set, &set); /* best effort */
			return;
		}
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--worker"))
		return worker(argv[2], strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10));
	if (argc < 2 || argc > 3 || access(argv[1], X_OK) != 0)
		return fprintf(stderr, "usage: %s path/to/backoffshim [ROUNDS]\n", argv[0]), 2;
	int rounds = argc == 3 ? atoi(argv[2]) : ROUNDS;
	if (rounds < 1 || rounds > MAX_ROUNDS)
		return fprintf(stderr, "sup_bench: ROUNDS: 1 to %d\n", MAX_ROUNDS), 2;
	char *cli = realpath(argv[1], NULL), *self = realpath("/proc/self/exe", NULL);
	if (!cli || !self)
		die("realpath");
	const char *pin = getenv("SUP_BENCH_PIN");
	int pinned = !pin || strcmp(pin, "0");
	if (pinned)
		pin_last_cpu();
	alarm(TOTAL_LIMIT_S + 30);
	uint64_t deadline = now_ns() + (uint64_t)TOTAL_LIMIT_S * 1000000000u;
	/* per setting and round: connect+close us, getppid ns, SO_ERROR us */
	static double c[NMODES][MAX_ROUNDS], g[NMODES][MAX_ROUNDS], e[NMODES][MAX_ROUNDS];
	double conn_ratio[MAX_ROUNDS], bare_ratio[MAX_ROUNDS], call_ratio[MAX_ROUNDS],
		filt_ratio[MAX_ROUNDS], soe_ratio[MAX_ROUNDS];
	int done = 0, failed = 0;
	for (int r = 0; r < rounds; r++) {
		if (now_ns() > deadline) {
			fprintf(stderr, "sup_bench: over %d s, stopping after %d rounds\n", TOTAL_LIMIT_S, r);
			break;
		}
		int ok = 1;
		for (int k = 0; k < NMODES && ok; k++) {
			enum mode m = (enum mode)((r + k) % NMODES);
			uint64_t t[3];
			int got = run_one(self, cli, m, CONNECTS, CALLS, t);
			if (got == 0) {
				printf("seccomp engine cost: SKIPPED, the engine cannot run here (see above)\n");
				return 0;
			}
			ok = got > 0;
			if (ok) {
				c[m][done] = (double)t[0] / CONNECTS / 1e3;
				g[m][done] = (double)t[1] / CALLS;
				e[m][done] = (double)t[2] / (CALLS / SO_ERROR_SHARE) / 1e3;
			}
		}
		if (!ok) {
			failed++;
			continue;
		}
		conn_ratio[done] = c[ENGINE][done] / c[PLAIN][done];
		bare_ratio[done] = c[BARE][done] / c[PLAIN][done];
		call_ratio[done] = g[ENGINE][done] / g[FILTER][done];
		filt_ratio[done] = g[FILTER][done] / g[PLAIN][done];
		soe_ratio[done] = e[ENGINE][done] / e[PLAIN][done];
		done++;
	}
	if (!done) {
		printf("seccomp engine cost: no result (every round had a failed worker, see above)\n");
		return 0;
	}
	double cr = median(conn_ratio, done), gr = median(call_ratio, done);
	printf("seccomp engine cost (issue 23): medians of %d rounds%s, %s; a run: %d connects, "
	       "%d getppid, %d getsockopt(SO_ERROR)\n",
	       done, failed ? " (some left out, see above)" : "", pinned ? "one CPU" : "not pinned",
	       CONNECTS, CALLS, CALLS / SO_ERROR_SHARE);
	printf("  %-31s %8s %8s %8s %8s\n", "", "plain", "filter", "bare", "engine");
	printf("  %-31s %8.2f %8.2f %8.2f %8.2f   engine/plain %.2f (target <= %.0f), bare/plain %.2f\n",
	       "connect+close, us", median(c[PLAIN], done), median(c[FILTER], done),
	       median(c[BARE], done), median(c[ENGINE], done), cr, CONNECT_TARGET,
	       median(bare_ratio, done));
	printf("  %-31s %8.1f %8.1f %8.1f %8.1f   engine/filter %.3f (target 1), filter/plain %.3f\n",
	       "getppid, ns", median(g[PLAIN], done), median(g[FILTER], done), median(g[BARE], done),
	       median(g[ENGINE], done), gr, median(filt_ratio, done));
	printf("  %-31s %8.2f %8.2f %8.2f %8.2f   engine/plain %.2f (trapped: a round trip)\n",
	       "getsockopt(SO_ERROR), us", median(e[PLAIN], done), median(e[FILTER], done),
	       median(e[BARE], done), median(e[ENGINE], done), median(soe_ratio, done));
	if (cr > CONNECT_TARGET)
		printf("  warning: connect+close under the engine takes %.2f times the plain time, "
		       "above the target %.0f\n", cr, CONNECT_TARGET);
	if (gr > CALL_TARGET)
		printf("  warning: getppid costs %.0f%% more under the engine than under its filter alone "
		       "(a loaded machine moves this; run again to be sure)\n", (gr - 1) * 100);
	free(cli);
	free(self);
	return 0;
}

/*
 * multiwait: N non-blocking connects at once, then one event loop that waits
 * for them with poll() or epoll_wait(), the way an event-driven client does.
 *   multiwait poll|epoll HOST PORT N TIMEOUT_MS
 * Starts N (1..64) non-blocking connects to HOST:PORT (IPv4), then waits for
 * POLLOUT (EPOLLOUT) on all of them until TIMEOUT_MS have passed since the
 * first wait began; each fd that becomes ready is reported and dropped from
 * the set. Prints:
 *   connect fd=F rc=R errno=NAME           (one per socket)
 *   wait rc=R ms=T                        (one per poll/epoll_wait call)
 *   ready fd=F events=0xE so_error=NAME   (one per fd reported ready)
 *   pending fd=F so_error=NAME            (each fd never reported, at the end)
 *   done waits=W ready=K pending=P wall_ms=X cpu_ms=Y
 * cpu_ms is user+system CPU time of the whole process (getrusage) spent from
 * the first wait to the end. Exit 0, or 2 on bad usage / setup failure.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXN 64
#define MAX_WAITS 100000 /* a bound on the loop besides the clock */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static const char *ename(int e)
{
	switch (e) {
	case 0: return "0";
	case EINPROGRESS: return "EINPROGRESS";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case ENETUNREACH: return "ENETUNREACH";
	case ECONNRESET: return "ECONNRESET";
	case ECONNABORTED: return "ECONNABORTED";
	case EAGAIN: return "EAGAIN";
	case EALREADY: return "EALREADY";
	case EINTR: return "EINTR";
	default: return "OTHER";
	}
}

static int so_error(int fd)
{
	int e = 0;
	socklen_t l = sizeof e;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
		return errno;
	return e;
}

int main(int argc, char **argv)
{
	if (argc != 6 || (strcmp(argv[1], "poll") && strcmp(argv[1], "epoll"))) {
		fprintf(stderr, "usage: multiwait poll|epoll HOST PORT N TIMEOUT_MS\n");
		return 2;
	}
	int use_epoll = !strcmp(argv[1], "epoll");
	int n = atoi(argv[4]), timeout = atoi(argv[5]);
	if (n < 1 || n > MAXN || timeout < 0)
		return 2;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
	if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);

	int fds[MAXN], live[MAXN];
	for (int i = 0; i < n; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fds[i] < 0)
			return 2;
		int rc = connect(fds[i], (struct sockaddr *)&sa, sizeof sa);
		printf("connect fd=%d rc=%d errno=%s\n", fds[i], rc, ename(rc ? errno : 0));
		live[i] = 1;
	}
	int ep = -1;
	if (use_epoll) {
		ep = epoll_create1(0);
		if (ep < 0)
			return 2;
		for (int i = 0; i < n; i++) {
			struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (unsigned)i};
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0)
				return 2;
		}
	}

	double t0 = now_ms(), c0 = cpu_ms();
	int waits = 0, ready = 0, left = n;
	while (left > 0 && waits < MAX_WAITS) {
		int rem = timeout - (int)(now_ms() - t0);
		if (rem < 0)
			rem = 0;
		int rc, idx[MAXN];
		unsigned evs[MAXN];
		int k = 0;
		if (use_epoll) {
			struct epoll_event out[MAXN];
			rc = epoll_wait(ep, out, MAXN, rem);
			for (int j = 0; j < rc; j++) {
				idx[k] = (int)out[j].data.u32;
				evs[k++] = out[j].events;
			}
		} else {
			struct pollfd p[MAXN];
			int map[MAXN], m = 0;
			for (int i = 0; i < n; i++)
				if (live[i]) {
					p[m].fd = fds[i];
					p[m].events = POLLOUT;
					p[m].revents = 0;
					map[m++] = i;
				}
			rc = poll(p, m, rem);
			for (int j = 0; rc > 0 && j < m; j++)
				if (p[j].revents) {
					idx[k] = map[j];
					evs[k++] = p[j].revents;
				}
		}
		int err = errno;
		waits++;
		printf("wait rc=%d ms=%.0f%s%s\n", rc, now_ms() - t0, rc < 0 ? " errno=" : "",
		       rc < 0 ? ename(err) : "");
		if (rc < 0 && err != EINTR)
			break;
		for (int j = 0; j < k; j++) {
			int i = idx[j];
			if (!live[i])
				continue;
			printf("ready fd=%d events=0x%x so_error=%s\n", fds[i], evs[j],
			       ename(so_error(fds[i])));
			live[i] = 0;
			left--;
			ready++;
			if (use_epoll)
				epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
		}
		if (rc == 0 && now_ms() - t0 >= timeout)
			break;
	}
	double wall = now_ms() - t0, cpu = cpu_ms() - c0;
	for (int i = 0; i < n; i++)
		if (live[i])
			printf("pending fd=%d so_error=%s\n", fds[i], ename(so_error(fds[i])));
	printf("done waits=%d ready=%d pending=%d wall_ms=%.0f cpu_ms=%.1f\n", waits, ready, left,
	       wall, cpu);
	return 0;
}

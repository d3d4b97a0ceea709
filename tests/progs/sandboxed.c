/*
 * sandboxed: a program that forbids itself every TCP connect with Landlock
 * (ABI 4 or later), then connects, and connects again from a child it
 * forks (which inherits the sandbox). For the seccomp engine: its attempts
 * must stay the sandboxed program's own, judged by its sandbox.
 *   sandboxed PORT
 * Prints "parent: RESULT" and "child: RESULT" (RESULT: "connected" or an
 * errno name); exit 0, or 2 where Landlock cannot restrict TCP connects.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct ruleset_attr {
	uint64_t handled_access_fs, handled_access_net;
};
#define ACCESS_NET_CONNECT_TCP (1ull << 1)

static const char *try_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int r = connect(fd, (struct sockaddr *)&a, sizeof a);
	const char *what = r == 0 ? "connected" : strerrorname_np(errno);
	close(fd);
	return what;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return fprintf(stderr, "usage: sandboxed PORT\n"), 2;
	int port = atoi(argv[1]);
	struct ruleset_attr attr = {0, ACCESS_NET_CONNECT_TCP};
	int rs = (int)syscall(444 /* landlock_create_ruleset */, &attr, sizeof attr, 0);
	if (rs < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(446 /* landlock_restrict_self */, rs, 0) != 0) {
		perror("sandboxed: landlock");
		return 2;
	}
	printf("parent: %s\n", try_connect(port));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		printf("child: %s\n", try_connect(port));
		return 0;
	}
	waitpid(pid, NULL, 0);
	return 0;
}

/*
 * denied: a program in a sandbox of its own. It installs a seccomp filter
 * that answers one system call with EPERM (as an allow-list that lacks it
 * would), then makes a blocking connect to 127.0.0.1:PORT.
 *   denied SYSCALL PORT      (SYSCALL: futex or ppoll)
 * Prints "connect=E" (0 or the errno) and exits 0, or 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int deny(long nr)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof *f, .filter = f};
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	long nr = !strcmp(argv[1], "futex") ? SYS_futex : !strcmp(argv[1], "ppoll") ? SYS_ppoll : -1;
	if (nr < 0 || deny(nr))
		return 2;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	printf("connect=%d\n", connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno);
	return 0;
}

/*
 * denycall: run a command with one system call refused, as a container's
 * seccomp profile refuses it (for the seccomp engine's fallback tests).
 *   denycall NAME ERRNO -- CMD [ARGS...]
 * NAME: pidfd_open, pidfd_getfd, kcmp, process_vm_readv, io_uring_setup or
 * seccomp; ERRNO: a number (1 for EPERM). Sets no_new_privs, installs a
 * filter that answers NAME with -ERRNO, and execs CMD.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct {
	const char *name;
	long nr;
} calls[] = {
	{"pidfd_open", SYS_pidfd_open},         {"pidfd_getfd", SYS_pidfd_getfd},
	{"kcmp", SYS_kcmp},                     {"process_vm_readv", SYS_process_vm_readv},
	{"io_uring_setup", SYS_io_uring_setup}, {"seccomp", SYS_seccomp},
};

int main(int argc, char **argv)
{
	if (argc < 5 || strcmp(argv[3], "--")) {
		fprintf(stderr, "usage: denycall NAME ERRNO -- CMD [ARGS...]\n");
		return 2;
	}
	long nr = -1;
	for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
		if (!strcmp(argv[1], calls[i].name))
			nr = calls[i].nr;
	int err = atoi(argv[2]);
	if (nr < 0 || err <= 0 || err > 4095) {
		fprintf(stderr, "denycall: unknown call or errno\n");
		return 2;
	}
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof code / sizeof *code, code};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("denycall");
		return 2;
	}
	execvp(argv[4], argv + 4);
	perror("denycall: exec");
	return 127;
}

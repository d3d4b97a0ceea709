/* proc: see proc.h. */
#include "proc.h"

#include "elfinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

int bs_proc_read(pid_t tid, uint64_t at, void *buf, size_t n)
{
	struct iovec local = {buf, n}, remote = {(void *)(uintptr_t)at, n};
	return process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

int bs_proc_write(pid_t tid, uint64_t at, const void *buf, size_t n)
{
	struct iovec local = {(void *)buf, n}, remote = {(void *)(uintptr_t)at, n};
	return process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

int bs_proc_getfd(pid_t tid, int fd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (pidfd < 0)
		return -1;
	int dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	close(pidfd);
	return dup; /* (pidfd_getfd sets close-on-exec) */
}

int bs_proc_same_file(pid_t tid, int fd, int mine)
{
	long r = syscall(SYS_kcmp, tid, getpid(), KCMP_FILE, fd, mine);
	if (r == 0)
		return 1;
	return r < 0 && errno == ESRCH ? -1 : 0;
}

pid_t bs_proc_tgid(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *t = strstr(buf, "\nTgid:");
	return t ? (pid_t)atoi(t + 6) : 0;
}

/* The executables judged so far (a program rarely runs more than a few). */
#define KNOWN 16
static struct {
	dev_t dev;
	ino_t ino;
	int go;
} known[KNOWN];
static unsigned nknown;

int bs_proc_is_go(pid_t tid)
{
	char path[64];
	static unsigned char head[64 * 1024];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)tid);
	if (stat(path, &st) != 0)
		return 0;
	for (unsigned i = 0; i < nknown && i < KNOWN; i++)
		if (known[i].dev == st.st_dev && known[i].ino == st.st_ino)
			return known[i].go;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, head, sizeof head);
	if (fd >= 0)
		close(fd);
	int go = n > 0 && bs_elf_kind(head, (size_t)n) == BS_ELF_GO;
	unsigned i = nknown++ % KNOWN;
	known[i].dev = st.st_dev, known[i].ino = st.st_ino, known[i].go = go;
	return go;
}

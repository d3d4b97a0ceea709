/* proc: see proc.h. */
#include "proc.h"

#include "elfinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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

/* pidfds of the threads that made calls lately, least recently used
 * out. A pidfd names one thread for good: one whose thread is gone fails
 * (ESRCH) and is opened anew for the thread that has its number now. */
#define PIDFDS 64
static struct {
	pid_t tid;
	int fd;
	uint64_t used;
} pidfds[PIDFDS];
static uint64_t uses;

static int pidfd_slot(pid_t tid, int fresh)
{
	int lru = 0;
	for (int i = 0; i < PIDFDS; i++) {
		if (pidfds[i].tid == tid && pidfds[i].fd > 0) {
			if (!fresh) {
				pidfds[i].used = ++uses;
				return i;
			}
			lru = i;
			break;
		}
		if (pidfds[i].used < pidfds[lru].used)
			lru = i;
	}
	int fd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
	if (fd < 0)
		return -1;
	if (pidfds[lru].fd > 0)
		close(pidfds[lru].fd);
	pidfds[lru].tid = tid, pidfds[lru].fd = fd, pidfds[lru].used = ++uses;
	return lru;
}

int bs_proc_getfd(pid_t tid, int fd)
{
	int i = pidfd_slot(tid, 0);
	int dup = i < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfds[i].fd, fd, 0);
	if (dup < 0 && i >= 0 && errno == ESRCH && (i = pidfd_slot(tid, 1)) >= 0)
		dup = (int)syscall(SYS_pidfd_getfd, pidfds[i].fd, fd, 0);
	return dup; /* (pidfd_getfd sets close-on-exec) */
}

int bs_proc_same_file(pid_t tid, int fd, int mine)
{
	long r = syscall(SYS_kcmp, tid, getpid(), KCMP_FILE, fd, mine);
	if (r == 0)
		return 1;
	return r < 0 && errno == ESRCH ? -1 : 0;
}

/* PIDFD_GET_INFO (6.13): the pid, thread group and parent of a pidfd */
struct pidfd_info_v0 {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ids[8], spare;
};
#define PIDFD_GET_INFO_V0 _IOWR(0xFF, 11, struct pidfd_info_v0)

/* A "Name:\tNUMBER" field of /proc/<pid>/status; 0 if unknown. */
static pid_t status_field(pid_t pid, const char *name)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *t = strstr(buf, name);
	return t ? (pid_t)atoi(t + strlen(name)) : 0;
}

pid_t bs_proc_ppid(pid_t pid)
{
	return status_field(pid, "\nPPid:");
}

int bs_proc_name(pid_t pid, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, out, n - 1);
	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return 0;
	out[got] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 1;
}

/* The LSM label of a process (AppArmor, SELinux, Smack), or "" if none
 * can be read. */
static void label_of(const char *who, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%s/attr/current", who);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, out, n - 1);
	if (fd >= 0)
		close(fd);
	out[got > 0 ? got : 0] = '\0';
}

int bs_proc_other_label(pid_t tid)
{
	static char mine[256];
	static int known;
	if (!known) {
		label_of("self", mine, sizeof mine);
		known = 1;
	}
	if (!mine[0])
		return 0; /* (no LSM labels here: nothing to differ) */
	char who[16], theirs[256];
	snprintf(who, sizeof who, "%d", (int)tid);
	label_of(who, theirs, sizeof theirs);
	return strcmp(mine, theirs) != 0;
}

pid_t bs_proc_tgid(pid_t tid)
{
	int i = pidfd_slot(tid, 0);
	struct pidfd_info_v0 info;
	memset(&info, 0, sizeof info);
	info.mask = 1; /* PIDFD_INFO_PID */
	if (i >= 0 && ioctl(pidfds[i].fd, PIDFD_GET_INFO_V0, &info) == 0 && info.tgid)
		return (pid_t)info.tgid;
	return status_field(tid, "\nTgid:");
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

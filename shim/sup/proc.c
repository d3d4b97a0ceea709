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

/* /proc/PID/FILE (PID -1: /proc/self) into out, at most n - 1 bytes and
 * a NUL: the bytes read (<= 0: none). */
static ssize_t read_proc(pid_t pid, const char *file, char *out, size_t n)
{
	char path[64];
	if (pid != -1)
		snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	else
		snprintf(path, sizeof path, "/proc/self/%s", file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, out, n - 1);
	if (fd >= 0)
		close(fd);
	out[got > 0 ? got : 0] = '\0';
	return got;
}

/* A "Name:\tNUMBER" field of /proc/<pid>/status; 0 if unknown. */
static pid_t status_field(pid_t pid, const char *name)
{
	char buf[1024];
	const char *t = read_proc(pid, "status", buf, sizeof buf) > 0 ? strstr(buf, name) : NULL;
	return t ? (pid_t)atoi(t + strlen(name)) : 0;
}

pid_t bs_proc_ppid(pid_t pid)
{
	return status_field(pid, "\nPPid:");
}

int bs_proc_stopped(pid_t pid)
{
	char buf[512];
	if (read_proc(pid, "stat", buf, sizeof buf) <= 0)
		return 0;
	const char *end = strrchr(buf, ')'); /* (the name may hold anything) */
	return end && (end[1] && (end[2] == 'T' || end[2] == 't'));
}

int bs_proc_name(pid_t pid, char *out, size_t n)
{
	if (read_proc(pid, "comm", out, n) <= 0)
		return 0;
	out[strcspn(out, "\n")] = '\0';
	return 1;
}

/* (attr/current: the LSM label, AppArmor, SELinux or Smack; "" if none) */
int bs_proc_other_label(pid_t tid)
{
	static char mine[256];
	static int known;
	if (!known) {
		read_proc(-1, "attr/current", mine, sizeof mine);
		known = 1;
	}
	if (!mine[0])
		return 0; /* (no LSM labels here: nothing to differ) */
	char theirs[256];
	read_proc(tid, "attr/current", theirs, sizeof theirs);
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
	static char head[64 * 1024 + 1]; /* (64 KiB and read_proc's NUL) */
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)tid);
	if (stat(path, &st) != 0)
		return 0;
	for (unsigned i = 0; i < nknown && i < KNOWN; i++)
		if (known[i].dev == st.st_dev && known[i].ino == st.st_ino)
			return known[i].go;
	ssize_t n = read_proc(tid, "exe", head, sizeof head);
	int go = n > 0 && bs_elf_kind((const unsigned char *)head, (size_t)n) == BS_ELF_GO;
	unsigned i = nknown++ % KNOWN;
	known[i].dev = st.st_dev, known[i].ino = st.st_ino, known[i].go = go;
	return go;
}

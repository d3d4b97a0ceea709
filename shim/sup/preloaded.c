/* preloaded: see preloaded.h. */
#include "preloaded.h"

#include "proc.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PRELOADED 256

static struct entry {
	pid_t tgid; /* 0: free */
	int pidfd;
	dev_t dev;
	ino_t ino;
} table[MAX_PRELOADED];
static unsigned used;

static int exe_of(pid_t pid, struct stat *st)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	return stat(path, st);
}

static int alive(const struct entry *e)
{
	return syscall(SYS_pidfd_send_signal, e->pidfd, 0, NULL, 0) == 0;
}

static void drop(struct entry *e)
{
	close(e->pidfd);
	e->tgid = 0;
	used--;
}

static struct entry *find(pid_t tgid)
{
	for (unsigned i = 0; i < MAX_PRELOADED; i++)
		if (table[i].tgid == tgid)
			return &table[i];
	return NULL;
}

void bs_preloaded_add(pid_t tid)
{
	pid_t tgid = bs_proc_tgid(tid);
	struct stat st;
	if (!tgid || exe_of(tgid, &st) != 0)
		return;
	struct entry *e = find(tgid);
	if (e)
		drop(e); /* (an exec'd program announcing itself again) */
	for (unsigned i = 0; !e && i < MAX_PRELOADED; i++)
		if (!table[i].tgid || !alive(&table[i])) {
			if (table[i].tgid)
				drop(&table[i]);
			e = &table[i];
		}
	if (!e)
		return; /* (full of live ones: the engine keeps this one) */
	int pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	if (pidfd < 0)
		return;
	*e = (struct entry){tgid, pidfd, st.st_dev, st.st_ino};
	used++;
}

int bs_preloaded_has(pid_t tid)
{
	if (!used)
		return 0;
	struct entry *e = find(tid); /* (a main thread: its tid is its pid) */
	if (!e) {
		pid_t tgid = bs_proc_tgid(tid);
		e = tgid ? find(tgid) : NULL;
	}
	if (!e)
		return 0;
	struct stat st;
	if (!alive(e) || exe_of(e->tgid, &st) != 0 || st.st_dev != e->dev || st.st_ino != e->ino) {
		drop(e);
		return 0;
	}
	return 1;
}

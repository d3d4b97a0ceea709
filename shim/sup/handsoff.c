/* handsoff: see handsoff.h. */
#include "handsoff.h"

#include "proc.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ENTRIES 256
#define MAX_DEPTH 32 /* ancestors looked at for a sandbox */

static struct entry {
	pid_t tgid; /* 0: free */
	enum bs_handsoff_why why;
	int pidfd;
	dev_t dev;
	ino_t ino;
} table[MAX_ENTRIES];
static unsigned used, sandboxes;
static int sandbox_lost; /* a sandbox found no place: pass everything */

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
	sandboxes -= e->why == BS_HANDS_OFF_SANDBOX;
	e->tgid = 0;
	used--;
}

static struct entry *find(pid_t tgid)
{
	for (unsigned i = 0; tgid && i < MAX_ENTRIES; i++)
		if (table[i].tgid == tgid)
			return &table[i];
	return NULL;
}

/* A place for a new entry: a free one, a dead one's, or (for a sandbox) a
 * library's. */
static struct entry *place(enum bs_handsoff_why why)
{
	struct entry *library = NULL;
	for (unsigned i = 0; i < MAX_ENTRIES; i++) {
		struct entry *e = &table[i];
		if (e->tgid && !alive(e))
			drop(e);
		if (!e->tgid)
			return e;
		if (e->why == BS_HANDS_OFF_LIBRARY)
			library = e;
	}
	if (why == BS_HANDS_OFF_SANDBOX && library) {
		drop(library);
		return library;
	}
	return NULL;
}

void bs_handsoff_add(pid_t tid, enum bs_handsoff_why why)
{
	pid_t tgid = bs_proc_tgid(tid);
	struct stat st;
	if (!tgid || exe_of(tgid, &st) != 0) {
		sandbox_lost |= why == BS_HANDS_OFF_SANDBOX;
		return;
	}
	struct entry *e = find(tgid);
	if (e && e->why == BS_HANDS_OFF_SANDBOX)
		return; /* (a sandbox stays one) */
	if (e)
		drop(e); /* (an exec'd program announcing itself again) */
	e = place(why);
	int pidfd = e ? (int)syscall(SYS_pidfd_open, tgid, 0) : -1;
	if (pidfd < 0) {
		sandbox_lost |= why == BS_HANDS_OFF_SANDBOX;
		return;
	}
	*e = (struct entry){tgid, why, pidfd, st.st_dev, st.st_ino};
	used++;
	sandboxes += why == BS_HANDS_OFF_SANDBOX;
}

/* Is e (found for a process) still what it was? */
static int holds(struct entry *e)
{
	struct stat st;
	if (alive(e) && (e->why == BS_HANDS_OFF_SANDBOX ||
			 (exe_of(e->tgid, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino)))
		return 1;
	drop(e);
	return 0;
}

/* Has a process of tgid's ancestry sandboxed itself? */
static int sandboxed_ancestor(pid_t tgid)
{
	for (int depth = 0; depth < MAX_DEPTH && tgid > 1; depth++) {
		struct entry *e = find(tgid);
		if (e && e->why == BS_HANDS_OFF_SANDBOX && holds(e))
			return 1;
		tgid = bs_proc_ppid(tgid);
	}
	return 0;
}

int bs_handsoff_has(pid_t tid)
{
	if (sandbox_lost)
		return 1;
	if (!used)
		return 0;
	struct entry *e = find(tid); /* (a main thread: its tid is its pid) */
	pid_t tgid = e ? tid : bs_proc_tgid(tid);
	if (!e)
		e = find(tgid);
	if (e && holds(e))
		return 1;
	return sandboxes && tgid && sandboxed_ancestor(tgid);
}

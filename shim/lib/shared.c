/* shared: the host-wide table. See shared.h. */
#include "shared.h"

#include "policy.h"
#include "clock.h"
#include "log.h"
#include "dest.h"
#include "errname.h"
#include "ret.h"
#include "shim.h"
#include "shtab.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOCK_DIR "/dev/shm"
#define SAY_EVERY (10 * BS_NS_PER_SEC) /* table lines, at most one per kind */

static const struct bs_config *g_cfg;
static struct bs_table g_private;
/* the table in use: the private one until a shared one is attached, from
 * the first connect() on (shim.h: bs_tab) */
struct bs_table *_Atomic bs_tab_g = &g_private;
static struct bs_table *_Atomic g_shared; /* the attached table, if any */
static int g_key;
static char g_lock_path[128];
/* 0: not looked yet; 1: looked, none; 2: attached; 3: never (off, refused) */
static _Atomic int g_phase;

int bs_shared_on(void)
{
	return atomic_load(&g_shared) != NULL;
}

/* "shared table (System V key 0x2b5a184a): WHY[: ERROR]; using a private
 * table" (or, for damage, what to do) */
static void say(enum bs_level level, const char *why, int err, const char *then)
{
	if (!bs_log_enabled(level))
		return;
	static const char hex[] = "0123456789abcdef";
	char key[11] = "0x";
	for (int i = 0; i < 8; i++)
		key[2 + i] = hex[(unsigned)g_key >> (28 - 4 * i) & 15];
	key[10] = 0;
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "table");
	bs_line_str(&l, "shared table (System V key ");
	bs_line_str(&l, key);
	bs_line_str(&l, "): ");
	bs_line_str(&l, why);
	if (err) {
		bs_line_str(&l, ": ");
		bs_line_str(&l, bs_errno_msg(err));
	}
	bs_line_str(&l, then);
	bs_line_emit(&l, level);
}

static uint64_t netns_inode(void)
{
	struct stat st;
	if (BS_SYS(SYS_newfstatat, AT_FDCWD, "/proc/self/ns/net", &st, 0) != 0)
		return 0;
	return (uint64_t)st.st_ino;
}

void bs_shared_setup(const struct bs_config *cfg)
{
	g_cfg = cfg;
	if (!strcmp(cfg->shared, "off") || getauxval(AT_SECURE))
		atomic_store(&g_phase, 3);
}

static uid_t euid(void)
{
	return (uid_t)getauxval(AT_EUID); /* (no system call) */
}

/* The segment attached and checked: the table, or NULL with *why (and
 * *err, the system call's error, if one failed). */
static struct bs_table *attach(int id, const char **why, int *err)
{
	struct shmid_ds ds;
	long r = BS_SYS(SYS_shmctl, id, IPC_STAT, &ds);
	if (r != 0)
		return *why = "cannot be examined", *err = (int)-r, NULL;
	struct bs_shtab_stat st = {ds.shm_perm.uid, ds.shm_perm.cuid, ds.shm_perm.mode,
				   (uint64_t)ds.shm_segsz};
	enum bs_shtab_verdict v = bs_shtab_check_segment(&st, euid());
	if (v != BS_SHTAB_OK)
		return *why = bs_shtab_verdict_text(v), NULL;
	long m = BS_SYS(SYS_shmat, id, NULL, 0);
	if (m < 0)
		return *why = "cannot be attached", *err = (int)-m, NULL;
	struct bs_shtab_header *h = (struct bs_shtab_header *)m;
	v = bs_shtab_check_header(h);
	if (v == BS_SHTAB_NEW)
		bs_shtab_header_publish(h); /* (whoever attaches first writes the same) */
	else if (v != BS_SHTAB_OK) {
		BS_SYS(SYS_shmdt, (void *)m);
		return *why = bs_shtab_verdict_text(v), NULL;
	}
	return (struct bs_table *)(m + BS_SHTAB_OFFSET);
}

/* Look for the table, creating it if asked; attach it. Once a process has
 * attached one, or was refused, it looks no more. */
static void find(int create)
{
	int phase = atomic_load(&g_phase);
	if (phase >= 2 || (phase == 1 && !create))
		return;
	if (!g_key) {
		const char *name = g_cfg->shared[0] == '/' ? g_cfg->shared : "";
		uint64_t ns = netns_inode();
		g_key = bs_shtab_key(euid(), ns, name);
		bs_shtab_lock_path(g_lock_path, sizeof g_lock_path, LOCK_DIR, g_key);
		if (!ns) {
			/* (no /proc): the key would be that of every namespace
			 * that cannot tell either, whose 127.0.0.1 is not ours */
			say(BS_LOG_INFO, "cannot tell the network namespace (/proc/self/ns/net)",
			    0, "; using a private table");
			atomic_store(&g_phase, 3);
			return;
		}
	}
	long id = BS_SYS(SYS_shmget, g_key, 0, 0);
	if (id == -ENOENT && create)
		id = BS_SYS(SYS_shmget, g_key, BS_SHTAB_SIZE, IPC_CREAT | IPC_EXCL | 0600);
	if (id == -EEXIST)
		id = BS_SYS(SYS_shmget, g_key, 0, 0);
	if (id == -ENOENT) {
		atomic_store(&g_phase, 1);
		return;
	}
	const char *why = "cannot be created";
	int err = id < 0 ? (int)-id : 0;
	struct bs_table *t = id >= 0 ? attach((int)id, &why, &err) : NULL;
	if (!t) {
		/* someone else's segment holds the key: not ours to judge, and
		 * nothing the user can act on (debug); anything else, once */
		say(id >= 0 && !strcmp(why, bs_shtab_verdict_text(BS_SHTAB_OTHER_OWNER)) ?
			    BS_LOG_DEBUG : BS_LOG_INFO, why, err, "; using a private table");
		atomic_store(&g_phase, 3);
		return;
	}
	struct bs_table *none = NULL;
	if (atomic_compare_exchange_strong(&g_shared, &none, t)) {
		bs_futex_shared();
		atomic_store(&bs_tab_g, t);
	} else {
		BS_SYS(SYS_shmdt, (char *)t - BS_SHTAB_OFFSET); /* another thread's is in use */
	}
	atomic_store(&g_phase, 2);
}

void bs_shared_look(void)
{
	if (atomic_load(&g_phase) == 0)
		find(0);
}

/* ---- claims ---- */

static _Atomic uint32_t g_own;        /* entries this process made */
static _Atomic uint64_t g_said_evict, g_said_full, g_said_damage;
static _Atomic uint32_t g_evicted_quiet; /* evictions not said since the last line */

/* Due to say a kind of line again? */
static int due(_Atomic uint64_t *said, uint64_t now)
{
	uint64_t last = atomic_load(said);
	return (!last || now - last >= SAY_EVERY) &&
	       atomic_compare_exchange_strong(said, &last, now);
}

static void say_dest(enum bs_level level, const struct bs_dest *d, const char *what,
		     uint32_t more)
{
	if (!bs_log_enabled(level))
		return;
	struct bs_line l;
	bs_dest_line(&l, d->addr, d->len, "table", 0);
	bs_line_str(&l, what);
	if (more) {
		bs_line_str(&l, " (and ");
		bs_line_u64(&l, more);
		bs_line_str(&l, " more since the last such line)");
	}
	bs_line_emit(&l, level);
}

static void tell(const struct bs_claim_note *n, const struct bs_dest *d, uint64_t now)
{
	if (n->damaged && due(&g_said_damage, now))
		say(BS_LOG_ERROR, "damaged: entries that do not check out are taken over", 0,
		    "; `backoffshim reset --all` rebuilds it");
	if (n->refused && due(&g_said_full, now))
		say_dest(BS_LOG_ERROR, d,
			 "not retried: the table has no room (every entry near it has waiters)", 0);
	if (!n->evicted)
		return;
	if (due(&g_said_evict, now))
		say_dest(BS_LOG_INFO, d,
			 "an older destination's schedule was dropped to make room in the table",
			 atomic_exchange(&g_evicted_quiet, 0));
	else
		atomic_fetch_add(&g_evicted_quiet, 1);
}

struct bs_entry *bs_shared_claim(const struct bs_dest *d, uint64_t now, uint64_t idle)
{
	find(1);
	struct bs_entry *e = bs_table_find(bs_tab(), d->key);
	if (e)
		return e;
	struct bs_claim_note note;
	uint32_t own = atomic_load(&g_own), was = own;
	uint32_t who = (uint32_t)BS_SYS(SYS_getpid);
	e = bs_table_claim_as(bs_tab(), d->key, now, idle, who, &own, &note);
	atomic_fetch_add(&g_own, own - was);
	tell(&note, d, now);
	return e;
}

void bs_shared_forget_stale(const struct bs_config *cfg, struct bs_entry *e)
{
	if (bs_entry_forget_idle(e, bs_now(), bs_policy_longest_wait(&cfg->policy))) {
		bs_entry_bump(e); /* published, as outcome.c's bs_publish does */
		bs_wake((const uint32_t *)&e->seq);
	}
}

/* ---- what this process knows ---- */

static _Atomic uint64_t g_known[BS_TABLE_SLOTS / 64];

static size_t slot_of(const struct bs_entry *e)
{
	struct bs_table *t = atomic_load(&g_shared);
	return t && e >= t->entries && e < t->entries + BS_TABLE_SLOTS ? (size_t)(e - t->entries)
								       : BS_TABLE_SLOTS;
}

int bs_shared_known(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	return i >= BS_TABLE_SLOTS || (atomic_load(&g_known[i / 64]) >> (i % 64) & 1);
}

void bs_shared_mark_known(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	if (i < BS_TABLE_SLOTS)
		atomic_fetch_or(&g_known[i / 64], 1ull << (i % 64));
}

/* ---- liveness: open-file-description locks in the lock file ---- */

/* The lock file's descriptors sit high, out of the numbers a program
 * counts on (the lowest free one first: a thread's socket() while another
 * waits gets the number it gets without the shim): from LOCK_FD_LOW, or
 * lower under a small limit, never within LOCK_FD_ROOM of the limit (the
 * open takes the lowest free number until the move). A process whose limit
 * leaves no such room goes without the lock, its open not even tried. */
#define LOCK_FD_LOW 512
#define LOCK_FD_ROOM 64

/* The number to move a lock file descriptor up to, or 0 for none. */
static rlim_t lock_fd_floor(rlim_t *limit)
{
	struct rlimit rl;
	if (BS_SYS(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) != 0 ||
	    rl.rlim_cur < 2 * LOCK_FD_ROOM)
		return 0;
	*limit = rl.rlim_cur;
	return rl.rlim_cur - LOCK_FD_ROOM < LOCK_FD_LOW ? rl.rlim_cur - LOCK_FD_ROOM : LOCK_FD_LOW;
}

static int moved_high(int fd, rlim_t floor, rlim_t limit)
{
	int high = (int)BS_SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, (int)floor);
	BS_SYS(SYS_close, fd);
	if (high >= 0 && (rlim_t)high >= limit - LOCK_FD_ROOM / 2) {
		BS_SYS(SYS_close, high); /* crowded up there: none */
		high = -1;
	}
	return high;
}

/* The lock file as the last open found it, so that a release closes only
 * a number that still names it. */
static _Atomic uint64_t g_lock_dev, g_lock_ino;

#define LOCK_OPEN (O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* The lock file's path is looked at before the file is opened: a close of
 * any descriptor of a file drops the process's POSIX locks on it, so the
 * shim opens no file that may have another name (a hard link to one of the
 * program's own files). Through a path-only descriptor, whose close drops
 * nothing: this user's own regular file, open to nobody else, of one name;
 * then the file itself through /proc/self/fd. Made anew if absent. */
static int open_checked(void)
{
	int path = (int)BS_SYS(SYS_openat, AT_FDCWD, g_lock_path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (path == -ENOENT) {
		int made = (int)BS_SYS(SYS_openat, AT_FDCWD, g_lock_path, LOCK_OPEN | O_CREAT | O_EXCL,
				       0600);
		return made < 0 ? -1 : made;
	}
	if (path < 0)
		return -1;
	struct stat st;
	int fd = -1;
	if (BS_SYS(SYS_fstat, path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == euid() &&
	    !(st.st_mode & 077) && st.st_nlink == 1) {
		char proc[32] = "/proc/self/fd/", digits[12];
		int n = 0;
		for (unsigned v = (unsigned)path; n == 0 || v; v /= 10)
			digits[n++] = (char)('0' + v % 10);
		size_t at = strlen(proc);
		while (n)
			proc[at++] = digits[--n];
		proc[at] = '\0';
		fd = (int)BS_SYS(SYS_openat, AT_FDCWD, proc, LOCK_OPEN & ~O_NOFOLLOW);
	}
	BS_SYS(SYS_close, path);
	return fd < 0 ? -1 : fd;
}

/* The lock file, opened for one use: fd, or -1. It must be this user's
 * own regular file, open to nobody else; it is never mapped. */
static int open_lock_file(void)
{
	rlim_t limit = 0, floor = lock_fd_floor(&limit);
	if (!g_lock_path[0] || !floor)
		return -1;
	int fd = open_checked(); /* (which checks what the file is) */
	if (fd >= 0)
		fd = moved_high(fd, floor, limit);
	struct stat st;
	if (fd >= 0 && BS_SYS(SYS_fstat, fd, &st) != 0) {
		BS_SYS(SYS_close, fd);
		fd = -1;
	}
	if (fd >= 0) {
		atomic_store(&g_lock_dev, (uint64_t)st.st_dev);
		atomic_store(&g_lock_ino, (uint64_t)st.st_ino);
	}
	return fd;
}

/* Does fd still name the lock file? The program may have closed the
 * number (closefrom, close_range) and reused it meanwhile. */
static int names_lock_file(int fd)
{
	struct stat st;
	return BS_SYS(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_dev == atomic_load(&g_lock_dev) &&
	       (uint64_t)st.st_ino == atomic_load(&g_lock_ino);
}

/* The lock file's descriptors this process holds a lock through (fd + 1;
 * 0: a free place). A fork child shares each one's open file description,
 * and with it the lock: it closes its copies, so that a lock ends with the
 * call that took it, not with a long-lived child. (Left: a fork in another
 * thread between the lock file's open and its note here; the lock the
 * child then shares counts for the others only until the probe word's own
 * deadline.) */
#define HELD_MAX 64
static _Atomic int g_held[HELD_MAX];

static void note_held(int fd, int held)
{
	for (int i = 0; i < HELD_MAX; i++) {
		int want = held ? 0 : fd + 1;
		if (atomic_compare_exchange_strong(&g_held[i], &want, held ? fd + 1 : 0))
			return;
	}
	/* (no place free: a fork child keeps that one's lock, which counts
	 * for the others until the probe word's own deadline) */
}

static void forget_the_parents_waiters(void);

static void close_held_in_child(void)
{
	for (int i = 0; i < HELD_MAX; i++) {
		int v = atomic_exchange(&g_held[i], 0);
		if (v > 0 && names_lock_file(v - 1))
			BS_SYS(SYS_close, v - 1);
	}
	forget_the_parents_waiters();
}

__attribute__((constructor)) static void shared_fork_hooks(void)
{
	pthread_atfork(NULL, NULL, close_held_in_child);
}

/* A write lock on one byte of the lock file (shtab.h says which). */
#define BYTE_LOCK(at) {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)(at), .l_len = 1}

/* bs_shared_hold on byte `at`. */
static int hold_at(off_t at)
{
	if (!bs_shared_on())
		return -1;
	int fd = open_lock_file();
	if (fd < 0)
		return -1;
	note_held(fd, 1); /* (before the lock: a fork child after it closes its copy) */
	struct flock fl = BYTE_LOCK(at);
	long r = BS_SYS(SYS_fcntl, fd, F_OFD_SETLK, &fl);
	if (r != 0) {
		BS_SYS(SYS_close, fd);
		note_held(fd, 0);
		return r == -EAGAIN || r == -EACCES ? BS_SHARED_BUSY : -1;
	}
	return fd;
}

int bs_shared_hold(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	return i < BS_TABLE_SLOTS ? hold_at((off_t)bs_shtab_probe_byte((unsigned)i)) : -1;
}

void bs_shared_release(int token)
{
	if (token < 0)
		return;
	if (names_lock_file(token))
		BS_SYS(SYS_close, token); /* the last close of the description unlocks */
	note_held(token, 0); /* (after: a fork in between finds it closed) */
}

int bs_shared_held_elsewhere(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	int fd = i < BS_TABLE_SLOTS ? open_lock_file() : -1;
	if (fd < 0)
		return 0;
	struct flock fl = BYTE_LOCK(bs_shtab_probe_byte((unsigned)i));
	int held = BS_SYS(SYS_fcntl, fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	BS_SYS(SYS_close, fd);
	return held;
}

/* ---- waiting processes ---- */

/* per slot: threads of this process waiting on it, and its cell's lock
 * (the lock file's fd + 1; 0: none) */
static _Atomic uint16_t g_waiting[BS_TABLE_SLOTS];
static _Atomic int g_cell_lock[BS_TABLE_SLOTS];

/* (a fork child's: the waiting threads were the parent's, and so were
 * the cells' locks, whose copies it has just closed) */
static void forget_the_parents_waiters(void)
{
	if (!atomic_load(&g_shared))
		return;
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++)
		if (atomic_load_explicit(&g_waiting[i], memory_order_relaxed))
			atomic_store(&g_waiting[i], 0), atomic_store(&g_cell_lock[i], 0);
}

void bs_shared_wait_begins(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	if (i >= BS_TABLE_SLOTS)
		return;
	int first = atomic_fetch_add(&g_waiting[i], 1) == 0;
	int cell = bs_table_waiter_add(atomic_load(&g_shared), e, (uint32_t)BS_SYS(SYS_getpid));
	if (!first || cell < 0)
		return;
	int fd = hold_at((off_t)bs_shtab_waiter_byte((unsigned)i, (unsigned)cell));
	int none = 0; /* (a racing last waiter's lock may still be there: keep it) */
	if (fd >= 0 && !atomic_compare_exchange_strong(&g_cell_lock[i], &none, fd + 1))
		bs_shared_release(fd);
}

void bs_shared_wait_ends(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	if (i >= BS_TABLE_SLOTS)
		return;
	bs_table_waiter_remove(atomic_load(&g_shared), e, (uint32_t)BS_SYS(SYS_getpid));
	uint16_t w = atomic_load(&g_waiting[i]);
	while (w && !atomic_compare_exchange_weak(&g_waiting[i], &w, (uint16_t)(w - 1)))
		; /* (never below 0: a fork child's count starts afresh) */
	if (w == 1)
		bs_shared_release(atomic_exchange(&g_cell_lock[i], 0) - 1);
}

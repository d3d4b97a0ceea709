/* shared: the table file. See shared.h. */
#include "shared.h"

#include "clock.h"
#include "log.h"
#include "policy.h"
#include "shtab.h"

#include "ret.h"
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"

static char g_path[256];
static struct bs_table *g_shared; /* the mapping, if any */
static dev_t g_dev;
static ino_t g_ino;

int bs_shared_on(void)
{
	return g_shared != NULL;
}

static void say(const char *path, const char *what)
{
	struct bs_line l;
	bs_line_start(&l);
	bs_line_event(&l, "table");
	bs_line_str(&l, "shared table ");
	bs_line_str(&l, path);
	bs_line_str(&l, ": ");
	bs_line_str(&l, what);
	bs_line_str(&l, "; using a private table");
	bs_line_emit(&l, BS_LOG_INFO);
}

static uint64_t netns_inode(void)
{
	struct stat st;
	if (BS_SYS(SYS_newfstatat, AT_FDCWD, "/proc/self/ns/net", &st, 0) != 0)
		return 0;
	return (uint64_t)st.st_ino;
}

static int choose_path(const struct bs_config *cfg, char *out, size_t n)
{
	if (cfg->shared[0] == '/') {
		if (strlen(cfg->shared) >= n)
			return 0;
		strcpy(out, cfg->shared);
		return 1;
	}
	return bs_shtab_user_path(out, n, SHM_DIR, geteuid(), netns_inode()) != 0;
}

/* The directory part of path into dir. */
static void dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash && slash != path ? (size_t)(slash - path) : 1;
	if (len >= n)
		len = n - 1;
	memcpy(dir, path, len);
	dir[len] = 0;
}

/* A complete new table linked at path: its fd, or -errno with *why
 * (-EEXIST: someone else linked theirs first). */
static int create_table(const char *path, int explicit_path, const char **why)
{
	char dir[256], proc[64];
	dir_of(path, dir, sizeof dir);
	int fd = (int)BS_SYS(SYS_openat, AT_FDCWD, dir, O_TMPFILE | O_RDWR | O_CLOEXEC,
			     explicit_path ? 0660 : 0600);
	if (fd < 0)
		return *why = "cannot create a file there", fd;
	int err = posix_fallocate(fd, 0, (off_t)BS_SHTAB_SIZE);
	struct bs_shtab_header h;
	bs_shtab_header_init(&h);
	if (err || BS_NEG(pwrite(fd, &h, sizeof h, 0)) != (ssize_t)sizeof h) {
		BS_SYS(SYS_close, fd);
		return *why = "no room for it (full?)", -ENOSPC;
	}
	BS_SYS(SYS_fchmod, fd, explicit_path ? 0660 : 0600); /* whatever the umask */
	memcpy(proc, "/proc/self/fd/", 14);
	int n = 14, v = fd;
	char digits[12];
	int d = 0;
	do
		digits[d++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (d)
		proc[n++] = digits[--d];
	proc[n] = 0;
	int r = (int)BS_SYS(SYS_linkat, AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
	if (r) {
		BS_SYS(SYS_close, fd);
		return *why = "cannot link it into place", r;
	}
	return fd;
}

static const char *check_file(int fd, int explicit_path)
{
	struct stat st;
	struct bs_shtab_header h;
	memset(&h, 0, sizeof h);
	if (BS_SYS(SYS_fstat, fd, &st) != 0)
		return "cannot stat it";
	struct bs_shtab_stat s = {S_ISREG(st.st_mode), st.st_uid, st.st_mode, (uint64_t)st.st_size};
	if (s.is_regular && s.size >= sizeof h &&
	    BS_NEG(pread(fd, &h, sizeof h, 0)) != (ssize_t)sizeof h)
		return "cannot read it";
	enum bs_shtab_verdict v = bs_shtab_check(&s, &h, geteuid(), explicit_path);
	if (v != BS_SHTAB_OK)
		return bs_shtab_verdict_text(v);
	g_dev = st.st_dev;
	g_ino = st.st_ino;
	return NULL;
}

/* fd or -errno */
static int open_existing(const char *path)
{
	return (int)BS_SYS(SYS_openat, AT_FDCWD, path,
			   O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}

/* Open or create the file; -1 with *why. */
static int open_table(const char *path, int explicit_path, const char **why)
{
	for (int round = 0; round < 2; round++) {
		int fd = open_existing(path);
		if (fd == -ELOOP)
			return *why = "a symbolic link", -1;
		if (fd < 0 && fd != -ENOENT)
			return *why = "cannot open it", -1;
		if (fd < 0)
			fd = create_table(path, explicit_path, why);
		if (fd >= 0) {
			if ((*why = check_file(fd, explicit_path)) == NULL)
				return fd;
			BS_SYS(SYS_close, fd);
			return -1;
		}
		if (fd != -EEXIST)
			return -1;
		/* another process linked its table first: use that one */
	}
	return *why = "cannot open it", -1;
}

struct bs_table *bs_shared_map(const struct bs_config *cfg, struct bs_table *private_table)
{
	if (!strcmp(cfg->shared, "off") || getauxval(AT_SECURE))
		return private_table;
	if (!choose_path(cfg, g_path, sizeof g_path))
		return private_table;
	int explicit_path = cfg->shared[0] == '/';
	const char *why = NULL;
	int fd = open_table(g_path, explicit_path, &why);
	if (fd < 0) {
		say(g_path, why);
		return private_table;
	}
	void *m = mmap(NULL, BS_SHTAB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	BS_SYS(SYS_close, fd);
	if (m == MAP_FAILED) {
		say(g_path, "cannot map it");
		return private_table;
	}
	g_shared = (struct bs_table *)(void *)((char *)m + BS_SHTAB_OFFSET);
	bs_futex_shared();
	return g_shared;
}

/* ---- what this process knows ---- */

static _Atomic uint64_t g_known[BS_TABLE_SLOTS / 64];

static size_t slot_of(const struct bs_entry *e)
{
	return g_shared ? (size_t)(e - g_shared->entries) : BS_TABLE_SLOTS;
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

/* threads of this process waiting on each slot */
static _Atomic uint16_t g_waiting[BS_TABLE_SLOTS];

void bs_shared_wait_begins(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	if (i < BS_TABLE_SLOTS && atomic_fetch_add(&g_waiting[i], 1) == 0)
		bs_table_waiter_add(g_shared, e, (uint32_t)getpid());
}

void bs_shared_wait_ends(const struct bs_entry *e)
{
	size_t i = slot_of(e);
	if (i < BS_TABLE_SLOTS && atomic_fetch_sub(&g_waiting[i], 1) == 1)
		bs_table_waiter_remove(g_shared, e, (uint32_t)getpid());
}

/* ---- the attempt slot's owner ---- */

/* The table file again, for a lock: it must still be the file mapped. */
static int open_for_lock(void)
{
	int fd = open_existing(g_path);
	struct stat st;
	if (fd >= 0 && (BS_SYS(SYS_fstat, fd, &st) != 0 || st.st_dev != g_dev ||
			st.st_ino != g_ino)) {
		BS_SYS(SYS_close, fd);
		fd = -1;
	}
	return fd;
}

static struct flock range_of(const struct bs_entry *e, short type)
{
	struct flock fl;
	memset(&fl, 0, sizeof fl);
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)BS_SHTAB_OFFSET + (off_t)((const char *)e - (const char *)g_shared);
	fl.l_len = (off_t)sizeof *e;
	return fl;
}

int bs_shared_hold(const struct bs_entry *e)
{
	if (!g_shared)
		return -1;
	int fd = open_for_lock();
	if (fd < 0)
		return -1;
	struct flock fl = range_of(e, F_WRLCK);
	long r = BS_SYS(SYS_fcntl, fd, F_OFD_SETLK, &fl);
	if (r != 0) {
		BS_SYS(SYS_close, fd);
		fd = r == -EAGAIN || r == -EACCES ? BS_SHARED_BUSY : -1;
	}
	return fd;
}

void bs_shared_release(int token)
{
	if (token >= 0)
		BS_SYS(SYS_close, token); /* the last close of the description unlocks */
}

int bs_shared_held_elsewhere(const struct bs_entry *e)
{
	if (!g_shared)
		return 0;
	int fd = open_for_lock();
	if (fd < 0)
		return 0;
	struct flock fl = range_of(e, F_WRLCK);
	int held = BS_SYS(SYS_fcntl, fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	BS_SYS(SYS_close, fd);
	return held;
}

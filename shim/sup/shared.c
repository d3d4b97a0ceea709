/* sup/shared: see shared.h. */
#include "shared.h"

#include "clock.h"
#include "config.h"
#include "shtab.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_DIR "/dev/shm" /* (the library's and status's) */

static char lock_path[256];

static struct bs_table *private_table(void)
{
	void *t = NULL;
	if (posix_memalign(&t, 64, sizeof(struct bs_table)) != 0)
		return NULL;
	memset(t, 0, sizeof(struct bs_table));
	return t;
}

static struct bs_table *attach(int id)
{
	struct shmid_ds ds;
	if (shmctl(id, IPC_STAT, &ds) != 0)
		return NULL;
	struct bs_shtab_stat st = {ds.shm_perm.uid, ds.shm_perm.cuid, ds.shm_perm.mode,
				   (uint64_t)ds.shm_segsz};
	if (bs_shtab_check_segment(&st, geteuid()) != BS_SHTAB_OK)
		return NULL;
	void *m = shmat(id, NULL, 0);
	if (m == (void *)-1)
		return NULL;
	enum bs_shtab_verdict v = bs_shtab_check_header((struct bs_shtab_header *)m);
	if (v == BS_SHTAB_NEW)
		bs_shtab_header_publish((struct bs_shtab_header *)m);
	else if (v != BS_SHTAB_OK)
		return shmdt(m), NULL;
	return (struct bs_table *)(void *)((char *)m + BS_SHTAB_OFFSET);
}

struct bs_table *bs_sup_table(const struct bs_config *cfg, int create, int *shared)
{
	*shared = 0;
	if (strcmp(cfg->shared, "off") == 0)
		return private_table();
	struct stat ns;
	const char *name = cfg->shared[0] == '/' ? cfg->shared : "";
	if (stat("/proc/self/ns/net", &ns) != 0) /* (no /proc: as the library) */
		return private_table();
	int key = bs_shtab_key(geteuid(), (uint64_t)ns.st_ino, name);
	int id = shmget(key, create ? BS_SHTAB_SIZE : 0, create ? IPC_CREAT | 0600 : 0);
	if (id < 0 && errno == ENOENT && !create) {
		*shared = BS_SUP_TABLE_LATER;
		return private_table();
	}
	struct bs_table *t = id >= 0 ? attach(id) : NULL;
	if (!t)
		return private_table();
	bs_shtab_lock_path(lock_path, sizeof lock_path, LOCK_DIR, key);
	bs_futex_shared();
	*shared = 1;
	return t;
}

/* The lock file, checked as the library checks it: fd, or -1. */
static int open_lock_file(void)
{
	if (!lock_path[0])
		return -1;
	int fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
			(st.st_mode & 077))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int bs_sup_hold_probe(struct bs_table *t, const struct bs_entry *e)
{
	size_t i = (size_t)(e - t->entries);
	int fd = i < BS_TABLE_SLOTS ? open_lock_file() : -1;
	if (fd < 0)
		return -1;
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
			   .l_start = (off_t)bs_shtab_probe_byte((unsigned)i), .l_len = 1};
	if (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
		int busy = errno == EAGAIN || errno == EACCES;
		close(fd);
		return busy ? BS_SUP_BUSY : -1;
	}
	return fd;
}

void bs_sup_release(int token)
{
	if (token >= 0)
		close(token);
}

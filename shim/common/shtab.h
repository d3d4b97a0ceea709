/*
 * shtab: the layout of the shared table, where it lives, and the checks a
 * process makes before it trusts one.
 *
 * Promise: pure functions (no I/O: the caller passes what IPC_STAT and the
 * segment's first bytes said). The table lives in a System V shared-memory
 * segment: unlike a file, nobody can truncate it under a process that has
 * it attached (a truncated mapping is SIGBUS in every process using it),
 * and a removed one stays attached until its last user detaches. A segment
 * is used only if its owner and creator are this user, its mode is 0600 and
 * its size and header are this layout's: no other user can have written
 * it, and no group can share it. Any failure names one reason, which the
 * caller reports (a debug line when someone else's segment holds the key)
 * before it keeps its private table. The layout version is in the header
 * and in the key, so an upgrade never attaches an old table.
 */
#ifndef BS_SHTAB_H
#define BS_SHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "table.h"

#define BS_SHTAB_MAGIC 0x62736869667473ull /* "bshifts" */
#define BS_SHTAB_LAYOUT 3u /* 3: a System V segment; buckets of one cache
			    * line, a check word per slot */
#define BS_SHTAB_OFFSET 4096u /* the table starts here */
#define BS_SHTAB_SIZE (BS_SHTAB_OFFSET + sizeof(struct bs_table))

struct bs_shtab_header {
	uint64_t magic;
	uint32_t layout;
	uint32_t header_size;
	uint64_t file_size;
	uint32_t slots;
	uint32_t entry_size;
	uint64_t table_offset;
	uint64_t table_size;
};

/* What IPC_STAT said of a segment. */
struct bs_shtab_stat {
	uid_t owner, creator;
	mode_t mode;
	uint64_t size;
};

enum bs_shtab_verdict {
	BS_SHTAB_OK = 0,
	BS_SHTAB_NEW,         /* no magic yet: just created; its maker writes the
			       * fields, then the magic */
	BS_SHTAB_OTHER_OWNER,
	BS_SHTAB_OPEN_TO_OTHERS,
	BS_SHTAB_WRONG_SIZE,
	BS_SHTAB_BAD_HEADER,
	BS_SHTAB_OTHER_LAYOUT,
};

/* The header a new table gets. */
void bs_shtab_header_init(struct bs_shtab_header *h);
/* That header written into a new segment's h: every field, then the magic
 * word last (release), so that a process checking it meanwhile sees "new"
 * (all zero but the fields) or the whole header, never half of one. */
void bs_shtab_header_publish(struct bs_shtab_header *h);

/* May a process with effective uid `euid` attach this segment? */
enum bs_shtab_verdict bs_shtab_check_segment(const struct bs_shtab_stat *st, uid_t euid);
/* Is this the header of a table of this layout (or a new, all-zero one)? */
enum bs_shtab_verdict bs_shtab_check_header(const struct bs_shtab_header *h);

/* A short phrase for a verdict ("owned by another user"...). */
const char *bs_shtab_verdict_text(enum bs_shtab_verdict v);

/* The table's System V key: one per layout, user, network namespace (the
 * inode of /proc/self/ns/net, 0 if unknown) and name ("" for the default
 * table; `shared = NAME` picks another table of the same user). Never
 * IPC_PRIVATE. */
int bs_shtab_key(uid_t uid, uint64_t netns, const char *name);

/* The lock file's bytes: slot i's prober's, then each waiter cell's. */
static inline uint64_t bs_shtab_probe_byte(unsigned slot)
{
	return slot;
}

static inline uint64_t bs_shtab_waiter_byte(unsigned slot, unsigned cell)
{
	return (uint64_t)BS_TABLE_SLOTS + (uint64_t)slot * BS_TABLE_WAITER_PIDS + cell;
}

/* The table's lock file in dir, which holds the probers' and waiters'
 * locks (it is never mapped, so its size does not matter):
 * dir/backoffshim-v<layout>-k<key>.lock. Returns the length, or 0 if it
 * does not fit in n bytes. */
size_t bs_shtab_lock_path(char *out, size_t n, const char *dir, int key);

#endif

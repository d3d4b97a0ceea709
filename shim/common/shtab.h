/*
 * shtab: the layout of the shared table file, and the checks a process
 * makes before it trusts one.
 *
 * Promise: pure functions (no I/O: the caller passes what fstat and the
 * file's first bytes said). A file is used only if every check passes; any
 * failure names one reason, which the caller logs once before it falls
 * back to a private table. The table itself follows the header at a fixed,
 * page-aligned offset; its layout version is in the header and in the
 * file name, so an upgrade never opens an old table.
 */
#ifndef BS_SHTAB_H
#define BS_SHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "table.h"

#define BS_SHTAB_MAGIC 0x62736869667473ull /* "bshifts" */
#define BS_SHTAB_LAYOUT 2u /* 2: IPv4 keys hold port and address in memory
			    * order, and a key's home slot is a Fibonacci hash */
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

/* What fstat said of an opened file. */
struct bs_shtab_stat {
	int is_regular;
	uid_t owner;
	mode_t mode;
	uint64_t size;
};

enum bs_shtab_verdict {
	BS_SHTAB_OK = 0,
	BS_SHTAB_NOT_REGULAR,
	BS_SHTAB_OTHER_OWNER,
	BS_SHTAB_WRITABLE_BY_OTHERS,
	BS_SHTAB_WRONG_SIZE,
	BS_SHTAB_BAD_HEADER,
	BS_SHTAB_OTHER_LAYOUT,
};

/* The header a new file gets. */
void bs_shtab_header_init(struct bs_shtab_header *h);

/* May a process with effective uid `euid` use this file? `explicit_path`:
 * the operator named the file (BACKOFFSHIM_SHARED=/path): then its owner
 * and group bits are the operator's choice, and only "writable by others"
 * (o+w) is refused; the per-user default must be the user's own, mode
 * 0600. */
enum bs_shtab_verdict bs_shtab_check(const struct bs_shtab_stat *st,
				     const struct bs_shtab_header *h, uid_t euid,
				     int explicit_path);

/* A short phrase for a verdict ("owned by another user"...). */
const char *bs_shtab_verdict_text(enum bs_shtab_verdict v);

/* The per-user file name in dir: dir/backoffshim-v<layout>-u<uid>-n<netns>
 * (netns: the inode of /proc/self/ns/net, 0 if unknown). Returns the
 * length, or 0 if it does not fit in n bytes. */
size_t bs_shtab_user_path(char *out, size_t n, const char *dir, uid_t uid, uint64_t netns);

#endif

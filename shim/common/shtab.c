/* shtab: see shtab.h. */
#include "shtab.h"

#include "mix.h"
#include "util.h"

#include <stdatomic.h>
#include <string.h>

_Static_assert(sizeof(struct bs_shtab_header) == 48, "no padding: headers compare whole");

void bs_shtab_header_init(struct bs_shtab_header *h)
{
	memset(h, 0, sizeof *h);
	h->magic = BS_SHTAB_MAGIC;
	h->layout = BS_SHTAB_LAYOUT;
	h->header_size = sizeof *h;
	h->file_size = BS_SHTAB_SIZE;
	h->slots = BS_TABLE_SLOTS;
	h->entry_size = sizeof(struct bs_entry);
	h->table_offset = BS_SHTAB_OFFSET;
	h->table_size = sizeof(struct bs_table);
}

enum bs_shtab_verdict bs_shtab_check_segment(const struct bs_shtab_stat *st, uid_t euid)
{
	if (st->owner != euid || st->creator != euid)
		return BS_SHTAB_OTHER_OWNER;
	if ((st->mode & 0777) != 0600)
		return BS_SHTAB_OPEN_TO_OTHERS;
	return st->size == BS_SHTAB_SIZE ? BS_SHTAB_OK : BS_SHTAB_WRONG_SIZE;
}

enum bs_shtab_verdict bs_shtab_check_header(const struct bs_shtab_header *h)
{
	if (h->magic == 0) /* (its maker writes the magic last) */
		return BS_SHTAB_NEW;
	if (h->magic != BS_SHTAB_MAGIC)
		return BS_SHTAB_BAD_HEADER;
	if (h->layout != BS_SHTAB_LAYOUT)
		return BS_SHTAB_OTHER_LAYOUT;
	struct bs_shtab_header want;
	bs_shtab_header_init(&want);
	return memcmp(h, &want, sizeof want) == 0 ? BS_SHTAB_OK : BS_SHTAB_BAD_HEADER;
}

const char *bs_shtab_verdict_text(enum bs_shtab_verdict v)
{
	switch (v) {
	case BS_SHTAB_OK: return "usable";
	case BS_SHTAB_NEW: return "new";
	case BS_SHTAB_OTHER_OWNER: return "owned by another user";
	case BS_SHTAB_OPEN_TO_OTHERS: return "open to other users (mode is not 0600)";
	case BS_SHTAB_WRONG_SIZE: return "of the wrong size";
	case BS_SHTAB_BAD_HEADER: return "damaged (bad header)";
	case BS_SHTAB_OTHER_LAYOUT: return "a table of another layout version";
	}
	return "unusable";
}

int bs_shtab_key(uid_t uid, uint64_t netns, const char *name)
{
	uint64_t h = bs_mix64(BS_SHTAB_MAGIC ^ BS_SHTAB_LAYOUT);
	h = bs_mix64(h ^ (uint64_t)uid);
	h = bs_mix64(h ^ netns);
	for (const char *c = name; *c; c++)
		h = bs_mix64(h ^ (unsigned char)*c);
	int key = (int)(h & 0x7fffffff);
	return key ? key : 1;
}

size_t bs_shtab_lock_path(char *out, size_t n, const char *dir, int key)
{
	char buf[512];
	size_t len = strlen(dir);
	if (len + 64 > sizeof buf)
		return 0;
	memcpy(buf, dir, len);
	memcpy(buf + len, "/backoffshim-v", 14);
	len += 14;
	len += bs_u64_digits(buf + len, BS_SHTAB_LAYOUT);
	memcpy(buf + len, "-k", 2);
	len += 2;
	len += bs_u64_digits(buf + len, (uint64_t)(unsigned)key);
	memcpy(buf + len, ".lock", 5);
	len += 5;
	if (len + 1 > n)
		return 0;
	memcpy(out, buf, len);
	out[len] = 0;
	return len;
}

void bs_shtab_header_publish(struct bs_shtab_header *h)
{
	struct bs_shtab_header want;
	bs_shtab_header_init(&want);
	memcpy((char *)h + sizeof h->magic, (char *)&want + sizeof want.magic,
	       sizeof want - sizeof want.magic);
	atomic_store_explicit((_Atomic uint64_t *)&h->magic, BS_SHTAB_MAGIC, memory_order_release);
}

/* shtab: see shtab.h. */
#include "shtab.h"

#include <string.h>
#include <sys/stat.h>

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

static int header_matches(const struct bs_shtab_header *h)
{
	struct bs_shtab_header want;
	bs_shtab_header_init(&want);
	return h->header_size == want.header_size && h->file_size == want.file_size &&
	       h->slots == want.slots && h->entry_size == want.entry_size &&
	       h->table_offset == want.table_offset && h->table_size == want.table_size;
}

enum bs_shtab_verdict bs_shtab_check(const struct bs_shtab_stat *st,
				     const struct bs_shtab_header *h, uid_t euid,
				     int explicit_path)
{
	if (!st->is_regular)
		return BS_SHTAB_NOT_REGULAR;
	if (!explicit_path && st->owner != euid)
		return BS_SHTAB_OTHER_OWNER;
	if ((st->mode & S_IWOTH) || (!explicit_path && (st->mode & S_IWGRP)))
		return BS_SHTAB_WRITABLE_BY_OTHERS;
	if (st->size != BS_SHTAB_SIZE)
		return BS_SHTAB_WRONG_SIZE;
	if (h->magic != BS_SHTAB_MAGIC)
		return BS_SHTAB_BAD_HEADER;
	if (h->layout != BS_SHTAB_LAYOUT)
		return BS_SHTAB_OTHER_LAYOUT;
	return header_matches(h) ? BS_SHTAB_OK : BS_SHTAB_BAD_HEADER;
}

const char *bs_shtab_verdict_text(enum bs_shtab_verdict v)
{
	switch (v) {
	case BS_SHTAB_OK: return "usable";
	case BS_SHTAB_NOT_REGULAR: return "not a regular file";
	case BS_SHTAB_OTHER_OWNER: return "owned by another user";
	case BS_SHTAB_WRITABLE_BY_OTHERS: return "writable by other users";
	case BS_SHTAB_WRONG_SIZE: return "of the wrong size";
	case BS_SHTAB_BAD_HEADER: return "not a backoffshim table (bad header)";
	case BS_SHTAB_OTHER_LAYOUT: return "a table of another layout version";
	}
	return "unusable";
}

/* decimal digits of v into p; returns the count */
static size_t put_u64(char *p, uint64_t v)
{
	char tmp[20];
	size_t n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	for (size_t i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

size_t bs_shtab_user_path(char *out, size_t n, const char *dir, uid_t uid, uint64_t netns)
{
	char buf[512];
	size_t len = strlen(dir);
	if (len + 80 > sizeof buf)
		return 0;
	memcpy(buf, dir, len);
	const char *parts[] = {"/backoffshim-v", "-u", "-n"};
	uint64_t vals[] = {BS_SHTAB_LAYOUT, (uint64_t)uid, netns};
	for (int i = 0; i < 3; i++) {
		size_t pl = strlen(parts[i]);
		memcpy(buf + len, parts[i], pl);
		len += pl;
		len += put_u64(buf + len, vals[i]);
	}
	if (len + 1 > n)
		return 0;
	memcpy(out, buf, len);
	out[len] = 0;
	return len;
}

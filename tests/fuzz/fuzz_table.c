/*
 * libFuzzer target: the shared table as another process may have left it
 * (shtab.h, table.h). The input is a header and a list of writes anywhere
 * into a zeroed table: [region, slot hi, slot lo, offset, length, bytes].
 * Then everything the shim and `backoffshim status` read from a table is
 * run on it: the header check, lookups and claims (with a creator's share),
 * outcomes, the forgetting rule, waiter cells, and the operator's rows (a
 * slot's key checked, its address read and formatted). What must hold:
 * nothing crashes or loops; a claim returns an entry inside the table (or
 * NULL, with a reason); a key just claimed is found again at that entry;
 * a slot said valid holds a valid key.
 */
#include "addr.h"
#include "shtab.h"
#include "table.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NOW (5000ull * 1000000000ull)
#define IDLE (120ull * 1000000000ull)

static void fail(const char *what)
{
	fprintf(stderr, "FUZZ CHECK FAILED: %s\n", what);
	abort();
}

/* Where region r's bytes for slot i start, and how many there are. */
static unsigned char *region(struct bs_table *t, unsigned r, unsigned i, size_t *n)
{
	switch (r % 6) {
	case 0: *n = sizeof t->keys[i]; return (unsigned char *)&t->keys[i];
	case 1: *n = sizeof t->meta[i]; return (unsigned char *)&t->meta[i];
	case 2: *n = sizeof t->entries[i]; return (unsigned char *)&t->entries[i];
	case 3: *n = sizeof t->addrs[i]; return (unsigned char *)t->addrs[i];
	case 4: *n = sizeof t->waiters[i]; return (unsigned char *)t->waiters[i];
	default: *n = sizeof t->tags[i % BS_TABLE_BUCKETS];
		 return (unsigned char *)&t->tags[i % BS_TABLE_BUCKETS];
	}
}

static void apply_writes(struct bs_table *t, const uint8_t *d, size_t n)
{
	while (n >= 5) {
		unsigned r = d[0], i = ((unsigned)d[1] << 8 | d[2]) % BS_TABLE_SLOTS;
		size_t cap, off, len;
		unsigned char *p = region(t, r, i, &cap);
		off = d[3] % cap;
		len = d[4] % (cap - off + 1);
		d += 5, n -= 5;
		if (len > n)
			len = n;
		memcpy(p + off, d, len);
		d += len, n -= len;
	}
}

/* What status does with each slot. */
static void read_rows(struct bs_table *t)
{
	for (unsigned i = 0; i < BS_TABLE_SLOTS; i++) {
		uint64_t k = 0;
		if (!bs_table_slot_valid(t, i, &k))
			continue;
		if (!bs_table_key_valid(k))
			fail("a valid slot holds an invalid key");
		struct sockaddr_storage ss;
		memset(&ss, 0, sizeof ss);
		uint32_t len = bs_table_get_addr(t, i, &ss);
		if (len > BS_TABLE_ADDR_MAX)
			fail("an address longer than the table holds");
		char name[128];
		if (len && bs_addr_key((struct sockaddr *)&ss, len) == k)
			bs_addr_format((struct sockaddr *)&ss, len, name, sizeof name);
		struct bs_entry *e = &t->entries[i];
		(void)bs_state_next_at(atomic_load(&e->state));
		(void)bs_probe_stale_at(atomic_load(&e->probe));
	}
}

static void use_as_the_shim(struct bs_table *t, uint64_t seed)
{
	uint32_t own = (uint32_t)(seed % (BS_TABLE_SHARE + 2));
	for (unsigned j = 0; j < 64; j++) {
		uint64_t key = ((seed + j * 0x9e3779b97f4a7c15ull) & ((1ull << 60) - 1)) | 1;
		struct bs_claim_note note;
		uint64_t now = NOW + j * 1000000ull;
		struct bs_entry *e = bs_table_claim_as(t, key, now, IDLE, 77, &own, &note);
		if (!e)
			continue; /* refused, or a bounded claim gave up: untracked */
		if (e < t->entries || e >= t->entries + BS_TABLE_SLOTS)
			fail("a claim returned an entry outside the table");
		if (bs_table_find(t, key) != e)
			fail("a key just claimed is not found at its entry");
		uint64_t s = atomic_load(&e->state);
		bs_entry_fail(e, s, now, now + 1000000000ull, bs_state_failures(s) + 1, 111, now);
		bs_entry_forget_idle(e, now + (seed & 0xffffffffffull), IDLE);
		int cell = bs_table_waiter_add(t, e, 4242);
		if (cell >= (int)BS_TABLE_WAITER_PIDS)
			fail("a waiter cell out of range");
		bs_table_waiter_remove(t, e, 4242);
		if (j % 3 == 0)
			bs_entry_connected(e, now);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bs_table *t;
	if (!t && !(t = malloc(sizeof *t)))
		return 0;
	memset(t, 0, sizeof *t);
	struct bs_shtab_header h;
	memset(&h, 0, sizeof h);
	size_t hn = size < sizeof h ? size : sizeof h;
	memcpy(&h, data, hn);
	(void)bs_shtab_check_header(&h);
	(void)bs_shtab_verdict_text(bs_shtab_check_header(&h));
	uint64_t seed = 0;
	memcpy(&seed, &h, sizeof seed);
	apply_writes(t, data + hn, size - hn);
	read_rows(t);
	use_as_the_shim(t, seed);
	read_rows(t);
	return 0;
}

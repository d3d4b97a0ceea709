/* resolv: resolution records. See resolv.h. */
#include "resolv.h"

static struct bs_res *record(struct bs_restab *t, const uint64_t *keys, unsigned n,
			     uint64_t now, uint64_t name, int any_port)
{
	struct bs_res *r = &t->rec[atomic_fetch_add(&t->next, 1) % BS_RES_RECORDS];
	unsigned m = 0;
	atomic_store(&r->stamp, 0);
	for (unsigned i = 0; i < n && m < BS_RES_KEYS; i++) {
		int dup = 0;
		for (unsigned j = 0; j < m; j++)
			dup |= atomic_load(&r->keys[j]) == keys[i];
		if (!dup && keys[i])
			atomic_store(&r->keys[m++], keys[i]);
	}
	atomic_store(&r->n, m);
	atomic_store(&r->cand, 0);
	atomic_store(&r->name, name);
	atomic_store(&r->any_port, (uint32_t)any_port);
	atomic_store(&r->lasts, 0);
	atomic_store(&r->stamp, now ? now : 1);
	return r;
}

void bs_res_add(struct bs_restab *t, const uint64_t *keys, unsigned n, uint64_t now,
		uint64_t name, int any_port)
{
	record(t, keys, n, now, name, any_port);
}

void bs_res_learn_walk(struct bs_restab *t, uint64_t from, uint64_t to, uint64_t now,
		       uint64_t lasts)
{
	uint64_t keys[2] = {from, to};
	struct bs_res *r = record(t, keys, 2, now, 0, 0);
	atomic_store(&r->cand, (uint32_t)BS_CAND_FAILED | (uint32_t)BS_CAND_INFLIGHT << 2);
	atomic_store(&r->lasts, lasts);
}

/* The newest live record holding key (or host, in a record of any port),
 * and its index in it; with `name`, only records of that name count. */
static struct bs_res *find(struct bs_restab *t, uint64_t key, uint64_t host, uint64_t now,
			   uint64_t horizon, unsigned *idx, const uint64_t *name)
{
	struct bs_res *best = 0;
	uint64_t best_stamp = 0;
	for (unsigned r = 0; r < BS_RES_RECORDS; r++) {
		struct bs_res *x = &t->rec[r];
		uint64_t st = atomic_load(&x->stamp), lasts = atomic_load(&x->lasts);
		uint64_t h = lasts > horizon ? lasts : horizon;
		if (!st || st <= best_stamp || (now > st && now - st > h) ||
		    (name && atomic_load(&x->name) != *name))
			continue;
		unsigned n = atomic_load(&x->n);
		uint64_t want = atomic_load(&x->any_port) ? host : key;
		for (unsigned i = 0; i < n && i < BS_RES_KEYS; i++) {
			if (!want || atomic_load(&x->keys[i]) != want)
				continue;
			if (atomic_load(&x->stamp) != st)
				break; /* rewritten meanwhile */
			best = x;
			best_stamp = st;
			*idx = i;
			break;
		}
	}
	return best;
}

void bs_res_mark(struct bs_restab *t, uint64_t key, uint64_t host, enum bs_cand c, uint64_t now,
		 uint64_t horizon)
{
	unsigned i;
	struct bs_res *r = find(t, key, host, now, horizon, &i, 0);
	if (!r)
		return;
	uint32_t old = atomic_load(&r->cand), want;
	do
		want = (old & ~(3u << (2 * i))) | (uint32_t)c << (2 * i);
	while (!atomic_compare_exchange_weak(&r->cand, &old, want));
}

int bs_res_has_alternative(struct bs_restab *t, uint64_t key, uint64_t host, uint64_t now,
			   uint64_t horizon)
{
	unsigned i;
	struct bs_res *r = find(t, key, host, now, horizon, &i, 0);
	if (!r)
		return 0;
	unsigned n = atomic_load(&r->n);
	uint32_t cand = atomic_load(&r->cand);
	for (unsigned j = 0; j < n && j < BS_RES_KEYS; j++)
		if (j != i && ((cand >> (2 * j)) & 3u) != BS_CAND_FAILED)
			return 1;
	return 0;
}

int bs_res_name_has(struct bs_restab *t, uint64_t name, uint64_t key, uint64_t now,
		    uint64_t horizon)
{
	unsigned i;
	return find(t, key, key, now, horizon, &i, &name) != 0;
}

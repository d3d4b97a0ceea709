/* fdtab: per-fd tracking state. See fdtab.h. */
#include "fdtab.h"

#include <string.h>

void bs_fdtab_init(struct bs_fdtab *t, struct bs_fdslot *slots, unsigned cap)
{
	t->slots = slots;
	t->cap = slots ? cap : 0;
	atomic_store(&t->high, 0);
}

void bs_fd_track(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t key,
		 uint64_t since, uint64_t call_start, const struct sockaddr *addr,
		 socklen_t len)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s)
		return;
	/* Invalidate first so a concurrent reader never pairs the new key
	 * with the old address. */
	atomic_store_explicit(&s->state, BS_FD_NONE, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->key, key, memory_order_relaxed);
	atomic_store_explicit(&s->since, since, memory_order_relaxed);
	atomic_store_explicit(&s->call_start, call_start, memory_order_relaxed);
	if (addr && len <= BS_FD_ADDR_MAX) {
		memcpy(s->addr, addr, len);
		s->addrlen = len;
	} else {
		s->addrlen = 0;
	}
	unsigned h = atomic_load_explicit(&t->high, memory_order_relaxed);
	while ((unsigned)fd + 1 > h && !atomic_compare_exchange_weak(&t->high, &h, (unsigned)fd + 1))
		;
	atomic_store_explicit(&s->state, st, memory_order_release);
}

void bs_fd_set(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t since)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s || atomic_load(&s->state) == BS_FD_NONE)
		return;
	atomic_store(&s->since, since);
	atomic_store_explicit(&s->state, st, memory_order_release);
}

void bs_fd_clear(struct bs_fdtab *t, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (s && atomic_load_explicit(&s->state, memory_order_relaxed) != BS_FD_NONE)
		atomic_store_explicit(&s->state, BS_FD_NONE, memory_order_release);
}

void bs_fd_copy(struct bs_fdtab *t, int from, int to)
{
	struct bs_fdslot *f = bs_fd_slot(t, from), *d = bs_fd_slot(t, to);
	if (!d || from == to)
		return;
	unsigned st = f ? atomic_load(&f->state) : BS_FD_NONE;
	if (st == BS_FD_NONE) {
		bs_fd_clear(t, to);
		return;
	}
	atomic_store(&d->err, atomic_load(&f->err)); /* an owed error goes along */
	bs_fd_track(t, to, (enum bs_fd_state)st, atomic_load(&f->key), atomic_load(&f->since),
		    atomic_load(&f->call_start), (const struct sockaddr *)f->addr, f->addrlen);
}

void bs_fd_clear_range(struct bs_fdtab *t, unsigned lo, unsigned hi)
{
	unsigned h = atomic_load(&t->high);
	if (hi >= h)
		hi = h ? h - 1 : 0;
	for (unsigned fd = lo; fd <= hi && fd < h; fd++)
		bs_fd_clear(t, (int)fd);
}

void bs_fd_fail(struct bs_fdtab *t, int fd, int err)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s)
		return;
	atomic_store(&s->err, (uint32_t)err);
	unsigned h = atomic_load_explicit(&t->high, memory_order_relaxed);
	while ((unsigned)fd + 1 > h && !atomic_compare_exchange_weak(&t->high, &h, (unsigned)fd + 1))
		;
	atomic_store_explicit(&s->state, BS_FD_FAILED, memory_order_release);
}

int bs_fd_take_err(struct bs_fdtab *t, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	unsigned want = BS_FD_FAILED;
	if (!s || !atomic_compare_exchange_strong(&s->state, &want, BS_FD_NONE))
		return 0;
	return (int)atomic_load(&s->err);
}

/* fdtab: per-fd tracking state. See fdtab.h. */
#include "fdtab.h"
#include "addr.h"

#include <netinet/in.h>
#include <string.h>

/* A slot keeps an IPv4 or IPv6 peer address whole. */
_Static_assert(sizeof(struct sockaddr_in) <= BS_FD_ADDR_MAX, "sockaddr_in fits a slot");
_Static_assert(sizeof(struct sockaddr_in6) <= BS_FD_ADDR_MAX, "sockaddr_in6 fits a slot");
_Static_assert(BS_FD_ADDR_WORDS * 8 >= BS_FD_ADDR_MAX, "the address words hold it");

void bs_fdtab_init(struct bs_fdtab *t, struct bs_fdslot *slots, unsigned cap)
{
	*t = (struct bs_fdtab){.slots = slots, .cap = slots ? cap : 0};
}

/* Every state change: the pending count follows the exchange's result.
 * Between two states that are not pending (the common case: a connect that
 * succeeded, a close) a plain store: a racing writer can then only leave
 * the count too high, which costs readiness calls their fast path, never
 * too low. */
static inline __attribute__((always_inline)) void set_state(struct bs_fdtab *t,
							     struct bs_fdslot *s, unsigned st)
{
	unsigned seen = atomic_load_explicit(&s->state, memory_order_relaxed);
	if (!bs_fd_state_is_pending(seen) && !bs_fd_state_is_pending(st)) {
		atomic_store_explicit(&s->state, st, memory_order_release);
		return;
	}
	unsigned old = atomic_exchange_explicit(&s->state, st, memory_order_acq_rel);
	int d = bs_fd_state_is_pending(st) - bs_fd_state_is_pending(old);
	if (d)
		atomic_fetch_add_explicit(&t->pending, d, memory_order_relaxed);
	d = (st == BS_FD_PARKED) - (old == BS_FD_PARKED);
	if (d)
		atomic_fetch_add_explicit(&t->parked, d, memory_order_relaxed);
}

#define READ_TRIES 1024 /* loads of the generation before a reader gives up */

/* What the generation guards, as plain values. */
struct dest {
	uint64_t key, cookie; /* cookie 0: no identity */
	uint64_t addr[BS_FD_ADDR_WORDS];
	uint32_t len;
};

static void raise_to(_Atomic unsigned *mark, unsigned v)
{
	unsigned h = atomic_load_explicit(mark, memory_order_relaxed);
	while (v > h && !atomic_compare_exchange_weak(mark, &h, v))
		;
}

static void raise_high(struct bs_fdtab *t, int fd)
{
	raise_to(&t->high, (unsigned)fd + 1);
	if (atomic_load_explicit(&t->fresh_on, memory_order_relaxed))
		raise_to(&t->fresh_below, (unsigned)fd + 1);
}

static uint32_t write_begin(struct bs_fdslot *s)
{
	uint32_t g = atomic_fetch_add_explicit(&s->gen, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	return g;
}

/* Returns 1 if no other writer overlapped this one. */
static int write_end(struct bs_fdslot *s, uint32_t began)
{
	uint32_t g = atomic_fetch_add_explicit(&s->gen, BS_FD_GEN_VERSION - 1,
					       memory_order_release);
	return !(began & BS_FD_GEN_WRITERS) && g == began + 1;
}

static void put(struct bs_fdslot *s, const struct dest *d)
{
	if (d->cookie)
		atomic_fetch_or(&s->flags, BS_FDF_EXTRA);
	atomic_store_explicit(&s->key, d->key, memory_order_relaxed);
	for (unsigned i = 0; i < BS_FD_ADDR_WORDS; i++)
		atomic_store_explicit(&s->addr[i], d->addr[i], memory_order_relaxed);
	atomic_store_explicit(&s->addrlen, d->len, memory_order_relaxed);
	atomic_store_explicit(&s->cookie, d->cookie, memory_order_relaxed);
}

/* Write d under the generation. Returns 1 if no other writer overlapped;
 * otherwise the slot's destination and identity are emptied again (the
 * result of two writers at once is a mix) and 0 is returned. */
static int write_dest(struct bs_fdslot *s, const struct dest *d)
{
	uint32_t g = write_begin(s);
	put(s, d);
	if (write_end(s, g))
		return 1;
	static const struct dest none;
	g = write_begin(s);
	put(s, &none);
	write_end(s, g);
	return 0;
}

static void get(struct bs_fdslot *s, struct dest *d)
{
	d->key = atomic_load_explicit(&s->key, memory_order_relaxed);
	for (unsigned i = 0; i < BS_FD_ADDR_WORDS; i++)
		d->addr[i] = atomic_load_explicit(&s->addr[i], memory_order_relaxed);
	d->len = atomic_load_explicit(&s->addrlen, memory_order_relaxed);
	d->cookie = atomic_load_explicit(&s->cookie, memory_order_relaxed);
}

/* A consistent copy of what the generation guards; 0 if none was had. */
static int read_dest(struct bs_fdslot *s, struct dest *d)
{
	for (unsigned n = 0; n < READ_TRIES; n++) {
		uint32_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
		if (g & BS_FD_GEN_WRITERS)
			continue;
		get(s, d);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->gen, memory_order_relaxed) == g)
			return 1;
	}
	return 0;
}

static void track_dest(struct bs_fdtab *t, int fd, enum bs_fd_state st, const struct dest *d,
		       uint64_t since, uint64_t call_start)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s)
		return;
	/* Invalidate first: a reader that sees the new state also sees the
	 * new destination (and bs_fd_read_dest never mixes old and new). */
	set_state(t, s, BS_FD_NONE);
	atomic_store_explicit(&s->flags,
			      atomic_load(&s->flags) & (BS_FDF_NO_PARK | BS_FDF_TWIN | BS_FDF_EXTRA),
			      memory_order_relaxed);
	atomic_store_explicit(&s->probe, 0, memory_order_relaxed);
	atomic_store_explicit(&s->steps, 0, memory_order_relaxed);
	atomic_store_explicit(&s->since, since, memory_order_relaxed);
	atomic_store_explicit(&s->call_start, call_start, memory_order_relaxed);
	int alone = write_dest(s, d);
	raise_high(t, fd);
	/* another write at once (a program racing on this number): untracked */
	set_state(t, s, alone ? st : BS_FD_NONE);
}

/* How much of addr a slot keeps: all of it up to BS_FD_ADDR_MAX; of an
 * internet address passed with a longer length (a sockaddr_storage's), its
 * family's own size; otherwise nothing. */
static socklen_t kept_len(const struct sockaddr *addr, socklen_t len)
{
	if (len <= BS_FD_ADDR_MAX)
		return len;
	if (addr->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (addr->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

void bs_fd_track(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t key,
		 uint64_t since, uint64_t call_start, const struct sockaddr *addr,
		 socklen_t len)
{
	struct dest d = {.key = key, .len = addr ? kept_len(addr, len) : 0};
	if (d.len)
		memcpy(d.addr, addr, d.len);
	track_dest(t, fd, st, &d, since, call_start);
}

void bs_fd_enable_fresh(struct bs_fdtab *t)
{
	atomic_store(&t->fresh_on, 1);
	raise_to(&t->fresh_below, atomic_load(&t->high));
}

#define TO(st) (1u << (st))

/* The moves bs_fd_set and bs_fd_fail make, from each state. Tracking
 * starts (bs_fd_track) and ends (bs_fd_clear, bs_fd_renew, bs_fd_take_err)
 * elsewhere, from any state. */
static const uint8_t moves[] = {
	[BS_FD_NONE] = TO(BS_FD_FAILED), /* an error read away, then forgotten */
	[BS_FD_CONNECTING] = TO(BS_FD_CONNECTING) | TO(BS_FD_PROBATION) | TO(BS_FD_HEALTHY) |
			     TO(BS_FD_FAILED) | TO(BS_FD_PARKED),
	[BS_FD_PROBATION] = TO(BS_FD_HEALTHY),
	[BS_FD_HEALTHY] = TO(BS_FD_HEALTHY),
	[BS_FD_FAILED] = TO(BS_FD_FAILED),
	[BS_FD_PARKED] = TO(BS_FD_CONNECTING) | TO(BS_FD_FAILED),
	[BS_FD_EPOLL] = 0,
};

int bs_fd_move_ok(unsigned from, unsigned to)
{
	return from < sizeof moves && to < 8 && (moves[from] & TO(to));
}

/* A move the table refuses is a caller's bug: the slot stays as it is
 * (the unit tests fail on it). */
static int may_move(struct bs_fdslot *s, unsigned to)
{
	return bs_fd_move_ok(atomic_load_explicit(&s->state, memory_order_acquire), to);
}

int bs_fd_set(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t since)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s || atomic_load(&s->state) == BS_FD_NONE || !may_move(s, st))
		return 0;
	atomic_store(&s->since, since);
	set_state(t, s, st);
	return 1;
}

/* The identity alone, under the generation: 1 if no other writer overlapped. */
static int write_ident(struct bs_fdslot *s, uint64_t cookie)
{
	uint32_t g = write_begin(s);
	atomic_store_explicit(&s->cookie, cookie, memory_order_relaxed);
	return write_end(s, g);
}

static inline __attribute__((always_inline)) void untrack(struct bs_fdtab *t,
							   struct bs_fdslot *s)
{
	if (atomic_load_explicit(&s->state, memory_order_relaxed) != BS_FD_NONE)
		set_state(t, s, BS_FD_NONE);
	if (atomic_load_explicit(&s->cookie, memory_order_relaxed))
		write_ident(s, 0);
}

void bs_fd_clear(struct bs_fdtab *t, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (s)
		untrack(t, s);
}

void bs_fd_renew_slot(struct bs_fdtab *t, struct bs_fdslot *s)
{
	untrack(t, s);
	/* (the registration before the flags: BS_FDF_EXTRA goes last) */
	if (atomic_load_explicit(&s->ep_set, memory_order_relaxed))
		atomic_store_explicit(&s->ep_set, 0, memory_order_relaxed);
	if (atomic_load_explicit(&s->flags, memory_order_relaxed))
		atomic_store_explicit(&s->flags, 0, memory_order_release);
}

void bs_fd_copy(struct bs_fdtab *t, int from, int to)
{
	struct bs_fdslot *f = bs_fd_slot(t, from), *d = bs_fd_slot(t, to);
	if (!d || from == to)
		return;
	unsigned st = f ? atomic_load(&f->state) : BS_FD_NONE;
	struct dest x;
	bs_fd_renew(t, to); /* what `to` named before is closed */
	if (f) { /* one socket, two numbers: its failure cannot be hidden while both live */
		atomic_fetch_or(&f->flags, BS_FDF_TWIN);
		atomic_store(&d->flags, BS_FDF_TWIN);
		raise_high(t, from);
		raise_high(t, to);
	}
	atomic_store(&d->sotype, f ? atomic_load(&f->sotype) : 0);
	if (st == BS_FD_NONE || st == BS_FD_EPOLL || !read_dest(f, &x))
		return;
	atomic_store(&d->err, atomic_load(&f->err)); /* an owed error goes along */
	track_dest(t, to, (enum bs_fd_state)st, &x, atomic_load(&f->since),
		   atomic_load(&f->call_start));
}

void bs_fd_clear_range(struct bs_fdtab *t, unsigned lo, unsigned hi)
{
	unsigned h = atomic_load(&t->high);
	for (unsigned fd = lo; fd <= hi && fd < h; fd++) {
		if (bs_fd_state(t, (int)fd) == BS_FD_EPOLL)
			bs_fd_ep_forget_set(t, (int)fd);
		bs_fd_renew(t, (int)fd); /* closed: the number names nothing */
	}
}

void bs_fd_fail(struct bs_fdtab *t, int fd, int err)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s || !may_move(s, BS_FD_FAILED))
		return;
	atomic_store(&s->err, (uint32_t)err);
	raise_high(t, fd);
	set_state(t, s, BS_FD_FAILED);
}

int bs_fd_take_err(struct bs_fdtab *t, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	unsigned want = BS_FD_FAILED;
	if (!s || !atomic_compare_exchange_strong(&s->state, &want, BS_FD_NONE))
		return 0;
	atomic_fetch_sub_explicit(&t->pending, 1, memory_order_relaxed); /* FAILED was */
	return (int)atomic_load(&s->err);
}

int bs_fd_read_dest(struct bs_fdtab *t, int fd, uint64_t *key,
		    struct sockaddr_storage *addr, socklen_t *len)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	struct dest d;
	if (!s || !read_dest(s, &d))
		return 0;
	*key = d.key;
	if (d.len == BS_FD_ADDR_OF_KEY) { /* the fast track's: rebuilt */
		struct sockaddr_in in;
		d.len = bs_addr_of_v4_key(d.key, &in) ? sizeof in : 0;
		memcpy(d.addr, &in, d.len);
	} else if (d.len > BS_FD_ADDR_MAX) {
		d.len = 0; /* cannot happen: writers never store more */
	}
	if (addr)
		memcpy(addr, d.addr, d.len);
	*len = d.len;
	return 1;
}

void bs_fd_set_ident(struct bs_fdtab *t, int fd, uint64_t cookie)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!s)
		return;
	if (cookie)
		atomic_fetch_or(&s->flags, BS_FDF_EXTRA);
	if (!write_ident(s, cookie))
		write_ident(s, 0); /* raced with another write: record nothing */
	raise_high(t, fd); /* so close_range/closefrom clear it */
}

int bs_fd_ident_matches(struct bs_fdtab *t, int fd, uint64_t cookie)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	struct dest d;
	if (!s)
		return 0;
	if (!read_dest(s, &d))
		return -1;
	return d.cookie != 0 && d.cookie == cookie;
}

void bs_fd_ep_added(struct bs_fdtab *t, int epfd, int fd, uint32_t events, uint64_t data)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd), *e = bs_fd_slot(t, epfd);
	if (!s || !e)
		return;
	if (atomic_load(&e->state) == BS_FD_NONE)
		set_state(t, e, BS_FD_EPOLL);
	raise_high(t, epfd);
	raise_high(t, fd);
	uint32_t set = atomic_load(&s->ep_set);
	if (set && set != (uint32_t)epfd + 1) {
		atomic_fetch_or(&s->flags, BS_FDF_NO_PARK); /* in two sets */
		return;
	}
	atomic_fetch_or(&s->flags, BS_FDF_EXTRA);
	atomic_store(&s->ep_events, events);
	atomic_store(&s->ep_data, data);
	atomic_store(&s->ep_set, (uint32_t)epfd + 1);
}

int bs_fd_ep_in(struct bs_fdtab *t, int epfd, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	return s && epfd >= 0 && atomic_load(&s->ep_set) == (uint32_t)epfd + 1;
}

void bs_fd_ep_modified(struct bs_fdtab *t, int epfd, int fd, uint32_t events, uint64_t data)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (!bs_fd_ep_in(t, epfd, fd))
		return;
	atomic_store(&s->ep_events, events);
	atomic_store(&s->ep_data, data);
}

void bs_fd_ep_deleted(struct bs_fdtab *t, int epfd, int fd)
{
	struct bs_fdslot *s = bs_fd_slot(t, fd);
	if (bs_fd_ep_in(t, epfd, fd)) {
		atomic_store(&s->ep_set, 0);
		atomic_fetch_and(&s->flags, ~BS_FDF_EP_REMOVED);
	}
}

void bs_fd_ep_forget_set(struct bs_fdtab *t, int epfd)
{
	unsigned h = atomic_load(&t->high);
	for (unsigned fd = 0; fd < h && fd < t->cap; fd++)
		bs_fd_ep_deleted(t, epfd, (int)fd);
}

int bs_fd_ep_find(struct bs_fdtab *t, int epfd, uint64_t data, enum bs_fd_state st)
{
	unsigned h = atomic_load(&t->high);
	int found = -1;
	for (unsigned fd = 0; fd < h && fd < t->cap; fd++) {
		struct bs_fdslot *s = &t->slots[fd];
		if (atomic_load(&s->ep_set) != (uint32_t)epfd + 1 || atomic_load(&s->ep_data) != data ||
		    (atomic_load(&s->flags) & BS_FDF_EP_REMOVED))
			continue; /* (one the shim took out of the set reports nothing) */
		if (found != -1)
			return BS_FD_EP_AMBIGUOUS;
		found = (int)fd;
	}
	return found >= 0 && bs_fd_state(t, found) == (unsigned)st ? found : -1;
}

void bs_fd_ep_share(struct bs_fdtab *t, int epfd, uint64_t data)
{
	unsigned h = atomic_load(&t->high);
	for (unsigned fd = 0; fd < h && fd < t->cap; fd++) {
		struct bs_fdslot *s = &t->slots[fd];
		if (atomic_load(&s->ep_set) == (uint32_t)epfd + 1 && atomic_load(&s->ep_data) == data)
			atomic_fetch_or(&s->flags, BS_FDF_NO_PARK);
	}
}

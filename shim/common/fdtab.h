/*
 * fdtab: what the shim knows about each file descriptor, indexed by fd.
 *
 * Promise: atomics only, no allocation (the caller provides the slots, e.g.
 * an mmap sized from RLIMIT_NOFILE), no syscalls; async-signal-safe. The
 * hot-path question "is this fd one the shim must look at?" is one load.
 * fds beyond the capacity are simply untracked.
 *
 * A slot may be stale if the program closed the fd behind the shim's back
 * (a raw syscall, a libc-internal close) and the number was reused; callers
 * check the socket's identity on the rare path (an error, the first byte),
 * never on every call.
 */
#ifndef BS_FDTAB_H
#define BS_FDTAB_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

enum bs_fd_state {
	BS_FD_NONE = 0,       /* not tracked */
	BS_FD_CONNECTING = 1, /* non-blocking connect in flight */
	BS_FD_PROBATION = 2,  /* connected, nothing received from the peer yet */
	BS_FD_HEALTHY = 3,    /* has received data; send errors still count */
	BS_FD_FAILED = 4,     /* the shim read the connect error away: `err`
			       * is owed to the program's next look */
};

#define BS_FD_ADDR_MAX 28 /* sockaddr_in6 */

struct bs_fdslot {
	_Atomic uint32_t state;
	uint32_t addrlen;
	_Atomic uint64_t key;        /* destination */
	_Atomic uint64_t since;      /* ns: attempt start, or connect time */
	_Atomic uint64_t call_start; /* ns: the program's connect() call */
	unsigned char addr[BS_FD_ADDR_MAX];
	_Atomic uint32_t err; /* with BS_FD_FAILED */
};

struct bs_fdtab {
	struct bs_fdslot *slots;
	unsigned cap;
	_Atomic unsigned high; /* 1 + highest fd ever tracked */
};

void bs_fdtab_init(struct bs_fdtab *t, struct bs_fdslot *slots, unsigned cap);

/* The slot of fd, or NULL if fd is out of range. */
static inline struct bs_fdslot *bs_fd_slot(struct bs_fdtab *t, int fd)
{
	return (unsigned)fd < t->cap ? &t->slots[fd] : 0;
}

/* The fd's state in one relaxed load (BS_FD_NONE when out of range). */
static inline unsigned bs_fd_state(struct bs_fdtab *t, int fd)
{
	return (unsigned)fd < t->cap
		       ? atomic_load_explicit(&t->slots[fd].state, memory_order_acquire)
		       : BS_FD_NONE;
}

/* Start tracking fd (addr may be NULL for kinds not reconnected). */
void bs_fd_track(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t key,
		 uint64_t since, uint64_t call_start, const struct sockaddr *addr,
		 socklen_t len);
/* Move a tracked fd to a new state (no-op if untracked). */
void bs_fd_set(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t since);
void bs_fd_clear(struct bs_fdtab *t, int fd);
/* The connect error was consumed by the shim; keep it for the program. */
void bs_fd_fail(struct bs_fdtab *t, int fd, int err);
/* Take an owed error (0 if none) and forget the fd. */
int bs_fd_take_err(struct bs_fdtab *t, int fd);
/* dup2/dup3: `to` now names what `from` names. */
void bs_fd_copy(struct bs_fdtab *t, int from, int to);
/* close_range/closefrom: clear fds lo..hi inclusive (bounded by high). */
void bs_fd_clear_range(struct bs_fdtab *t, unsigned lo, unsigned hi);

#endif

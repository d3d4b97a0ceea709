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
 * check the socket's identity on the rare path (an error, EOF, the first
 * byte from a destination with an entry), never on every call, nor where
 * they publish nothing (bs_fd_first_byte). A slot can record that identity
 * (the socket's SO_COOKIE: 64 bits, never reused while the kernel runs)
 * for them.
 *
 * Consistency: the destination (key, address, length) and the identity are
 * written together under a per-slot generation word, seqlock style: a writer
 * adds 1 to the writer count in its low bits before it writes and, after,
 * takes the 1 back and adds 1 to the version in the high bits. A reader
 * (bs_fd_read_dest, bs_fd_ident_matches) copies the words between two loads
 * of the generation and accepts the copy only if no writer was active at
 * the first and nothing changed by the second; it retries a bounded number
 * of times, then reports failure instead of waiting (a signal handler may
 * have interrupted the writer). Every field is an atomic word, so readers
 * never race in the language's sense. Writers never wait either: two
 * writers on one slot at once (a program racing on one fd number) both see
 * the overlap, and the slot is left untracked with no address or identity
 * rather than a mix of the two. The fast track (bs_fd_prepare_fresh) is the
 * one writer that does without the generation, and says why.
 */
#ifndef BS_FDTAB_H
#define BS_FDTAB_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "table.h"

enum bs_fd_state {
	BS_FD_NONE = 0,       /* not tracked */
	BS_FD_CONNECTING = 1, /* non-blocking connect in flight */
	BS_FD_PROBATION = 2,  /* connected, nothing received from the peer yet */
	BS_FD_HEALTHY = 3,    /* has received data; send errors still count */
	BS_FD_FAILED = 4,     /* the shim read the connect error away: `err`
			       * is owed to the program's next look */
	BS_FD_PARKED = 5,     /* defer mode: the connect failed, the shim hides
			       * it and reconnects when the destination is due */
	BS_FD_EPOLL = 6,      /* an epoll instance some slots' registrations name */
};

/* Connecting or parked: a connect of the program's still in flight. */
static inline int bs_fd_state_in_flight(unsigned st)
{
	return st == BS_FD_CONNECTING || st == BS_FD_PARKED;
}

/* In flight, or its failure owed to the program (the kernel no longer
 * shows the error): the states readiness calls must look at. */
static inline int bs_fd_state_is_pending(unsigned st)
{
	return bs_fd_state_in_flight(st) || st == BS_FD_FAILED;
}

/* slot flags */
#define BS_FDF_NO_PARK 1u    /* the shim cannot hide this socket's failure
			      * (in two epoll sets, O_ASYNC, unscreened) */
#define BS_FDF_EP_REMOVED 2u /* parked: the shim took it out of its epoll set
			      * and puts it back when it reconnects */
#define BS_FDF_BUSY 8u       /* parked: one thread is giving it its next
			      * step (a reconnect or its end) */
#define BS_FDF_WINDOW_PROBE 32u /* pace: its attempt is the probe sent inside
				 * its destination's backoff window: a failure
				 * folds into the current step */
#define BS_FDF_TWIN 64u      /* another number named this socket when one of
			      * them was copied (dup, dup2, F_DUPFD): parked
			      * only once none still does (park.c asks the
			      * kernel); a copy of a copy is marked too */
#define BS_FDF_EXTRA 16u     /* an identity or an epoll registration may be
			      * recorded: set before either is, cleared only
			      * with both (bs_fd_renew_slot), so that the
			      * head alone says "nothing recorded" */

#define BS_FD_ADDR_MAX 28 /* sockaddr_in6 */
#define BS_FD_ADDR_WORDS ((BS_FD_ADDR_MAX + 7) / 8)

/* generation word: writers active in the low bits, version above */
#define BS_FD_GEN_WRITERS 0xffu
#define BS_FD_GEN_VERSION 0x100u

/* A power of two, so that the wrappers' "is this fd watched?" is a shift
 * and a load (read_send.c: 10 instructions in all). */
#define BS_FD_SLOT_SIZE 128

struct __attribute__((aligned(BS_FD_SLOT_SIZE))) bs_fdslot {
	union {
		/* state and flags in one word: the fast paths' questions
		 * ("is anything recorded?", "on probation and nothing
		 * else?") are one load and one compare (bs_fd_head) */
		_Atomic uint64_t head;
		struct {
			_Atomic uint32_t state;
			_Atomic uint32_t flags; /* BS_FDF_* */
		};
	};
	_Atomic uint64_t key;        /* destination */
	_Atomic uint64_t since;      /* ns: attempt start, or connect time */
	_Atomic uint64_t call_start; /* ns: the program's connect() call */
	_Atomic uint64_t addr[BS_FD_ADDR_WORDS]; /* the sockaddr's bytes */
	_Atomic uint32_t addrlen;
	_Atomic uint32_t err;        /* with BS_FD_FAILED */
	/* the socket the shim took custody of (bs_fd_set_ident): its
	 * SO_COOKIE, 0 for none recorded (the kernel's cookies start at 1) */
	_Atomic uint64_t cookie;
	/* the type argument socket() was given (SOCK_STREAM... in its low 4
	 * bits, SOCK_NONBLOCK... above; 0: not known), written by the
	 * socket() wrapper and kept until the number names a new descriptor
	 * (bs_fd_set_sotype): a hint for the first byte's fast track, never
	 * a fact a failure is recorded on (see bs_fd_first_byte) */
	_Atomic uint32_t sotype;
	_Atomic uint32_t gen;        /* guards key, addr, addrlen, ident_* */
	/* defer mode: the budget of a parked socket's connect */
	_Atomic uint32_t steps;      /* failed steps this connect lived through */
	_Atomic uint32_t seen_fail;  /* the destination's failure count last seen */
	_Atomic uint32_t last_err;   /* the last real error of its attempts */
	_Atomic uint32_t resets;     /* its destination's reset count when parked */
	_Atomic uint64_t probe;      /* the probe word its attempt holds (table.h) */
	/* the program's epoll registration of this fd (epoll_ctl); a socket
	 * in two sets is marked BS_FDF_NO_PARK instead */
	_Atomic uint32_t ep_set;     /* the epoll fd + 1; 0: none */
	_Atomic uint32_t ep_events;
	_Atomic uint64_t ep_data;
};
_Static_assert(sizeof(struct bs_fdslot) == BS_FD_SLOT_SIZE, "one slot, one power of two");

/* The head word of a slot in state st with flags. */
static inline uint64_t bs_fd_head(unsigned st, unsigned flags)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint64_t)flags << 32 | st;
#else
	return (uint64_t)st << 32 | flags;
#endif
}

static inline uint64_t bs_fd_head_of(struct bs_fdslot *s)
{
	return atomic_load_explicit(&s->head, memory_order_acquire);
}

struct bs_fdtab {
	struct bs_fdslot *slots;
	unsigned cap;
	_Atomic unsigned high; /* 1 + highest fd ever tracked */
	/* the fast track's bound (bs_fd_fresh_below): 0 until the caller
	 * enables it, then high; fresh_on says it is enabled */
	_Atomic unsigned fresh_below;
	_Atomic int fresh_on;
	_Atomic int pending;   /* slots connecting, parked or failed (set_state) */
	_Atomic int parked;    /* of which parked */
};

/* Is any socket of the process connecting, parked or owed its failure?
 * One load. */
static inline int bs_fd_any_pending(struct bs_fdtab *t)
{
	return atomic_load_explicit(&t->pending, memory_order_relaxed) != 0;
}

/* Is any socket of the process parked? One load. */
static inline int bs_fd_any_parked(struct bs_fdtab *t)
{
	return atomic_load_explicit(&t->parked, memory_order_relaxed) != 0;
}

void bs_fdtab_init(struct bs_fdtab *t, struct bs_fdslot *slots, unsigned cap);

/* The slot of fd, which the caller knows to be below the capacity. */
static inline struct bs_fdslot *bs_fd_slot_at(struct bs_fdtab *t, int fd)
{
	return &t->slots[(unsigned)fd];
}

/* The slot of fd, or NULL if fd is out of range. */
static inline struct bs_fdslot *bs_fd_slot(struct bs_fdtab *t, int fd)
{
	return (unsigned)fd < t->cap ? &t->slots[fd] : 0;
}

static inline unsigned bs_fd_slot_state(struct bs_fdslot *s)
{
	return atomic_load_explicit(&s->state, memory_order_acquire);
}

/* The fd's state (BS_FD_NONE when out of range). */
static inline unsigned bs_fd_state(struct bs_fdtab *t, int fd)
{
	return (unsigned)fd < t->cap ? bs_fd_slot_state(&t->slots[fd]) : BS_FD_NONE;
}

/* Start tracking fd (addr may be NULL for kinds not reconnected; an
 * address longer than BS_FD_ADDR_MAX is kept at its family's size if it is
 * an internet one, else not kept). Clears the identity. */
void bs_fd_track(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t key,
		 uint64_t since, uint64_t call_start, const struct sockaddr *addr,
		 socklen_t len);
/* Move a tracked fd to a new state, if that is one of the explicit moves
 * (bs_fd_move_ok: fdtab.c's table). Returns 1 if moved; 0, changing
 * nothing, if fd is untracked or the move is not one of those (a bug). */
int bs_fd_set(struct bs_fdtab *t, int fd, enum bs_fd_state st, uint64_t since);
int bs_fd_move_ok(unsigned from, unsigned to);
/* Forget fd: untracked, identity cleared (its epoll registration and flags
 * stay: the descriptor is still the program's). */
void bs_fd_clear(struct bs_fdtab *t, int fd);
/* The number names a new descriptor (socket, accept) or none (close):
 * forget everything, the epoll registration and flags too. A clean slot
 * (the common case) is only read. */
void bs_fd_renew_slot(struct bs_fdtab *t, struct bs_fdslot *s);
static inline void bs_fd_renew(struct bs_fdtab *t, int fd)
{
	if ((unsigned)fd < t->cap && bs_fd_head_of(bs_fd_slot_at(t, fd)) != 0)
		bs_fd_renew_slot(t, bs_fd_slot_at(t, fd));
}
/* close() of a live connection (slot s: on probation or healthy) that
 * holds nothing else (no flags, so no epoll registration or identity
 * either) to a destination tab holds no entry for: forgotten in one store,
 * and 1. Otherwise 0, and nothing changed (then bs_outcome_closed
 * decides: a reset may be due). (A plain store: see fdtab.c's set_state.) */
_Static_assert((BS_FD_PROBATION | 1) == BS_FD_HEALTHY, "probation and healthy differ in bit 0");
static inline int bs_fd_drop_live(struct bs_fdslot *s, struct bs_table *tab)
{
	/* (probation or healthy, no flags: one compare) */
	if ((bs_fd_head_of(s) | bs_fd_head(1, 0)) != bs_fd_head(BS_FD_HEALTHY, 0) ||
	    bs_table_may_hold(tab, atomic_load_explicit(&s->key, memory_order_relaxed)))
		return 0;
	atomic_store_explicit(&s->state, BS_FD_NONE, memory_order_release);
	return 1;
}

#define BS_FD_SOTYPE_MASK 0xfu /* the kernel's SOCK_TYPE_MASK */
static inline void bs_fd_set_sotype(struct bs_fdslot *s, int type)
{
	atomic_store_explicit(&s->sotype, (uint32_t)type, memory_order_relaxed);
}

/* The first byte's fast track (read_send.c): is slot s a connection on
 * probation to a destination tab holds no entry for? Its state (whatever
 * its flags) and, if so, its key's tag bit. Then the first byte has
 * nothing to publish: no entry to mark healthy, so no healthy_after to
 * test, no clock to read and no address to copy. */
static inline int bs_fd_fresh_probation(struct bs_fdslot *s, struct bs_table *tab)
{
	return atomic_load_explicit(&s->state, memory_order_acquire) == BS_FD_PROBATION &&
	       !bs_table_may_hold(tab, atomic_load_explicit(&s->key, memory_order_relaxed));
}

/* Data arrived on such a connection (bs_fd_fresh_probation): healthy,
 * the move from probation made by one compare-and-swap (a slot another
 * thread renewed meanwhile is left as it is), 1; or 0 if socket() did not
 * say SOCK_STREAM for this number (a datagram's reply proves nothing, or
 * the type is unknown): the full path asks the kernel. The slot's identity
 * is not checked: if the number was closed behind the shim's back and
 * names something else, a healthy slot changes nothing for any
 * destination (every path that records a failure asks the kernel about
 * the socket first, bs_outcome_send_error), and its close forgets it. The
 * attempt's start (since) stays the connect's: no clock is read. */
static inline int bs_fd_first_byte(struct bs_fdslot *s)
{
	if ((atomic_load_explicit(&s->sotype, memory_order_relaxed) & BS_FD_SOTYPE_MASK) !=
	    SOCK_STREAM)
		return 0;
	unsigned want = BS_FD_PROBATION;
	atomic_compare_exchange_strong_explicit(&s->state, &want, BS_FD_HEALTHY,
						memory_order_acq_rel, memory_order_relaxed);
	return 1;
}

/* The fast track's address length: the slot keeps no address bytes, its
 * destination is its IPv4 key alone (exact), from which bs_fd_read_dest
 * rebuilds the sockaddr_in. */
#define BS_FD_ADDR_OF_KEY 0xffffffffu

/* The fast track applies from now on (init: the settings allow it). */
void bs_fd_enable_fresh(struct bs_fdtab *t);
/* Does the fast track apply to fd? One compare: it is enabled and fd is
 * below the high-water mark (a number above it takes the full track once,
 * which raises the mark). */
static inline int bs_fd_fresh_below(struct bs_fdtab *t, int fd)
{
	return (unsigned)fd < atomic_load_explicit(&t->fresh_below, memory_order_acquire);
}
/* The fast track, in two halves around the program's connect. The socket
 * on fd (slot s) is untracked (BS_FD_NONE); the destination is the IPv4
 * key, the attempt starts at `since`.
 *
 * bs_fd_fresh_ready: may it? The slot says BS_FD_NONE and has no flag
 * but BS_FDF_NO_PARK or BS_FDF_TWIN (so no identity or epoll registration
 * either: those take the full bs_fd_track).
 *
 * bs_fd_prepare_fresh writes key, since and the address length before the
 * connect: plain stores, with no generation word, as the slot still says
 * BS_FD_NONE, behind which no reader looks, and the destination is one
 * word (the key; the address is rebuilt from it).
 *
 * bs_fd_publish_fresh, once connected: the slot says BS_FD_PROBATION,
 * with release order. A failed connect publishes nothing. */
static inline int bs_fd_fresh_ready(struct bs_fdslot *s)
{
	return (bs_fd_head_of(s) & ~bs_fd_head(0, BS_FDF_NO_PARK | BS_FDF_TWIN)) ==
	       bs_fd_head(BS_FD_NONE, 0);
}

static inline void bs_fd_prepare_fresh(struct bs_fdslot *s, uint64_t key, uint64_t since)
{
	atomic_store_explicit(&s->key, key, memory_order_relaxed);
	atomic_store_explicit(&s->since, since, memory_order_relaxed);
	atomic_store_explicit(&s->addrlen, BS_FD_ADDR_OF_KEY, memory_order_relaxed);
}

static inline void bs_fd_publish_fresh(struct bs_fdslot *s)
{
	/* (from a state that is not pending to one that is not: no count moves) */
	atomic_store_explicit(&s->state, BS_FD_PROBATION, memory_order_release);
}

/* The connect error was consumed by the shim; keep it for the program. */
void bs_fd_fail(struct bs_fdtab *t, int fd, int err);
/* Take an owed error (0 if none) and forget the fd. */
int bs_fd_take_err(struct bs_fdtab *t, int fd);
/* dup2/dup3: `to` now names what `from` names (state, destination, times,
 * owed error, identity, socket type); both are marked BS_FDF_TWIN, and
 * counted below `high` so that park.c can look for the other. */
void bs_fd_copy(struct bs_fdtab *t, int from, int to);
/* close_range/closefrom: fds lo..hi inclusive (bounded by high) are closed:
 * renewed, and the registrations naming a closed epoll fd forgotten. */
void bs_fd_clear_range(struct bs_fdtab *t, unsigned lo, unsigned hi);

/* The program's epoll registrations (epoll_ctl succeeded): fd added to
 * epfd's set with events/data, modified, or deleted. A second set marks
 * fd BS_FDF_NO_PARK (one registration is kept per fd). epfd's slot says
 * BS_FD_EPOLL (unless it tracks something else). */
void bs_fd_ep_added(struct bs_fdtab *t, int epfd, int fd, uint32_t events, uint64_t data);
void bs_fd_ep_modified(struct bs_fdtab *t, int epfd, int fd, uint32_t events, uint64_t data);
void bs_fd_ep_deleted(struct bs_fdtab *t, int epfd, int fd);
int bs_fd_ep_in(struct bs_fdtab *t, int epfd, int fd);
/* epfd was closed: every registration naming it is forgotten. */
void bs_fd_ep_forget_set(struct bs_fdtab *t, int epfd);
/* An event from epfd carries `data`: the fd it is for, if that fd's is the
 * one recorded registration in epfd carrying `data` and the fd is in state
 * st; -1 if not; BS_FD_EP_AMBIGUOUS if several registrations carry it (the
 * event cannot be told apart: see bs_fd_ep_share). */
#define BS_FD_EP_AMBIGUOUS (-2)
int bs_fd_ep_find(struct bs_fdtab *t, int epfd, uint64_t data, enum bs_fd_state st);
/* Mark every fd whose registration in epfd carries `data` BS_FDF_NO_PARK:
 * their events cannot be told apart, so none of their failures is hidden. */
void bs_fd_ep_share(struct bs_fdtab *t, int epfd, uint64_t data);

/* A consistent copy of fd's destination: *key, the address (*len bytes
 * into *addr, 0 if none was kept; addr may be NULL). Returns 1, or 0 if fd
 * is out of range or no consistent copy was had within a bounded number of
 * tries (a write in progress): the caller treats the destination as
 * unknown. Says nothing about the state: read that separately. */
int bs_fd_read_dest(struct bs_fdtab *t, int fd, uint64_t *key,
		    struct sockaddr_storage *addr, socklen_t *len);

/* Record the socket's identity (its SO_COOKIE) for fd (a cookie of 0,
 * which no socket has, records none). */
void bs_fd_set_ident(struct bs_fdtab *t, int fd, uint64_t cookie);
/* 1 only if an identity was recorded for fd and it is `cookie`; 0 if
 * another or none is recorded (or fd is out of range); -1 if no consistent
 * read was had (a write in progress): the caller cannot tell now. */
int bs_fd_ident_matches(struct bs_fdtab *t, int fd, uint64_t cookie);

#endif

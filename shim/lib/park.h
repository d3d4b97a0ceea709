/*
 * park: defer mode. A retried non-blocking connect looks like one slow
 * connect to the program.
 *
 * Promise: when a tracked non-blocking connect fails with a retryable error
 * and the shim can keep the illusion, the socket is parked instead of the
 * failure being reported: its error read away, disconnected
 * (connect(AF_UNSPEC)), out of the program's epoll set, hidden from every
 * readiness call. To the program it is still connecting (SO_ERROR 0,
 * connect() EALREADY, send/recv EAGAIN, getpeername ENOTCONN). When the
 * destination is due, and this socket is its one probe (single flight) or
 * it has connected elsewhere, the same socket is reconnected without
 * blocking, back in its epoll set with the program's own events and data,
 * and the program sees the real outcome. When the budget (max_attempts,
 * max_elapsed) would end while parked, it is not parked: the program sees
 * the last real error, as without the shim.
 *
 * The shim never parks a socket it cannot hide: shared through dup
 * (BS_FDF_NO_PARK), registered in two epoll sets, O_ASYNC, or one more than
 * a readiness call's stack copy holds. Nothing here blocks or sleeps.
 */
#ifndef BS_PARK_H
#define BS_PARK_H

#include <stdint.h>

#include "config.h"
#include "shim.h"

/* Is fd parked? One load: the question of the paths that only look. */
static inline int bs_park_is_parked(int fd)
{
	return bs_fd_state(bs_fds(), fd) == BS_FD_PARKED;
}

/* Is fd parked, and does it still name the socket the shim took custody
 * of, in the process that did (custody.h)? Every made-up answer for a
 * parked socket asks this first; a stale parked slot is forgotten here. */
int bs_park_holds(int fd);

/* The program watches fd where the shim cannot screen it (a poll() array
 * or select() set larger than the shim's copy): fd is never parked from
 * now on, and its parking ends if it is parked (its last error owed). */
void bs_park_unscreened(int fd);
/* The program closes the epoll fds lo..hi (close, dup2 onto one,
 * close_range): a socket parked out of one of those sets ends its parking
 * the same way, back in the set first, since another number for the set
 * (a dup) may keep it alive and wait on it. Before the close. */
void bs_park_end_out_of_sets(unsigned lo, unsigned hi);

/* The failure err of fd's tracked non-blocking connect (already read from
 * the kernel) was published: park fd if cfg's mode parks and the illusion
 * can be kept. Returns 1 if parked. */
int bs_park(const struct bs_config *cfg, int fd, int err);
/* Until when a failure of fd's attempt, just learned, may still be
 * followed by another attempt of fd, which bs_park would park: 0 if its
 * budget allows none, the end of its time budget otherwise; UINT64_MAX if
 * there is no end, or if fd will not be parked (then no give-up line
 * follows the failure's own). */
uint64_t bs_park_budget_end(const struct bs_config *cfg, int fd);
/* Could fd's socket be hidden at all (it is not under two numbers, in two
 * epoll sets, O_ASYNC...)? If not, the shim leaves its error where the
 * kernel keeps it, for whichever number reads it first. */
int bs_park_may_hide(int fd);

/* A connect() of fd inside its destination's backoff window (fd already
 * tracked as connecting, nothing sent): park it at once, err being the
 * destination's last error. Returns 1 if parked (connect() then says
 * EINPROGRESS), 0 if the attempt should go out. */
int bs_park_waiting(const struct bs_config *cfg, int fd, int err);

/* End fd's parking now (the illusion cannot be kept): its last error is
 * owed to the program, and it is back in its epoll set. */
void bs_park_end(int fd);

/* The attempt model's verdict (attempt.h) for the connect parked (or to
 * be parked) in slot s, whose destination is e, at now; own_err: its own
 * attempt just failed with it (0: it did not). The attempt as the slot
 * keeps it is in *a. */
struct bs_attempt;
struct bs_decision bs_park_judge(const struct bs_config *cfg, struct bs_fdslot *s,
				 struct bs_entry *e, uint64_t now, int own_err, struct bs_attempt *a);
/* Its budget is spent: the program sees its last real error (owed), and
 * the give-up line says why (b). Returns its state now (BS_FD_FAILED). */
struct bs_budget;
unsigned bs_park_spent(int fd, const struct bs_budget *b);
/* fd is reconnecting: back into its epoll set, if the shim took it out. */
void bs_park_rejoin(int fd);

#endif

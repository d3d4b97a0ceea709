/*
 * outcome: the single place where what a wrapper learned about a
 * destination is published: to the per-destination table (and its
 * waiters), the fd table, the resolution records and the log.
 *
 * Promise: nothing here calls back up into the engines (engine, nonblock,
 * park, defer): data flows down into it and returns as values.
 */
#ifndef BS_OUTCOME_H
#define BS_OUTCOME_H

#include "dest.h"
#include "shim.h"
#include <stdint.h>
#include <sys/socket.h>

/* A destination's host key (its address with port 0), for resolution
 * records of lookups that named no service (resolv.h); 0 if unknown. */
uint64_t bs_dest_host(const struct bs_dest *d);

/* A failed attempt that started at t0 on state `seen`, to be followed by a
 * wait of `delay` (counted from t0). Logs the wait unless quiet. */
void bs_outcome_failed(struct bs_entry *e, const struct bs_dest *d, uint64_t seen,
		       uint64_t t0, uint64_t delay, int err, int quiet);
/* A failure learned after the fact (a non-blocking connect's error, EOF
 * before the first byte, a send error). The next attempt is announced only
 * if due before announce_before (the end of the caller's budget; UINT64_MAX:
 * always), else the give-up line follows instead. Returns 1 if the policy
 * allows no further attempt. */
int bs_outcome_failed_later(const struct bs_config *cfg, const struct bs_dest *d,
			    uint64_t t0, int err, uint64_t announce_before);
/* Pace's probe inside the window failed: counted for the operator, no
 * step of the schedule (the window's own failure already is one). */
void bs_outcome_probe_failed(const struct bs_dest *d, int err);
/* An attempt on fd connected (probation until the first byte). */
void bs_outcome_connected(const struct bs_dest *d, int fd, uint64_t t0);
/* The shim read fd's connect error away (poll): owe `err` to the program's
 * next look at that socket, identified by its `cookie` (sock.h). */
void bs_owe(int fd, uint64_t cookie, int err);
/* The error owed for fd, if fd still names the socket it was read from;
 * 0 if nothing is owed, the number now names something else (then the
 * stale slot is forgotten) or this is not the owner process (custody.h):
 * the caller passes the call through. */
int bs_owed_take(int fd);
/* Is an error owed for fd, by this process, to the socket fd names now? */
int bs_owed_holds(int fd);
/* The first byte arrived, or the connection lived healthy_after. */
void bs_outcome_healthy(uint64_t key);

/* Events the wrappers report on a tracked fd; outcome.c decides what
 * follows (table, fd state, resolution records, log), with the one
 * healthy_after test and the one "proved healthy" transition (destination
 * healthy, fd BS_FD_HEALTHY).
 *  started:      a connect is in flight (EINPROGRESS at t0): track fd
 *                (unless nonblocking = off); returns -EINPROGRESS;
 *  lived:        fd on probation is in use: if it lived healthy_after it is
 *                healthy, whatever ends it now (returns 1 then);
 *  first_byte:   the peer sent a byte: healthy (if fd still names d); to a
 *                destination with no entry, nothing to publish: the fast
 *                track (read_send.c) moves the slot alone and skips lived
 *                and sent;
 *  closed_early: EOF (err 0) or a reset (err) before the first byte: a
 *                failed attempt, unless it lived healthy_after or was an
 *                upload the peer took in full;
 *  send_error:   a send on a TCP socket failed with err (EPIPE...): a
 *                failure, so the next reconnect is paced; a datagram's
 *                error is the program's alone;
 *  closed:       the program closes fd: healthy if it lived healthy_after
 *                on probation (closed earlier proves nothing); forgotten.
 * cfg: as the caller resolved it for the destination. */
int bs_outcome_started(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		       socklen_t len, uint64_t key, uint64_t t0);
/* The responsive policy's connection on fd connected at t0: no probation
 * (its pacing counts successes at connect), the fd is healthy at once. */
void bs_outcome_paced_connected(int fd, uint64_t t0);
/* Nothing more is to be learned from fd (its connect failed for good, was
 * given up, or it is not a stream): untracked. */
void bs_outcome_forget(int fd);
/* fd names a new descriptor (socket, accept, dup) of socket type `type`
 * (socket()'s argument; 0: not known), nothing else known. One load and one
 * store when its slot is clean; otherwise (a number closed behind the
 * wrappers' back) its old connect's probe is let go and the slot renewed. */
void bs_outcome_renew(int fd);
static inline void bs_outcome_new_fd(int fd, int type)
{
	struct bs_fdtab *t = bs_fds();
	if ((unsigned)fd >= t->cap)
		return;
	struct bs_fdslot *s = bs_fd_slot_at(t, fd);
	bs_fd_set_sotype(s, type); /* (renewing leaves it) */
	if (bs_fd_head_of(s) != 0)
		bs_outcome_renew(fd);
}
int bs_outcome_lived(const struct bs_config *cfg, int fd, uint64_t key);
void bs_outcome_first_byte(const struct bs_config *cfg, int fd, const struct bs_dest *d);
/* The first byte on fd, whose destination is not backing off (no entry, or
 * a healthy one: a tag the fast track could not rule out): nothing to
 * publish, so the slot alone moves (bs_fd_first_byte), with no call to the
 * kernel; 1 then, or 0: the full path (bs_outcome_first_byte) decides. */
int bs_outcome_first_byte_calm(int fd);
void bs_outcome_closed_early(const struct bs_config *cfg, int fd, const struct bs_dest *d,
			     int err);
void bs_outcome_send_error(const struct bs_config *cfg, int fd, int err);
void bs_outcome_closed(int fd);
/* A send on fd (on probation) went through: healthy if it lived
 * healthy_after (its destination's, [dest] rules applied). */
void bs_outcome_sent(const struct bs_config *cfg, int fd);
/* fd's destination, its address copied into *ss (key and address from one
 * consistent read; failing that, the key alone, addr NULL). */
struct bs_dest bs_fd_dest(int fd, struct sockaddr_storage *ss);
/* The one give-up line of every mode and policy, in the README's format
 * ("connect ADDR:PORT: giving up after N attempts in T (REASON): ERROR"),
 * from the call's budget (attempts, start, b->stop). Returns -err
 * (-ECONNREFUSED if 0). */
struct bs_budget;
int bs_outcome_give_up(const struct bs_dest *d, const struct bs_budget *b, int err);
/* A call waits on a schedule others move (engine.c): the first line says
 * why (the destination's failures and last error, who is trying it, or
 * NULL: nobody yet) and how long; later ones, each step another published.
 * bs_outcome_tell_step: is this the first thread of the process to tell
 * the log of step `failures` of e? (one line per step per process) */
int bs_outcome_tell_step(const struct bs_entry *e, uint32_t failures);
void bs_outcome_log_waiting(const struct bs_dest *d, int first, uint32_t failures, int err,
			    const char *who, uint64_t wait);
/* Announce a change of the entry to everyone waiting on it. */
void bs_publish(struct bs_entry *e);
/* debug: a connect the shim let through, and why (err: the error it
 * failed with, 0 for none). */
void bs_outcome_log_passed(const struct sockaddr *addr, socklen_t len, const char *why, int err);
/* info: the operator's reset woke a waiter, or a parked socket. */
void bs_outcome_log_reset(const struct sockaddr *addr, socklen_t len);

/* The probe a connect's attempt on fd holds (0 if none), taken from its
 * slot; and letting it go once the outcome is published (no other attempt
 * may go out on the state from before it). */
uint64_t bs_outcome_take_probe(int fd);
void bs_outcome_let_probe_go(uint64_t key, uint64_t probe);
/* fd's attempt has an outcome (learned by any wrapper, or closed): if it
 * held its destination's probe, the probe is let go. */
void bs_outcome_probe_learned(int fd);
/* The program's next look at fd gets err, if fd names a socket (its
 * identity recorded, custody.h); otherwise fd is forgotten. */
void bs_owe_now(int fd, int err);

#endif

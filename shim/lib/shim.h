/*
 * shim: process-wide state of the preloaded library (config, table, random
 * stream) and its one-time initialisation.
 *
 * Promise: bs_active() is one atomic load once initialised. Initialisation
 * runs in the constructor; a call that arrives earlier initialises on the
 * spot, and a call that arrives while another thread is initialising (or
 * after BACKOFFSHIM_DISABLE / a disabling config) gets NULL, meaning "pass
 * through". Nothing here exits, aborts or writes to stdout.
 */
#ifndef BS_SHIM_H
#define BS_SHIM_H

#include <stdint.h>
#include <sys/socket.h>

#include "clock.h"
#include "config.h"
#include "fdtab.h"
#include "mix.h"
#include "resolv.h"
#include "table.h"

/* How long a name resolution is remembered: for [dest name:port] rules,
 * and (a shorter window) for "the program has other addresses to try". A
 * program walks its addresses right after resolving; one that keeps using
 * the first address of an old resolution is paced per address. */
#define BS_RES_HORIZON (30 * BS_NS_PER_SEC)
#define BS_RES_FALLBACK (2 * BS_NS_PER_SEC)

const struct bs_config *bs_active(void);
/* The settings when connect.c's fresh path may serve them (init.c), else
 * NULL, as before start-up; then the fd table's fast track is enabled too
 * (bs_fd_fresh_below). */
extern const struct bs_config *_Atomic bs_fresh_cfg_g __attribute__((visibility("hidden")));
/* The settings for one destination ([dest ...] rules), fast when none. */
int bs_name_has(void *ctx, uint64_t name, uint64_t key);
static inline const struct bs_config *bs_cfg_for(const struct bs_config *cfg,
						 const struct sockaddr *addr, socklen_t len)
{
	return bs_config_for(cfg, addr, len, bs_name_has, NULL);
}
extern struct bs_table *bs_tab_g __attribute__((visibility("hidden")));
static inline struct bs_table *bs_tab(void)
{
	return bs_tab_g;
}
/* The fd table, read directly on the hot path of every read/write. */
extern struct bs_fdtab bs_fdtab_g __attribute__((visibility("hidden")));
static inline struct bs_fdtab *bs_fds(void)
{
	return &bs_fdtab_g;
}
struct bs_restab *bs_res(void);
/* Next value of the (seeded) random stream, lock-free. */
uint64_t bs_random(void);
/* The wait to draw after one more failure of e (state s), per the policy:
 * BS_STOP means this failure ends the retries. */
uint64_t bs_next_wait(const struct bs_config *cfg, struct bs_entry *e, uint64_t s);

/* role.c: a process that listens (listen(), accept(), or a listening socket
 * inherited from systemd's LISTEN_FDS or inetd at fd 0) is a server; any
 * other is a client. nonblocking = auto means defer for a client, pace for
 * a server: a server connects on behalf of its requests and has its own
 * failover, so a refused upstream must reach it at once. */
extern _Atomic int bs_role_server_g __attribute__((visibility("hidden")));
void bs_role_is_server(void);
void bs_role_detect_inherited(void); /* once, at initialisation */
/* fd listens (listen() succeeded): the destinations it serves are up. */
void bs_role_listening(int fd);
/* The mode in force for non-blocking sockets under cfg (never auto). */
static inline int bs_nb_mode(const struct bs_config *cfg)
{
	if (cfg->nonblocking != BS_NB_AUTO)
		return cfg->nonblocking;
	return atomic_load_explicit(&bs_role_server_g, memory_order_relaxed) ? BS_NB_PACE
									       : BS_NB_DEFER;
}

/* errno of this thread, without a call to __errno_location: the thread
 * pointer plus the offset of libc's errno, which is the same in every
 * thread (libc's TLS is in the static TLS block). init.c measures the
 * offset before it enables the fresh path, its only user. */
extern long bs_errno_off_g __attribute__((visibility("hidden")));
static inline int *bs_errno(void)
{
	return (int *)((char *)__builtin_thread_pointer() + bs_errno_off_g);
}

/* When fd's slot says its connect started or it connected (since), in ns. */
static inline uint64_t bs_fd_since_ns(int fd)
{
	return atomic_load(&bs_fd_slot(bs_fds(), fd)->since);
}

/* The retry engine (engine.c): called by the connect() wrapper for an
 * AF_INET/AF_INET6 (or enabled AF_UNIX) destination. */
int bs_engine_connect(const struct bs_config *cfg, int fd,
		      const struct sockaddr *addr, socklen_t len, uint64_t key);
/* The engine from where the program's own connect (started at t0) failed
 * with err; saved is errno as the program had it. */
int bs_engine_first_failed(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			   socklen_t len, uint64_t key, uint64_t t0, int err, int saved);

/* outcome.c: what any wrapper learned about a destination, published to
 * the table, the fd table, the resolution records and the log. */
struct bs_dest {
	uint64_t key;
	const struct sockaddr *addr; /* for log lines; may be NULL */
	socklen_t len;
};

/* A failed attempt that started at t0 on state `seen`, to be followed by a
 * wait of `delay` (counted from t0). Logs the wait unless quiet. Returns 1
 * if this call moved the state (then it also published it). */
int bs_outcome_failed(struct bs_entry *e, const struct bs_dest *d, uint64_t seen,
		   uint64_t t0, uint64_t delay, int err, int quiet);
/* Failure learned after the fact (EOF before the first byte, send error). */
/* Returns 1 if the policy allows no further attempt after it. */
int bs_outcome_failed_later(const struct bs_config *cfg, const struct bs_dest *d,
			  uint64_t t0, int err, int quiet);
/* The same, announcing the next attempt only if it is due before
 * announce_before (the time the caller's own budget ends): a wait that
 * will not happen is not announced; the give-up line follows instead. */
int bs_outcome_failed_within(const struct bs_config *cfg, const struct bs_dest *d,
			     uint64_t t0, int err, uint64_t announce_before);
/* Pace's probe inside the window failed: counted for the operator, no
 * step of the schedule (the window's own failure already is one). */
void bs_outcome_probe_failed(const struct bs_dest *d, int err);
/* An attempt on fd connected (probation until the first byte). */
void bs_outcome_connected(const struct bs_config *cfg, const struct bs_dest *d, int fd,
		       uint64_t t0);
/* The shim read fd's connect error away (poll): owe `err` to the program's
 * next look at that socket, identified by `id` (sock.h). */
struct bs_sock_ident;
void bs_owe(int fd, const struct bs_sock_ident *id, int err);
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
 * follows (the table, the fd's state, the resolution records, the log).
 * The healthy_after test and the "proved healthy" transition (destination
 * healthy, fd BS_FD_HEALTHY) live there, each written once.
 *  started:      a connect is in flight (EINPROGRESS at t0): track fd
 *                (unless nonblocking = off); returns -1 with errno
 *                EINPROGRESS, as connect() does;
 *  (connected, failed: bs_outcome_connected, bs_outcome_failed(_later) above);
 *  lived:        fd on probation is in use: if it lived healthy_after it is
 *                healthy, whatever ends it now (returns 1 then);
 *  first_byte:   the peer sent a byte: healthy (if fd still names d);
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
/* The number fd names a new descriptor (socket, accept): nothing known. */
static inline void bs_outcome_new_fd(int fd)
{
	bs_fd_renew(bs_fds(), fd);
}
int bs_outcome_lived(const struct bs_config *cfg, int fd, uint64_t key);
void bs_outcome_first_byte(const struct bs_config *cfg, int fd, const struct bs_dest *d);
void bs_outcome_closed_early(const struct bs_config *cfg, int fd, const struct bs_dest *d,
			     int err);
void bs_outcome_send_error(const struct bs_config *cfg, int fd, int err);
void bs_outcome_closed(int fd);
/* A send on fd (on probation) went through: healthy if it lived
 * healthy_after (its destination's, [dest] rules applied). */
void bs_outcome_sent(const struct bs_config *cfg, int fd);
/* fd's destination, its address copied into *ss (key and address from one
 * consistent read; failing that, the key alone, addr NULL). */
struct sockaddr_storage;
struct bs_dest bs_fd_dest(int fd, struct sockaddr_storage *ss);
/* The one give-up line of every mode and policy, in the README's format
 * ("connect ADDR:PORT: giving up after N attempts in T (REASON): ERROR"),
 * from the call's budget (attempts, start, b->stop). Sets errno to err
 * (ECONNREFUSED if 0) and returns -1. */
struct bs_budget;
int bs_outcome_give_up(const struct bs_dest *d, const struct bs_budget *b, int err);
/* Announce a change of the entry to everyone waiting on it. */
void bs_publish(struct bs_entry *e);
/* The line a waiter logs when an operator's reset woke it. */
void bs_outcome_log_reset(const struct bs_dest *d);

/* nonblock.c: non-blocking sockets. bs_nb_connect: a connect to a
 * destination in backoff; returns what connect() returns. */
int bs_nb_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
		  socklen_t len, uint64_t key);
/* The program learned err (0 = connected) for a tracked connecting fd.
 * Returns the error the program should see (0 = connected), or
 *   BS_NB_PARKED_NOW: fd is parked (park.h): to the program it is still
 *                     connecting;
 *   BS_NB_EINTR:      (may_wait only) a signal handler ended retry mode's
 *                     wait: the readiness call fails with EINTR, fd still
 *                     connecting (in flight or parked).
 * may_wait: the call is one where the program could block (a readiness
 * call); only there does retry mode wait and retry. */
#define BS_NB_PARKED_NOW (-1)
#define BS_NB_EINTR (-2)
int bs_nb_outcome(const struct bs_config *cfg, int fd, int err, int may_wait);
/* responsive.c: the responsive policy's connect, and an outcome learned
 * later (err 0: connected). */
int bs_responsive_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			  socklen_t len, uint64_t key);
void bs_responsive_outcome(const struct bs_config *cfg, struct bs_entry *e,
			   const struct sockaddr *addr, socklen_t len, int err);

/* The destination's last error (ECONNREFUSED if none): what a connect
 * inside its backoff window fails with. */
int bs_nb_last_err(uint64_t key);
/* Wait (max_elapsed from now, and the program's SO_SNDTIMEO on fd, at
 * most) until d may be tried again: 0 when due, else the error to fail
 * with (bs_nb_last_err), after the common give-up line. */
int bs_nb_wait_due(const struct bs_config *cfg, int fd, const struct bs_dest *d, uint64_t now);

/* fastopen.c: sendto(MSG_FASTOPEN), a connect and a send in one call. */
ssize_t bs_fastopen(const struct bs_config *cfg, int fd, const void *buf, size_t n, int flags,
		    const struct sockaddr *addr, socklen_t len);

#endif

/*
 * defer: the rounds of defer mode (defer.c), above park.h's mechanics.
 *
 * Promise: a readiness call (poll, select, epoll) that holds connecting or
 * parked sockets hands each report of a connecting socket to
 * bs_defer_screen, which learns the failure as the program would, has it
 * published and the socket parked (or retried, in retry mode); and gives
 * every parked socket of the process its next step when the attempt model
 * (attempt.h) says so. Only sockets the shim holds (custody.h) are
 * answered for; anything else passes through. Nothing here blocks but
 * retry mode's wait, which the program's own readiness call would do.
 */
#ifndef BS_DEFER_H
#define BS_DEFER_H

#include <signal.h>
#include <stdint.h>

#include "units.h"
#include "timeout.h"

/* A readiness call that holds parked sockets wakes at least this often to
 * re-check their destinations (a success elsewhere releases them). */
#define BS_DEFER_RECHECK (200 * BS_NS_PER_MS)

/* Give every due parked socket of the process its next attempt (a
 * reconnect) or its end (budget spent: its last error owed, back in its
 * epoll set). Returns when (ns) a parked socket needs looking at again, at
 * most now + BS_DEFER_RECHECK, or BS_TIMEOUT_NONE if none is parked. */
uint64_t bs_defer_run(uint64_t now);

/* The same for one parked socket (a call that touches it). Returns its
 * state afterwards (BS_FD_PARKED if still parked), or BS_FD_NONE if the
 * shim does not hold it (bs_park_holds): the call passes through. */
unsigned bs_defer_run_fd(int fd, uint64_t now);

/* A readiness call saw fd (connecting) with an error or hangup. In defer
 * and retry modes, learn the outcome as a program would (SO_ERROR), publish
 * it, and park fd (defer) or retry it in the call (retry). Says what the
 * readiness call reports for fd:
 *   KEEP:      the report as it is (an error read away is owed to the
 *              program's next look: bs_owed_take);
 *   HIDE:      nothing (fd is parked now);
 *   CONNECTED: writable (retry mode connected it);
 *   EINTR:     nothing, and the readiness call fails with EINTR (a signal
 *              handler ended retry mode's wait). */
enum bs_screen { BS_SCREEN_KEEP, BS_SCREEN_HIDE, BS_SCREEN_CONNECTED, BS_SCREEN_EINTR };
enum bs_screen bs_defer_screen(int fd);

/* The rounds of one readiness call that holds connecting or parked
 * sockets: each runs the due parked sockets (bs_defer_run, whose result is
 * `wake`), then round(call, now, wake) makes the real call, its wait capped
 * (bs_defer_round_wait), screens its reports and hands them to the
 * program, returning how many remain, or -errno: the call's own error as
 * it is, or -EINTR from a screen. The rounds end when something is
 * reported, on an error, or when the program's deadline passes; the result
 * is the last round's, as ret.h has it. The signals `mask` blocks (the
 * program's ppoll, pselect or epoll_pwait mask; NULL: none) stay blocked
 * from the first round to the last, as in one kernel wait. */
int bs_defer_rounds(void *call, uint64_t deadline, const sigset_t *mask,
		    int (*round)(void *call, uint64_t now, uint64_t wake));

/* The ns a round waits from now (BS_TIMEOUT_NONE: no limit): until the
 * program's deadline, or until `wake` (bs_defer_run's) if earlier and the
 * round hides parked sockets or must re-check them. */
uint64_t bs_defer_round_wait(uint64_t now, uint64_t deadline, uint64_t wake);

#endif

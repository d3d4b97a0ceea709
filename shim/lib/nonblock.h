/*
 * nonblock: non-blocking connects (nonblock.c). The program's connect()
 * returns EINPROGRESS; the shim learns the outcome wherever the program
 * looks for it and, by mode: retry waits and reconnects in the program's
 * readiness call, pace fails a connect inside the window at once, defer
 * parks the socket (park.h).
 */
#ifndef BS_NONBLOCK_H
#define BS_NONBLOCK_H

#include "config.h"
#include "outcome.h"
#include <stdint.h>
#include <sys/socket.h>

/* bs_nb_connect: a connect to a destination in backoff; returns 0 or
 * -errno, as connect() would say it (ret.h). */
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

/* The destination's last error (ECONNREFUSED if none): what a connect
 * inside its backoff window fails with. */
int bs_nb_last_err(uint64_t key);
/* Wait (max_elapsed from now, and the program's SO_SNDTIMEO on fd, at
 * most) until d may be tried again: 0 when due, else -(the error to fail
 * with, bs_nb_last_err) after the common give-up line. */
int bs_nb_wait_due(const struct bs_config *cfg, int fd, const struct bs_dest *d, uint64_t now);

#endif

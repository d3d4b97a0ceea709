/*
 * engine: the retry loop of a blocking connect() to a failing destination
 * (engine.c). It carries out the attempt model's verdicts (attempt.h).
 */
#ifndef BS_ENGINE_H
#define BS_ENGINE_H

#include "config.h"
#include "outcome.h"
#include <stdint.h>
#include <sys/socket.h>

/* The retry engine (engine.c): called by the connect() wrapper for an
 * AF_INET/AF_INET6 (or enabled AF_UNIX) destination. */
int bs_engine_connect(const struct bs_config *cfg, int fd,
		      const struct sockaddr *addr, socklen_t len, uint64_t key);
/* The engine from where the program's own connect (started at t0) failed
 * with err. Both return 0 or -errno (ret.h). */
int bs_engine_first_failed(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			   socklen_t len, uint64_t key, uint64_t t0, int err);

/* What the engine retries instead of a socket's connect: a name lookup
 * (resolve.c). attempt makes one and returns 0 or its error code;
 * retries says whether an error leads into backoff. */
struct bs_op {
	int (*attempt)(struct bs_op *op);
	int (*retries)(struct bs_op *op, const struct bs_config *cfg, int err);
};
/* op for destination d (its key, and the text the log shows): attempted
 * at once unless d is backing off, then retried on its schedule, one
 * attempt in flight per destination on the host. 0 or -err. */
int bs_engine_retry_op(const struct bs_config *cfg, const struct bs_dest *d, struct bs_op *op);

/* A signal handler leaves this thread's engine calls (siglongjmp): the
 * probe each holds is let go and its outcome published, and a waiter
 * stops counting as one (jump.c). */
void bs_engine_abandon(void);

#endif

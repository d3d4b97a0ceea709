/*
 * engine: the retry loop of a blocking connect() to a failing destination
 * (engine.c). It carries out the attempt model's verdicts (attempt.h).
 */
#ifndef BS_ENGINE_H
#define BS_ENGINE_H

#include "config.h"
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

#endif

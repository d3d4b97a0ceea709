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

#include "config.h"
#include "table.h"

const struct bs_config *bs_active(void);
struct bs_table *bs_tab(void);
/* Next value of the (seeded) random stream, lock-free. */
uint64_t bs_random(void);

/* The retry engine (engine.c): called by the connect() wrapper for an
 * AF_INET/AF_INET6 (or enabled AF_UNIX) destination. */
int bs_engine_connect(const struct bs_config *cfg, int fd,
		      const struct sockaddr *addr, socklen_t len, uint64_t key);

#endif

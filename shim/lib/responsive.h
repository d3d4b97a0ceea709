/*
 * responsive: the responsive policy (responsive.c): adaptive pacing of
 * every connect to a destination, by its recent outcomes.
 */
#ifndef BS_RESPONSIVE_H
#define BS_RESPONSIVE_H

#include "config.h"
#include "table.h"
#include <stdint.h>
#include <sys/socket.h>

/* The responsive policy's connect, and an outcome learned
 * later (err 0: connected). */
int bs_responsive_connect(const struct bs_config *cfg, int fd, const struct sockaddr *addr,
			  socklen_t len, uint64_t key);
void bs_responsive_outcome(const struct bs_config *cfg, struct bs_entry *e,
			   const struct sockaddr *addr, socklen_t len, int err);

#endif

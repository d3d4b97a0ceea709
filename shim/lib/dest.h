/*
 * dest: a destination as the library passes it around: its key (addr.h),
 * and its address for log lines and status (a socket address, or a name
 * lookup's pseudo-address); and the start of a log line about one.
 */
#ifndef BS_DEST_H
#define BS_DEST_H

#include "addr.h"

#include <stdint.h>
#include <sys/socket.h>

struct bs_dest {
	uint64_t key;
	const struct sockaddr *addr; /* for log lines; may be NULL */
	socklen_t len;
};

/* Is addr a name lookup's pseudo-address (addr.h)? */
static inline int bs_dest_is_name(const struct sockaddr *addr)
{
	return addr && addr->sa_family == BS_AF_NAME;
}

/* A log line about the destination addr (NULL when it cannot be read),
 * started: "connect ADDR:PORT: " (or "resolve NAME: "), its event and
 * error for the JSON fields. */
struct bs_line;
void bs_dest_line(struct bs_line *l, const struct sockaddr *addr, socklen_t len,
		  const char *event, int err);

#endif

/*
 * fastopen: TCP Fast Open (fastopen.c), paced as a connect() to the
 * destination would be.
 */
#ifndef BS_FASTOPEN_H
#define BS_FASTOPEN_H

#include "config.h"
#include <sys/socket.h>
#include <sys/types.h>

/* sendto(MSG_FASTOPEN) to addr: a connect and a send in one call. Returns
 * the bytes sent or -errno (ret.h). */
ssize_t bs_fastopen(const struct bs_config *cfg, int fd, const void *buf, size_t n, int flags,
		    const struct sockaddr *addr, socklen_t len);

#endif

/*
 * real: the libc functions the shim wraps, resolved lazily.
 *
 * Promise: each bs_real_* behaves exactly like the libc call it names. The
 * symbol is looked up with dlsym(RTLD_NEXT) on first use, from any thread,
 * even before the constructor; a call that arrives while this thread is
 * inside dlsym (or if dlsym fails) goes straight to the kernel instead.
 */
#ifndef BS_REAL_H
#define BS_REAL_H

#include <sys/socket.h>

int bs_real_connect(int fd, const struct sockaddr *addr, socklen_t len);

/* Resolve everything now (called from the constructor). */
void bs_real_resolve_all(void);

#endif

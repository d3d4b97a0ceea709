/*
 * ring: a minimal io_uring for one kind of work, a connect() on a socket
 * whose file may be blocking, made without blocking the caller and
 * without touching the file's flags (the program shares that file).
 *
 * Promise: the ring's fd is pollable (readable when completions wait), so
 * the supervisor's one event loop watches it like any other. A connect may
 * carry a time limit (a linked timeout): it then ends with -ECANCELED at
 * that time. Completions come back as (tag, result: 0 or -errno).
 */
#ifndef BS_SUP_RING_H
#define BS_SUP_RING_H

#include <stdint.h>
#include <sys/socket.h>

struct bs_ring;

/* A ring for up to `depth` connects in flight; NULL with errno set. */
struct bs_ring *bs_ring_open(unsigned depth);
int bs_ring_fd(const struct bs_ring *r);

/* Start a connect of fd to addr (copied), ending by itself after
 * limit_ns (0: no limit). 0, or -errno (the ring is full: -EBUSY). */
int bs_ring_connect(struct bs_ring *r, uint64_t tag, int fd, const struct sockaddr *addr,
		    socklen_t len, uint64_t limit_ns);
/* Ask the connect tagged `tag` to end now (it completes with -ECANCELED,
 * or its own result if it was done first). */
int bs_ring_cancel(struct bs_ring *r, uint64_t tag);

/* The next completion of a connect, if any: 1 and *tag, *res; else 0. */
int bs_ring_reap(struct bs_ring *r, uint64_t *tag, int *res);

#endif

/*
 * scm: one message with at most one descriptor over a unix socket
 * (SCM_RIGHTS): the listener from the child to the supervisor, the
 * deferred sockets to the guard.
 *
 * Promise: a message whose descriptor does not arrive whole is no
 * descriptor (-1); received descriptors are close-on-exec.
 */
#ifndef BS_SUP_SCM_H
#define BS_SUP_SCM_H

#include <stddef.h>
#include <sys/types.h>

/* Send len bytes of data and fd (-1: none) with sendmsg flags; the bytes
 * sent, or -1. */
ssize_t bs_scm_send(int sock, const void *data, size_t len, int fd, int flags);
/* Receive up to len bytes into data and a descriptor into *fd (-1 if
 * none); the bytes received (0 at the end), or -1. */
ssize_t bs_scm_recv(int sock, void *data, size_t len, int *fd);

#endif

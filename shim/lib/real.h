/*
 * real: the libc functions the shim wraps, resolved lazily.
 *
 * Promise: each bs_real_* behaves exactly like the libc call it names. The
 * symbol is looked up with dlsym(RTLD_NEXT) on first use, from any thread,
 * even before the constructor; a call that arrives while this thread is
 * inside dlsym (or if dlsym fails) goes straight to the kernel instead, so
 * nothing here can recurse or return an error libc would not.
 */
#ifndef BS_REAL_H
#define BS_REAL_H

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

int bs_real_connect(int fd, const struct sockaddr *addr, socklen_t len);
int bs_real_getsockopt(int fd, int level, int opt, void *val, socklen_t *len);
ssize_t bs_real_read(int fd, void *buf, size_t n);
ssize_t bs_real_readv(int fd, const struct iovec *iov, int cnt);
ssize_t bs_real_recv(int fd, void *buf, size_t n, int flags);
ssize_t bs_real_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a,
			 socklen_t *al);
ssize_t bs_real_recvmsg(int fd, struct msghdr *m, int flags);
ssize_t bs_real_write(int fd, const void *buf, size_t n);
ssize_t bs_real_writev(int fd, const struct iovec *iov, int cnt);
ssize_t bs_real_send(int fd, const void *buf, size_t n, int flags);
ssize_t bs_real_sendto(int fd, const void *buf, size_t n, int flags,
		       const struct sockaddr *a, socklen_t al);
ssize_t bs_real_sendmsg(int fd, const struct msghdr *m, int flags);
int bs_real_poll(struct pollfd *fds, nfds_t n, int timeout);
int bs_real_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		  const sigset_t *mask);
int bs_real_close(int fd);
int bs_real_socket(int domain, int type, int protocol);
int bs_real_accept(int fd, struct sockaddr *addr, socklen_t *len);
int bs_real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int bs_real_dup2(int a, int b);
int bs_real_dup3(int a, int b, int flags);
int bs_real_close_range(unsigned first, unsigned last, int flags);
void bs_real_closefrom(int lowfd);
int bs_real_getaddrinfo(const char *node, const char *svc, const struct addrinfo *hints,
			struct addrinfo **res);
void bs_real_freeaddrinfo(struct addrinfo *res);

/* Resolve everything now (called from the constructor). */
void bs_real_resolve_all(void);

#endif

/* real: lazy dlsym(RTLD_NEXT) with a raw-syscall fallback. See real.h. */
#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Set while this thread is inside dlsym, so that re-entry cannot recurse. */
static __thread int in_dlsym __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) static void *resolve_slow(void *_Atomic *slot, const char *name)
{
	if (in_dlsym)
		return NULL;
	in_dlsym = 1;
	void *p = dlsym(RTLD_NEXT, name);
	in_dlsym = 0;
	if (p)
		atomic_store_explicit(slot, p, memory_order_release);
	return p;
}

/* The hot part: one load once resolved. */
static inline __attribute__((always_inline)) void *resolve(void *_Atomic *slot,
							   const char *name)
{
	void *p = atomic_load_explicit(slot, memory_order_acquire);
	if (__builtin_expect(p != NULL, 1))
		return p;
	return resolve_slow(slot, name);
}

/* One slot per wrapped function; REAL(name, type) declares the slot and a
 * typed accessor returning NULL until resolved. */
#define REAL(name, type)                                                 \
	static void *_Atomic slot_##name;                                \
	static type get_##name(void)                                     \
	{                                                                \
		return (type)resolve(&slot_##name, #name);               \
	}

typedef int (*connect_t)(int, const struct sockaddr *, socklen_t);
typedef int (*getsockopt_t)(int, int, int, void *, socklen_t *);
typedef ssize_t (*read_t)(int, void *, size_t);
typedef ssize_t (*readv_t)(int, const struct iovec *, int);
typedef ssize_t (*recv_t)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_t)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
typedef ssize_t (*recvmsg_t)(int, struct msghdr *, int);
typedef ssize_t (*write_t)(int, const void *, size_t);
typedef ssize_t (*send_t)(int, const void *, size_t, int);
typedef ssize_t (*sendto_t)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
typedef ssize_t (*sendmsg_t)(int, const struct msghdr *, int);
typedef int (*poll_t)(struct pollfd *, nfds_t, int);
typedef int (*ppoll_t)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*close_t)(int);
typedef int (*socket_t)(int, int, int);
typedef int (*accept_t)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_t)(int, struct sockaddr *, socklen_t *, int);
typedef int (*dup2_t)(int, int);
typedef int (*dup3_t)(int, int, int);
typedef int (*close_range_t)(unsigned, unsigned, int);
typedef void (*closefrom_t)(int);
typedef int (*getaddrinfo_t)(const char *, const char *, const struct addrinfo *,
			     struct addrinfo **);
typedef void (*freeaddrinfo_t)(struct addrinfo *);

REAL(connect, connect_t)
REAL(getsockopt, getsockopt_t)
REAL(read, read_t)
REAL(readv, readv_t)
REAL(recv, recv_t)
REAL(recvfrom, recvfrom_t)
REAL(recvmsg, recvmsg_t)
REAL(write, write_t)
REAL(writev, readv_t)
REAL(send, send_t)
REAL(sendto, sendto_t)
REAL(sendmsg, sendmsg_t)
REAL(poll, poll_t)
REAL(ppoll, ppoll_t)
REAL(close, close_t)
REAL(socket, socket_t)
REAL(accept, accept_t)
REAL(accept4, accept4_t)
REAL(dup2, dup2_t)
REAL(dup3, dup3_t)
REAL(close_range, close_range_t)
REAL(closefrom, closefrom_t)
REAL(getaddrinfo, getaddrinfo_t)
REAL(freeaddrinfo, freeaddrinfo_t)

/* Call the real function, or make the system call when it is not resolved. */
#define CALL(name, sys, ...)                                             \
	do {                                                             \
		__typeof__(get_##name()) f = get_##name();               \
		if (f)                                                   \
			return f(__VA_ARGS__);                           \
		return sys;                                              \
	} while (0)

int bs_real_connect(int fd, const struct sockaddr *a, socklen_t l)
{
	CALL(connect, (int)syscall(SYS_connect, fd, a, l), fd, a, l);
}

int bs_real_getsockopt(int fd, int lv, int o, void *v, socklen_t *l)
{
	CALL(getsockopt, (int)syscall(SYS_getsockopt, fd, lv, o, v, l), fd, lv, o, v, l);
}

ssize_t bs_real_read(int fd, void *b, size_t n)
{
	CALL(read, syscall(SYS_read, fd, b, n), fd, b, n);
}

ssize_t bs_real_readv(int fd, const struct iovec *v, int c)
{
	CALL(readv, syscall(SYS_readv, fd, v, c), fd, v, c);
}

ssize_t bs_real_recv(int fd, void *b, size_t n, int fl)
{
	CALL(recv, syscall(SYS_recvfrom, fd, b, n, fl, NULL, NULL), fd, b, n, fl);
}

ssize_t bs_real_recvfrom(int fd, void *b, size_t n, int fl, struct sockaddr *a, socklen_t *al)
{
	CALL(recvfrom, syscall(SYS_recvfrom, fd, b, n, fl, a, al), fd, b, n, fl, a, al);
}

ssize_t bs_real_recvmsg(int fd, struct msghdr *m, int fl)
{
	CALL(recvmsg, syscall(SYS_recvmsg, fd, m, fl), fd, m, fl);
}

ssize_t bs_real_write(int fd, const void *b, size_t n)
{
	CALL(write, syscall(SYS_write, fd, b, n), fd, b, n);
}

ssize_t bs_real_writev(int fd, const struct iovec *v, int c)
{
	CALL(writev, syscall(SYS_writev, fd, v, c), fd, v, c);
}

ssize_t bs_real_send(int fd, const void *b, size_t n, int fl)
{
	CALL(send, syscall(SYS_sendto, fd, b, n, fl, NULL, 0), fd, b, n, fl);
}

ssize_t bs_real_sendto(int fd, const void *b, size_t n, int fl, const struct sockaddr *a,
		       socklen_t al)
{
	CALL(sendto, syscall(SYS_sendto, fd, b, n, fl, a, al), fd, b, n, fl, a, al);
}

ssize_t bs_real_sendmsg(int fd, const struct msghdr *m, int fl)
{
	CALL(sendmsg, syscall(SYS_sendmsg, fd, m, fl), fd, m, fl);
}

int bs_real_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000}, *tp = &ts;
	if (timeout < 0)
		tp = NULL;
	CALL(poll, (int)syscall(SYS_ppoll, fds, n, tp, NULL, 8), fds, n, timeout);
}

int bs_real_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		  const sigset_t *mask)
{
	CALL(ppoll, (int)syscall(SYS_ppoll, fds, n, ts, mask, 8), fds, n, ts, mask);
}

int bs_real_close(int fd)
{
	CALL(close, (int)syscall(SYS_close, fd), fd);
}

int bs_real_socket(int d, int t, int p)
{
	CALL(socket, (int)syscall(SYS_socket, d, t, p), d, t, p);
}

int bs_real_accept(int fd, struct sockaddr *a, socklen_t *l)
{
	CALL(accept, (int)syscall(SYS_accept, fd, a, l), fd, a, l);
}

int bs_real_accept4(int fd, struct sockaddr *a, socklen_t *l, int fl)
{
	CALL(accept4, (int)syscall(SYS_accept4, fd, a, l, fl), fd, a, l, fl);
}

int bs_real_dup2(int a, int b)
{
	CALL(dup2, (int)syscall(SYS_dup2, a, b), a, b);
}

int bs_real_dup3(int a, int b, int fl)
{
	CALL(dup3, (int)syscall(SYS_dup3, a, b, fl), a, b, fl);
}

int bs_real_close_range(unsigned first, unsigned last, int fl)
{
	CALL(close_range, (int)syscall(SYS_close_range, first, last, fl), first, last, fl);
}

void bs_real_closefrom(int lowfd)
{
	closefrom_t f = get_closefrom();
	if (f)
		f(lowfd);
	else
		syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0);
}

int bs_real_getaddrinfo(const char *node, const char *svc, const struct addrinfo *hints,
			struct addrinfo **res)
{
	getaddrinfo_t f = get_getaddrinfo();
	return f ? f(node, svc, hints, res) : EAI_SYSTEM;
}

void bs_real_freeaddrinfo(struct addrinfo *res)
{
	freeaddrinfo_t f = get_freeaddrinfo();
	if (f)
		f(res);
}

void bs_real_resolve_all(void)
{
	get_connect(); get_getsockopt(); get_read(); get_readv(); get_recv();
	get_recvfrom(); get_recvmsg(); get_write(); get_writev(); get_send();
	get_sendto(); get_sendmsg(); get_poll(); get_ppoll(); get_close(); get_socket(); get_accept(); get_accept4(); get_dup2(); get_dup3();
	get_close_range(); get_closefrom(); get_getaddrinfo(); get_freeaddrinfo();
}

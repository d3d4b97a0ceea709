/* socket, accept, accept4, listen: a new descriptor starts with a clean slot in the
 * fd table, even if an earlier one with the same number was closed behind
 * the shim's back (a raw syscall, fclose() of an fdopen()ed socket), and
 * the type socket() asked for recorded in it. One load and one store when
 * the slot is already clean. A process that listens or accepts
 * is a server (role.c). */
#include "outcome.h"
#include "park.h"
#include "real.h"
#include "role.h"

#include <errno.h>

static int with_clean_slot(int fd, int type)
{
	bs_outcome_new_fd(fd, type); /* (-1 is out of the table's range) */
	return fd;
}

BS_API int socket(int domain, int type, int protocol)
{
	return with_clean_slot(bs_real_socket(domain, type, protocol), type);
}

static int accepted(int fd)
{
	bs_role_is_server();
	return with_clean_slot(fd, 0); /* (its type is the listener's: not known) */
}

/* A parked socket, or one whose refusal is owed, is still connecting to
 * the kernel as the program knows it, which refuses to make a connecting
 * socket listen; the shim's abort left it unconnected. */
static int connecting(int fd)
{
	unsigned st = bs_fd_state(bs_fds(), fd);
	return (st == BS_FD_PARKED && bs_park_holds(fd)) || (st == BS_FD_FAILED && bs_owed_holds(fd));
}

BS_API int listen(int fd, int backlog)
{
	if (__builtin_expect(bs_fd_state(bs_fds(), fd) != BS_FD_NONE, 0) && connecting(fd)) {
		errno = EINVAL;
		return -1;
	}
	int r = bs_real_listen(fd, backlog);
	if (r == 0) {
		uint64_t keys[BS_ROLE_KEYS];
		bs_role_is_server();
		for (int i = bs_role_listening(fd, keys); i > 0; i--)
			bs_outcome_healthy(keys[i - 1]); /* served here: up */
	}
	return r;
}

BS_API int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accepted(bs_real_accept(fd, addr, len));
}

BS_API int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return accepted(bs_real_accept4(fd, addr, len, flags));
}

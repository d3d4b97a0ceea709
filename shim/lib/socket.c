/* socket, accept, accept4: a new descriptor starts with a clean slot in the
 * fd table, even if an earlier one with the same number was closed behind
 * the shim's back (a raw syscall, fclose() of an fdopen()ed socket). One
 * store when the slot is already clean. */
#include "real.h"
#include "shim.h"

static int fresh(int fd)
{
	if (fd >= 0)
		bs_outcome_new_fd(fd);
	return fd;
}

BS_API int socket(int domain, int type, int protocol)
{
	return fresh(bs_real_socket(domain, type, protocol));
}

BS_API int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return fresh(bs_real_accept(fd, addr, len));
}

BS_API int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return fresh(bs_real_accept4(fd, addr, len, flags));
}

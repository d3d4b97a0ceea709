/* scm: see scm.h. */
#include "scm.h"

#include <string.h>
#include <sys/socket.h>

union control {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

ssize_t bs_scm_send(int sock, const void *data, size_t len, int fd, int flags)
{
	struct iovec iov = {(void *)data, len};
	union control u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		m.msg_control = u.buf, m.msg_controllen = sizeof u.buf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return sendmsg(sock, &m, flags | MSG_NOSIGNAL);
}

ssize_t bs_scm_recv(int sock, void *data, size_t len, int *fd)
{
	struct iovec iov = {data, len};
	union control u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = sizeof u.buf};
	*fd = -1;
	ssize_t got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = got >= 0 && !(m.msg_flags & MSG_CTRUNC) ? CMSG_FIRSTHDR(&m) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(c), sizeof *fd);
	return got;
}

/* errname: constant errno table. See errname.h. */
#include "errname.h"
#include "util.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>

static const struct {
	int err;
	const char *name, *msg;
} tab[] = {
#define E(n, m) {n, #n, m}
	E(EPERM, "Operation not permitted"),
	E(ENOENT, "No such file or directory"),
	E(EINTR, "Interrupted system call"),
	E(EIO, "Input/output error"),
	E(EBADF, "Bad file descriptor"),
	E(EAGAIN, "Resource temporarily unavailable"),
	E(ENOMEM, "Cannot allocate memory"),
	E(EACCES, "Permission denied"),
	E(EFAULT, "Bad address"),
	E(EBUSY, "Device or resource busy"),
	E(EINVAL, "Invalid argument"),
	E(ENFILE, "Too many open files in system"),
	E(EMFILE, "Too many open files"),
	E(EPIPE, "Broken pipe"),
	E(ENOTSOCK, "Socket operation on non-socket"),
	E(EPROTOTYPE, "Protocol wrong type for socket"),
	E(EAFNOSUPPORT, "Address family not supported by protocol"),
	E(EADDRINUSE, "Address already in use"),
	E(EADDRNOTAVAIL, "Cannot assign requested address"),
	E(ENETDOWN, "Network is down"),
	E(ENETUNREACH, "Network is unreachable"),
	E(ENETRESET, "Network dropped connection on reset"),
	E(ECONNABORTED, "Software caused connection abort"),
	E(ECONNRESET, "Connection reset by peer"),
	E(ENOBUFS, "No buffer space available"),
	E(EISCONN, "Transport endpoint is already connected"),
	E(ENOTCONN, "Transport endpoint is not connected"),
	E(ETIMEDOUT, "Connection timed out"),
	E(ECONNREFUSED, "Connection refused"),
	E(EHOSTDOWN, "Host is down"),
	E(EHOSTUNREACH, "No route to host"),
	E(EALREADY, "Operation already in progress"),
	E(EINPROGRESS, "Operation now in progress"),
	E(EPROTO, "Protocol error"),
	E(ENOSR, "Out of streams resources"),
	/* (opening a config or log file) */
	E(ENXIO, "No such device or address"),
	E(EEXIST, "File exists"),
	E(ENOTDIR, "Not a directory"),
	E(EISDIR, "Is a directory"),
	E(ENOSPC, "No space left on device"),
	E(EROFS, "Read-only file system"),
	E(ENAMETOOLONG, "File name too long"),
	E(ELOOP, "Too many levels of symbolic links"),
	E(EDQUOT, "Disk quota exceeded"),
#undef E
/* a name lookup's errors (names and messages only: no list of errors to
 * retry takes them, `resolve` decides) */
#define EAI(n, m) {BS_ERR_EAI(n), #n, m}
	EAI(EAI_AGAIN, "Temporary failure in name resolution"),
	EAI(EAI_NONAME, "Name or service not known"),
	EAI(EAI_FAIL, "Non-recoverable failure in name resolution"),
	EAI(EAI_NODATA, "No address associated with hostname"),
	EAI(EAI_SERVICE, "Servname not supported for ai_socktype"),
	EAI(EAI_FAMILY, "ai_family not supported"),
	EAI(EAI_MEMORY, "Memory allocation failure"),
	EAI(EAI_SYSTEM, "System error"),
#undef EAI
};

#define N BS_ARRAY_SIZE(tab)

int bs_errno_from_name(const char *name, unsigned len)
{
	for (unsigned i = 0; i < N; i++)
		if (strlen(tab[i].name) == len && memcmp(tab[i].name, name, len) == 0 &&
		    !BS_ERR_IS_EAI(tab[i].err))
			return tab[i].err;
	if (len == 11 && memcmp(name, "EWOULDBLOCK", 11) == 0)
		return EWOULDBLOCK;
	return 0;
}

const char *bs_errno_name(int err)
{
	for (unsigned i = 0; i < N; i++)
		if (tab[i].err == err)
			return tab[i].name;
	return 0;
}

const char *bs_errno_msg(int err)
{
	for (unsigned i = 0; i < N; i++)
		if (tab[i].err == err)
			return tab[i].msg;
	return "Unknown error";
}

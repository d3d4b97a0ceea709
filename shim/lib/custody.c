/* custody: the identity, owner and visibility rules. See custody.h. */
#include "custody.h"

#include "ret.h"
#include "shim.h"
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic int owner_pid;

static int pid_now(void)
{
	return (int)syscall(SYS_getpid); /* (never fails; errno untouched) */
}

void bs_custody_start(void)
{
	atomic_store(&owner_pid, pid_now());
}

__attribute__((constructor)) static void owner_at_load(void)
{
	bs_custody_start();
}

int bs_custody_here(void)
{
	return pid_now() == atomic_load(&owner_pid);
}

void bs_custody_take(int fd)
{
	uint64_t cookie = bs_sock_cookie(fd);
	if (cookie)
		bs_fd_set_ident(bs_fds(), fd, cookie);
}

enum bs_custody bs_custody_check(int fd)
{
	if (!bs_custody_here())
		return BS_CUSTODY_UNSURE;
	uint64_t cookie = bs_sock_cookie(fd);
	if (!cookie)
		return BS_CUSTODY_GONE; /* no socket at all now */
	int m = bs_fd_ident_matches(bs_fds(), fd, cookie);
	return m > 0 ? BS_CUSTODY_HELD : m < 0 ? BS_CUSTODY_UNSURE : BS_CUSTODY_GONE;
}

/* /proc/self/maps names an io_uring's rings "anon_inode:[io_uring]". At
 * most this much of it is read (a process with a larger map is assumed to
 * have one: parking is then given up, which is always safe). */
#define MAPS_MAX (8u << 20)

static const char ring_name[] = "[io_uring]";

/* Does the stream from fd contain ring_name? 1 also when it cannot be read
 * to the end within MAPS_MAX. */
static int stream_names_a_ring(int fd)
{
	enum { K = sizeof ring_name - 1 };
	char buf[4096 + K];
	size_t keep = 0, total = 0;
	for (;;) {
		ssize_t n = BS_SYS(SYS_read, fd, buf + keep, sizeof buf - keep);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n < 0;
		size_t have = keep + (size_t)n;
		if (memmem(buf, have, ring_name, K))
			return 1;
		if ((total += (size_t)n) > MAPS_MAX)
			return 1;
		keep = have < K - 1 ? have : K - 1;
		memmove(buf, buf + have - keep, keep);
	}
}

int bs_custody_may_hide_unscreened(void)
{
	int fd = (int)BS_SYS(SYS_openat, AT_FDCWD, "/proc/self/maps",
			     O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int ring = fd < 0 || stream_names_a_ring(fd);
	if (fd >= 0)
		BS_SYS(SYS_close, fd);
	return !ring;
}

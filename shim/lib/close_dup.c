/* close, dup2, dup3, close_range, closefrom: keep the fd table in step with
 * the program's descriptors. Untracked fds cost one load. */
#include "real.h"
#include "shim.h"

#include <linux/close_range.h>

static int do_close(int fd)
{
	if (bs_fd_state(bs_fds(), fd) != BS_FD_NONE)
		bs_outcome_closed(fd); /* before the number can be reused */
	return bs_real_close(fd);
}

static int do_dup2(int from, int to)
{
	int r = bs_real_dup2(from, to);
	if (r >= 0)
		bs_fd_copy(bs_fds(), from, to);
	return r;
}

static int do_dup3(int from, int to, int flags)
{
	int r = bs_real_dup3(from, to, flags);
	if (r >= 0)
		bs_fd_copy(bs_fds(), from, to);
	return r;
}

static int do_close_range(unsigned first, unsigned last, int flags)
{
	int r = bs_real_close_range(first, last, flags);
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		bs_fd_clear_range(bs_fds(), first, last);
	return r;
}

static void do_closefrom(int lowfd)
{
	bs_real_closefrom(lowfd);
	if (lowfd >= 0)
		bs_fd_clear_range(bs_fds(), (unsigned)lowfd, ~0u);
}

BS_API int close(int fd) { return do_close(fd); }
BS_API int dup2(int from, int to) { return do_dup2(from, to); }
BS_API int dup3(int from, int to, int flags) { return do_dup3(from, to, flags); }
BS_API int close_range(unsigned first, unsigned last, int flags)
{
	return do_close_range(first, last, flags);
}
BS_API void closefrom(int lowfd) { do_closefrom(lowfd); }

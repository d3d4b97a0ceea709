/*
 * ret: the error convention inside shim/lib, as libuv has it.
 *
 * Promise: a function of shim/lib returns a result >= 0, or a negative
 * error code (-ECONNREFUSED); errno never carries a result between them.
 * errno is the program's: a call the shim makes for itself goes through
 * BS_NEG, which turns libc's -1-and-errno into the code and leaves errno as
 * it was; only a wrapper (a BS_API definition) sets errno, once, from the
 * code it returns (bs_ret), and puts it back when the call succeeds, as
 * libc's own call leaves it. An error *value* (SO_ERROR, a
 * destination's last error, an owed error) is data and stays positive.
 */
#ifndef BS_RET_H
#define BS_RET_H

#include <errno.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* The call's result, or -errno if it returned -1; errno as it was. */
#define BS_NEG(call)                                                       \
	__extension__({                                                    \
		int saved_ = errno;                                        \
		long r_ = (long)(call);                                    \
		if (r_ == -1)                                              \
			r_ = -errno;                                       \
		errno = saved_;                                            \
		r_;                                                        \
	})

/* A raw system call (the shim's own housekeeping, real.h), the same way. */
#define BS_SYS(...) BS_NEG(syscall(__VA_ARGS__))

/* At a wrapper's return: r as libc returns it, with errno set from a
 * code, or else put back to `saved`, the program's errno at the call. */
static inline long bs_ret_long(long r, int saved)
{
	errno = r < 0 ? (int)-r : saved;
	return r < 0 ? -1 : r;
}

static inline int bs_ret(long r, int saved)
{
	return (int)bs_ret_long(r, saved);
}

#endif

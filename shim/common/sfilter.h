/*
 * sfilter: the seccomp filter of the supervisor engine (backoffshim run
 * --engine seccomp), and the call a preloaded library announces itself with.
 *
 * Promise: pure. Writes a classic BPF program into the caller's array; no
 * system call here. The filter sends to the supervisor only:
 *  - connect() with an IPv4 or IPv6 address length (16 or 28): TCP is
 *    told from the rest by the supervisor, which lets the others continue;
 *  - getsockopt(SOL_SOCKET, SO_ERROR), if asked: a deferred socket's
 *    outcome is answered from the supervisor;
 *  - prctl(BS_SUP_PRCTL_OPTION): a preloaded library says it retries this
 *    process's connects itself, and the supervisor passes them through
 *    (one engine per connect, never a wait inside a wait); the supervisor
 *    answers BS_SUP_PRCTL_ERRNO.
 *  - landlock_restrict_self(): a process that sandboxes itself is left to
 *    the kernel from then on (the sandbox judges the task that connects);
 *    the supervisor lets the call continue.
 * Anything else, and any other architecture's calls (x32 included), are
 * allowed untouched.
 */
#ifndef BS_SFILTER_H
#define BS_SFILTER_H

#include <linux/filter.h>

/* An option number no kernel uses ("bshp"): without a supervisor the
 * kernel answers EINVAL. */
#define BS_SUP_PRCTL_OPTION 0x62736870
#define BS_SUP_PRCTL_ERRNO 133 /* EHWPOISON: never a prctl's own answer */

/* (the same number on every architecture; older headers lack its name) */
#define BS_SYS_LANDLOCK_RESTRICT_SELF 446

#define BS_SFILTER_MAX 40

/* The program into out (BS_SFILTER_MAX entries); returns its length.
 * trap_so_error: also send getsockopt(SOL_SOCKET, SO_ERROR). */
unsigned bs_sfilter_build(struct sock_filter *out, int trap_so_error);

#endif

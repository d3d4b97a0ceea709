/*
 * shim: process-wide state of the preloaded library (config, table, random
 * stream) and its one-time initialisation.
 *
 * Promise: bs_active() is one atomic load once initialised. Initialisation
 * runs in the constructor; a call that arrives earlier initialises on the
 * spot, and a call that arrives while another thread is initialising (or
 * after BACKOFFSHIM_DISABLE / a disabling config) gets NULL, meaning "pass
 * through". Nothing here exits, aborts or writes to stdout.
 */
#ifndef BS_SHIM_H
#define BS_SHIM_H

#include <stdint.h>
#include <sys/socket.h>

#include "clock.h"
#include "config.h"
#include "fdtab.h"
#include "mix.h"
#include "resolv.h"
#include "table.h"

/* How long a name resolution is remembered: for [dest name:port] rules,
 * and (a shorter window) for "the program has other addresses to try". A
 * program walks its addresses right after resolving; one that keeps using
 * the first address of an old resolution is paced per address. */
#define BS_RES_HORIZON (30 * BS_NS_PER_SEC)
#define BS_RES_FALLBACK (2 * BS_NS_PER_SEC)

const struct bs_config *bs_active(void);
/* The settings when connect.c's fresh path may serve them (init.c), else
 * NULL, as before start-up; then the fd table's fast track is enabled too
 * (bs_fd_fresh_below). */
extern const struct bs_config *_Atomic bs_fresh_cfg_g __attribute__((visibility("hidden")));
/* The settings for one destination ([dest ...] rules), fast when none. */
int bs_name_has(void *ctx, uint64_t name, uint64_t key);
static inline const struct bs_config *bs_cfg_for(const struct bs_config *cfg,
						 const struct sockaddr *addr, socklen_t len)
{
	return bs_config_for(cfg, addr, len, bs_name_has, NULL);
}
extern struct bs_table *_Atomic bs_tab_g __attribute__((visibility("hidden")));
static inline struct bs_table *bs_tab(void)
{
	return atomic_load_explicit(&bs_tab_g, memory_order_acquire);
}
/* The first connect() of the process: the shared table looked for, then
 * the fresh path enabled if the settings allow it (init.c). */
void bs_first_connect(void);
/* A connect while the shim is off: if a connect() wrapper loaded after the
 * shim turned it off, one line says so, the first time (init.c). */
void bs_passing_through(void);
/* The fd table, read directly on the hot path of every read/write. */
extern struct bs_fdtab bs_fdtab_g __attribute__((visibility("hidden")));
static inline struct bs_fdtab *bs_fds(void)
{
	return &bs_fdtab_g;
}
struct bs_restab *bs_res(void);
/* Next value of the (seeded) random stream, lock-free. */
uint64_t bs_random(void);
/* The wait to draw after one more failure of e (state s), per the policy:
 * BS_STOP means this failure ends the retries. */
uint64_t bs_next_wait(const struct bs_config *cfg, struct bs_entry *e, uint64_t s);

/* errno of this thread, without a call to __errno_location: the thread
 * pointer plus the offset of libc's errno, which is the same in every
 * thread (libc's TLS is in the static TLS block). init.c measures the
 * offset before it enables the fresh path, its only user. */
extern long bs_errno_off_g __attribute__((visibility("hidden")));
static inline int *bs_errno(void)
{
	return (int *)((char *)__builtin_thread_pointer() + bs_errno_off_g);
}

/* When fd's slot says its connect started or it connected (since), in ns. */
static inline uint64_t bs_fd_since_ns(int fd)
{
	return atomic_load(&bs_fd_slot(bs_fds(), fd)->since);
}

#endif

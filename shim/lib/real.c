/* real: lazy dlsym(RTLD_NEXT) with a raw-syscall fallback. See real.h; the
 * calls are listed in interposed.def. */
#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
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

/* Fallbacks that take more than one system call. */

/* poll(2) as ppoll(2): asm-generic has no poll. */
static int bs_sys_poll(struct pollfd *fds, nfds_t n, int timeout)
{
	struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000}, *tp = &ts;
	if (timeout < 0)
		tp = NULL;
	return (int)syscall(SYS_ppoll, fds, n, tp, NULL, _NSIG / 8);
}

/* select(2) as pselect6(2) (no SYS_select on aarch64); Linux writes the
 * time left back into *tv, and so does this. */
static int bs_sys_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	struct timespec ts, *tp = NULL;
	if (tv) {
		ts.tv_sec = tv->tv_sec;
		ts.tv_nsec = tv->tv_usec * 1000;
		tp = &ts;
	}
	int res = (int)syscall(SYS_pselect6, n, r, w, e, tp, NULL);
	if (tv) {
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return res;
}

static int bs_sys_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
			  const sigset_t *mask)
{
	struct timespec copy, *tp = NULL; /* pselect6 writes the time left */
	struct {
		const sigset_t *set;
		size_t size;
	} m = {mask, _NSIG / 8};
	if (ts) {
		copy = *ts;
		tp = &copy;
	}
	return (int)syscall(SYS_pselect6, n, r, w, e, tp, mask ? &m : NULL);
}

/* dup2(2) as dup3(2), which refuses a == b: then dup2 returns b if a is
 * open (as glibc does where there is no dup2 system call). */
static int bs_sys_dup2(int a, int b)
{
	if (a == b)
		return syscall(SYS_fcntl, a, F_GETFD) < 0 ? -1 : b;
	return (int)syscall(SYS_dup3, a, b, 0);
}

/* Per call: the pointer type, the slot, a typed accessor returning NULL
 * until resolved, and bs_real_name() calling it or the fallback. */
#define SLOT(ret, name, params)                                          \
	typedef ret (*name##_t) params;                                  \
	static void *_Atomic slot_##name;                                \
	static name##_t get_##name(void)                                 \
	{                                                                \
		return (name##_t)resolve(&slot_##name, #name);           \
	}

/* The resolved case is a load, a test and a tail call: the rest (dlsym,
 * the fallback) lives in a cold function of its own, so no frame is set up
 * on the way to libc. */
#define BS_REAL(ret, name, params, args, fallback)                       \
	SLOT(ret, name, params)                                          \
	static __attribute__((noinline, cold)) ret unresolved_##name params \
	{                                                                \
		name##_t f = get_##name();                               \
		if (f)                                                   \
			return f args;                                   \
		return fallback;                                         \
	}                                                                \
	ret bs_real_##name params                                        \
	{                                                                \
		name##_t f = (name##_t)atomic_load_explicit(             \
			&slot_##name, memory_order_acquire);             \
		if (__builtin_expect(f != NULL, 1))                      \
			return f args;                                   \
		return unresolved_##name args;                           \
	}
#define BS_REAL_VOID(name, params, args, fallback)                       \
	SLOT(void, name, params)                                         \
	void bs_real_##name params                                       \
	{                                                                \
		name##_t f = get_##name();                               \
		if (f)                                                   \
			f args;                                          \
		else                                                     \
			fallback;                                        \
	}
#include "interposed.def"
#undef BS_REAL
#undef BS_REAL_VOID

void bs_real_resolve_all(void)
{
#define BS_REAL(ret, name, params, args, fallback) get_##name();
#define BS_REAL_VOID(name, params, args, fallback) get_##name();
#include "interposed.def"
#undef BS_REAL
#undef BS_REAL_VOID
}

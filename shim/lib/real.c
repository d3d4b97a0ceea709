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

#define BS_REAL(ret, name, params, args, fallback)                       \
	SLOT(ret, name, params)                                          \
	ret bs_real_##name params                                        \
	{                                                                \
		name##_t f = get_##name();                               \
		if (f)                                                   \
			return f args;                                   \
		return fallback;                                         \
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

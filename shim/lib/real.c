/* real: lazy dlsym(RTLD_NEXT) with a raw-syscall fallback. See real.h; the
 * calls are listed in interposed.def. */
#include "real.h"

#include "clock.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Set while this thread is inside dlsym, so that re-entry cannot recurse. */
static __thread int in_dlsym __attribute__((tls_model("initial-exec")));

/* libc's `name`, stored in *slot; NULL (slot unchanged) while this thread
 * is inside dlsym or if the lookup fails. */
__attribute__((noinline)) static void *look_up(void *_Atomic *slot, const char *name)
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

void bs_real_jumped(void)
{
	in_dlsym = 0; /* a jump out of a signal handler leaves any dlsym */
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

/* Per call: the resolver the slot starts at (cold: it runs once, or while
 * dlsym is busy in this thread), and the slot. */
#define RESOLVER(ret, name, params, args, call_fallback)                  \
	static __attribute__((noinline, cold)) ret resolve_##name params  \
	{                                                                 \
		bs_##name##_fn f = (bs_##name##_fn)look_up(               \
			(void *_Atomic *)&bs_slot_##name, #name);         \
		if (f)                                                    \
			return f args;                                    \
		call_fallback;                                            \
	}                                                                 \
	bs_##name##_fn _Atomic bs_slot_##name = resolve_##name;
#define BS_REAL(ret, name, params, args, fallback) RESOLVER(ret, name, params, args, return fallback)
#define BS_REAL_VOID(name, params, args, fallback) RESOLVER(void, name, params, args, fallback)
#include "interposed.def"
#undef BS_REAL
#undef BS_REAL_VOID

/* The kernel's clock_gettime, from the vDSO glibc maps and lists under its
 * soname (clock.h says why the shim reads it there). */
static void use_the_kernels_clock(void)
{
#if defined(__aarch64__)
	static const char name[] = "__kernel_clock_gettime";
#else
	static const char name[] = "__vdso_clock_gettime";
#endif
	void *vdso = bs_real_dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (vdso)
		bs_clock_use_kernels((int (*)(clockid_t, struct timespec *))dlsym(vdso, name));
}

/* Resolve every slot still at its resolver, and the clock. */
void bs_real_resolve_all(void)
{
#define RESOLVE(name)                                                      \
	if (atomic_load(&bs_slot_##name) == resolve_##name)                 \
		look_up((void *_Atomic *)&bs_slot_##name, #name);
#define BS_REAL(ret, name, params, args, fallback) RESOLVE(name)
#define BS_REAL_VOID(name, params, args, fallback) RESOLVE(name)
#include "interposed.def"
#undef BS_REAL
#undef BS_REAL_VOID
	use_the_kernels_clock();
}

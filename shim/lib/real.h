/*
 * real: the libc functions the shim wraps, resolved lazily.
 *
 * Promise: each bs_real_* behaves exactly like the libc call it names. The
 * symbol is looked up with dlsym(RTLD_NEXT) on first use, from any thread,
 * even before the constructor; a call that arrives while this thread is
 * inside dlsym (or if dlsym fails) goes straight to the kernel instead, so
 * nothing here can recurse or return an error libc would not.
 *
 * The calls are listed once, in interposed.def, which says what is made
 * from it. To interpose one more call: add it there, define it with BS_API
 * in a wrapper file, and nothing else.
 *
 * bs_real_* or a raw syscall()?
 *  - bs_real_* when the shim makes, on the program's behalf, the call the
 *    program made (or its retry): the program's own libc then does what it
 *    would have done without the shim (cancellation points, fortify and
 *    errno conventions, another preloaded library further down the chain).
 *    Never call the interposed name itself (read, close, poll...) from
 *    inside the library: that binds back to the shim's own export through
 *    the PLT and runs the wrapper again (test_build.py checks for such
 *    relocations).
 *  - A raw syscall(SYS_...) for the shim's own housekeeping (fstat,
 *    getpeername, fcntl, getsockopt(SO_ERROR) of its own, its config file
 *    and log), which must not be seen by other interposers, must not be a
 *    cancellation point and must work before dlsym can. Use only system
 *    calls that every architecture has: the asm-generic table (aarch64,
 *    riscv64) lacks open, dup2, poll, epoll_wait, accept, select, pipe,
 *    fork, stat...; use openat, dup3, ppoll, epoll_pwait, accept4, pselect6,
 *    pipe2, clone (`make cross-check` compiles the library for aarch64).
 *    fstat and futex, which the shim uses, are on every 64-bit architecture
 *    but riscv32 and loongarch64 (before Linux 6.11, for fstat) lack them.
 */
#ifndef BS_REAL_H
#define BS_REAL_H

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <setjmp.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* glibc declares them only for _FORTIFY_SOURCE builds */
void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));
void __chk_fail(void) __attribute__((noreturn));

/* The mark of a definition of an interposed (exported) name; everything
 * else is hidden (-fvisibility=hidden) and the version script hides the
 * rest. */
#define BS_API __attribute__((visibility("default")))

/* Each call has a slot holding the function to call. It starts at a
 * resolver of the shim's own (which looks the symbol up, stores it and
 * calls it, or the fallback) and holds libc's function once resolved, so
 * bs_real_name() is one load and an indirect tail call in every case. */
#define BS_REAL_(ret, name, params, args, return_)                        \
	typedef ret (*bs_##name##_fn) params;                              \
	extern __attribute__((visibility("hidden"))) bs_##name##_fn _Atomic bs_slot_##name;                    \
	static inline __attribute__((always_inline)) ret bs_real_##name params \
	{                                                                  \
		return_ atomic_load_explicit(&bs_slot_##name, memory_order_acquire) args; \
	}
#define BS_REAL(ret, name, params, args, fallback) BS_REAL_(ret, name, params, args, return)
#define BS_REAL_VOID(name, params, args, fallback) BS_REAL_(void, name, params, args, )
#include "interposed.def"
#undef BS_REAL_
#undef BS_REAL
#undef BS_REAL_VOID

/* A longjmp left this thread's frames (jump.c): a dlsym it was inside of
 * (a signal handler ran during one) is left too. */
void bs_real_jumped(void);

/* Resolve everything now (called from the constructor). */
void bs_real_resolve_all(void);

#endif

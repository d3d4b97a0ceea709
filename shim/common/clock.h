/*
 * clock: monotonic time, deadline waits and the EINTR rule.
 *
 * Promise: every function is async-signal-safe and allocation-free (raw
 * syscalls, and libc's sigaction and pthread_setcanceltype, which are
 * atomic stores here). Waits are toward an absolute CLOCK_MONOTONIC deadline, so a
 * signal never stretches one, and they can be cut short by a wake-up on a
 * 32-bit word (futex), which is how an attempt's outcome is announced.
 */
#ifndef BS_CLOCK_H
#define BS_CLOCK_H

#include <stdint.h>
#include <time.h>

#define BS_NEVER UINT64_MAX

/* The clock_gettime bs_now calls: libc's, until the library points it at
 * the kernel's own (the vDSO's, bs_clock_use_kernels). Another preload
 * that fakes clock_gettime (libfaketime) would otherwise put the futex and
 * ppoll deadlines, which the kernel reads on its own clock, hours away,
 * and the shared table's times wrong for every other process. */
extern int (*bs_clock_gettime)(clockid_t, struct timespec *);

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bs_now(void)
{
	struct timespec ts;
	__atomic_load_n(&bs_clock_gettime, __ATOMIC_RELAXED)(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleep until `deadline` (ns, monotonic), or until *word no longer holds
 * `expect` / someone calls bs_wake(word). Returns 0 when the wait ended for
 * any of those reasons, EINTR when a signal handler ran. */
int bs_wait(const uint32_t *word, uint32_t expect, uint64_t deadline);

/* bs_wait inside a call that is a cancellation point (connect, poll): a
 * deferred pthread_cancel acts during it, as during the kernel's wait. A
 * raw system call is none, and glibc sends a deferred cancel no signal:
 * cancellation is asynchronous for the wait alone, as glibc makes it
 * around its own blocking calls. */
int bs_wait_cancellable(const uint32_t *word, uint32_t expect, uint64_t deadline);
/* A signal handler jumps out of this thread's cancellable wait (longjmp):
 * the program's cancel type is put back, which the wait's end would have
 * done. */
void bs_wait_left(void);

/* Point bs_clock_gettime at fn (the vDSO's clock_gettime; NULL: none
 * found, libc's stays). */
void bs_clock_use_kernels(int (*fn)(clockid_t, struct timespec *));

void bs_wake(const uint32_t *word);

/* From now on, waits and wakes work across processes (the words live in a
 * shared mapping): the futexes drop FUTEX_PRIVATE_FLAG. */
void bs_futex_shared(void);

/* After a wait was interrupted by a signal handler: should a blocking
 * connect() report EINTR (true) or carry on as the kernel would under
 * SA_RESTART (false)? A futex or ppoll wait returns EINTR whatever the
 * handler's flags, and which signal ran is not known, so: true if some
 * caught signal that could have run here lacks SA_RESTART. Signals blocked
 * in this thread cannot have run here, and the signals a thread raises
 * itself (SEGV, BUS, FPE, ILL, TRAP, SYS, and ABRT from abort(): crash
 * handlers) cannot interrupt a wait, so neither counts. A handler
 * installed with SA_RESETHAND (glibc's signal() under -std=c99) is SIG_DFL
 * once it ran, so those are read when the call begins (bs_intr_begin):
 * one of them found SIG_DFL afterwards ran. `has_timeout` is the socket's
 * SO_SNDTIMEO being set, in which case the kernel never restarts
 * connect(). */
struct bs_intr {
	int has_timeout, noted;
	uint64_t resetting; /* bit n-1: signal n's handler resets, lacks SA_RESTART */
};
/* At the call's start: no system call. Before each wait: the resetting
 * handlers are read once per call (64 rt_sigaction), after what comes
 * first, such as publishing a failure, which other threads wait for. */
void bs_intr_begin(struct bs_intr *in, int has_timeout);
void bs_intr_before_wait(struct bs_intr *in);
int bs_intr_returns_eintr(const struct bs_intr *in);

#endif

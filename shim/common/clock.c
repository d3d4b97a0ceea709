/* clock: monotonic time, futex-based deadline waits, EINTR rule. */
#include "clock.h"
#include "timeout.h"
#include "units.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(BS_NEVER == BS_TIMEOUT_NONE, "no deadline is no timeout (bs_timeout_ts)");

int (*bs_clock_gettime)(clockid_t, struct timespec *) = clock_gettime;

void bs_clock_use_kernels(int (*fn)(clockid_t, struct timespec *))
{
	if (fn)
		__atomic_store_n(&bs_clock_gettime, fn, __ATOMIC_RELAXED);
}

/* FUTEX_PRIVATE_FLAG until a shared table is mapped */
static _Atomic int futex_private = FUTEX_PRIVATE_FLAG;

void bs_futex_shared(void)
{
	atomic_store(&futex_private, 0);
}

int bs_wait(const uint32_t *word, uint32_t expect, uint64_t deadline)
{
	struct timespec ts;
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout. */
	long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | atomic_load(&futex_private),
			 expect, bs_timeout_ts(deadline, &ts), NULL, FUTEX_BITSET_MATCH_ANY);
	if (r == -1 && errno != EINTR && errno != EAGAIN && errno != ETIMEDOUT) {
		/* futex refused (a seccomp filter of the program's: EPERM):
		 * a sleep toward the deadline, at most a second, that no
		 * wake-up cuts short, rather than a loop that spins */
		uint64_t cap = bs_now() + BS_NS_PER_SEC;
		bs_timeout_ts(deadline < cap ? deadline : cap, &ts);
		r = syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	if (r == -1 && errno == EINTR)
		return EINTR;
	return 0; /* woken, timed out, or the value had already changed */
}

/* The program's cancel type + 1 while this thread waits in
 * bs_wait_cancellable (0: not waiting; -1: async just set, the type not
 * yet known, taken for the default). */
static __thread int waiting_type __attribute__((tls_model("initial-exec")));

int bs_wait_cancellable(const uint32_t *word, uint32_t expect, uint64_t deadline)
{
	if (waiting_type) /* a handler's wait inside this thread's: the outer keeps the record */
		return bs_wait(word, expect, deadline);
	int type;
	waiting_type = -1;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &type);
	waiting_type = type + 1;
	int r = bs_wait(word, expect, deadline);
	pthread_setcanceltype(type, NULL); /* (then the record: a handler's wait in
					    * between leaves both alone) */
	waiting_type = 0;
	return r;
}

void bs_wait_left(void)
{
	int t = waiting_type;
	waiting_type = 0;
	if (t)
		pthread_setcanceltype(t > 0 ? t - 1 : PTHREAD_CANCEL_DEFERRED, NULL);
}

void bs_wake(const uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE | atomic_load(&futex_private), 0x7fffffff,
		NULL, NULL, 0);
}

/* Raised by the thread itself (see clock.h). */
static int synchronous_fault(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
	       sig == SIGTRAP || sig == SIGSYS || sig == SIGABRT;
}

/* The caught signals that could have run in this thread, as a mask (bit
 * n-1 for signal n) of those whose handler has all of `flags` and none of
 * SA_RESTART. */
static uint64_t interrupting(unsigned long flags)
{
	uint64_t blocked = 0, found = 0;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &blocked, sizeof blocked);
	for (int sig = 1; sig <= 64 && sig < NSIG; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || synchronous_fault(sig))
			continue;
		if (blocked >> (sig - 1) & 1)
			continue; /* blocked in this thread: it did not run here */
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
		    sa.sa_handler != SIG_IGN && (sa.sa_flags & flags) == flags &&
		    !(sa.sa_flags & SA_RESTART))
			found |= 1ull << (sig - 1);
	}
	return found;
}

void bs_intr_begin(struct bs_intr *in, int has_timeout)
{
	*in = (struct bs_intr){.has_timeout = has_timeout, .noted = has_timeout};
}

void bs_intr_before_wait(struct bs_intr *in)
{
	if (!in->noted)
		in->resetting = interrupting(SA_RESETHAND), in->noted = 1;
}

int bs_intr_returns_eintr(const struct bs_intr *in)
{
	if (in->has_timeout)
		return 1;
	for (int sig = 1; sig <= 64; sig++) {
		struct sigaction sa;
		if ((in->resetting >> (sig - 1) & 1) && sigaction(sig, NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_DFL)
			return 1; /* it ran, and reset itself */
	}
	return interrupting(0) != 0;
}

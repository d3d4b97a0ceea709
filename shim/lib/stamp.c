/* stamp: which stamps this process makes (shim.h, common/stamp.h). The
 * CPU's counter is used only where the kernel's own CLOCK_MONOTONIC runs
 * on it (its clocksource is that counter), so that both agree on rate and
 * monotonicity across CPUs; and, on x86-64, only while reading the TSC is
 * allowed (prctl PR_GET_TSC), since a disallowed read raises SIGSEGV. A
 * thread that disallows it later (prctl PR_SET_TSC, which the shim
 * interposes: prctl.c) stops the counting for the whole process first;
 * stamps already made are converted with a last pair read then, and every
 * clock is read by system call from then on, since the vDSO's
 * clock_gettime reads the same TSC (checked on 6.18). */
#include "clock.h"
#include "shim.h"

#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int bs_stamp_counting_g;
static struct bs_stamp_pair g_ref;
static struct bs_stamp_pair g_last; /* once counting stopped */
static _Atomic int g_stopped, g_claimed;

static struct bs_stamp_pair pair_now(void)
{
	struct bs_stamp_pair p;
	p.ticks = bs_stamp_counter();
	p.ns = bs_now();
	return p;
}

#if defined(__x86_64__)
#define COUNTER_CLOCKSOURCE "tsc"
static int counter_readable(void)
{
	int mode = 0;
	return syscall(SYS_prctl, PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_ENABLE;
}
#elif defined(__aarch64__)
#define COUNTER_CLOCKSOURCE "arch_sys_counter"
static int counter_readable(void)
{
	return 1;
}
#endif

#ifdef COUNTER_CLOCKSOURCE
/* Is the kernel's clock the counter? (raw system calls: inside the library
 * read() and close() are the shim's wrappers) */
static int kernel_clock_is_counter(void)
{
	static const char path[] = "/sys/devices/system/clocksource/clocksource0/"
				   "current_clocksource";
	char buf[32];
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return 0;
	long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
	syscall(SYS_close, fd);
	size_t want = sizeof COUNTER_CLOCKSOURCE - 1;
	return n == (long)want + 1 && memcmp(buf, COUNTER_CLOCKSOURCE "\n", want + 1) == 0;
}
#endif

void bs_stamp_setup(void)
{
#ifdef COUNTER_CLOCKSOURCE
	if (!atomic_load(&bs_clock_by_syscall_g) && kernel_clock_is_counter() && counter_readable()) {
		g_ref = pair_now();
		atomic_store(&bs_stamp_counting_g, 1);
	}
#endif
}

uint64_t bs_stamp_ns_of(uint64_t stamp)
{
	if (atomic_load(&g_stopped))
		return bs_stamp_ns(stamp, g_ref, g_last);
	return bs_stamp_ns(stamp, g_ref, pair_now());
}

void bs_stamp_stop(void)
{
	int no = 0;
	if (atomic_load(&bs_stamp_counting_g) &&
	    atomic_compare_exchange_strong(&g_claimed, &no, 1)) { /* one thread writes g_last */
		atomic_store(&bs_stamp_counting_g, 0); /* no new counter stamps */
		g_last = pair_now(); /* this thread may still read the counter */
		atomic_store(&g_stopped, 1);
	}
	/* another thread stopping at the same moment: its conversions must not
	 * read the counter either, so it waits (briefly) for g_last */
	for (int i = 0; atomic_load(&g_claimed) && !atomic_load(&g_stopped) && i < 100000; i++)
		syscall(SYS_sched_yield);
	bs_clock_by_syscall();
}

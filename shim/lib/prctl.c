/* prctl(): interposed only to learn that a thread forbids itself the CPU's
 * counter (PR_SET_TSC with PR_TSC_SIGSEGV): the shim's stamps and clock
 * reads stop touching it before the program's call takes effect. Every
 * call then goes to libc unchanged. */
#include "real.h"
#include "shim.h"

#include <stdarg.h>
#include <sys/prctl.h>

BS_API int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
		      a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
#if defined(__x86_64__) /* the only architecture with PR_SET_TSC */
	if (option == PR_SET_TSC && (int)a2 != PR_TSC_ENABLE) /* (an int to the kernel) */
		bs_stamp_stop();
#endif
	return bs_real_prctl(option, a2, a3, a4, a5);
}

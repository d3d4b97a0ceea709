/* jump: longjmp and its kin. A signal handler that leaves a blocked
 * connect() or name lookup with siglongjmp (alarm-bounded clients, wget's
 * --dns-timeout) would otherwise leave the call's probe held and its
 * waiter counted, and the thread's cancel type asynchronous: the engine
 * lets go of them first, then the jump is libc's own. */
#include "clock.h"
#include "engine.h"
#include "real.h"

#include <setjmp.h>

#define JUMP(name)                                                  \
	BS_API void name(struct __jmp_buf_tag env[1], int val)        \
	{                                                           \
		bs_real_jumped();                                   \
		bs_wait_left();                                     \
		bs_engine_abandon();                                \
		bs_real_##name(env, val);                           \
		__builtin_unreachable();                            \
	}
JUMP(longjmp)
JUMP(_longjmp)
JUMP(siglongjmp)
JUMP(__longjmp_chk)

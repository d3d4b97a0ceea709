/*
 * handsoff: the processes under the engine whose connects it leaves to
 * the kernel:
 *  - LIBRARY: a preloaded library announced itself (sfilter.h): it
 *    retries the process's connects itself and serves a dynamic program
 *    better (it can hide a refusal from poll and keep the program's own
 *    timeouts); one engine per connect;
 *  - SANDBOX: the process restricted itself with Landlock, whose rules
 *    judge the task that connects: an attempt the supervisor made for it
 *    would escape them. Its children inherit the sandbox, so a process
 *    with such an ancestor is left alone too.
 *
 * Promise: an entry ends with its process (a pidfd tells, whatever number
 * the kernel gives out next) or, for LIBRARY, with an exec into another
 * program (the executable's identity is kept): a static program exec'd
 * later by a preloaded one is the engine's again. (A sandbox survives
 * exec.) When the table is full of live entries, a SANDBOX entry takes
 * the place of a LIBRARY one; a process that finds no place is the
 * engine's, for LIBRARY, and for SANDBOX the engine is told to pass every
 * connect from then on (bs_handsoff_has answers 1 for all).
 */
#ifndef BS_SUP_HANDSOFF_H
#define BS_SUP_HANDSOFF_H

#include <sys/types.h>

enum bs_handsoff_why { BS_HANDS_OFF_LIBRARY = 1, BS_HANDS_OFF_SANDBOX = 2 };

/* Thread tid's process announced its library, or sandboxed itself. */
void bs_handsoff_add(pid_t tid, enum bs_handsoff_why why);
/* Are thread tid's connects the kernel's alone? */
int bs_handsoff_has(pid_t tid);

#endif

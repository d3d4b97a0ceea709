/*
 * preloaded: the processes under the engine whose preloaded library
 * retries their connects itself (it announced itself, sfilter.h). The
 * engine passes their calls through: one engine per connect. The library
 * serves a dynamic program better (it can hide a refusal from poll and
 * keep the program's own timeouts); the engine keeps the rest.
 *
 * Promise: an entry ends with its process (a pidfd tells, whatever number
 * the kernel gives out next) or with an exec into another program (the
 * executable's identity is kept): a static program exec'd later by a
 * preloaded one is the engine's again.
 */
#ifndef BS_SUP_PRELOADED_H
#define BS_SUP_PRELOADED_H

#include <sys/types.h>

/* Thread tid's process announced its library. */
void bs_preloaded_add(pid_t tid);
/* Does thread tid's process still run with the library it announced? */
int bs_preloaded_has(pid_t tid);

#endif

/*
 * guard: a small process, forked by the supervisor before the program. It
 * continues a supervisor stopped with a program that runs again
 * (bs_guard_watch_stop), and it holds a duplicate of each deferred socket
 * while it waits between two attempts. If the supervisor dies (SIGKILL: no code of its own runs),
 * the guard sees its end of their socketpair close and shuts every socket
 * it holds down: a Go program waiting for the edge of writability wakes,
 * reads SO_ERROR, gets ENOSYS (the kernel's answer once no supervisor
 * listens) and fails its dial instead of waiting for ever. (The program
 * itself dies with the supervisor, PR_SET_PDEATHSIG; the processes it
 * forked do not.)
 *
 * Promise: best effort and never blocking the supervisor: a message that
 * does not fit is dropped. The guard holds no end of the program's stdio
 * and none of the supervisor's descriptors but its own socket; it exits
 * when the supervisor does, which reaps it.
 */
#ifndef BS_SUP_GUARD_H
#define BS_SUP_GUARD_H

#include <stdint.h>
#include <sys/types.h>

/* The guard started: the supervisor's end of the socketpair, or -1. */
int bs_guard_start(void);
/* Hold sock (a duplicate, not taken over) under id; sock -1: let it go. */
void bs_guard_hold(int guard, uint64_t id, int sock);
/* The supervisor is about to stop because the program stopped: while it
 * is stopped and the program runs again or is gone, the guard continues it
 * (SIGCONT), in case nothing else would (the program continued by its pid
 * alone). program 0: the supervisor runs on, the watch ends. */
void bs_guard_watch_stop(int guard, pid_t program);
/* The supervisor ends: the guard is told to go (its socket closed) and
 * reaped, so that no zombie is left to a parent that never reaps unknown
 * children (a script as a container's PID 1, a subreaper). Waits at most a
 * second for it; a guard stopped meanwhile is left as before. */
void bs_guard_stop(int guard);

#endif

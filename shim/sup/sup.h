/*
 * sup: the seccomp engine of `backoffshim run --engine seccomp`, for the
 * programs a preloaded library cannot reach (static binaries, Go).
 *
 * Promise: the command forks the program under a seccomp filter
 * (sfilter.h) and stays its parent, as tini does: it forwards the signals
 * sent to it, returns the program's exit status (128+N for a signal) and
 * exits when the last process under the filter does. One event loop
 * (epoll over the notification fd, a signalfd, the program's pidfd, an
 * io_uring for attempts) serves every connect; no thread per connect.
 * Every attempt is made on the program's own socket, through a duplicate
 * (pidfd_getfd), and every made-up answer goes only to a socket the
 * engine holds, proven by kcmp(KCMP_FILE) against its duplicate. The
 * schedule is shim/common's: policy, budget, the attempt model, config and
 * [dest] rules, the table. Anything the engine cannot judge continues
 * untouched (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
 */
#ifndef BS_SUP_H
#define BS_SUP_H

#include <stdint.h>

struct bs_config;

/* NULL if this machine and process can run the engine; otherwise why not
 * and what to do, as one phrase (checked in a throwaway child: seccomp,
 * user notification, pidfd_getfd, process_vm_readv, kcmp, io_uring). */
const char *bs_sup_unavailable(void);

/* Run argv (execvp) under the engine with settings cfg; returns the exit
 * status for the command to exit with (a program killed by a signal: the
 * supervisor dies of it first), or -1 if the engine could not start and
 * nothing was run (the caller runs the program without it). */
int bs_sup_run(char **argv, const struct bs_config *cfg);

/* The engine proper (ops.c), for the loop in spawn.c. ep: the loop's
 * epoll, to which it adds what it watches with data.u64 >= BS_SUP_EV_OWN.
 * NULL on failure. bs_sup_listen: the notification fd, once there is one,
 * and the guard's socket (guard.h; -1: none). */
#define BS_SUP_EV_OWN 16
struct bs_sup;
struct bs_sup *bs_sup_open(int ep, const struct bs_config *cfg);
void bs_sup_listen(struct bs_sup *s, int listener, int guard);
void bs_sup_on_notification(struct bs_sup *s);
void bs_sup_on_event(struct bs_sup *s, uint64_t data);
/* Deadlines: the earliest (UINT64_MAX: none), and their turn at now. */
uint64_t bs_sup_next_due(const struct bs_sup *s);
void bs_sup_on_time(struct bs_sup *s, uint64_t now);

#endif

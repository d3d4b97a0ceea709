/*
 * proc: what the engine learns of a traced thread and its sockets, through
 * the kernel's identities only (pids from the notification, kcmp,
 * pidfd_getfd), never by guessing from numbers.
 *
 * Promise: each call is one or a few system calls, fails closed (an
 * answer of "not known" makes the caller continue the program's call
 * untouched) and leaves the traced process unchanged, except
 * bs_proc_write, which writes the answer of a call into that call's own
 * output buffer.
 */
#ifndef BS_SUP_PROC_H
#define BS_SUP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* (6.9; older headers lack it) */
#endif

/* Copy n bytes at `at` in thread tid's memory into buf: 0, or -1. */
int bs_proc_read(pid_t tid, uint64_t at, void *buf, size_t n);
/* Write n bytes of buf at `at` in tid's memory: 0, or -1. */
int bs_proc_write(pid_t tid, uint64_t at, const void *buf, size_t n);

/* A duplicate of thread tid's descriptor fd (the same open file), close
 * on exec; -1 if the thread or the descriptor is gone. */
int bs_proc_getfd(pid_t tid, int fd);

/* Does tid's descriptor fd name the same open file as our descriptor
 * mine? 1 yes, 0 no (closed, another file), -1 the thread is gone. */
int bs_proc_same_file(pid_t tid, int fd, int mine);

/* The process (thread group) of thread tid; 0 if it is gone. */
pid_t bs_proc_tgid(pid_t tid);
/* The parent of process pid; 0 if unknown. */
pid_t bs_proc_ppid(pid_t pid);
/* Is process pid stopped (or traced and stopped)? 0 if not, or gone. */
int bs_proc_stopped(pid_t pid);
/* Process pid's name (its comm) into out: 1, or 0 if it cannot be read. */
int bs_proc_name(pid_t pid, char *out, size_t n);

/* Does thread tid run under another LSM label than the engine (an
 * AppArmor profile or SELinux domain entered on exec)? Then an attempt
 * the engine made for it would be judged by the engine's label, not its
 * own. 0 where the engine's own label cannot be read (no such LSM). */
int bs_proc_other_label(pid_t tid);

/* Is the program tid runs a Go program (its runtime waits on the edge of
 * writability and reads SO_ERROR after it)? Remembered per executable. */
int bs_proc_is_go(pid_t tid);

#endif

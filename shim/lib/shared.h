/*
 * shared: where the per-destination table lives (issue 10). By default one
 * table per effective uid and network namespace, in /dev/shm; `shared =
 * off` keeps it private; an absolute path names a table that a group of
 * services share.
 *
 * Promise: bs_shared_map() runs once at start-up, before any interposed
 * call needs the table. It never fails the program: every problem (a
 * symlink, another user's file, a truncated, corrupted or other-version
 * file, /dev/shm missing, full or read-only) gives one log line naming the
 * file and a private table. A new file is created complete (O_TMPFILE,
 * posix_fallocate, header, then linked into place), so nobody ever sees a
 * half-made table or waits for one. A setuid or secure-exec process always
 * uses a private table.
 *
 * The attempt slot's owner (issue 10's "a process killed while it holds a
 * destination's attempt") is tracked with an open-file-description lock on
 * the entry's byte range of the file, taken by the prober for the length of
 * its attempt and released by the kernel if it dies. These are syscalls on
 * the attempt path only (bs_shared_hold/release/held_elsewhere).
 */
#ifndef BS_SHARED_H
#define BS_SHARED_H

#include "config.h"
#include "table.h"

/* Map the table cfg asks for, or return `private_table`. */
struct bs_table *bs_shared_map(const struct bs_config *cfg, struct bs_table *private_table);

/* Is the table shared with other processes? */
int bs_shared_on(void);

/* The prober's lock on e's range for the length of its attempt: returns a
 * token for bs_shared_release (-1: none taken; the probe word's deadline
 * then guards alone), or BS_SHARED_BUSY: another process holds it (its
 * attempt is in flight). */
#define BS_SHARED_BUSY (-2)
int bs_shared_hold(const struct bs_entry *e);
void bs_shared_release(int token);

/* Does a live process other than this one hold e's lock? 0 if nobody does
 * or if it cannot be told (then the probe word's deadline decides). */
int bs_shared_held_elsewhere(const struct bs_entry *e);

/* A thread of this process begins or ends a wait on e: the process is
 * listed among e's waiting processes while any of its threads waits. */
void bs_shared_wait_begins(const struct bs_entry *e);
void bs_shared_wait_ends(const struct bs_entry *e);


/* Has this process itself published an outcome of e, or waited on it?
 * (A process that has not joins a shared schedule: engine.c.) Marking is
 * one atomic or; entries are told apart by slot. */
int bs_shared_known(const struct bs_entry *e);
void bs_shared_mark_known(const struct bs_entry *e);

#endif

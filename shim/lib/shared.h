/*
 * shared: the host-wide table (shtab.h): one per effective uid and network
 * namespace, a System V segment of mode 0600; `shared = off` keeps the
 * table private, `shared = NAME` (an absolute path) picks another table of
 * the same user.
 *
 * Promise: the table is advice, never a hazard. Start-up makes no system
 * call for it; a process looks for the table at its first connect() (it
 * never creates one then) and creates it at its first failure, so a
 * program that never connects, or never fails, makes none. Nobody can
 * truncate a segment under a process, no other user can have written or
 * be sharing an attached one, and everything read from it is checked
 * (table.h). Every problem keeps the private table: one line (a debug line
 * when another user's segment holds the key). A setuid or secure-exec
 * process always keeps its private table.
 *
 * Liveness: a prober holds an open-file-description lock on its entry's
 * byte of the table's lock file (shtab.h) for the length of its attempt,
 * and a waiting process on its waiter cell's byte; the kernel drops them
 * when the process dies, so others (and `backoffshim status`) can tell a
 * live owner from a dead one. These are system calls on the attempt and
 * wait paths only.
 */
#ifndef BS_SHARED_H
#define BS_SHARED_H

#include "config.h"
#include "table.h"

/* At start-up: the settings. No system call: until a shared table is
 * attached, the process's private one is in use. */
void bs_shared_setup(const struct bs_config *cfg);
/* A connect() is about to use the table: attach the shared one if it
 * exists (the first time only; never creates it). */
void bs_shared_look(void);
/* The entry of destination d, claimed (the shared table attached, or
 * created, first): as bs_table_claim_as, with this process as the creator,
 * and its evictions, refusals and damage said (one line per kind per 10 s
 * at most). NULL: untracked (said). */
struct bs_dest;
struct bs_entry *bs_shared_claim(const struct bs_dest *d, uint64_t now, uint64_t idle);

/* e's failures are forgotten if nobody attempted it for the policy's
 * longest wait past its due time (table.h: bs_entry_forget_idle), and the
 * change published: the next attempt starts a new schedule. */
void bs_shared_forget_stale(const struct bs_config *cfg, struct bs_entry *e);

int bs_shared_on(void); /* is the table shared with other processes? */

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
 * listed among e's waiting processes, its cell's lock held, while any of
 * its threads waits. */
void bs_shared_wait_begins(const struct bs_entry *e);
void bs_shared_wait_ends(const struct bs_entry *e);

/* Has this process itself published an outcome of e, or waited on it?
 * (A process that has not joins a shared schedule: engine.c.) Marking is
 * one atomic or; entries are told apart by slot. */
int bs_shared_known(const struct bs_entry *e);
void bs_shared_mark_known(const struct bs_entry *e);

#endif

/*
 * custody: which sockets the shim may make up answers for, and in which
 * process.
 *
 * Promise: a made-up answer (a socket hidden from poll/select/epoll,
 * EAGAIN or EALREADY while parked, SO_ERROR 0, an owed error, a socket put
 * back into an epoll set) goes only to the socket the shim took custody
 * of, in the process that took it:
 *  - identity: when the shim takes custody of a socket (parks it, or reads
 *    its error away), it records the socket's SO_COOKIE in the fd's slot;
 *    before each made-up answer it compares the cookie of what the number
 *    names now. A number that names something else is forgotten, silently,
 *    and the call passes through;
 *  - owner: the fd table describes the process that initialised the shim
 *    (or, after fork(), the child, from its atfork handler). A vfork()
 *    child, or a child made by a raw clone, shares or copies that memory
 *    without being that process: there every wrapper passes through and
 *    changes no slot (close_range in a vfork child leaves the parent's
 *    parked sockets alone);
 *  - visibility: a socket the program may also watch where the shim cannot
 *    screen it (io_uring, a poll() array or select() set larger than the
 *    shim's copy) is never parked: the program gets the real answer.
 * Each check costs a system call and runs on rare paths only (a socket
 * parked, failed or owed), never on the hot path of an untracked fd.
 */
#ifndef BS_CUSTODY_H
#define BS_CUSTODY_H

/* This process is the fd table's owner from now on (initialisation, and a
 * fork child's atfork handler). */
void bs_custody_start(void);
/* Is the calling process the fd table's owner? One getpid system call. */
int bs_custody_here(void);
/* Take custody of the socket fd names: its cookie recorded in its slot
 * (none if fd names no socket: then no made-up answer may follow). */
void bs_custody_take(int fd);
/* Does fd still name the socket the shim took custody of, in its owner?
 *  HELD:   yes;
 *  GONE:   the number names another descriptor, or none: the slot is
 *          stale, to be forgotten (silently), and the call passes through;
 *  UNSURE: not the owner process, or the slot is being written (a signal
 *          handler interrupted its writer): the call passes through and
 *          nothing is changed. */
enum bs_custody { BS_CUSTODY_GONE, BS_CUSTODY_HELD, BS_CUSTODY_UNSURE };
enum bs_custody bs_custody_check(int fd);
/* May the shim hide a failure that the program learned by its own look
 * (getsockopt, read, send, connect) rather than through a readiness call
 * the shim screened? Not when the process has an io_uring instance: the
 * program may have learned readiness there. Reads /proc/self/maps. */
int bs_custody_may_hide_unscreened(void);

#endif

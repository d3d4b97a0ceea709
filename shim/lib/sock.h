/*
 * sock: what the shim knows about Linux sockets, kept in one place.
 *
 * Promise: raw syscalls only (async-signal-safe, no allocation). Kernel
 * facts this module relies on (checked on Linux 5.x/6.x):
 *  - a blocking TCP socket whose connect() failed (refused, timed out) is
 *    back in the unconnected state and may connect() again; so may AF_UNIX;
 *  - a blocking connect() with SO_SNDTIMEO returns EINPROGRESS when the
 *    timeout hits and the handshake carries on in the background;
 *  - connect(AF_UNSPEC) aborts such a handshake but leaves ECONNRESET pending
 *    in SO_ERROR, which must be read away before the next attempt;
 *  - a blocking connect() on a socket still handshaking waits for it again
 *    (used to resume after a signal under SA_RESTART);
 *  - a connect() after a failure whose error was already read returns
 *    ECONNABORTED once, and the next one starts a fresh attempt;
 *  - a timed-out connect() can lose the race with its own handshake (a SYN
 *    retransmitted right at the deadline): check for a peer before
 *    aborting, or an established connection gets reset.
 * The program's bound address, fd number, flags and options are untouched;
 * SO_SNDTIMEO is borrowed for the attempt and put back.
 */
#ifndef BS_SOCK_H
#define BS_SOCK_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

/* 1 if fd is a SOCK_STREAM socket. */
int bs_sock_is_stream(int fd);
/* 1 if fd is a blocking SOCK_STREAM socket. */
int bs_sock_is_blocking_stream(int fd);

/* The program's SO_SNDTIMEO; returns 1 if one is set. */
int bs_sock_sndtimeo(int fd, struct timeval *tv);

enum bs_attempt { BS_ATT_OK, BS_ATT_FAIL, BS_ATT_CUT, BS_ATT_PROG_TIMEOUT, BS_ATT_EINTR };

/* One connect attempt, bounded by `deadline` (monotonic ns). `prog_cut` says
 * the deadline is the program's own SO_SNDTIMEO (so a timeout is reported as
 * BS_ATT_PROG_TIMEOUT with the handshake left running, as the kernel would)
 * rather than the shim's (BS_ATT_CUT: handshake aborted, socket reusable).
 * On BS_ATT_FAIL *err holds the errno. */
enum bs_attempt bs_sock_attempt(int fd, const struct sockaddr *addr, socklen_t len,
				uint64_t deadline, int prog_cut,
				const struct timeval *prog_tv, int prog_has_tv,
				int *err);

/* Abort a handshake in progress (connect(AF_UNSPEC)) and read away the
 * error that leaves pending, so the socket can connect again. */
void bs_sock_abort(int fd);

uint32_t bs_gettid(void);
/* Is thread tid of this process still alive? */
int bs_thread_alive(uint32_t tid);

#endif

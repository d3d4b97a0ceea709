/*
 * sock: what the shim knows about Linux sockets, kept in one place.
 *
 * Promise: raw syscalls only (async-signal-safe, no allocation). Kernel
 * facts this module relies on (checked with small C programs on Linux 6.18):
 *  - a blocking TCP (or AF_UNIX) socket whose connect() failed is back in
 *    the unconnected state and may connect() again;
 *  - a non-blocking connect() whose failure was learned through poll and
 *    SO_ERROR leaves the socket "connecting": the next connect() returns
 *    ECONNABORTED. connect(AF_UNSPEC) puts it back where a failed blocking
 *    connect() leaves it, no error pending, so the next connect() starts
 *    afresh;
 *  - connect(AF_UNSPEC) on a socket still handshaking aborts it and leaves
 *    ECONNRESET pending in SO_ERROR, which must be read away;
 *  - a connect() on a socket still handshaking returns EALREADY, and poll
 *    reports POLLOUT (connected) or POLLERR|POLLHUP (failed) when it ends;
 *  - a handshake can complete right at the deadline (a SYN retransmitted
 *    then): check for a peer before aborting, or an established connection
 *    gets reset.
 * A retried attempt never changes a program-visible property of the
 * socket (fd number, options, SO_SNDTIMEO, bound address, flags). It is a
 * non-blocking connect (O_NONBLOCK set for that one call only, all signals
 * blocked, so no handler can see it or longjmp out meanwhile), then a
 * ppoll() on the fd toward the attempt's deadline.
 */
#ifndef BS_SOCK_H
#define BS_SOCK_H

#include "clock.h"

#include <stdint.h>
#include <sys/socket.h>

/* The queries below are the only ones the shim makes of a socket. Each
 * leaves errno as it found it and returns its answer. */

int bs_sock_is_stream(int fd);
/* getsockopt(SO_ERROR): the pending error, which the kernel clears by this
 * very read (so call it exactly where the error is to be taken); 0 if none;
 * -errno if the query itself failed. */
int bs_sock_take_error(int fd);
/* Would the kernel answer a connect of fd to addr at once, whatever the
 * destination does: a socket of another family than addr's (EINVAL,
 * EAFNOSUPPORT), or a TCP socket connected, connecting or listening
 * (EISCONN, EALREADY)? No such connect is made to wait. 0 when unsure. */
int bs_sock_answers_at_once(int fd, const struct sockaddr *addr);
/* 1 if fd has a peer (getpeername succeeds): connected. */
int bs_sock_has_peer(int fd);
/* Is fd still connected to the destination `key` (addr.h)? Also 1 for a
 * socket that lost its peer (reset: ENOTCONN); 0 for another peer, or for a
 * number that now names a file or pipe (ENOTSOCK). */
int bs_sock_peer_is(int fd, uint64_t key);
/* 1 if fd's file status flags (F_GETFL) include `flag` (O_NONBLOCK...);
 * 0 if they do not, or fd is no fd. */
int bs_sock_has_flag(int fd, int flag);
/* Has fd's connect failed (an error pending, as poll sees it: POLLERR)?
 * The error is not read. */
int bs_sock_has_failed(int fd);
int bs_sock_is_listening(int fd); /* (SO_ACCEPTCONN) */
int bs_sock_is_open(int fd);      /* (a descriptor of any kind) */
/* epoll_ctl(epfd, op, fd) with these events and data, as a raw syscall:
 * 0 or -errno. */
int bs_sock_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
int bs_sock_is_blocking_stream(int fd);

/* The program's SO_SNDTIMEO (read, never changed) in ns, as a budget takes
 * it: BS_BUDGET_NO_TIMEOUT if none is set. */
uint64_t bs_sock_sndtimeo_ns(int fd);
/* Is err, which fd's connect to addr (NULL: not known) ended with, final
 * whatever the destination does, so that it is not retried?
 *  - ETIMEDOUT, ended by the program's own bound on the handshake:
 *    TCP_USER_TIMEOUT set, or a TCP_SYNCNT below the host's
 *    net.ipv4.tcp_syn_retries (read once per process, only for a
 *    TCP_SYNCNT below the kernel's default of 6). The timeout is the
 *    program's, as SO_SNDTIMEO's is.
 *  - ENETUNREACH to an address no route reaches (bs_addr_never_routed). */
int bs_sock_error_is_final(int fd, const struct sockaddr *addr, int err);

enum bs_sock_outcome { BS_ATT_OK, BS_ATT_FAIL, BS_ATT_CUT, BS_ATT_PROG_TIMEOUT, BS_ATT_EINTR };

/* One connect attempt, bounded by `deadline` (monotonic ns). `prog_cut` says
 * the deadline is the program's own SO_SNDTIMEO (so a timeout is reported as
 * BS_ATT_PROG_TIMEOUT with the handshake left running, as the kernel would)
 * rather than the shim's (BS_ATT_CUT: handshake aborted, socket reusable).
 * `intr`: the call's EINTR rule (clock.h); its has_timeout is the program's
 * SO_SNDTIMEO being set.
 * On BS_ATT_FAIL *err holds the errno. */
enum bs_sock_outcome bs_sock_attempt(int fd, const struct sockaddr *addr, socklen_t len,
				uint64_t deadline, int prog_cut, const struct bs_intr *intr,
				int *err);

/* Abort a handshake in progress (connect(AF_UNSPEC)) and read away the
 * error that leaves pending, so the socket can connect again. */
void bs_sock_abort(int fd);
/* Give fd, left unconnected by bs_sock_abort after its refusal, the look
 * of a refused socket again: both directions shut, as the kernel leaves a
 * connect it saw refused, so that poll() says POLLIN|POLLHUP as it would.
 * On an unconnected socket shutdown() changes nothing else (ENOTCONN), and
 * a connect() may still follow. */
void bs_sock_as_refused(int fd);

/* At EOF before the peer sent a byte: did it take everything we sent (an
 * upload the server completed: graphite, syslog, nc -N)? For TCP, true when
 * TCP_INFO's tcpi_bytes_acked > 1 (the SYN counts 1), SIOCOUTQ is 0 and no
 * error (a reset) is pending, as poll() sees it (SO_ERROR would take the
 * error from the program). Asked of the kernel, not of what the wrappers
 * saw written: stdio through fdopen() bypasses them, and a server that
 * closes at once may FIN before our data reaches it. AF_UNIX cannot tell:
 * its orderly close counts as an upload taken. */
int bs_sock_peer_took_all(int fd);

/* Did fd's TCP connect go through before the error now pending on it (a
 * reset, a timeout of the connection)? The kernel counts the segments it
 * received: a refusal is one (the reset), a connect that timed out or was
 * unreachable none, a handshake's answer and what ended it two or more.
 * 0 for anything that is not TCP. */
int bs_sock_was_established(int fd);

/* Which socket an fd names: its SO_COOKIE, a 64-bit number the kernel
 * gives each socket once and never reuses while it runs (st_ino is a
 * wrapping counter); 0 if fd is not a socket. Asked on rare paths only,
 * never on every call: libc closes and reopens fds past the wrappers
 * (fclose, open, dup, socketpair...). Checked on Linux 6.18. */
uint64_t bs_sock_cookie(int fd);

uint32_t bs_gettid(void);
int bs_thread_alive(uint32_t tid); /* (of this process) */

#endif

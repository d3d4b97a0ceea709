"""Defer mode at the edges of a program's readiness calls (issue 9): a fork
while a socket is parked, two epoll registrations with the same data,
timeouts too large to end, timeouts the kernel refuses, timeouts below a
millisecond, a parked socket given a second number by dup or fcntl, a
select() beyond FD_SETSIZE, an address passed with a sockaddr_storage's
length; and (issue 19's last survey) an epoll set waited on through poll()
or select(), an epoll set closed while a dup of it lives on, a connection
reset after the program saw it writable, and a socket copied before its
connect (dup, or dup2 then close). Each runs
tests/progs/parkedge (or wideaddr) with the shim and without it."""
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time

from lib import (Acceptor, LineReader, Server, SynSniffer, TestSkip, base_env, check, finish, free_port, prog,
                 run, shim_env, spawn, wait_status_row)

DEFER = dict(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_INITIAL_BACKOFF="100ms",
             BACKOFFSHIM_MAX_BACKOFF="200ms")


def _both(case, **extra):
    port = free_port()
    rc, plain, err = run([prog("parkedge"), case, str(port)], base_env())
    check(rc == 0, "%s without the shim: rc=%d %r" % (case, rc, err[-300:]))
    env = shim_env(**dict(DEFER, **extra))
    rc, shimmed, err = run([prog("parkedge"), case, str(port)], env)
    check(rc == 0, "%s with the shim: rc=%d %r" % (case, rc, err[-300:]))
    return plain, shimmed, err


def test_a_socket_parked_at_fork_is_parked_by_neither_process():
    """The child shares the parked socket (close-on-exec, not yet exec'd):
    it may wait on it or share the epoll set, so at fork() the parking
    ends and the parent learns the refusal as without the shim; the child
    makes no attempt of its own."""
    plain, shimmed, err = _both("fork")
    check("events=0x1c so_error=111" in plain, "without the shim: %r" % plain)
    m = re.match(r"parent=(\d+) events=(0x[0-9a-f]+) so_error=(\d+)", shimmed)
    check(m and m.group(2) == "0x1c" and m.group(3) == "111",
          "the parent did not learn the refusal: %r (without the shim %r)" % (shimmed, plain))
    pids = set(re.findall(r"backoffshim\[(\d+)\]", err))
    check(pids <= {m.group(1)}, "attempts from the child: pids %r, parent %s" % (pids, m.group(1)))


def test_two_registrations_with_the_same_data_are_reported_as_they_are():
    """A pipe's hangup and a socket's failure carry the same epoll data:
    the shim cannot tell them apart, so it hides neither, and the socket's
    SO_ERROR tells the failure as without the shim."""
    plain, shimmed, err = _both("samedata")
    check(plain.strip() == "n=2 events=0x10,0x1c so_error=111", "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_timeouts_too_large_to_end_wait_until_a_signal():
    """tv_sec = 18446744074 wraps 64 bits of nanoseconds to 0.3 s; the
    kernel saturates it to forever. alarm(1) ends each wait with EINTR."""
    plain, shimmed, err = _both("huge")
    check(plain.count("rc=-1 errno=4 ms=1000") == 4, "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_timeouts_the_kernel_refuses_fail_with_einval_untouched():
    plain, shimmed, err = _both("invalid")
    check(plain.count("errno=22") == 11, "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_timeouts_below_a_millisecond_are_kept():
    """80 waits of 20 us (ppoll, pselect, select, epoll_pwait2) while a
    socket is connecting: the kernel is asked for at most 20 us each time,
    never a rounded-up millisecond. Read from outside with strace."""
    if not shutil.which("strace"):
        raise TestSkip("strace is not installed")
    port = free_port()
    env = shim_env(**DEFER)
    cmd = ["strace", "-f", "-e", "trace=ppoll,pselect6,epoll_pwait2",
           prog("parkedge"), "submillis", str(port)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and p.stdout.strip() == "done", "rc=%d %r" % (p.returncode, p.stderr[-300:]))
    waits = [int(ns) for ns in re.findall(r"tv_nsec=(\d+)", p.stderr)]
    check(len(waits) >= 80, "%d timed waits traced: %r" % (len(waits), p.stderr[-500:]))
    check(max(waits) <= 20000, "a wait of %d ns asked of the kernel for a 20 us timeout" % max(waits))


def test_a_second_number_for_a_parked_socket_tells_its_failure():
    """dup, fcntl(F_DUPFD[_CLOEXEC]) and dup2 of a parked socket: the shim
    can no longer hide it, so the new number sees the failure (POLLERR and
    SO_ERROR ECONNREFUSED) as without the shim, never 'connected'."""
    plain, shimmed, err = _both("dup")
    for how in ("dup", "F_DUPFD", "F_DUPFD_CLOEXEC", "dup2"):
        m = re.search(r"^%s revents=(0x[0-9a-f]+) so_error=(\d+)$" % how, shimmed, re.M)
        check(m, "%s: no report in %r" % (how, shimmed))
        check(int(m.group(1), 16) & 0x8 and m.group(2) == "111",
              "%s: the new number said %s so_error=%s (without the shim: %r)"
              % (how, m.group(1), m.group(2), plain))


def test_select_beyond_fd_setsize_ends_the_parking():
    """select() with nfds past FD_SETSIZE is passed through: a parked socket
    in its sets ends first, so the program sees it writable with its real
    error, as without the shim."""
    plain, shimmed, err = _both("bigselect")
    if plain.strip() == "skip":
        raise TestSkip("the fd limit cannot reach 1500")
    check(plain.strip() == "n=1 so_error=111", "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_an_address_passed_with_a_storage_length_is_never_lost():
    """A program that passes sizeof(struct sockaddr_storage) as the length
    (IPv4, and IPv4-mapped IPv6 on an AF_INET6 socket): the shim keeps the
    address at its family's size, so a parked socket reconnects to it. It
    once kept none, and the second socket reported EBADF. Each socket ends
    with the error the program gets without the shim."""
    for family in ("4", "6"):
        port = free_port()
        rc, plain, err = run([prog("wideaddr"), family, str(port)], base_env())
        check(rc == 0 and plain.count("so_error=Connection refused") == 3,
              "without the shim: %r %r" % (plain, err))
        rc, shimmed, err = run([prog("wideaddr"), family, str(port)],
                               shim_env(**dict(DEFER, BACKOFFSHIM_MAX_ELAPSED="500ms")))
        check(rc == 0 and shimmed == plain, "IPv%s: with the shim %r, without %r (%r)"
              % (family, shimmed, plain, err[-300:]))
        check("127.0.0.1:%d" % port in err and "?" not in err,
              "the log does not name the destination: %r" % err)


def _late_server_through(case):
    """parkedge CASE against a server that starts once the program waits on
    its epoll set through poll() or select() (its socket parked, its line
    "waiting"): the wait must end with the connection, as it would once the
    server is up."""
    port = free_port()
    rc, plain, err = run([prog("parkedge"), case, str(port)], base_env())
    check(plain.strip() == "events=0x1c so_error=111", "without the shim: %r" % plain)
    lr = LineReader(spawn([prog("parkedge"), case, str(port)], shim_env(**DEFER)))
    check(lr.wait_for(lambda l: l == "waiting", 10), "%s: never waited: %r" % (case, lr.lines))
    with Server(port).start():
        rc, lines, err = lr.finish(20)
    check(rc == 0 and lines[-1:] == ["events=0x4 so_error=0"],
          "%s: the program never saw the server that came up: %r %r" % (case, lines, err[-300:]))


def test_an_epoll_set_waited_on_through_poll_sees_the_late_server():
    """poll() on an epoll fd whose socket is parked: the parked socket is in
    no array the shim screens, yet its retries go on (a wait that watches
    none of the program's parked sockets is capped all the same), so the
    set becomes readable when the server is up. It hung before."""
    _late_server_through("pollepoll")


def test_an_epoll_set_waited_on_through_select_sees_the_late_server():
    _late_server_through("selectepoll")


def test_closing_an_epoll_set_whose_dup_lives_on_ends_the_parking():
    """The program dups its epoll fd and closes the original: the set lives
    on, but its number is gone, so a parked socket could never rejoin it.
    Its parking ends at the close, back in the set, and the program learns
    the refusal through the copy (SO_ERROR; EPOLLERR aside: the error was
    read away, so the kernel shows EPOLLOUT|EPOLLHUP). It hung before."""
    plain, shimmed, err = _both("epolldup")
    check(plain.strip() == "events=0x1c so_error=111", "without the shim: %r" % plain)
    m = re.match(r"events=(0x[0-9a-f]+) so_error=(\d+)$", shimmed.strip())
    check(m and int(m.group(1), 16) & 0x10 and m.group(2) == "111",
          "with the shim %r, without %r" % (shimmed, plain))


def _reset_later(conn):
    """Accepted: 300 ms of silence, then a reset (SO_LINGER 0 on close)."""
    time.sleep(0.3)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_a_reset_after_the_program_saw_the_connection_is_the_programs():
    """A client that learns "connected" from POLLOUT (or EPOLLOUT) alone and
    then waits for the server to speak: the server accepts and resets. The
    program sees the reset as without the shim, and the shim makes no
    reconnect of its own (it hid the reset and reconnected 5 times before)."""
    port = free_port()
    srv = Acceptor(port, _reset_later, threaded=True)
    try:
        rc, plain, err = run([prog("parkedge"), "writable", str(port)], base_env())
        check(rc == 0 and "recv=-1 errno=104" in plain, "without the shim: %r" % plain)
        n = len(srv.accepts)
        rc, shimmed, err = run([prog("parkedge"), "writable", str(port)], shim_env(**DEFER))
        check(rc == 0 and shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))
        check(len(srv.accepts) - n == n, "%d connections with the shim, %d without"
              % (len(srv.accepts) - n, n))
    finally:
        srv.close()


DUP_FIRST = r"""
import select, socket, sys
s = socket.socket(); s2 = s.dup(); s.setblocking(False)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except BlockingIOError:
    pass
p = select.poll(); p.register(s.fileno(), select.POLLOUT)
first = p.poll(300)
p2 = select.poll(); p2.register(s2.fileno(), select.POLLOUT)
second = p2.poll(300)
print([hex(e) for _, e in first], [hex(e) for _, e in second],
      s2.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
      s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
"""


def test_a_socket_copied_before_its_connect_is_never_parked():
    """s.dup() before the connect: one socket, two numbers, so its refusal
    cannot be hidden (the other number would see it). Both numbers report
    what they report without the shim, and the error is left for whichever
    reads it first (it was hidden from the one and read away from the other
    before)."""
    port = free_port()
    rc, plain, err = run([sys.executable, "-c", DUP_FIRST, str(port)], base_env())
    check(rc == 0 and plain.strip() == "['0x1c'] ['0x1c'] 111 0", "without the shim: %r" % plain)
    rc, shimmed, err = run([sys.executable, "-c", DUP_FIRST, str(port)], shim_env(**DEFER))
    check(rc == 0 and shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


DUP2_THEN_CLOSE = r"""
import os, select, socket, sys
old = socket.socket(); new = socket.socket()
os.dup2(new.fileno(), old.fileno()); new.close()
old.setblocking(False)
try:
    old.connect(("127.0.0.1", int(sys.argv[1])))
except BlockingIOError:
    pass
p = select.poll(); p.register(old.fileno(), select.POLLOUT)
print([hex(e) for _, e in p.poll(10000)], old.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
"""


def test_a_copy_closed_before_the_connect_leaves_a_socket_that_is_retried():
    """perl's IO::Socket::IP, for a name's second address: a new socket is
    dup2()ed onto the old number and closed, then connected. The socket has
    one number again, so it is parked and retried (max_attempts = 3: three
    SYNs), and the program ends with the refusal as without the shim (one
    SYN, never retried, before)."""
    port = free_port()
    rc, plain, err = run([sys.executable, "-c", DUP2_THEN_CLOSE, str(port)], base_env())
    check(rc == 0 and plain.strip() == "['0x1c'] 111", "without the shim: %r" % plain)
    with SynSniffer(port) as sn:
        rc, shimmed, err = run([sys.executable, "-c", DUP2_THEN_CLOSE, str(port)],
                               shim_env(BACKOFFSHIM_MAX_ATTEMPTS="3", **DEFER))
        syns = sn.settled_count()
    check(rc == 0 and shimmed == plain and syns == 3,
          "with the shim %r (%d SYNs), without %r" % (shimmed, syns, plain))


def _cookie_questions(strace_out):
    return len(re.findall(r"getsockopt\(\d+, SOL_SOCKET, SO_COOKIE", strace_out))


def test_many_parked_sockets_cost_each_poll_only_its_own():
    """100 threads, each parked on one dead destination and waiting in its
    own poll(): a round over the process's parked sockets asks the kernel
    nothing of one that is not due, so the cookie questions grow with the
    threads, not with their square (about 420 per thread in 2 s before, and
    400 threads took both cores). The same threads all connect to a server
    that comes up late."""
    if not shutil.which("strace"):
        raise TestSkip("strace is not installed")
    port, n = free_port(), 100
    env = shim_env(BACKOFFSHIM_MAX_ELAPSED="2s", BACKOFFSHIM_LOG="off", **DEFER)
    trace = "/tmp/bs-manyparked-%d.strace" % port
    try:
        rc, out, err = run(["strace", "-f", "-qq", "-e", "trace=getsockopt", "-o", trace,
                            prog("manyparked"), str(port), str(n)], env, timeout=60)
        with open(trace) as f:
            asked = _cookie_questions(f.read())
    finally:
        if os.path.exists(trace):
            os.unlink(trace)
    check(out.strip() == "connected=0 refused=%d other=0" % n, "without a server: %r" % out)
    check(asked <= 100 * n, "%d SO_COOKIE questions for %d threads" % (asked, n))
    env = shim_env(BACKOFFSHIM_MAX_ELAPSED="20s", BACKOFFSHIM_LOG="off", **DEFER)
    p = spawn([prog("manyparked"), str(port), "400"], env)
    wait_status_row(env["BACKOFFSHIM_SHARED"], lambda r: r["failures"] >= 2,
                    what="a retry of the parked sockets")
    with Server(port).start():
        out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and out.strip() == "connected=400 refused=0 other=0",
          "400 threads and a late server: %r %r" % (out, err[-300:]))

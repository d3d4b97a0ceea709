"""A program that moves on from a connect the shim follows: it dissolves
the association (connect to AF_UNSPEC), shuts the socket down, connects it
somewhere else, or lets a child read its outcome. From then on the socket is
the program's: the shim makes no connection of its own on it and blames
nothing on the next destination. Each case runs tests/progs/movedon with the
shim and without it; a server on the first port starts only once the
program has moved on, so a reconnect by the shim would reach it."""
import time

from lib import (Acceptor, LineReader, Server, SynSniffer, base_env, check, free_port, prog, run,
                 shim_env, spawn)

SCHEDULE = dict(BACKOFFSHIM_INITIAL_BACKOFF="50ms", BACKOFFSHIM_MAX_BACKOFF="100ms")


def _late_server(case, env):
    """movedon CASE against a port that starts listening once the program
    says it moved on: its lines, and how many connections the server got."""
    port = free_port()
    lr = LineReader(spawn([prog("movedon"), case, str(port)], env))
    check(lr.wait_for(lambda l: l == "moved on", 10), "%s: %r" % (case, lr.lines))
    srv = Server(port).start()
    try:
        rc, lines, err = lr.finish(20)
        check(rc == 0, "%s: rc=%d %r" % (case, rc, err[-300:]))
        return lines, len(srv.accepts)
    finally:
        srv.close()


def _no_reconnect_after(case, expected_first):
    plain, n_plain = _late_server(case, base_env())
    check(plain[0] == expected_first and n_plain == 0, "without the shim: %r" % plain)
    for mode in ("defer", "pace"):
        shimmed, n = _late_server(case, shim_env(BACKOFFSHIM_NONBLOCKING=mode, **SCHEDULE))
        check(shimmed == plain and n == 0, "%s: %r and %d connections made, without the shim %r"
              % (mode, shimmed, n, plain))


def test_dissolving_a_parked_socket_ends_its_retries():
    """connect(AF_UNSPEC) on a parked socket: 0, and the refusal still
    pending, as the kernel leaves it. The shim said EALREADY and went on
    reconnecting the socket to the old destination."""
    _no_reconnect_after("unspec_parked", "unspec=0")


def test_shutting_down_a_parked_socket_ends_its_retries():
    """shutdown() of a parked socket: ENOTCONN, then POLLERR and the
    refusal. The shim reconnected the socket once the server was up."""
    _no_reconnect_after("shutdown_parked", "shutdown=107")


def _hold(conn):
    """Accepted: reads until the client goes."""
    while conn.recv(100):
        pass


def test_dissolving_a_connection_the_program_saw_is_the_programs():
    """A server that is up: the program learns "connected" from POLLOUT
    alone, then dissolves the connection with connect(AF_UNSPEC). The
    kernel then reports a reset and refuses the write. The shim took that
    reset for a failed connect, hid it and reconnected: the write reached
    the server on a second connection."""
    port = free_port()
    srv = Acceptor(port, _hold, threaded=True)
    try:
        with SynSniffer(port) as sn:
            rc, plain, err = run([prog("movedon"), "unspec_connected", str(port)], base_env())
            n = sn.settled_count()
            check(rc == 0 and plain.startswith("unspec=0 ") and "write=32" in plain and n == 1,
                  "without the shim: %r, %d SYNs" % (plain, n))
            rc, shimmed, err = run([prog("movedon"), "unspec_connected", str(port)],
                                   shim_env(**SCHEDULE))
            m = sn.settled_count() - n
        check(rc == 0 and shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))
        check(m == 1, "%d connections (SYNs) with the shim, 1 without" % m)
    finally:
        srv.close()


def _elsewhere(case, mode):
    dead, live = free_port(), free_port()
    with Server(live).start():
        rc, plain, err = run([prog("movedon"), case, str(dead), str(live)], base_env())
        check(rc == 0 and "peer=%d" % live in plain and "fresh=5/5" in plain,
              "without the shim: %r" % plain)
        rc, shimmed, err = run([prog("movedon"), case, str(dead), str(live)],
                               shim_env(BACKOFFSHIM_NONBLOCKING=mode, **SCHEDULE))
    check(rc == 0 and shimmed == plain, "%s: with the shim %r, without %r"
          % (mode, shimmed, plain))


def test_a_parked_socket_connected_elsewhere_reaches_the_other_server():
    """The program gives up on a dead server and connects the same socket
    to a live one: the first connect() reports the old refusal, the next
    one goes to the new server, as the kernel does. The shim said EALREADY
    to every connect() while it went on retrying the dead server."""
    for mode in ("defer", "pace"):
        _elsewhere("elsewhere_parked", mode)


def test_an_unread_refusal_is_not_blamed_on_the_next_destination():
    """The refusal of the first connect, never read, comes back from the
    connect() to the live server. It is the first server's: the live one
    is not backed off from (pace refused it for a whole window)."""
    for mode in ("defer", "pace"):
        _elsewhere("stale_elsewhere", mode)


def test_a_child_that_reads_first_learns_the_refusal():
    """fork() while a socket is parked; the child polls the socket and
    reads SO_ERROR before its parent looks. It sees the refusal as without
    the shim (it saw POLLOUT|POLLHUP and SO_ERROR 0, a false "connected")."""
    port = free_port()
    rc, plain, err = run([prog("movedon"), "fork_child_reads", str(port)], base_env())
    check(rc == 0 and plain.strip().endswith("so_error=111"), "without the shim: %r" % plain)
    rc, shimmed, err = run([prog("movedon"), "fork_child_reads", str(port)], shim_env(**SCHEDULE))
    check(rc == 0 and shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_a_parked_socket_made_blocking_answers_as_a_blocking_socket():
    """fcntl() clears O_NONBLOCK on a parked socket, then the program calls
    connect() or read() on it: the refusal, as the kernel gives it. The
    shim said EALREADY and EAGAIN, which a blocking socket never gets."""
    for case, expected in (("blocking_connect", "connect=111"), ("blocking_read", "read=111")):
        port = free_port()
        rc, plain, err = run([prog("movedon"), case, str(port)], base_env())
        check(rc == 0 and plain.strip() == expected, "without the shim: %r" % plain)
        rc, shimmed, err = run([prog("movedon"), case, str(port)], shim_env(**SCHEDULE))
        check(rc == 0 and shimmed == plain, "%s: with the shim %r, without %r"
              % (case, shimmed, plain))


def _answered(case):
    """answered CASE against a destination backing off: the kernel's answer,
    at once (the program's run with the shim takes no longer than without
    it plus a second, where the shim's wait is 4 to 6 s; its first poll
    takes 0.3 s with the shim)."""
    runs = []
    for env in (base_env(), shim_env(BACKOFFSHIM_INITIAL_BACKOFF="5s",
                                     BACKOFFSHIM_MAX_BACKOFF="5s", BACKOFFSHIM_SHARED="off")):
        live = free_port()
        srv = Server(live).start()
        try:
            t0 = time.monotonic()
            rc, out, err = run([prog("answered"), case, str(free_port()), str(live)], env)
            runs.append((rc, out, time.monotonic() - t0, err))
        finally:
            srv.close()
    (prc, plain, pt, _), (rc, out, t, err) = runs
    check(prc == 0 and rc == 0 and out == plain and t < pt + 1.0,
          "%s: %r in %.1fs with the shim, %r in %.1fs without; %s"
          % (case, out, t, plain, pt, err[-300:]))
    return plain


def test_connecting_a_connected_socket_elsewhere_is_refused_at_once():
    """A blocking socket connected to a live server, connected again to a
    destination backing off: EISCONN at once, its peer kept. The shim
    waited the step, took the kernel's EISCONN for its own success, and
    returned 0: the program took the old peer for the new one."""
    check(_answered("connected") == "connect=-1 EISCONN peer=live\n", "not EISCONN")


def test_connecting_a_connected_nonblocking_socket_elsewhere_is_answered_at_once():
    """The same with a non-blocking socket whose connect the program saw
    complete (POLLOUT): the kernel's next connect() says 0, whatever the
    address, and the peer stays."""
    check(_answered("nb_connected") == "connect=0  peer=live\n", "not 0")


def test_an_address_of_another_family_is_refused_at_once():
    """An IPv4 address given to an IPv6 socket: EINVAL at once, not after
    the destination's step."""
    check(_answered("family").startswith("connect=-1 EINVAL"), "not EINVAL")

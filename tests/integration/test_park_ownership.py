"""Defer mode when a parked (or connecting) socket's number or kernel object
is shared with something the shim does not see: a vfork child whose
close_range runs in the parent's memory, a forked child that waits first on
a shared epoll set, libc closing the number inside fclose() and a new file
or pipe taking it, a poll() set too large to copy, io_uring, and an
EPOLLEXCLUSIVE registration, a number libc freed that dup() gives to a
connected socket, a connect inside the backoff window in a process with an
io_uring instance. Each runs tests/progs/ownedge with the shim and
without it: the program must see what it sees without the shim, except
that the failure may come later (never earlier, never not at all, never as
a false "connected"). An asyncio program that runs a subprocess while its
connect is pending must either be refused, as without the shim, or connect
once the server is up; never wait out its own timeout."""
import re
import sys

from lib import (LineReader, Server, SynSniffer, TestSkip, base_env, check, finish, free_port,
                 prog, run, shim_env, spawn)

# The first wait of each case (300 ms) sees the refusal and the shim parks
# the socket; the first backoff (600 ms) is longer than that wait, so the
# socket is still parked when the case goes on. The next step would pass
# max_elapsed: the second refusal (at 0.6 s) is the real error, owed to
# the program, well inside its 3 s wait.
DEFER = dict(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_INITIAL_BACKOFF="600ms",
             BACKOFFSHIM_MAX_BACKOFF="600ms", BACKOFFSHIM_MAX_ELAPSED="1s")

TENTHS = re.compile(r" tenths=(\d+)")


def _both(case, **extra):
    port = free_port()
    rc0, plain, err0 = run([prog("ownedge"), case, str(port)], base_env())
    check(rc0 == 0, "%s without the shim: rc=%d %r %r" % (case, rc0, plain, err0[-300:]))
    rc1, shimmed, err1 = run([prog("ownedge"), case, str(port)], shim_env(**dict(DEFER, **extra)))
    check(rc1 == rc0, "%s with the shim: rc=%d, without %d; %r %r"
          % (case, rc1, rc0, shimmed, err1[-400:]))
    return plain, shimmed, err1


def _tenths(out):
    return [int(t) for t in TENTHS.findall(out)]


def _same_but_later(case, plain, shimmed, err):
    """The same lines but for their times; each time no earlier."""
    check(TENTHS.sub("", shimmed) == TENTHS.sub("", plain),
          "%s: with the shim %r, without %r (%r)" % (case, shimmed, plain, err[-400:]))
    for t1, t0 in zip(_tenths(shimmed), _tenths(plain)):
        check(t1 >= t0, "%s: with the shim the outcome came earlier: %r vs %r"
              % (case, shimmed, plain))


def _vfork(case):
    plain, shimmed, err = _both(case)
    check(TENTHS.sub("", plain).strip() == "events=OUT|ERR|HUP so_error=111 peer=no",
          "without the shim: %r" % plain)
    _same_but_later(case, plain, shimmed, err)


def test_a_vfork_childs_close_range_leaves_the_parents_parked_socket_epoll():
    """The child of vfork() runs in the parent's memory: its close_range(3,
    ~0U) before exec must not make the parent's shim forget the socket it
    parked (and took out of the epoll set). The parent's epoll wait gets
    the refusal, later at most (it once got nothing at all)."""
    _vfork("vfork-epoll")


def test_a_vfork_childs_close_range_leaves_the_parents_parked_socket_poll():
    """As above with poll(): the parent once saw POLLOUT, SO_ERROR 0 and no
    peer on a socket that had been disconnected (a false "connected")."""
    _vfork("vfork-poll")


def test_a_forked_child_that_waits_first_on_a_shared_epoll_set_leaves_the_parent_an_event():
    """The socket is in an epoll set when the process forks; the child waits
    300 ms on the shared set and exits. Without the shim the child gets the
    refusal and reads SO_ERROR, and the parent's wait then reports OUT|HUP
    at once. With the shim the child may instead see a slow connect; then
    the failure is the parent's to learn: its wait (3 s) must report it with
    SO_ERROR 111 (it once got no event at all: the child had parked the
    socket, taken it out of the shared set, and exited)."""
    plain, shimmed, err = _both("fork-shared-epoll")
    p_child, p_parent = plain.splitlines()
    check(p_child == "child events=OUT|ERR|HUP so_error=111" and
          TENTHS.sub("", p_parent) == "parent events=OUT|HUP so_error=0 peer=no",
          "without the shim: %r" % plain)
    lines = shimmed.splitlines()
    check(len(lines) == 2, "with the shim: %r (%r)" % (shimmed, err[-400:]))
    child, parent = lines
    if child == p_child:  # the child was told the refusal, as without the shim
        _same_but_later("fork-shared-epoll", plain, shimmed, err)
        return
    check(child == "child events=- so_error=0",
          "the child saw neither the refusal nor a slow connect: %r" % shimmed)
    check(TENTHS.sub("", parent) == "parent events=OUT|ERR|HUP so_error=111 peer=no",
          "the child saw a slow connect, and the parent never learned its outcome: %r (%r)"
          % (shimmed, err[-400:]))


def test_a_file_on_a_number_fclose_freed_is_a_plain_file():
    """fclose(fdopen(socket)) closes the parked socket inside libc (not
    through close()); open() then returns the same number for a regular
    file. Writes, reads and poll on it are the file's (writes and reads
    once failed with EAGAIN: the shim still took the number for its parked
    socket)."""
    plain, shimmed, err = _both("fclose-file")
    check(plain.splitlines() == ["same-number=yes", "write rc=5 errno=0",
                                 "read rc=5 errno=0 data=hello", "poll n=1 revents=IN|OUT"],
          "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err[-400:]))


def test_a_pipe_on_a_number_fclose_freed_joins_the_epoll_set_with_its_own_data():
    """The same with a pipe's read end on the freed number, added to the
    epoll set the socket was in (data 7, the socket had 42): the add
    succeeds and the wait reports the pipe with its own data, nothing
    else (the add once failed with EEXIST: the shim took it for the parked
    socket's registration)."""
    plain, shimmed, err = _both("fclose-pipe")
    check(plain.splitlines() == ["same-number=yes", "add rc=0 errno=0",
                                 "n=1 data=7 events=IN", "read rc=1 data=x"],
          "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err[-400:]))


def test_a_poll_set_too_large_to_copy_reports_the_refusal_through_so_error():
    """poll() on 300 entries (more than the shim's copy holds) reports the
    connecting socket's POLLERR as it is; SO_ERROR then tells the refusal
    (it once said 0: the getsockopt wrapper parked the socket the program
    had already been told had failed)."""
    plain, shimmed, err = _both("poll300")
    check(TENTHS.sub("", plain).strip() == "revents=OUT|ERR|HUP so_error=111 peer=no",
          "without the shim: %r" % plain)
    _same_but_later("poll300", plain, shimmed, err)


def test_a_refusal_seen_through_io_uring_is_told_by_so_error():
    """An io_uring POLL_ADD (the shim cannot see it) completes with the
    refusal; the program's getsockopt(SO_ERROR) must then say
    ECONNREFUSED, not 0 (a false "connected", as it once did)."""
    plain, shimmed, err = _both("iouring")
    if plain.startswith("skip"):
        raise TestSkip("io_uring: %s" % plain.strip())
    check(re.fullmatch(r"res=OUT\|ERR\|HUP(\|RDHUP)? so_error=111 peer=no", plain.strip()),
          "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err[-400:]))


def test_an_accepted_socket_duped_onto_a_number_fclose_freed_is_never_parked_nor_reconnected():
    """A non-blocking connect to a dead port P; fclose(fdopen()) closes the
    socket inside libc right after; dup() of an accepted socket takes the
    number; the peer resets that connection. poll() must report the reset
    and read() ECONNRESET, as without the shim (the shim once took the
    accepted socket for its connecting one: it hid the reset, sent a SYN
    from it to P, and the program was told ECONNREFUSED, or nothing until
    its timeout and then EAGAIN). On the wire, the run with the shim sends
    P no more SYNs than the run without."""
    port = free_port()
    with SynSniffer(port) as sn:
        rc0, plain, err0 = run([prog("ownedge"), "stale-dup", str(port)], base_env())
        syns_plain = sn.settled_count()
    check(rc0 == 0, "without the shim: rc=%d %r %r" % (rc0, plain, err0[-300:]))
    with SynSniffer(port) as sn:
        rc1, shimmed, err = run([prog("ownedge"), "stale-dup", str(port)], shim_env(**DEFER))
        syns_shim = sn.settled_count()
    check(rc1 == 0, "with the shim: rc=%d %r %r" % (rc1, shimmed, err[-400:]))
    check(plain.splitlines() == ["same-number=yes", "poll n=1 revents=IN|ERR|HUP",
                                 "read rc=-1 errno=104"],
          "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err[-400:]))
    check(syns_plain >= 1, "without the shim no SYN to the dead port was seen")
    check(syns_shim <= syns_plain,
          "with the shim %d SYNs went to the dead port, without it %d (%r)"
          % (syns_shim, syns_plain, err[-400:]))


def test_a_connect_inside_the_window_in_a_process_with_io_uring_is_not_a_false_connected():
    """A process with an io_uring instance: socket A's connect to a dead port
    fails (seen through a POLL_ADD completion and SO_ERROR); socket B then
    connects to the same port inside the shim's backoff window, and is
    watched the same way. B's completion must carry the refusal, SO_ERROR
    111 and a write EPIPE, as without the shim (the shim once parked B at
    once: the completion said OUT|HUP, SO_ERROR 0, and the write EAGAIN,
    a socket neither failed nor connected)."""
    plain, shimmed, err = _both("uring-window")
    if plain.startswith("skip"):
        raise TestSkip("io_uring: %s" % plain.strip())
    lines = plain.splitlines()
    check(len(lines) == 3 and
          re.fullmatch(r"A res=OUT\|ERR\|HUP(\|RDHUP)? so_error=111", lines[0]) and
          re.fullmatch(r"B res=OUT\|ERR\|HUP(\|RDHUP)? so_error=111 peer=no", lines[1]) and
          lines[2] == "B write rc=-1 errno=32",
          "without the shim: %r" % plain)
    check(shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err[-400:]))


def test_epoll_ctl_mod_of_an_exclusive_registration_fails_with_einval():
    """EPOLL_CTL_MOD of a registration made with EPOLLEXCLUSIVE fails with
    EINVAL, the socket parked or not, and the registration keeps its events
    (the shim once answered 0 for the socket it had taken out of the set,
    and later put it back with the refused events: IN|OUT|ERR|HUP)."""
    plain, shimmed, err = _both("epoll-exclusive-mod")
    check(TENTHS.sub("", plain).splitlines() == ["mod rc=-1 errno=22",
                                                 "events=OUT|ERR|HUP so_error=111"],
          "without the shim: %r" % plain)
    _same_but_later("epoll-exclusive-mod", plain, shimmed, err)


# An asyncio client whose loop runs a short-lived program (subprocess: vfork,
# then close_range in the child) while its connect is pending. Its own
# timeout is 8 s.
ASYNCIO_CLIENT = r"""
import asyncio, subprocess, sys

async def main(port):
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    conn = asyncio.ensure_future(asyncio.open_connection("127.0.0.1", port))
    # the loop's other work while the connect is pending (each wait lets
    # the loop see the refusal)
    for _ in range(3):
        await asyncio.sleep(0.1)
        subprocess.run(["/bin/true"], check=True)
    print("spawned", flush=True)
    try:
        r, w = await asyncio.wait_for(conn, 8)
    except ConnectionRefusedError:
        print("refused", flush=True)
        return
    except asyncio.TimeoutError:
        print("timeout after %.1fs" % (loop.time() - t0), flush=True)
        return
    line = await asyncio.wait_for(r.readline(), 5)
    print("connected", line.decode().strip(), flush=True)
    w.close()

asyncio.run(main(int(sys.argv[1])))
"""


def _asyncio_run(env, port):
    """Run the client; start the server once it has spawned its programs.
    Returns (rc, lines, stderr)."""
    p = spawn([sys.executable, "-c", ASYNCIO_CLIENT, str(port)], env)
    lr = LineReader(p)
    seen = lr.wait_for(lambda ln: ln == "spawned", timeout=15)
    if seen is None:
        p.kill()
        rc, lines, err = lr.finish(5)
        check(False, "the client never spawned its programs: %r %r" % (lines, err[-400:]))
    with Server(port).start():
        rc, lines, err = lr.finish(20)
    return rc, lines, err


def test_asyncio_running_a_subprocess_while_connecting_never_waits_out_its_timeout():
    """Without the shim the connect is refused at once. With the shim the
    client may be refused too, or connect once the server is up (it starts
    when the client has run its three programs); it must never wait until
    its own 8 s timeout (it once did: the vfork child's close_range made the
    parent's shim forget the socket it had parked)."""
    port = free_port()
    rc0, lines0, err0 = _asyncio_run(base_env(), port)
    check(rc0 == 0 and lines0 == ["spawned", "refused"],
          "without the shim: rc=%d %r %r" % (rc0, lines0, err0[-400:]))
    env = shim_env(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_INITIAL_BACKOFF="1s",
                   BACKOFFSHIM_MAX_BACKOFF="1s")
    rc1, lines1, err1 = _asyncio_run(env, port)
    check(rc1 == 0 and lines1[:1] == ["spawned"] and len(lines1) == 2,
          "with the shim: rc=%d %r %r" % (rc1, lines1, err1[-400:]))
    check(lines1[1] in ("refused", "connected hello from server"),
          "with the shim the client got %r, not the refusal nor the server (%r)"
          % (lines1[1], err1[-400:]))

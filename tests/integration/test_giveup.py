"""One give-up line for every retry loop (issue #8, item 1): blocking,
non-blocking retry mode and the responsive policy all end a call with
`connect ADDR:PORT: giving up after N attempts in T (REASON): ERROR`."""
import re
import sys

from lib import check, free_port, prog, run, shim_env

NB_CLIENT = r"""
import errno, select, socket, sys
s = socket.socket(); s.setblocking(False)
r = s.connect_ex(('127.0.0.1', int(sys.argv[1])))
if r == errno.EINPROGRESS:
    select.select([], [s], [], 10)
    r = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print(errno.errorcode.get(r, r), flush=True)
"""


def _give_up_lines(err, port):
    pat = (r"^backoffshim\[\d+\](?: [^ :]+)?: connect 127\.0\.0\.1:%d: giving up after (\d+) attempts? "
           r"in \d+(?:\.\d+)?m?s \(([^)]*)\): (.+)$" % port)
    return [m.groups() for m in (re.match(pat, l) for l in err.splitlines()) if m]


def _one_line(err, port, n, reason, what):
    lines = _give_up_lines(err, port)
    check(lines == [(str(n), reason, "Connection refused")],
          "%s: expected one give-up line (%d, %s): %r" % (what, n, reason, err))


def test_blocking_give_up_line():
    port = free_port()
    rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                       shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "rc=%d out=%r" % (rc, out))
    _one_line(err, port, 3, "max_attempts reached", "blocking")


def test_nonblocking_give_up_line_has_address_count_and_error():
    port = free_port()
    rc, out, err = run([sys.executable, "-c", NB_CLIENT, str(port)],
                       shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3))
    check(out.split()[:1] == ["ECONNREFUSED"], "expected the last real error: %r" % out)
    _one_line(err, port, 3, "max_attempts reached", "non-blocking")


def test_nonblocking_give_up_line_names_max_elapsed():
    port = free_port()
    rc, out, err = run([sys.executable, "-c", NB_CLIENT, str(port)],
                       shim_env(BACKOFFSHIM_MAX_ELAPSED="300ms"))
    check(out.split()[:1] == ["ECONNREFUSED"], "expected the last real error: %r" % out)
    lines = _give_up_lines(err, port)
    check(len(lines) == 1 and "max_elapsed" in lines[0][1], "non-blocking: %r" % err)


def test_responsive_give_up_line_when_max_attempts_runs_out():
    port = free_port()
    rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                       shim_env(BACKOFFSHIM_POLICY="responsive", BACKOFFSHIM_MAX_ATTEMPTS=3,
                                BACKOFFSHIM_INITIAL_BACKOFF="20ms"))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "rc=%d out=%r" % (rc, out))
    _one_line(err, port, 3, "max_attempts reached", "responsive")


def test_responsive_give_up_line_when_max_elapsed_runs_out():
    port = free_port()
    rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                       shim_env(BACKOFFSHIM_POLICY="responsive",
                                BACKOFFSHIM_INITIAL_BACKOFF="100ms",
                                BACKOFFSHIM_MAX_ELAPSED="250ms"))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "rc=%d out=%r" % (rc, out))
    lines = _give_up_lines(err, port)
    check(len(lines) == 1 and "max_elapsed" in lines[0][1],
          "responsive: %r" % err)
    check("giving up (budget spent)" in err, "the stats line stays: %r" % err)


def test_no_wait_is_announced_that_the_budget_will_not_wait():
    """A parked (defer) or retried connect whose budget ends before the
    destination is next due: its last failure announces no "next attempt
    in ...", the give-up line follows it instead (blocking already did)."""
    for mode, budget in (("defer", dict(BACKOFFSHIM_MAX_ELAPSED="300ms")),
                         ("defer", dict(BACKOFFSHIM_MAX_ATTEMPTS="3")),
                         ("retry", dict(BACKOFFSHIM_MAX_ELAPSED="300ms"))):
        port = free_port()
        rc, out, err = run([sys.executable, "-c", NB_CLIENT, str(port)],
                           shim_env(BACKOFFSHIM_NONBLOCKING=mode, **budget))
        gave_up = _give_up_lines(err, port)
        announced = [int(a) for a in re.findall(r"\(attempt (\d+)\), next attempt in", err)]
        check(out.strip() == "ECONNREFUSED" and len(gave_up) == 1,
              "%s %r: %r %r" % (mode, budget, out, err))
        check(announced and max(announced) == int(gave_up[0][0]) - 1,
              "%s %r: the last failure announced a wait: %r" % (mode, budget, err))


ASYNC_CLIENT = r"""
import fcntl, os, select, socket, sys
s = socket.socket(); s.setblocking(False)
fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_ASYNC)
s.connect_ex(('127.0.0.1', int(sys.argv[1]))); select.select([], [s], [], 5)
print(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), flush=True)
"""


def test_a_failure_defer_cannot_park_is_still_logged():
    """A socket defer cannot hide (O_ASYNC) fails as without the shim, and
    its failure still gets its line, though its budget allows no retry."""
    port = free_port()
    rc, out, err = run([sys.executable, "-c", ASYNC_CLIENT, str(port)],
                       shim_env(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_MAX_ATTEMPTS="1"))
    check(out.strip() == "111" and "127.0.0.1:%d: Connection refused (attempt 1)" % port in err,
          "%r %r" % (out, err))

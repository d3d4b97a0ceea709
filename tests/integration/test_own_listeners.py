"""A process refused by an address that it then listens on itself: its next
connect there is answered by its own listener, at once, as without the
shim. Each test runs tests/progs/ownlisten with the shim and without it and
compares what the program sees, and how long it took. The shim's first wait
is long (initial_backoff 2 s), so that a refusal it made up, or a wait it
added, stands out."""
import os
import tempfile
import time

from lib import base_env, check, check_not_delayed, free_port, prog, run, shim_env

WAIT = 2.0
LONG_WAIT = dict(BACKOFFSHIM_INITIAL_BACKOFF="2s", BACKOFFSHIM_MAX_BACKOFF="2s")


def _timed(cmd, env):
    t0 = time.monotonic()
    rc, out, err = run(cmd, env, timeout=30)
    return rc, out, err, time.monotonic() - t0


def _compare(what, cmd, env, expected):
    rc0, plain, err0, s0 = _timed(cmd, base_env())
    check(rc0 == 0 and plain.splitlines() == expected,
          "%s without the shim: rc=%d %r %r" % (what, rc0, plain, err0[-300:]))
    rc1, shimmed, err1, s1 = _timed(cmd, env)
    check(rc1 == 0 and shimmed == plain,
          "%s with the shim: rc=%d %r, without %r (%r)" % (what, rc1, shimmed, plain,
                                                          err1[-400:]))
    check_not_delayed(what, s0, s1, wait=WAIT)


def _no_ms(out):
    """out without its " ms=M" (the run times are compared instead)"""
    return "\n".join(line.rsplit(" ms=", 1)[0] for line in out.splitlines())


def _unix(what, **extra):
    with tempfile.TemporaryDirectory(prefix="bs-ownlisten-") as d:
        path = os.path.join(d, "s.sock")
        rc0, plain, err0, s0 = _timed([prog("ownlisten"), "unix", path], base_env())
        check(rc0 == 0 and _no_ms(plain).splitlines() == ["first rc=-1 errno=111",
                                                         "second rc=0 errno=0"],
              "%s without the shim: rc=%d %r %r" % (what, rc0, plain, err0[-300:]))
        env = shim_env(BACKOFFSHIM_UNIX="on", **dict(LONG_WAIT, **extra))
        rc1, shimmed, err1, s1 = _timed([prog("ownlisten"), "unix", path], env)
        check(rc1 == 0 and _no_ms(shimmed) == _no_ms(plain),
              "%s with the shim: rc=%d %r, without %r (%r)" % (what, rc1, shimmed, plain,
                                                              err1[-400:]))
        check_not_delayed(what, s0, s1, wait=WAIT)


def test_a_unix_path_a_process_listens_on_itself_is_not_refused_after_an_early_refusal():
    """A blocking connect to a unix path bound but not listening is refused
    (the shim gives up at once: its next wait would pass max_elapsed); the
    program then listens on that path and connects again: it connects at
    once, as without the shim (the shim once made up ECONNREFUSED for it:
    the path was in its backoff window)."""
    _unix("unix, max_elapsed 1s", BACKOFFSHIM_MAX_ELAPSED="1s")


def test_a_unix_path_a_process_listens_on_itself_is_not_waited_for_after_an_early_refusal():
    """As above, the first connect's budget one attempt (max_attempts 1):
    the second connect must not wait out the path's backoff window (it once
    waited 2 s for a listener that was the program's own and was there)."""
    _unix("unix, max_attempts 1", BACKOFFSHIM_MAX_ATTEMPTS="1", BACKOFFSHIM_MAX_ELAPSED="20s")


def test_an_address_of_a_port_a_process_listens_on_at_a_wildcard_is_not_refused():
    """nonblocking=pace: a non-blocking connect to 127.0.0.2:PORT is refused
    (nothing listens); the program then listens on 0.0.0.0:PORT, and a
    non-blocking connect to 127.0.0.2:PORT connects, as without the shim
    (the shim once refused it at once, a refusal it made up: 127.0.0.2:PORT
    was inside its backoff window, and only 127.0.0.1 was taken for the
    process's own listener)."""
    port = free_port()
    _compare("wildcard", [prog("ownlisten"), "wildcard", str(port)],
             shim_env(BACKOFFSHIM_NONBLOCKING="pace", **LONG_WAIT),
             ["first rc=-1 errno=115 so_error=111",
              "second rc=-1 errno=115 so_error=0 peer=yes", "queued=yes"])

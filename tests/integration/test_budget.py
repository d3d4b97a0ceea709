"""The budget of one connect() call, SO_SNDTIMEO, signals (issue #2)."""
import sys
import time

from lib import (LineReader, Server, SynSniffer, check, check_gaps, free_port, ms_of,
                 prog, run, shim_env, spawn, slack)


def test_max_attempts_counts_real_attempts():
    port = free_port()
    with SynSniffer(port) as sn:
        rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                           shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3))
        check(rc == 1, "rc=%d out=%r" % (rc, out))
        check(out.startswith("fail errno=ECONNREFUSED"), "last real error expected: %r" % out)
        sn.wait_for(4, 0.3)
        check(len(sn.times) == 3, "max_attempts=3 but %d SYNs" % len(sn.times))
        check_gaps(sn.gaps(), "budget")
        ms = ms_of(out) / 1000
        check(0.05 + 0.064 - slack() <= ms <= 0.05 + 0.096 + slack(), "elapsed %.3fs" % ms)
        check("giving up after 3 attempts" in err and "max_attempts" in err,
              "no give-up line: %r" % err)
        check(err.count("next attempt in") == 2, "expected 2 wait lines: %r" % err)


def test_max_elapsed_bounds_the_call():
    port = free_port()
    rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                       shim_env(BACKOFFSHIM_MAX_ELAPSED="300ms"))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "out=%r" % out)
    ms = ms_of(out) / 1000
    # attempts at ~0, 0.05, 0.13, 0.26; the next (~0.46) is past 0.3: give up
    check(0.15 <= ms <= 0.3 + slack(), "elapsed %.3fs with max_elapsed 300ms" % ms)
    check("max_elapsed" in err, "give-up line should name max_elapsed: %r" % err)


def test_program_sndtimeo_bounds_the_call():
    port = free_port()
    rc, out, err = run([prog("conntest"), "-c", "-s", "400", "127.0.0.1", str(port)], shim_env())
    check(rc == 1 and "errno=ECONNREFUSED" in out, "rc=%d out=%r" % (rc, out))
    ms = ms_of(out) / 1000
    check(ms <= 0.4 + slack(), "SO_SNDTIMEO 400ms but the call took %.3fs" % ms)
    check(ms >= 0.2, "gave up too early: %.3fs" % ms)


def test_signal_without_sa_restart_ends_the_call_on_time():
    """An alarm() without SA_RESTART during a wait between attempts ends the
    call when it fires, with the last attempt's real error: no attempt is in
    flight, and EINTR from connect() would mean "still connecting"."""
    port = free_port()
    rc, out, err = run([prog("conntest"), "-a", "300", "127.0.0.1", str(port)], shim_env())
    check("fail errno=ECONNREFUSED" in out, "expected the last real error: %r" % out)
    ms = ms_of(out) / 1000
    check(0.3 - slack() <= ms <= 0.3 + 0.03 + slack(), "ended at %.3fs, alarm was at 0.3s" % ms)
    check("a signal interrupted the wait" in err, "no give-up line: %r" % err[-300:])


def test_signal_with_sa_restart_keeps_waiting():
    port = free_port()
    rc, out, err = run([prog("conntest"), "-a", "300", "-r", "127.0.0.1", str(port)],
                       shim_env(BACKOFFSHIM_MAX_ELAPSED="1s"))
    check("fail errno=ECONNREFUSED" in out, "expected the budget to end it: %r" % out)
    check(ms_of(out) > 400, "SA_RESTART handler cut the wait: %r" % out)


def test_longjmp_out_of_connect_leaves_state_usable():
    port = free_port()
    p = spawn([prog("conntest"), "-a", "300", "-j", "-n", "2", "127.0.0.1", str(port)],
              shim_env())
    r = LineReader(p)
    line = r.wait_for(lambda l: l.startswith("jumped"), 5)
    check(line is not None, "no jump: %r" % r.lines)
    check(abs(ms_of(line) - 300) <= 60, "jumped at %s" % line)
    with Server(port).start():
        rc, lines, err = r.finish(10)
    # rc is 1: the first round (the jump) counts as a failed connect
    check(rc == 1 and lines[-1].startswith("ok"), "second round after longjmp: %r %r"
          % (lines, err[-300:]))


def test_signal_handler_may_call_connect():
    live = free_port()
    dead = free_port()
    with Server(live).start():
        rc, out, err = run([prog("conntest"), "-a", "200", "-H", str(live), "127.0.0.1",
                            str(dead)], shim_env(BACKOFFSHIM_MAX_ELAPSED="1s"), timeout=10)
    check("handler connect ok" in out, "connect() inside a signal handler: %r" % out)
    check("fail errno=" in out, "main connect should end by budget: %r" % out)


HUGE_SNDTIMEO = r"""
import socket, struct, sys, time
s = socket.socket()
# 18446744074 s: its nanoseconds wrap 64 bits to 0.29 s; the kernel keeps it
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 18446744074, 0))
t0 = time.monotonic()
print(s.connect_ex(("127.0.0.1", int(sys.argv[1]))), "%.2f" % (time.monotonic() - t0))
"""


def test_a_sndtimeo_too_large_for_nanoseconds_is_no_bound():
    """SO_SNDTIMEO of 584 years: no bound on the call, as for the kernel. Its
    nanoseconds wrapped to 0.29 s, and the call ended then with the refusal.
    The server starts once the shim has said its third attempt, which comes
    at least 0.8 * (200 + 320) ms = 0.42 s into the call; the call connects."""
    port = free_port()
    p = spawn([sys.executable, "-c", HUGE_SNDTIMEO, str(port)],
              shim_env(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_ELAPSED="5s"))
    log = LineReader(p, stream=p.stderr)
    with Server(port) as srv:
        third = log.wait_for(lambda ln: "(attempt 3)" in ln, 15)
        srv.start()
        log.finish(15)
    out = p.stdout.read()
    check(third is not None, "no third attempt: the call ended first: %r" % log.lines[-5:])
    rc, secs = out.split()
    err = "\n".join(ln for ln in log.lines if ln)
    check(p.returncode == 0 and rc == "0", "connect_ex %s after %ss: %r" % (rc, secs, err[-300:]))

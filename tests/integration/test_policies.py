"""Policies other than gRPC's, seen on the wire (issue #4, first part)."""
import os
import socket
import sys
import threading
import time

from lib import (NO_DELAY, SynSniffer, base_env, check, check_not_delayed, free_port, ms_of, prog,
                 run, shim_env, slack)


def _syns(env, n_expect_max=30):
    port = free_port()
    with SynSniffer(port) as sn:
        rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)], env)
        sn.wait_for(n_expect_max, 0.3)
        return rc, out, err, sn.gaps(), len(sn.times)


def test_exponential_makes_its_last_attempt_and_stops():
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="exponential",
                                           BACKOFFSHIM_INITIAL_BACKOFF="50ms",
                                           BACKOFFSHIM_MULTIPLIER="2",
                                           BACKOFFSHIM_MAX_BACKOFF="500ms"))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "exponential: %r %r" % (out, err))
    check(n == 5, "waits of 50, 100, 200, 400 ms mean 5 attempts; saw %d" % n)
    for g, e in zip(gaps, (0.05, 0.1, 0.2, 0.4)):
        check(abs(g - e) <= slack(), "exponential gaps (no jitter): %r" % gaps)
    check("no more attempts" in err, "give-up line: %r" % err)


def test_list_policy_follows_its_delays():
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="list",
                                           BACKOFFSHIM_DELAYS="0, 60ms, 120ms",
                                           BACKOFFSHIM_MAX_ATTEMPTS=6))
    check(n == 6, "max_attempts=6 but %d SYNs" % n)
    for g, d in zip(gaps, (0, 0.06, 0.12, 0.12, 0.12)):
        check(0.5 * d - slack() <= g <= 1.5 * d + slack(), "list gaps %r vs %s" % (gaps, d))


def test_policy_off_is_pass_through():
    _, plain_out, _, _, _ = _syns(base_env())
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="off", **NO_DELAY))
    check(n == 1 and err == "", "policy=off: %d SYNs %r %r" % (n, out, err))
    check_not_delayed("policy=off: the refused connect", ms_of(plain_out) / 1000,
                      ms_of(out) / 1000)


def test_two_destinations_follow_their_own_sections():
    import os
    import sys
    import tempfile
    from lib import SynSniffer
    a, b = free_port(), free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("[backoff]\ninitial_backoff = 50ms\nmax_backoff = 500ms\n"
                "[dest 127.0.0.1:%d]\npolicy = list\ndelays = 0, 120ms\nmax_attempts = 4\n"
                "[dest *:%d]\npolicy = exponential\nmultiplier = 2\n" % (a, b))
        path = f.name
    code = ("import socket,sys,threading\n"
            "def go(p):\n"
            "  try: socket.create_connection(('127.0.0.1', p))\n"
            "  except OSError as e: print(p, e.errno, flush=True)\n"
            "ts=[threading.Thread(target=go, args=(int(x),)) for x in sys.argv[1:]]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n")
    env = shim_env(BACKOFFSHIM_CONFIG=path)
    for k in ("BACKOFFSHIM_INITIAL_BACKOFF", "BACKOFFSHIM_MAX_BACKOFF", "BACKOFFSHIM_MULTIPLIER",
              "BACKOFFSHIM_JITTER"):
        env.pop(k)
    try:
        with SynSniffer(a) as sa, SynSniffer(b) as sb:
            rc, out, err = run([sys.executable, "-c", code, str(a), str(b)], env)
            sa.wait_for(10, 0.3)
            sb.wait_for(10, 0.3)
            ga, gb = sa.gaps(), sb.gaps()
    finally:
        os.unlink(path)
    check(sorted(out.split()) == sorted([str(a), "111", str(b), "111"]), "out %r %r" % (out, err))
    check(len(ga) == 3, "list destination: %d attempts, want 4 (%r)" % (len(ga) + 1, ga))
    for g, d in zip(ga, (0, 0.12, 0.12)):
        check(0.5 * d - slack() <= g <= 1.5 * d + slack(), "list gaps %r" % ga)
    check(len(gb) == 4, "exponential destination: %d attempts, want 5 (%r)" % (len(gb) + 1, gb))
    for g, e in zip(gb, (0.05, 0.1, 0.2, 0.4)):
        check(abs(g - e) <= slack(), "exponential gaps %r" % gb)


def test_responsive_paces_successes_too():
    """Failures raise the interval; while it is above 0, every connect —
    successes included — waits it (seen at the server's accept()s)."""
    import subprocess
    import sys
    from lib import Server, SynSniffer
    port = free_port()
    code = ("import socket,sys\n"
            "for i in range(3):\n"
            "  try: socket.create_connection(('127.0.0.1', %d))\n"
            "  except OSError: pass\n"
            "print('down', flush=True); sys.stdin.readline()\n"
            "for i in range(4): socket.create_connection(('127.0.0.1', %d)).close()\n"
            "print('done', flush=True)\n" % (port, port))
    env = shim_env(BACKOFFSHIM_POLICY="responsive", BACKOFFSHIM_MAX_ATTEMPTS=1,
                   BACKOFFSHIM_DOWN_THRESHOLD=100)
    sn = SynSniffer(port)
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with sn:
            check(p.stdout.readline().strip() == "down", "phase 1 did not finish")
            sn.wait_for(3, 1)
            gaps = sn.gaps()
        check(len(gaps) == 2, "3 failed calls, one SYN each: %r" % gaps)
        check(abs(gaps[0] - 0.05) <= slack(), "first wait is initial_backoff: %r" % gaps)
        check(0.7 * 0.075 - slack() <= gaps[1] <= 1.3 * 0.075 + slack(), "up x1.5 +-30%%: %r" % gaps)
        with Server(port).start() as srv:
            p.stdin.write("\n")
            p.stdin.flush()
            check(p.stdout.readline().strip() == "done", "phase 2 did not finish")
            import time
            end = time.monotonic() + 2  # the accept thread records the last one
            while len(srv.accepts) < 4 and time.monotonic() < end:
                srv.thread.join(0.01)
            acc = list(srv.accepts)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    agaps = [b - a for a, b in zip(acc, acc[1:])]
    check(len(acc) == 4 and all(g >= 0.7 * 0.075 - slack() for g in agaps),
          "successes must wait the interval too: %r" % agaps)
    check("went up" in err and "calls" in err, "stats line missing: %r" % err)


def _syn_count(cmd, env, port, extra=0.3):
    with SynSniffer(port) as sn:
        rc, out, err = run(cmd, env)
        sn.wait_for(50, extra)
        return rc, out, err, len(sn.times)


def test_global_off_keeps_destination_sections():
    from lib import prog
    port = free_port()
    rc, out, err, n = _syn_count([prog("conntest"), "127.0.0.1", str(port)],
                                 shim_env(BACKOFFSHIM_POLICY="off",
                                          BACKOFFSHIM_DEST_RULES="127.0.0.1:%d=policy:grpc,"
                                                                 "max_attempts:3" % port), port)
    check(n == 3, "the [dest] section must win over a global off: %d SYNs %r" % (n, err))


def test_environment_rule_adds_to_the_file_section():
    import os
    import tempfile
    from lib import prog
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("[dest 127.0.0.1:%d]\nmax_attempts = 2\n" % port)
        path = f.name
    try:
        rc, out, err, n = _syn_count([prog("conntest"), "127.0.0.1", str(port)],
                                     shim_env(BACKOFFSHIM_CONFIG=path,
                                              BACKOFFSHIM_DEST_RULES="127.0.0.1:%d=max_attempts:4"
                                                                     % port), port)
    finally:
        os.unlink(path)
    check(n == 4 and "config:" not in err, "env must override the file: %d SYNs %r" % (n, err))


def test_name_section_matches_a_resolution_without_service():
    port = free_port()
    code = ("import socket,sys\n"
            "ai=socket.getaddrinfo('localhost', None, socket.AF_INET, socket.SOCK_STREAM)\n"
            "try: socket.create_connection((ai[0][4][0], %d))\n"
            "except OSError as e: print(e.errno)\n" % port)
    rc, out, err, n = _syn_count([sys.executable, "-c", code],
                                 shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3,
                                          BACKOFFSHIM_DEST_RULES="localhost:%d=max_attempts:1"
                                                                 % port), port)
    check(n == 1, "[dest localhost:port] should apply: %d SYNs %r" % (n, err))


def test_responsive_interval_above_the_budget_still_tries():
    """An interval longer than max_elapsed must not lock the destination
    out: each call still makes an attempt, so a returning server is found."""
    from lib import Server
    port = free_port()
    code = ("import socket,time\n"
            "for i in range(8):\n"
            "  try: socket.create_connection(('127.0.0.1', %d)).close(); print('ok', i); break\n"
            "  except OSError: print('fail', i, flush=True)\n" % port)
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=shim_env(BACKOFFSHIM_POLICY="responsive",
                                      BACKOFFSHIM_INITIAL_BACKOFF="300ms",
                                      BACKOFFSHIM_MAX_BACKOFF="600ms",
                                      BACKOFFSHIM_MAX_ELAPSED="200ms"))
    lines = [p.stdout.readline(), p.stdout.readline()]
    with Server(port).start():
        out, _ = p.communicate(timeout=20)
    check(all(l.startswith("fail") for l in lines) and "ok" in out,
          "never tried again once the interval passed the budget: %r %r" % (lines, out))

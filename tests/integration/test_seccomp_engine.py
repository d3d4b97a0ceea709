"""The seccomp engine (issue 23): `backoffshim run --engine seccomp`, the
supervisor that retries the connects of static and Go programs from outside.

Every test runs the same program with and without the engine (or with the
other engine) in the same test and compares; attempts are observed from
outside (SYNs on lo with SynSniffer, accepts at the server). The schedule is
scaled down (first wait 200 ms) and a gap between two attempts is checked
against [0.8e - slack, 1.2e + slack] as in gRPC's interop test (the first
gap: e exactly, give or take the slack). Times are judged against the plain
run of the same test, the schedule, or the program's own timeout, never
against a bare number. A late server is started on an event: the client's
k-th SYN seen on the wire.

Binaries: build/backoffshim, build/go/* (make go-progs), build/static/*
(tests/static: cstatic, and sclient, the static C program with signal
knobs). A test whose binary is missing reports SKIP.
"""
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time

import lib
from lib import (BUILD, SO, Acceptor, LineReader, Server, TestFailure, TestSkip, base_env, check,
                 check_not_delayed, finish, free_port, ms_of, new_table, prog, run, slack,
                 spawn)
from servers import BODY

CLI = os.path.join(BUILD, "backoffshim")
GO = os.path.join(BUILD, "go")
STATIC = os.path.join(BUILD, "static")

# The scaled schedule (seconds): first wait, growth, cap, jitter; and the
# slack of a gap check (the supervisor's timers, the sniffer's thread; and
# lib.slack(), the machine's lateness now).
INITIAL, MULT, MAXB, JITTER = 0.2, 1.6, 0.8, 0.2


def gap_slack():
    return 0.03 + slack()


class SynSniffer(lib.SynSniffer):
    """lib's SynSniffer with a marker port of its own (below free_port()'s
    range), so that sniffers running side by side (parallel cases) do not
    take each other's markers for their own when they settle a count."""

    def __init__(self, port):
        self.MARKER = _marker_port()
        super().__init__(port)


_markers = iter(range(10000 + os.getpid() % 5000, 20000))


def _marker_port():
    for p in _markers:
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
    raise TestFailure("no marker port left")


# --- binaries --------------------------------------------------------------

def need(path, how):
    if not os.access(path, os.X_OK):
        raise TestSkip("%s not built (%s)" % (path, how))
    return path


def go_bin(name):
    return need(os.path.join(GO, name), "make go-progs; needs golang-go")


def static_bin(name):
    return need(os.path.join(STATIC, name), "make build/static/%s" % name)


_why_not = []


def need_engine():
    """SKIP unless this machine can run the engine (run says why not in
    its one warning line: seccomp off, an old kernel, a container profile)."""
    need(CLI, "make")
    if not _why_not:
        rc, out, err = run([CLI, "run", "--engine", "seccomp", "--", "true"], base_env(),
                           timeout=20)
        _why_not.append(err.strip() if "cannot run" in err or rc != 0 else "")
    if _why_not[0]:
        raise TestSkip("the seccomp engine cannot run here: %s" % _why_not[0])


# --- running under the engine ----------------------------------------------

def sched(initial=INITIAL, maxb=MAXB, jitter=JITTER, elapsed="20s", mult=MULT, attempts=0):
    return ["--initial-backoff", "%dms" % round(initial * 1000), "--multiplier", str(mult),
            "--max-backoff", "%dms" % round(maxb * 1000), "--jitter", str(jitter),
            "--max-elapsed", elapsed, "--max-attempts", str(attempts)]


def under(cmd, engine="seccomp", opts=None, log="info"):
    """cmd run by `backoffshim run --engine ENGINE` with the scaled schedule."""
    return ([CLI, "run", "--engine", engine, "--log", log] + (sched() if opts is None else opts)
            + ["--"] + cmd)


def eng_env(**extra):
    """No library preloaded, no config file, a shared table of its own."""
    return base_env(BACKOFFSHIM_CONFIG="/dev/null", BACKOFFSHIM_SHARED=new_table(), **extra)


def waits(n, initial=INITIAL, maxb=MAXB, mult=MULT):
    """Un-jittered waits after failures 1..n."""
    out, b = [], initial
    for i in range(n):
        out.append(b)
        b = min(b * mult, maxb)
    return out


def check_schedule(times, what, initial=INITIAL, maxb=MAXB, jitter=JITTER):
    """The gaps between the attempts at `times` follow the schedule."""
    gaps = [b - a for a, b in zip(times, times[1:])]
    check(gaps, "%s: no gaps to check (%d SYNs)" % (what, len(times)))
    for i, (g, e) in enumerate(zip(gaps, waits(len(gaps), initial, maxb))):
        j = 0 if i == 0 else jitter
        lo, hi = (1 - j) * e - gap_slack(), (1 + j) * e + gap_slack()
        check(lo <= g <= hi, "%s: gap %d = %.3fs outside [%.3f, %.3f] (all: %s)" % (
            what, i + 1, g, lo, hi, ", ".join("%.3f" % x for x in gaps)))


def least_wait(n, initial=INITIAL, maxb=MAXB, jitter=JITTER):
    """The shortest time n scheduled waits can take."""
    return sum((1 - (0 if i == 0 else jitter)) * e - gap_slack()
               for i, e in enumerate(waits(n, initial, maxb)))


def the_line(out, what, prefix=None):
    lines = [ln for ln in out.splitlines() if ln.strip()]
    check(len(lines) == 1, "%s: expected one line, got %r" % (what, out))
    if prefix:
        check(lines[0].startswith(prefix), "%s: %r does not start with %r"
              % (what, lines[0], prefix))
    return lines[0]


def syn_times(sn, first):
    """The times of the SYNs sn saw from index `first` on (settled first)."""
    sn.settled_count()
    with sn.cond:
        return list(sn.times[first:])


def plain_refused(cmd, sn, what, prefix="error errno=ECONNREFUSED "):
    """The plain run: refused, one SYN; returns its ms."""
    before = sn.settled_count()
    rc, out, err = run(cmd, base_env())
    line = the_line(out, what + " (plain)", prefix)
    check(rc == 1, "%s (plain): rc=%d %r" % (what, rc, err[-300:]))
    syns = sn.settled_count() - before
    check(syns == 1, "%s (plain): %d SYNs, not 1" % (what, syns))
    return ms_of(line)


def children(pid):
    """The child processes of pid (from /proc)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


GUARD_NAME = "backoffshim-grd"  # the supervisor's guard (shim/sup/guard.h)


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def the_child(pid, what):
    """pid's one child, its guard aside. Polled (bounded): a guard just
    forked has not named itself yet."""
    end = time.monotonic() + 5
    while True:
        kids = [k for k in children(pid) if comm(k) != GUARD_NAME]
        if len(kids) == 1 or time.monotonic() > end:
            break
        time.sleep(0.01)
    check(len(kids) == 1, "%s: %d has children %r, not one" % (what, pid, kids))
    return kids[0]


# connect and getsockopt: the calls the filter sends to the supervisor
TRAPPED = {"x86_64": ("42", "55"), "aarch64": ("203", "209")}.get(os.uname().machine, ())


def quiet_in_socket(pid, what, samples=5):
    """Wait (bounded) until no thread of pid is inside a call the filter
    sent to the supervisor, `samples` looks 10 ms apart in a row: the
    program's connect was answered (deferred) or is held, the getsockopt
    that followed the last failed attempt too, and nothing of it is in
    flight to the supervisor."""
    quiet = 0
    for _ in range(500):
        busy = []
        try:
            for tid in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                    nr = f.read().split(" ", 1)[0]
                if nr in TRAPPED:
                    busy.append(tid)
        except OSError:
            return
        quiet = 0 if busy else quiet + 1
        if quiet >= samples:
            return
        select.select([], [], [], 0.01)
    raise TestFailure("%s: threads of %d stay in a trapped call" % (what, pid))


def gone_within(pidfd, timeout):
    """Has the process of pidfd exited (or become a zombie) within timeout?"""
    r, _, _ = select.select([pidfd], [], [], timeout)
    return bool(r)


def kill_quietly(p):
    if p.poll() is None:
        p.kill()
    try:
        p.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError):
        pass


def parallel(*fns):
    """Run fns each in a thread; re-raise the first failure (a TestSkip only
    if nothing failed)."""
    errs = [None] * len(fns)

    def body(i, fn):
        try:
            fn()
        except BaseException as e:  # noqa: B902 (handed to the test's thread)
            errs[i] = e
    ths = [threading.Thread(target=body, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
        check(not th.is_alive(), "a parallel case did not end within 60 s")
    for e in errs:
        if e is not None and not isinstance(e, TestSkip):
            raise e
    for e in errs:
        if e is not None:
            raise e


class LateHttp(Acceptor):
    """A minimal HTTP/1.0 server (GET -> 200 BODY), started when wanted
    and with no readiness probe of its own (no extra SYN on the wire)."""

    autostart = False

    def __init__(self, port):
        super().__init__(port, self._http)

    @staticmethod
    def _http(c):
        c.settimeout(5)
        req = b""
        while b"\r\n\r\n" not in req and len(req) < 8192:
            d = c.recv(4096)
            if not d:
                return
            req += d
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(BODY), BODY))


def late_server(cmd, port, sn, server, before, what, env=None, during=None, timeout=30, want=1):
    """Run cmd under the engine; when its `before`-th SYN is seen (or, if
    `before` is a function, once it says yes to the run's SYN times), start
    `server` (a not yet started Acceptor). during(p), if given, runs once
    the first SYN is seen and returns a stop function. The server is
    closed once it accepted `want` connections (the ones the program made
    may still wait in its queue when the program ends), or after 5 s.
    Returns (rc, out, err, the engine run's SYN times, the server's accept
    times, when the server started)."""
    first = sn.settled_count()
    p = spawn(cmd, env or eng_env())
    stop = None
    try:
        check(sn.wait_for(first + 1, 10) > first, "%s: no SYN within 10 s" % what)
        if during:
            stop = during(p)
        if callable(before):
            for _ in range(1000):
                with sn.cond:
                    times = sn.times[first:]
                if before(times) or sn.wait_for(first + len(times) + 1, 10) <= first + len(times):
                    break
            check(before(times), "%s: the SYNs before the server started: %r" % (what, times))
        else:
            seen = sn.wait_for(first + before, 30)
            check(seen >= first + before, "%s: only %d SYNs before the server started"
                  % (what, seen - first))
        t_up = time.monotonic()
        with server.start():
            rc, out, err = finish(p, timeout)
            if stop:
                stop()
                stop = None
            for _ in range(500):
                if len(server.accepts) >= want:
                    break
                select.select([], [], [], 0.01)
    finally:
        if stop:
            stop()
        kill_quietly(p)
        server.close()
    return rc, out, err, syn_times(sn, first), list(server.accepts), t_up


# --- 1. late servers ------------------------------------------------------

LATE_BEFORE = 6  # refused SYNs before the server starts: about 3 s with 200ms..1s


def _late_case(what, cmd, port, server, prefix):
    """plain: refused at once; engine: connects after the server started
    (after LATE_BEFORE refused attempts), the SYNs on the schedule."""
    maxb = 1.0
    with SynSniffer(port) as sn:
        plain_ms = plain_refused(cmd, sn, what)
        rc, out, err, times, accepts, t_up = late_server(
            under(cmd, opts=sched(maxb=maxb)), port, sn, server, LATE_BEFORE, what)
    line = the_line(out, what, prefix)
    check(rc == 0, "%s: rc=%d %r" % (what, rc, err[-400:]))
    check(len(times) == LATE_BEFORE + 1, "%s: %d SYNs, not %d refused + 1: %r"
          % (what, len(times), LATE_BEFORE, err[-400:]))
    check_schedule(times, what, maxb=maxb)
    check(len(accepts) == 1, "%s: the server saw %d connections, not 1" % (what, len(accepts)))
    check(accepts[0] >= t_up and times[-1] >= t_up, "%s: connected before the server was up"
          % what)
    waited = least_wait(LATE_BEFORE, maxb=maxb) * 1000
    check(ms_of(line) >= plain_ms + waited, "%s: took %d ms under the engine; the schedule's "
          "%d waits take at least %.0f ms" % (what, ms_of(line), LATE_BEFORE, waited))
    check("connected after %d failed attempts" % LATE_BEFORE in err,
          "%s: no 'connected after' line: %r" % (what, err[-400:]))


def test_late_server_go_http_go_dial_static_c():
    need_engine()
    dial, httpget, cst = go_bin("dial"), go_bin("httpget"), static_bin("cstatic")
    p1, p2, p3 = free_port(), free_port(), free_port()
    parallel(
        lambda: _late_case("go net/http", [httpget, "http://127.0.0.1:%d/" % p1], p1,
                           LateHttp(p1), "status=200 "),
        lambda: _late_case("go net.Dial", [dial, "127.0.0.1:%d" % p2], p2, Server(p2),
                           "connected ms="),
        lambda: _late_case("static C", [cst, "-r", "127.0.0.1", str(p3)], p3, Server(p3),
                           "connected ms="),
    )


# --- 2. the program's own timeout wins --------------------------------------

def test_go_dialtimeout_dead_port_own_timeout_wins():
    """Go DialTimeout(2s) to a dead port: refused at once without the
    engine; "i/o timeout" at 2 s with it (deferred: retried in the
    background until Go's deadline), the attempts on the schedule and none
    after the program gave up (the supervisor stays alive: the program is
    a shell that waits for a line after dial)."""
    need_engine()
    dial = go_bin("dial")
    port, timeout = free_port(), 2.0
    addr = "127.0.0.1:%d" % port
    with SynSniffer(port) as sn:
        plain_ms = plain_refused([dial, addr, "2s"], sn, "DialTimeout")
        first = sn.settled_count()
        p = subprocess.Popen(under(["sh", "-c", "%s %s 2s; echo after; read x" % (dial, addr)]),
                             env=eng_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            lr = LineReader(p)
            line = lr.wait_for(lambda ln: ln.startswith("error "), 15)
            t_end = time.monotonic()
            check(line is not None, "DialTimeout under the engine: no error line: %r" % lr.lines)
            n = sn.settled_count()
            # the next attempt would have come within one wait: none comes
            later = sn.wait_for(n + 1, (1 + JITTER) * MAXB + gap_slack())
            p.stdin.write("x\n")
            p.stdin.flush()
            rc, lines, err = lr.finish(10)
        finally:
            kill_quietly(p)
        times = syn_times(sn, first)
    check(line.startswith("error errno=timeout ") and line.endswith(": i/o timeout"),
          "DialTimeout under the engine: %r" % line)
    ms = ms_of(line)
    check(timeout * 1000 <= ms <= timeout * 1000 + plain_ms + INITIAL * 1000 / 2,
          "DialTimeout(2s) under the engine ended after %d ms (plain: %d ms)" % (ms, plain_ms))
    check(rc == 0 and lines[-1] == "after", "the shell: rc=%d %r" % (rc, lines))
    check(len(times) >= 3, "only %d SYNs in 2 s: not retried" % len(times))
    check_schedule(times, "DialTimeout")
    check(later == n and all(t <= t_end for t in times),
          "a SYN after the program gave up (%d then %d): %s" % (n, later, times))


# --- 3. signal storms during a held or deferred connect ----------------------

def _storm_case(what, cmd, port, sig, before=4):
    """sig sent to the program in a loop while its connect waits for a late
    server: it still connects, once, and the restarted calls join their
    socket's operation (no extra attempt: the SYNs on the schedule)."""
    sent = [0, 0]  # all, before the server started

    def during(p):
        kid = the_child(p.pid, what)
        fd = os.pidfd_open(kid)
        stop = threading.Event()

        def storm():
            for _ in range(20000):
                if stop.is_set():
                    return
                try:
                    signal.pidfd_send_signal(fd, sig)
                except ProcessLookupError:
                    return
                sent[0] += 1
                time.sleep(0.0005)
        th = threading.Thread(target=storm, daemon=True)
        th.start()

        def end():
            stop.set()
            th.join(5)
            os.close(fd)
        return end

    class Marked(Server):
        def start(self):
            sent[1] = sent[0]
            return super().start()
    with SynSniffer(port) as sn:
        plain_refused(cmd, sn, what)
        rc, out, err, times, accepts, _ = late_server(under(cmd), port, sn, Marked(port), before,
                                                      what, during=during)
    line = the_line(out, what, "connected ms=")
    check(rc == 0, "%s: rc=%d %r" % (what, rc, err[-300:]))
    check(sent[1] >= 100, "%s: only %d signals before the server started" % (what, sent[1]))
    check(len(accepts) == 1, "%s: the server saw %d connections" % (what, len(accepts)))
    check(len(times) == before + 1, "%s: %d SYNs under %d signals, not %d refused + 1"
          % (what, len(times), sent[0], before))
    check_schedule(times, what)
    return line, sent[0]


def test_signal_storm_during_held_connect():
    """Go's preemption signal (SIGURG) on net.Dial's deferred connect, and a
    C handler's SIGUSR1 (SA_RESTART) on a static program's held blocking
    connect (every signal abandons the held notification: the restarted
    connect must join the running operation)."""
    need_engine()
    dial, sc = go_bin("dial"), static_bin("sclient")
    p1, p2 = free_port(), free_port()
    res = {}

    def c_case():
        line, sent = _storm_case("static C + SIGUSR1", [sc, "-u", "127.0.0.1", str(p2)], p2,
                                 signal.SIGUSR1)
        res["c"] = (line, sent)
    parallel(lambda: _storm_case("go + SIGURG", [dial, "127.0.0.1:%d" % p1], p1, signal.SIGURG),
             c_case)
    line, sent = res["c"]
    m = re.search(r" usr1=(\d+)", line)
    check(m and int(m.group(1)) >= 100,
          "static C: its handler ran %s times of %d signals" % (m and m.group(1), sent))


# --- 4. goroutines and threads ------------------------------------------------

def _many_case(what, cmd, port, n):
    with SynSniffer(port) as sn:
        first = sn.settled_count()
        rc, out, _ = run(cmd, base_env())
        line = the_line(out, what + " (plain)", "connected=0 of=%d " % n)
        check(rc == 1 and line.endswith("errno=ECONNREFUSED:%d" % n), "%s (plain): %r"
              % (what, line))
        check(sn.settled_count() - first == n, "%s (plain): not one SYN each" % what)
        # the server starts once the attempts span three waits of the schedule
        span = least_wait(3)
        rc, out, err, times, accepts, t_up = late_server(
            under(cmd), port, sn, Server(port), lambda t: t and t[-1] - t[0] >= span, what,
            want=n)
    line = the_line(out, what, "connected=%d of=%d " % (n, n))
    check(rc == 0, "%s: rc=%d %r" % (what, rc, err[-300:]))
    check(len(accepts) == n, "%s: the server saw %d connections, not %d"
          % (what, len(accepts), n))
    check(min(accepts) >= t_up, "%s: connected before the server was up" % what)
    return accepts


def test_goroutines_and_threads_late_server():
    need_engine()
    g, sc = go_bin("goroutines"), static_bin("sclient")
    p1, p2 = free_port(), free_port()
    parallel(lambda: _many_case("50 goroutines", [g, "50", "127.0.0.1:%d" % p1], p1, 50),
             lambda: _many_case("8 C threads", [sc, "-t", "8", "127.0.0.1", str(p2)], p2, 8))


def test_waiters_released_when_the_probe_connects():
    """When one socket's attempt connects, the other sockets waiting for the
    same destination go at once, as under the preload engine (the same
    dynamic threaded client, conntest -t 8, under both engines): not at
    their next periodic look, RECHECK (500 ms) later."""
    need_engine()
    conntest = need(prog("conntest"), "make build/progs/conntest")
    lag = {}
    for engine in ("preload", "seccomp"):
        port = free_port()
        cmd = under([conntest, "-t", "8", "127.0.0.1", str(port)], engine=engine)
        with SynSniffer(port) as sn:
            rc, out, err, times, accepts, _ = late_server(cmd, port, sn, Server(port), 4, engine,
                                                          want=8)
        check(rc == 0 and len(accepts) == 8, "conntest -t 8 under %s: rc=%d, %d accepts %r"
              % (engine, rc, len(accepts), err[-300:]))
        # the median lag of the other 7 behind the first connect
        lag[engine] = sorted(a - min(accepts) for a in accepts)[4]
    check(lag["preload"] < INITIAL / 2, "the preload engine's control: the other connects "
          "came %.3fs after the first" % lag["preload"])
    check(lag["seccomp"] < lag["preload"] + INITIAL / 2,
                     "the other sockets connected %.3fs after the first under seccomp "
                     "(%.3fs under preload; the median): a probe's success does not wake the "
                     "supervisor's own waiting ops (ops.c record_success publishes to the table, "
                     "but WAITING ops look again only at their due, up to RECHECK = 500 ms "
                     "later)" % (lag["seccomp"], lag["preload"]))


def test_one_schedule_per_destination_across_engines():
    """Issue 23: the supervisor uses the same shared table as the library,
    so that a Go process and a C process of one user share one schedule
    per destination. Two clients at once to one dead destination, four
    attempts each, no jitter: two dynamic ones under the preload engine
    (the control) share a schedule (fewer than 4 + 4 SYNs); a Go one under
    the seccomp engine with a dynamic one under preload, or two Go ones
    under two supervisors, must make no more SYNs than the control."""
    need_engine()
    dial = go_bin("dial")
    conntest = need(prog("conntest"), "make build/progs/conntest")
    port = free_port()
    cmds = {"preload": [conntest, "127.0.0.1", str(port)],
            "seccomp": [dial, "127.0.0.1:%d" % port]}
    counts = {}
    with SynSniffer(port) as sn:
        for pair in (("preload", "preload"), ("seccomp", "preload"), ("seccomp", "seccomp")):
            env = eng_env()  # one table for the pair
            first = sn.settled_count()
            ps = [spawn(under(cmds[e], engine=e, opts=sched(jitter=0, attempts=4)), env)
                  for e in pair]
            for p in ps:
                rc, out, err = finish(p, 20)
                check(rc == 1 and "ECONNREFUSED" in out, "%s: rc=%d %r" % (pair, rc, out))
            counts[pair] = sn.settled_count() - first
    control = counts[("preload", "preload")]
    check(control < 8, "the control: two preloaded clients made %d SYNs, two schedules" % control)
    check(max(counts.values()) <= control + 1,
                     "SYNs of two clients sharing a destination: %s (%d: one schedule); the "
                     "supervisor keeps a private table (ops.c private_table()), not the user's "
                     "shared one" % (", ".join("%s+%s: %d" % (k + (v,)) for k, v in counts.items()),
                                     control))


# --- 5. fork+exec grandchildren ---------------------------------------------

def test_grandchildren_retried():
    """Go -> Go (spawn dial) and Go -> sh -> static C (spawn sh -c cstatic):
    the grandchild's connect is retried too (the filter is inherited)."""
    need_engine()
    sp, dial, cst = go_bin("spawn"), go_bin("dial"), static_bin("cstatic")
    p1, p2 = free_port(), free_port()

    def case(what, cmd, port):
        with SynSniffer(port) as sn:
            plain_refused(cmd, sn, what)
            rc, out, err, times, accepts, _ = late_server(under(cmd), port, sn, Server(port), 3,
                                                          what)
        the_line(out, what, "connected ms=")
        check(rc == 0 and err.count("spawn: pid=") == 1, "%s: rc=%d %r" % (what, rc, err[-300:]))
        check(len(times) == 4 and len(accepts) == 1, "%s: %d SYNs, %d accepts"
              % (what, len(times), len(accepts)))
        check_schedule(times, what)
        # the engine's lines speak for the process that connects, as the
        # library's would: its pid and name, not the supervisor's
        pid = re.search(r"spawn: pid=(\d+)", err).group(1)
        said = [l for l in err.splitlines() if l.startswith("backoffshim[")]
        name = os.path.basename(cmd[-1].split()[1] if "sh" in cmd else cmd[1])
        check(said and all(l.startswith("backoffshim[%s] %s: " % (pid, name)) for l in said),
              "%s: lines should name pid %s (%s): %r" % (what, pid, name, said))
    parallel(lambda: case("spawn dial", [sp, dial, "127.0.0.1:%d" % p1], p1),
             lambda: case("spawn sh cstatic", [sp, "sh", "-c", "exec %s 127.0.0.1 %d"
                                               % (cst, p2)], p2))



REAPER = r"""
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
rc = subprocess.run(sys.argv[1:]).returncode
me = str(os.getpid())

def parent_of(pid):
    try:  # (a process of the machine's may end while the list is read)
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[1]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None

left = [p for p in os.listdir("/proc") if p.isdigit() and parent_of(p) == me]
print("rc=%d children=%d" % (rc, len(left)))
"""


def test_the_engine_leaves_no_child_to_a_reaper():
    """A parent that reaps only the children it knows (a script as a
    container's PID 1, a subreaper) is left with no process of the engine's:
    the supervisor reaps its guard before it ends (each run left a zombie
    backoffshim-grd before)."""
    need_engine()
    cmd = ["sh", "-c", "exit 3"]
    rc, plain, err = run([sys.executable, "-c", REAPER] + cmd, base_env())
    check(plain.strip() == "rc=3 children=0", "without the engine: %r %r" % (plain, err))
    rc, got, err = run([sys.executable, "-c", REAPER] + under(cmd), eng_env())
    check(got == plain, "under the engine %r, without %r" % (got, plain))


# --- 6. exit status and signals ----------------------------------------------

def test_a_closed_stdin_stdout_or_stderr_is_given_closed():
    """A program started with 0, 1 or 2 closed: without the engine it runs
    and exits at once. The supervisor's epoll set took the number, its
    /dev/null for the program's stdio was put over it, and its loop spun at
    full CPU for good, deaf to SIGTERM. The program sees which of 0-2 are
    open in its exit status; it must be the same under the engine."""
    need_engine()
    # exit 8 + a bit for each of 0, 1, 2 the program finds open
    sees = ("x=8; for f in 0 1 2; do [ -e /proc/$$/fd/$f ] && x=$((x + (1 << f))); done; "
            "exit $x")
    for redirect in ("<&-", ">&-", "2>&-", "<&- >&- 2>&-"):
        cmd = ["sh", "-c", sees]
        plain = ["sh", "-c", 'exec "$@" %s' % redirect, "sh"] + cmd
        rc, _, _ = run(plain, base_env())
        check(8 <= rc < 16, "plain %s: rc=%d" % (redirect, rc))
        rc2, _, err = run(["sh", "-c", 'exec "$@" %s' % redirect, "sh"] + under(cmd),
                          eng_env(), timeout=15)
        check(rc2 == rc, "%s: rc=%d under the engine, %d without; %r"
              % (redirect, rc2, rc, err[-300:]))


def test_a_program_that_signals_its_own_group_spares_its_parent():
    """A program that ignores SIGTERM and sends it to its own process group
    (`kill 0`, a cleanup trap's), run in a session of its own by a shell
    that waits for it. Without the engine the signal stays in the group.
    The supervisor, in the same group, took it for one sent to the parent
    and passed it on: the shell died."""
    need_engine()
    prog_ = ["sh", "-c", 'trap "" TERM; kill -TERM 0; exit 5']
    parent = ["sh", "-c", 'setsid "$@"; echo alive $?', "sh"]
    rc, plain, _ = run(parent + prog_, base_env())
    check(rc == 0 and plain == "alive 5\n", "plain: rc=%d %r" % (rc, plain))
    rc2, out, err = run(parent + under(prog_), eng_env())
    check((rc2, out) == (rc, plain), "under the engine: rc=%d %r, without: %r; %r"
          % (rc2, out, plain, err[-300:]))


def _wait_untraced(p, timeout=10):
    """The first wait status of p (stops included): ("stopped", sig) or
    ("exited", rc); bounded."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid, st = os.waitpid(p.pid, os.WUNTRACED | os.WNOHANG)
        if pid:
            if os.WIFSTOPPED(st):
                return ("stopped", os.WSTOPSIG(st))
            p.returncode = os.waitstatus_to_exitcode(st)
            return ("exited", p.returncode)
        time.sleep(0.01)
    p.kill()
    raise TestFailure("no wait status in %ds" % timeout)


def _state_becomes(pid, state, timeout):
    """Whether /proc says pid is in `state` within timeout (polled)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == state:
                    return True
        except OSError:
            return False
        time.sleep(0.01)
    return False


def _job(cmd, env):
    return subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, process_group=0)


def test_a_program_that_stops_itself_stops_its_job():
    """A program that suspends itself (a TUI's Ctrl-Z handler raises
    SIGTSTP): without the engine its parent (a shell) sees the job stop and
    continues it. The supervisor waited for exits alone: the shell waited
    for good."""
    need_engine()
    cmd = ["sh", "-c", "kill -TSTP $$; echo after"]
    seen = {}
    for mode, c, env in (("plain", cmd, base_env()), ("seccomp", under(cmd), eng_env())):
        p = _job(c, env)
        try:
            first = _wait_untraced(p)
            if first[0] == "stopped":
                os.kill(p.pid, signal.SIGCONT)
                p.stdin.close()
                out = p.stdout.read()
                end = _wait_untraced(p)
            else:
                out, end = p.stdout.read(), first
        finally:
            if p.returncode is None:
                p.kill()
        seen[mode] = (first, end, out)
    check(seen["plain"] == (("stopped", signal.SIGTSTP), ("exited", 0), "after\n"),
          "plain: %r" % (seen["plain"],))
    check(seen["seccomp"] == seen["plain"], "under the engine %r, without %r"
          % (seen["seccomp"], seen["plain"]))


def _reader_job_as_without(act, want=None, cmd=("sh", "-c", "echo ready; read x; echo done")):
    """cmd (which prints "ready", reads a line, prints "done") as a job of
    its own, without and then under the engine: act(p, program's pid)
    once it is ready (what it returns must be `want`), then a line. The two
    runs must end alike: exited 0, "done" printed."""
    need_engine()
    cmd, seen = list(cmd), {}
    for mode, c, env in (("plain", cmd, base_env()), ("seccomp", under(cmd), eng_env())):
        p = _job(c, env)
        try:
            ready = p.stdout.readline()
            got = act(p, p.pid if mode == "plain" else the_child(p.pid, "the program"))
            p.stdin.write("go\n")
            p.stdin.close()
            out = p.stdout.read()
            end = _wait_untraced(p)
        finally:
            if p.returncode is None:
                os.killpg(p.pid, signal.SIGCONT)
                p.kill()
        seen[mode] = (ready, got, end, out)
    want = ("ready\n", want, ("exited", 0), "done\n")
    check(seen["plain"] == want, "plain: %r" % (seen["plain"],))
    check(seen["seccomp"] == seen["plain"], "under the engine %r, without %r"
          % (seen["seccomp"], seen["plain"]))


def test_a_program_stopped_and_continued_by_pid_leaves_its_job_running():
    """`kill -STOP` then `kill -CONT` on the program's pid (cpulimit, a
    debugger): the shell's job never stops. A supervisor that copied the
    stop stayed stopped, since the continue went to the program alone, and
    the program's next connect would have hung on it."""
    def stop_and_continue(p, prog_pid):
        os.kill(prog_pid, signal.SIGSTOP)
        # the supervisor's reaction to the stop (none is wanted) has half a
        # second before the continue
        check(_state_becomes(prog_pid, "T", 5), "the program did not stop")
        _state_becomes(p.pid, "T", 0.5)
        os.kill(prog_pid, signal.SIGCONT)
    _reader_job_as_without(stop_and_continue)


def test_a_job_stopped_then_continued_by_the_programs_pid_ends():
    """Ctrl-Z (SIGTSTP to the group), then SIGCONT to the program's pid
    alone (from another terminal): without the engine the job stops, runs
    on and exits. The supervisor stopped with the program and nothing
    continued it: the job never ended, and the program's connects would
    have hung on it. The guard now continues a stopped supervisor whose
    program runs again."""
    def stop_then_continue_the_program(p, prog_pid):
        os.killpg(p.pid, signal.SIGTSTP)
        stop = _wait_untraced(p)
        os.kill(prog_pid, signal.SIGCONT)
        return stop
    _reader_job_as_without(stop_then_continue_the_program, ("stopped", signal.SIGTSTP))


def test_a_program_that_ignores_a_stop_is_not_stopped_for_it():
    """A program that ignores SIGTSTP gets one from its group (Ctrl-Z, a
    `kill -TSTP -PGID`): it runs on. The supervisor took the stop itself, so
    the shell said the job was stopped while the program ran on."""
    _reader_job_as_without(lambda p, _: os.killpg(p.pid, signal.SIGTSTP),
                           cmd=("sh", "-c", 'trap "" TSTP; echo ready; read x; echo done'))


def test_exit_status_passes_through():
    """The program's wait status under the engine is its own: its exit
    code; for a signal N, the supervisor dies of N too (so a shell reports
    128+N, as without the engine); 127/126 when it cannot be run (as the
    preload engine says)."""
    need_engine()
    sc, sp = static_bin("sclient"), go_bin("spawn")
    cases = [
        ("sh exit 7", ["sh", "-c", "exit 7"], 7),
        ("static C killed by SIGTERM", [sc, "-k", "15"], -15),
        ("static C killed by SIGSEGV", [sc, "-k", "11"], -11),
        # spawn (Go) is killed by its own child
        ("Go killed by SIGKILL", [sp, "sh", "-c", "kill -KILL $PPID"], -9),
    ]
    for what, cmd, want in cases:
        rc, _, err = run(cmd, base_env())
        check(rc == want, "%s (plain): rc=%d %r" % (what, rc, err))
        rc, _, err = run(under(cmd), eng_env())
        check(rc == want, "%s under the engine: rc=%d, not %d; %r" % (what, rc, want, err))
        shell = 128 - want if want < 0 else want
        for mode, c in (("plain", cmd), ("seccomp", under(cmd))):
            rc, out, err = run(["sh", "-c", '"$@"; echo "status=$?"', "sh"] + c, eng_env())
            check(out.strip().endswith("status=%d" % shell), "%s (%s) in a shell: %r %r"
                  % (what, mode, out, err[-200:]))
    for what, cmd, want in (("not found", ["/nonexistent/prog"], 127),
                            ("not executable", ["/etc/passwd"], 126)):
        rcs = [run(under(cmd, engine=e), eng_env())[0] for e in ("preload", "seccomp")]
        check(rcs == [want, want], "%s: rc %r under preload and seccomp, not %d" % (what, rcs,
                                                                                    want))


def _wait_line(lr, prefix, what):
    ln = lr.wait_for(lambda s: s.startswith(prefix), 10)
    check(ln is not None, "%s: no line %r: %r" % (what, prefix, lr.lines))
    return ln


def test_forwarded_signals_once():
    """SIGUSR1 and SIGTERM sent to the supervisor reach the program once
    each (sclient -w counts them), as when sent to the program itself."""
    need_engine()
    sc = static_bin("sclient")
    for mode in ("plain", "seccomp"):
        cmd = [sc, "-w"] if mode == "plain" else under([sc, "-w"])
        p = spawn(cmd, eng_env())
        try:
            lr = LineReader(p)
            ready = _wait_line(lr, "ready pid=", mode)
            kid = int(ready.split("=")[1])
            check((kid == p.pid) == (mode == "plain"), "%s: the program is pid %d, run's %d"
                  % (mode, kid, p.pid))
            os.kill(p.pid, signal.SIGUSR1)
            _wait_line(lr, "usr1=1 ", mode)
            os.kill(p.pid, signal.SIGUSR1)
            _wait_line(lr, "usr1=2 ", mode)
            os.kill(p.pid, signal.SIGTERM)
            rc, lines, err = lr.finish(10)
        finally:
            kill_quietly(p)
        check(rc == 0 and lines[-1] == "term usr1=2 int=0 hup=0" and len(lines) == 4,
              "%s: rc=%d %r %r" % (mode, rc, lines, err[-300:]))


class Pty:
    """cmd in a session of its own whose controlling terminal is a new pty;
    its output (the pty, or a pipe with out_pipe) is read line by line."""

    def __init__(self, cmd, env, out_pipe=False):
        self.master, slave = os.openpty()

        def setup():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        self.rd = None
        out = slave
        if out_pipe:
            self.rd, out = os.pipe()
        self.p = subprocess.Popen(cmd, env=env, stdin=slave, stdout=out, stderr=out,
                                  preexec_fn=setup, close_fds=True)
        os.close(slave)
        if out_pipe:
            os.close(out)
        self.buf = b""

    def wait_for(self, text, timeout=10):
        fd = self.rd if self.rd is not None else self.master
        end = time.monotonic() + timeout
        while text.encode() not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            try:
                d = os.read(fd, 4096)
            except OSError:
                return False
            if not d:
                return False
            self.buf += d
        return True

    def close(self):
        kill_quietly(self.p)
        for fd in (self.master, self.rd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


def test_terminal_signal_not_delivered_twice():
    """Ctrl-C on a terminal reaches the whole foreground process group (the
    supervisor and the program) with si_code SI_KERNEL: the supervisor does
    not forward it, so the program counts one SIGINT, as without the engine.
    A signal a process sends to the group (kill(-pgid), si_code SI_USER)
    cannot be told from one sent to the supervisor alone: it is forwarded
    too, and the program sees it once or twice (twice unless the two
    coalesce while pending)."""
    need_engine()
    sc = static_bin("sclient")
    for mode in ("plain", "seccomp"):
        t = Pty([sc, "-w"] if mode == "plain" else under([sc, "-w"]), eng_env())
        try:
            check(t.wait_for("ready pid="), "%s: not ready: %r" % (mode, t.buf))
            os.write(t.master, b"\x03")
            check(t.wait_for("usr1=0 int=1 hup=0"), "%s: ^C not counted: %r" % (mode, t.buf))
            os.killpg(t.p.pid, signal.SIGUSR1)
            check(t.wait_for("usr1=1 "), "%s: kill(-pgid) not counted: %r" % (mode, t.buf))
            os.kill(t.p.pid, signal.SIGTERM)
            check(t.wait_for("term "), "%s: no term line: %r" % (mode, t.buf))
            rc = t.p.wait(10)
        finally:
            t.close()
        m = re.search(rb"term usr1=(\d) int=(\d) hup=0", t.buf)
        check(rc == 0 and m, "%s: rc=%s %r" % (mode, rc, t.buf))
        check(m.group(2) == b"1", "%s: ^C reached the program %s times" % (mode, m.group(2)))
        check(m.group(1) in ((b"1",) if mode == "plain" else (b"1", b"2")),
              "%s: kill(-pgid, SIGUSR1) reached the program %s times" % (mode, m.group(1)))


def test_terminal_hangup_reaches_the_program():
    """A terminal that goes away (its master closed) sends SIGHUP to the
    session leader alone, with si_code SI_KERNEL. Run in a terminal of its
    own, the program learns of the hangup; under the engine the supervisor
    is the session leader and must pass it on."""
    need_engine()
    sc = static_bin("sclient")
    got = {}
    for mode in ("plain", "seccomp"):
        t = Pty([sc, "-w"] if mode == "plain" else under([sc, "-w"]), eng_env(), out_pipe=True)
        try:
            check(t.wait_for("ready pid="), "%s: not ready: %r" % (mode, t.buf))
            os.close(t.master)
            t.master = None
            got[mode] = t.wait_for("hup=1", 2)
            os.kill(t.p.pid, signal.SIGTERM)
            check(t.wait_for("term "), "%s: no term line: %r" % (mode, t.buf))
            t.p.wait(10)
        finally:
            t.close()
    check(got["plain"], "plain: the hangup did not reach the program (the test's setup)")
    check(got["seccomp"], "a terminal hangup never reaches the program: the kernel "
                     "sends SIGHUP (SI_KERNEL) to the session leader only, and spawn.c forward() "
                     "drops every SI_KERNEL signal as if the whole group had it")


# --- 7. the supervisor killed --------------------------------------------------

def test_supervisor_killed_program_gone():
    """SIGKILL to the supervisor while the program waits in a connect
    (static C: held; Go: deferred, its getsockopt answered, so that only
    the socket's next edge would wake it; sh -> static C: a grandchild,
    held) during a long first wait (5 s): the program does not outlive it
    (PR_SET_PDEATHSIG for the child; a grandchild's held connect fails).
    Plain: refused at once."""
    need_engine()
    cst, dial, sp = static_bin("cstatic"), go_bin("dial"), go_bin("spawn")
    for what, mk, depth in (
            ("static C", lambda port: [cst, "127.0.0.1", str(port)], 1),
            ("Go", lambda port: [dial, "127.0.0.1:%d" % port], 1),
            ("sh -> static C", lambda port: ["sh", "-c", "%s 127.0.0.1 %d; exit $?" % (cst, port)],
             2)):
        port = free_port()
        with SynSniffer(port) as sn:
            plain_refused(mk(port), sn, what)
            first = sn.settled_count()
            p = spawn(under(mk(port), opts=sched(initial=5.0, maxb=5.0)), eng_env())
            fds = []
            try:
                check(sn.wait_for(first + 1, 10) >= first + 1, "%s: no SYN" % what)
                pid = p.pid
                for _ in range(depth):
                    pid = the_child(pid, what)
                fds.append(os.pidfd_open(pid))
                if what == "Go":
                    quiet_in_socket(pid, what)
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
                ok = gone_within(fds[0], 3)
                if not ok:
                    signal.pidfd_send_signal(fds[0], signal.SIGKILL)
                check(ok, "%s: the program (pid %d) still runs 3 s after its supervisor "
                      "was killed" % (what, pid))
            finally:
                for fd in fds:
                    os.close(fd)
                kill_quietly(p)


def test_supervisor_killed_go_grandchild_not_hung():
    """The same for a Go grandchild (spawn -> dial, a deferred connect with
    no deadline, its getsockopt answered, in a 5 s first wait): it must not
    outlive the supervisor for long (PR_SET_PDEATHSIG kills spawn only)."""
    need_engine()
    sp, dial = go_bin("spawn"), go_bin("dial")
    port = free_port()
    cmd = [sp, dial, "127.0.0.1:%d" % port]
    with SynSniffer(port) as sn:
        plain_refused(cmd, sn, "spawn dial")
        first = sn.settled_count()
        p = spawn(under(cmd, opts=sched(initial=5.0, maxb=5.0)), eng_env())
        fd = None
        try:
            check(sn.wait_for(first + 1, 10) >= first + 1, "spawn dial: no SYN")
            gc = the_child(the_child(p.pid, "spawn dial"), "spawn dial")
            fd = os.pidfd_open(gc)
            quiet_in_socket(gc, "spawn dial")
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
            ok = gone_within(fd, 3)
            if not ok:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        finally:
            if fd is not None:
                os.close(fd)
            kill_quietly(p)
    check(ok, "a Go grandchild (spawn -> dial) still waits in epoll_wait 3 s after the "
          "supervisor was killed between two attempts: the guard did not wake its socket")


# --- 8. SIGALRM ------------------------------------------------------------------

def test_sigalrm_interrupts_held_connect():
    """A static C program's alarm (1 s) during a held blocking connect to a
    dead port: without SA_RESTART the connect fails with EINTR at 1 s (the
    program's timeout wins); with SA_RESTART it is restarted, joins the
    running operation (no extra attempt) and goes on to the budget's end.
    Plain: refused at once, before the alarm."""
    need_engine()
    sc = static_bin("sclient")
    port, alarm_ms, budget = free_port(), 1000, 2.5
    opts = sched(elapsed="%gs" % budget)
    with SynSniffer(port) as sn:
        plain_ms = plain_refused([sc, "-a", str(alarm_ms), "127.0.0.1", str(port)], sn, "alarm")
        first = sn.settled_count()
        rc, out, err = run(under([sc, "-a", str(alarm_ms), "127.0.0.1", str(port)], opts=opts),
                           eng_env())
        no_restart = syn_times(sn, first)
        line = the_line(out, "alarm without SA_RESTART", "error errno=EINTR ")
        check(rc == 1 and " alarms=1 " in line + " ", "alarm without SA_RESTART: %r" % line)
        ms = ms_of(line)
        check(alarm_ms <= ms <= alarm_ms + plain_ms + INITIAL * 1000 / 2,
              "alarm without SA_RESTART: EINTR after %d ms, the alarm at %d" % (ms, alarm_ms))
        check(len(no_restart) >= 3, "alarm without SA_RESTART: %d SYNs" % len(no_restart))
        check_schedule(no_restart, "alarm without SA_RESTART")
        first = sn.settled_count()
        rc, out, err = run(under([sc, "-a", str(alarm_ms), "-r", "127.0.0.1", str(port)],
                                 opts=opts), eng_env())
        restart = syn_times(sn, first)
    line = the_line(out, "alarm with SA_RESTART", "error errno=ECONNREFUSED ")
    check(rc == 1 and line.endswith(" alarms=1 usr1=0"), "alarm with SA_RESTART: %r" % line)
    check(ms_of(line) > alarm_ms, "alarm with SA_RESTART: ended at %d ms" % ms_of(line))
    check(restart and restart[-1] - restart[0] > alarm_ms / 1000,
          "alarm with SA_RESTART: no attempt after the alarm: %r" % restart)
    check_schedule(restart, "alarm with SA_RESTART")
    check(ms_of(line) <= budget * 1000 + plain_ms + INITIAL * 1000 / 2,
          "alarm with SA_RESTART: ended at %d ms, past the %gs budget" % (ms_of(line), budget))


# --- 9. never stack ------------------------------------------------------------

def _curl(env, wrap, port, sn, what):
    first = sn.settled_count()
    t0 = time.monotonic()
    rc, out, err = run(wrap(["curl", "-sS", "--connect-timeout", "2",
                             "http://127.0.0.1:%d/" % port]), env, timeout=20)
    took = time.monotonic() - t0
    # 7: refused; 28: its own timeout fired first
    check(rc in (7, 28) and "Failed to connect" in err, "%s: rc=%d %r" % (what, rc, err[-300:]))
    return took, sn.settled_count() - first


def test_never_stack():
    """One engine per connect. curl --connect-timeout 2 to a dead port with
    the library in LD_PRELOAD as well: under the seccomp engine the
    supervisor leaves the process to the library, which announced itself
    (as many SYNs as under the preload engine: one schedule, not the
    engine's pace nor both), under the preload engine it is loaded once;
    none ends past curl's 2 s. A dynamic blocking client under the seccomp
    engine, with the library preloaded or not, makes one schedule's
    attempts (no jitter, three attempts a connect: the counts are exact;
    two engines would make three times three)."""
    need_engine()
    if not shutil.which("curl"):
        raise TestSkip("no curl")
    need(SO, "make")
    conntest = need(prog("conntest"), "make build/progs/conntest")
    opts = sched(jitter=0, elapsed="20s")
    lib = dict(LD_PRELOAD=SO)
    port = free_port()
    res = {}
    with SynSniffer(port) as sn:
        res["plain"] = _curl(base_env(), lambda c: c, port, sn, "curl plain")
        for name, env, engine in (("seccomp", eng_env(), "seccomp"),
                                  ("seccomp+lib", eng_env(**lib), "seccomp"),
                                  ("preload+lib", eng_env(**lib), "preload")):
            res[name] = _curl(env, lambda c, e=engine: under(c, engine=e, opts=opts), port, sn,
                              "curl " + name)
        check(res["plain"][1] == 1, "curl plain: %d SYNs" % res["plain"][1])
        for name, (took, syns) in res.items():
            check(took <= 2.0 + res["plain"][0] + INITIAL / 2,
                  "curl --connect-timeout 2 under %s took %.2fs (plain %.2fs)"
                  % (name, took, res["plain"][0]))
        check(res["preload+lib"][1] > 1, "curl under preload: %d SYNs, not retried"
              % res["preload+lib"][1])
        check(res["seccomp+lib"][1] == res["preload+lib"][1],
              "curl with the library preloaded: %d SYNs under seccomp, %d under preload "
              "(the library alone); the engine alone: %d"
              % (res["seccomp+lib"][1], res["preload+lib"][1], res["seccomp"][1]))
        # a blocking dynamic client: one schedule, library or not
        counts = {}
        for name, env, engine in (("seccomp", eng_env(), "seccomp"),
                                  ("seccomp+lib", eng_env(**lib), "seccomp"),
                                  ("preload", eng_env(), "preload")):
            first = sn.settled_count()
            rc, out, err = run(under([conntest, "127.0.0.1", str(port)], engine=engine,
                                     opts=sched(jitter=0, attempts=3)), env)
            check(rc == 1 and out.startswith("fail errno=ECONNREFUSED "),
                  "conntest under %s: rc=%d %r" % (name, rc, out))
            counts[name] = (sn.settled_count() - first, ms_of(out))
    check([c[0] for c in counts.values()] == [3, 3, 3],
          "conntest, --max-attempts 3: %s SYNs under seccomp, seccomp with the library "
          "preloaded, preload" % [c[0] for c in counts.values()])
    check(abs(counts["seccomp+lib"][1] - counts["seccomp"][1]) < INITIAL * 1000 / 2,
          "conntest under seccomp: %d ms with the library, %d without"
          % (counts["seccomp+lib"][1], counts["seccomp"][1]))


# --- 10. the engine's choice ---------------------------------------------------

def _choice(cmd, port, sn, engine="auto", runner=(), env=None):
    """(stderr, SYNs) of cmd under run --engine ENGINE --log debug with a
    short schedule to a dead port."""
    first = sn.settled_count()
    rc, out, err = run(list(runner) + under(cmd, engine=engine, log="debug",
                                            opts=sched(jitter=0, elapsed="0.6s")),
                       env or eng_env())
    check(rc == 1, "%s: rc=%d %r %r" % (cmd, rc, out, err[-300:]))
    return err, sn.settled_count() - first


def test_engine_choice():
    """auto picks seccomp for a Go and a static program (run says "engine
    seccomp for PROG (why)" at debug; the connects are retried) and preload
    for a dynamic one (it says so; the library loads and retries);
    `--engine bogus` is a usage error (125, nothing run)."""
    need_engine()
    dial, sc = go_bin("dial"), static_bin("sclient")
    conntest = need(prog("conntest"), "make build/progs/conntest")
    port = free_port()
    with SynSniffer(port) as sn:
        for what, cmd in (("Go", [dial, "127.0.0.1:%d" % port]),
                          ("static", [sc, "127.0.0.1", str(port)])):
            err, syns = _choice(cmd, port, sn)
            check("backoffshim run: engine seccomp for %s (" % cmd[0] in err
                  and "warning" not in err, "auto for %s: %r" % (what, err[-300:]))
            check(syns == 3, "auto for %s: %d SYNs in 0.6 s (0, 0.2, 0.52 s expected)"
                  % (what, syns))
        err, syns = _choice([conntest, "127.0.0.1", str(port)], port, sn)
        check("backoffshim run: engine preload for %s (" % conntest in err
              and "engine seccomp" not in err and "loaded libbackoffshim" in err and syns == 3,
              "auto for a dynamic program: %d SYNs %r" % (syns, err[-300:]))
    rc, out, err = run([CLI, "run", "--engine", "bogus", "--", "sh", "-c", "echo ran"],
                       eng_env())
    check(rc == 125 and "ran" not in out and "--engine 'bogus'" in err,
          "--engine bogus: rc=%d %r %r" % (rc, out, err))


def _secure_copy(src, d, name):
    dst = os.path.join(d, name)
    shutil.copy(src, dst)
    os.chmod(dst, 0o755)
    return dst


def test_engine_choice_never_seccomp_for_setid_or_file_caps():
    """A setuid static program (owned by another uid) is never run under the
    seccomp engine, by auto or when asked (no_new_privs would take its
    privileges): one warning line, refused at once. The same copy without
    the bit is (the control). A static program with file capabilities, run
    by a user other than root, likewise."""
    need_engine()
    sc = static_bin("sclient")
    d = tempfile.mkdtemp(prefix="bs-setid-")
    os.chmod(d, 0o755)
    ran = 0
    try:
        if os.statvfs(d).f_flag & os.ST_NOSUID:
            raise TestSkip("%s is mounted nosuid" % d)
        port = free_port()
        with SynSniffer(port) as sn:
            plain = _secure_copy(sc, d, "plain")
            err, syns = _choice([plain, "127.0.0.1", str(port)], port, sn)
            check("engine seccomp" in err and syns == 3, "control: %d SYNs %r" % (syns, err))
            suid = _secure_copy(sc, d, "suid")
            try:  # (a set-uid bit changes an id only for a runner of another uid)
                os.chown(suid, 65534, 65534)
                os.chmod(suid, 0o4755)
                setuid_ok = os.geteuid() != 65534
            except OSError:
                setuid_ok = False
            if setuid_ok:
                ran += 1
                for engine, says in (("auto", "it is setuid/setgid"),
                                     ("seccomp", "no_new_privs would take its privileges")):
                    err, syns = _choice([suid, "127.0.0.1", str(port)], port, sn, engine)
                    warn = [ln for ln in err.splitlines() if "warning" in ln]
                    check("engine seccomp" not in err and syns == 1 and len(warn) == 1
                          and says in warn[0], "setuid under %s: %d SYNs %r" % (engine, syns,
                                                                                err[-400:]))
            # file capabilities count for a user other than root: as root, run
            # as nobody (setpriv)
            setcap, setpriv = shutil.which("setcap"), shutil.which("setpriv")
            runner = None if os.geteuid() == 0 and not setpriv else (
                [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
                if os.geteuid() == 0 else [])
            fcap = _secure_copy(sc, d, "fcap")
            r = subprocess.run([setcap, "cap_net_raw+ep", fcap], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               timeout=20) if setcap and runner is not None else None
            # (the runner must be able to read the build: a CI clone may be private)
            readable = runner is not None and subprocess.run(
                runner + ["test", "-r", os.path.join(BUILD, "libbackoffshim.so")],
                timeout=20).returncode == 0
            if r and r.returncode == 0 and readable:
                ran += 1
                env = eng_env()
                env.pop("BACKOFFSHIM_SHARED")
                err, syns = _choice([plain, "127.0.0.1", str(port)], port, sn, runner=runner,
                                    env=env)
                check("engine seccomp" in err and syns == 3,
                      "control, not as root: %d SYNs %r" % (syns, err[-300:]))
                err, syns = _choice([fcap, "127.0.0.1", str(port)], port, sn, runner=runner,
                                    env=env)
                warn = [ln for ln in err.splitlines() if "warning" in ln]
                check("engine seccomp" not in err and syns == 1 and len(warn) == 1
                      and "file capabilities" in warn[0],
                      "file capabilities, not as root: %d SYNs %r" % (syns, err[-400:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if not ran:
        raise TestSkip("cannot make a setuid file owned by another uid nor a file-capability "
                       "one here (needs root, or setcap)")


# --- 11. nested supervisors ------------------------------------------------------

def test_nested_supervisors():
    """run --engine seccomp -- run --engine seccomp -- PROG: the inner one
    cannot install its filter (EBUSY: another supervisor's listener) and
    runs PROG with one warning line naming the reason (a Go program as it
    is; a dynamic one with the preload engine, whose library then passes
    through); PROG is retried by the outer alone (one schedule: as many
    SYNs as under one supervisor, no jitter) and still connects to a live
    server."""
    need_engine()
    dial = go_bin("dial")
    conntest = need(prog("conntest"), "make build/progs/conntest")
    port = free_port()
    # three attempts a connect: two engines, one inside the other, would make
    # three times three
    opts = sched(jitter=0, attempts=3)
    with SynSniffer(port) as sn:
        for what, target, fails in (("Go", [dial, "127.0.0.1:%d" % port], "error errno="),
                                    ("dynamic", [conntest, "127.0.0.1", str(port)], "fail errno=")):
            plain_refused(target, sn, what, fails + "ECONNREFUSED ")
            inner = [CLI, "run", "--engine", "seccomp", "--"] + target
            counts = {}
            for name, cmd in (("one", under(target, opts=opts)),
                              ("nested", under(inner, opts=opts))):
                first = sn.settled_count()
                rc, out, err = run(cmd, eng_env())
                check(rc == 1 and out.startswith(fails + "ECONNREFUSED "),
                      "%s %s: rc=%d %r %r" % (what, name, rc, out, err[-300:]))
                counts[name] = (sn.settled_count() - first, err)
            warn = [ln for ln in counts["nested"][1].splitlines() if "warning" in ln]
            check(len(warn) == 1 and "another seccomp supervisor" in warn[0],
                  "%s nested: warnings %r" % (what, warn))
            check(not [ln for ln in counts["one"][1].splitlines() if "warning" in ln],
                  "%s, one supervisor: %r" % (what, counts["one"][1]))
            check(counts["one"][0] == 3 and counts["nested"][0] == counts["one"][0],
                  "%s nested: %d SYNs, under one supervisor: %d (3 expected: --max-attempts 3)"
                  % (what, counts["nested"][0], counts["one"][0]))
    with Server(port).start() as srv:
        rc, out, err = run(under([CLI, "run", "--engine", "seccomp", "--", dial,
                                  "127.0.0.1:%d" % port]), eng_env())
    check(rc == 0 and out.startswith("connected ms=") and len(srv.accepts) == 1,
          "nested, live server: rc=%d %r %r" % (rc, out, err[-300:]))


# --- 12. do no harm ------------------------------------------------------------

UDP_PROBE = r"""
import errno, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic()
s.connect(("127.0.0.1", int(sys.argv[1])))
s.send(b"x")
s.settimeout(2)
try:
    s.recv(16)
    r = "data"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e))
try:
    s.send(b"y")
    r2 = "sent"
except OSError as e:
    r2 = errno.errorcode.get(e.errno, str(e))
print("udp recv=%s send2=%s ms=%d" % (r, r2, (time.monotonic() - t0) * 1000))
"""

UNIX_PROBE = r"""
import socket, sys, time
t0 = time.monotonic()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(b"\0" + sys.argv[1].encode())
print("unix got=%s ms=%d" % (s.recv(64).decode().strip(), (time.monotonic() - t0) * 1000))
"""


def _strip(line):
    return re.sub(r" (ms|local)=\S+", "", line)


def test_do_no_harm():
    """Under the engine, with a first wait of 1 s (a wait it wrongly adds
    costs at least that): a UDP connect + send to a closed port gets
    ECONNREFUSED as without (the ICMP error, at once); an AF_UNIX connect
    whose address length is that of IPv4 or IPv6 (16, 28: the filter sends
    it to the supervisor) passes untouched; a healthy TCP connect (static C,
    Go net.Dial over IPv4 and IPv6, Go net/http) prints the same as without,
    no later."""
    need_engine()
    cst, dial, httpget = static_bin("cstatic"), go_bin("dial"), go_bin("httpget")
    slow = sched(initial=1.0, maxb=1.0)
    py = sys.executable
    port = free_port()
    cases = [("udp", [py, "-c", UDP_PROBE, str(port)], None)]
    want = {"udp": "udp recv=ECONNREFUSED send2=sent ", "unix": "unix got=hello unix ",
            "static C": "connected ms=", "Go dial": "connected ms=", "Go http": "status=200 "}
    # abstract names of 13 and 25 bytes: with the leading NUL and the family,
    # address lengths 16 and 28
    names = ["bs" + "u" * 11, "bs" + "v" * 23]
    for name in names:
        cases.append(("unix, length %d" % (len(name) + 3), [py, "-c", UNIX_PROBE, name], None))
    tcp = free_port()
    cases += [("static C", [cst, "-r", "127.0.0.1", str(tcp)], "srv4"),
              ("Go dial", [dial, "127.0.0.1:%d" % tcp], "srv4"),
              ("Go dial ::1", [dial, "[::1]:%d" % tcp], "srv6"),
              ("Go http", [httpget, "http://127.0.0.1:%d/" % tcp], "http")]
    lsts = []
    for name in names:
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(b"\0" + name.encode())
        ls.listen(8)
        lsts.append(ls)

    def unix_server(ls):
        for _ in range(2):
            try:
                c, _ = ls.accept()
            except OSError:
                return
            with c:
                c.sendall(b"hello unix\n")
    ths = [threading.Thread(target=unix_server, args=(ls,), daemon=True) for ls in lsts]
    for th in ths:
        th.start()
    servers = {"srv4": lambda: Server(tcp), "srv6": lambda: Server(tcp, host="::1"),
               "http": lambda: LateHttp(tcp)}
    try:
        for what, cmd, srv in cases:
            outs = []
            with SynSniffer(tcp) as sn:
                for mode in ("plain", "seccomp"):
                    s = servers[srv]().start() if srv else None
                    try:
                        before = sn.settled_count()
                        c = cmd if mode == "plain" else under(cmd, opts=slow)
                        rc, out, err = run(c, base_env() if mode == "plain" else eng_env())
                        syns = sn.settled_count() - before
                    finally:
                        if s:
                            s.close()
                    line = the_line(out, "%s (%s)" % (what, mode),
                                    next(v for k, v in want.items() if what.startswith(k)))
                    check(rc == 0, "%s (%s): rc=%d %r" % (what, mode, rc, err[-300:]))
                    check(syns == (1 if srv else 0), "%s (%s): %d SYNs" % (what, mode, syns))
                    check("backoffshim[" not in err, "%s (%s): %r" % (what, mode, err[-300:]))
                    outs.append((line, ms_of(line), len(s.accepts) if s else 0))
            check(_strip(outs[0][0]) == _strip(outs[1][0]),
                  "%s: %r without the engine, %r with it" % (what, outs[0][0], outs[1][0]))
            check(outs[0][2] == outs[1][2], "%s: accepts %d, %d" % (what, outs[0][2], outs[1][2]))
            check_not_delayed(what, outs[0][1] / 1000, outs[1][1] / 1000)
    finally:
        for ls in lsts:
            ls.close()
        for th in ths:
            th.join(2)


def test_the_engine_ends_with_the_programs_exit_status():
    """sh -c 'exit N' under the engine: the status sh gives without it. 2
    became 125 (taken for run's own usage error), and a status above 128
    was taken for a death by signal N - 128, which the supervisor then
    raised on itself: 130 said SIGINT, 147 left it stopped (SIGSTOP), so a
    parent that waits without WUNTRACED hung."""
    for n in (0, 2, 7, 125, 130, 137, 143, 147, 148, 255):
        cmd = ["sh", "-c", "exit %d" % n]
        rc, _, err = run([CLI, "run", "--engine", "seccomp", "--"] + cmd, base_env(), timeout=15)
        check(rc == n and "warning" not in err, "exit %d: %d under the engine; %s" % (n, rc, err[-300:]))

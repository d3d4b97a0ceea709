"""Pace mode (a process that listens) must not hide a destination that is up,
and a herd of defer-mode clients sharing one table sends about one SYN per
step of the schedule.

1. A proxy's connect-only health check (tests/progs/healthcheck.c, as
   HAProxy's "check" with rise 2): success is learned from EPOLLOUT alone.
   Once the backend returns, the shim may delay "up" by at most one
   initial_backoff and one check interval over the plain run.
2. A process that listens, whose connects to P failed, then listens on P
   itself: 128 non-blocking connects to P all connect, as without the shim.
3. 100 processes, each one non-blocking connect (defer), one shared table,
   the server down for ~9 s: about one SYN per step, no burst, and all
   connect within one step of the server's return.

Each case runs the same program without the shim in the same test.
"""
import errno
import sys
import time

from lib import (JITTER, LineReader, Server, SynSniffer, TestFailure, base_env, check,
                 finish, free_port, prog, run, shim_env, spawn)

# ---- 1. a connect-only health check ----------------------------------------

HC_INITIAL, HC_MAX = 0.2, 2.0   # the shim's schedule for these tests (s)
HC_CHECK_MS = 100               # the check's own interval: "inter 500ms" against
                                # the default initial_backoff of 1 s, scaled
HC_RISE = 2                     # HAProxy's default rise
HC_DOWN = 4.0                   # how long the backend is down
HC_SLACK = 0.15


def _health_check_delay(env, port):
    """Run healthcheck against a dead port for HC_DOWN s; start the backend
    right after a SYN seen past HC_DOWN (an attempt that failed: for the
    shim, one that published a step). Returns (seconds from the backend's
    listen() to the program's UP, the program's check lines, stderr)."""
    cmd = [prog("healthcheck"), str(port), str(HC_CHECK_MS), str(HC_RISE), "30000"]
    with SynSniffer(port) as sn:
        p = spawn(cmd, env)
        lines = LineReader(p)
        t0 = time.monotonic()
        try:
            # the program's first SYN, then the outage
            check(sn.wait_for(1, 5) >= 1, "the health check sent no SYN")
            n = len(sn.times)
            for _ in range(1000):
                if sn.wait_for(n + 1, HC_DOWN + 5) <= n:
                    break  # no SYN at all for that long: reported below
                n = len(sn.times)
                if sn.times[n - 1] - t0 >= HC_DOWN:
                    break
            check(sn.times[n - 1] - t0 >= HC_DOWN, "no SYN past %.1fs: %r" % (HC_DOWN, lines.lines))
            # that SYN's refusal is the program's "down" line (or its
            # connect() failed at once): then the backend comes up
            lines.wait_for(lambda l: l.startswith("check ") and
                           float(l.split("t=")[1]) >= sn.times[n - 1] - 0.05, 5)
        except TestFailure:
            p.kill()
            raise
        with Server(port).start():
            t_up = time.monotonic()
            up = lines.wait_for(lambda l: l.startswith("UP"), 25)
            rc, out, err = lines.finish(10)
    checks = [l for l in out if l.startswith("check")]
    if not up:
        raise TestFailure("never UP (rc=%d); checks after the backend started: %r; %s"
                          % (rc, [c for c in checks if float(c.split("t=")[1]) >= t_up],
                             err[-300:]))
    return float(up.split("t=")[1]) - t_up, checks, t_up, err


def test_a_connect_only_health_check_sees_the_backend_up_within_one_initial_backoff():
    port = free_port()
    plain, _, _, _ = _health_check_delay(base_env(), port)
    check(plain <= HC_RISE * HC_CHECK_MS / 1000 + HC_SLACK,
          "without the shim the backend was seen up %.3fs after it started" % plain)
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="%dms" % (HC_INITIAL * 1000),
                   BACKOFFSHIM_MAX_BACKOFF="%gs" % HC_MAX, BACKOFFSHIM_MAX_ELAPSED="60s",
                   BACKOFFSHIM_NONBLOCKING=None)  # auto: the program listens, so pace
    got, checks, t_up, err = _health_check_delay(env, free_port())
    bound = plain + HC_INITIAL + HC_CHECK_MS / 1000 + HC_SLACK
    after = ["%s@%+.2f" % (c.split()[2], float(c.split("t=")[1]) - t_up) for c in checks
             if float(c.split("t=")[1]) >= t_up]
    check(got <= bound,
          "with the shim the backend was seen up %.3fs after it started (without: %.3fs; "
          "bound %.3fs = plain + initial_backoff + check interval + slack); checks after it "
          "started: %s" % (got, plain, bound, " ".join(after)))


# ---- 2. a server's connects to a destination that is up --------------------

SELF_LISTEN = r"""
import errno, select, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
front = socket.socket()                 # a listening socket: this is a server
front.bind(('127.0.0.1', 0)); front.listen(8)

def attempt():
    s = socket.socket(); s.setblocking(False)
    r = s.connect_ex(('127.0.0.1', port))
    if r == errno.EINPROGRESS:
        select.select([], [s], [], 5)
        r = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return s, r

for i in range(3):                      # P is dead: refused
    s, r = attempt(); s.close()
    print('dead', errno.errorcode.get(r, r), flush=True)
lst = socket.socket()                   # now P is up, in this very process
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(('127.0.0.1', port)); lst.listen(1024)
socks, res = [], {}
for i in range(n):
    s, r = attempt(); socks.append(s)
    name = errno.errorcode.get(r, 'OK' if r == 0 else str(r))
    res[name] = res.get(name, 0) + 1
print('up', ' '.join('%s=%d' % kv for kv in sorted(res.items())), flush=True)
"""


def _self_listen(env, port, n):
    rc, out, err = run([sys.executable, "-c", SELF_LISTEN, str(port), str(n)], env)
    check(rc == 0, "rc=%d %r" % (rc, err[-400:]))
    lines = out.splitlines()
    dead = [l.split()[1] for l in lines if l.startswith("dead")]
    up = [l for l in lines if l.startswith("up")][0].split()[1:]
    return dead, dict((k, int(v)) for k, v in (x.split("=") for x in up)), err


def test_a_server_is_not_refused_by_the_shim_when_the_destination_is_up():
    n = 128
    dead, plain, _ = _self_listen(base_env(), free_port(), n)
    check(dead == ["ECONNREFUSED"] * 3 and plain == {"OK": n},
          "without the shim: dead %r, then %r" % (dead, plain))
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MAX_BACKOFF="10s",
                   BACKOFFSHIM_NONBLOCKING=None)  # auto: the program listens, so pace
    dead, got, err = _self_listen(env, free_port(), n)
    check(dead == ["ECONNREFUSED"] * 3, "with the shim, the dead port: %r" % dead)
    check(got == plain, "with the shim, %d connects to a listening port gave %r "
          "(without the shim: %r)" % (n, got, plain))


# ---- 3. a herd of defer-mode clients, one shared table ----------------------

HERD_N = 100
HERD_INITIAL, HERD_MULT, HERD_MAX = 0.2, 1.6, 2.0
HERD_DOWN = 9.0
HERD_SLACK = 0.3   # a parked socket rechecks its destination every 200 ms


def _steps_within(seconds):
    """Lower bound on the schedule's steps: waits at their shortest."""
    t, b, k = 0.0, HERD_INITIAL, 0
    for i in range(1000):
        w = HERD_INITIAL if i == 0 else (1 - JITTER) * b
        if t + w > seconds:
            break
        t += w
        k += 1
        b = min(b * HERD_MULT, HERD_MAX)
    return k


def _bursts(times, gap=0.08):
    """SYN times grouped into bursts (gaps under `gap`): [(start, count)]."""
    out = []
    for t in times:
        if out and t - out[-1][2] < gap:
            out[-1][1] += 1
            out[-1][2] = t
        else:
            out.append([t, 1, t])
    return [(s, c) for s, c, _ in out]


def _herd(env, port, down):
    """HERD_N herdnb processes at once against port; a server on it `down`
    s after they start (None: once they all ended). Returns (t0, t_server,
    SYN times, per-process (rc, line))."""
    res = []
    with SynSniffer(port) as sn:
        t0 = time.monotonic()
        ps = [spawn([prog("herdnb"), str(port), "40000"], env) for _ in range(HERD_N)]
        if down is None:
            for p in ps:
                rc, out, _ = finish(p, 30)
                res.append((rc, out.strip()))
        else:
            # the outage: the scenario's length; the SYNs are what is observed
            sn.wait_for(10 ** 6, max(0.0, t0 + down - time.monotonic()))
        with Server(port).start():
            t_srv = time.monotonic()
            for p in ps if down is not None else ():
                rc, out, _ = finish(p, max(1.0, t_srv + 30 - time.monotonic()))
                res.append((rc, out.strip()))
            sn.settled_count()
            syns = list(sn.times)
    return t0, t_srv, syns, res


def test_a_herd_of_deferred_clients_sends_one_syn_per_step():
    port = free_port()
    # without the shim: every client fails at once, one SYN each
    _, _, syns0, res0 = _herd(base_env(), port, None)
    check(all(rc == 1 and "failed %d" % errno.ECONNREFUSED in out for rc, out in res0) and
          len(syns0) == HERD_N,
          "without the shim: %d SYNs, %d of %d failed" % (
              len(syns0), sum(rc == 1 for rc, _ in res0), HERD_N))
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="%dms" % (HERD_INITIAL * 1000),
                   BACKOFFSHIM_MULTIPLIER=str(HERD_MULT),
                   BACKOFFSHIM_MAX_BACKOFF="%gs" % HERD_MAX,
                   BACKOFFSHIM_MAX_ELAPSED="60s", BACKOFFSHIM_LOG="off",
                   BACKOFFSHIM_NONBLOCKING=None)  # auto: a client, so defer
    t0, t_srv, syns, res = _herd(env, free_port(), HERD_DOWN)
    outage = [t - t0 for t in syns if t < t_srv]
    bursts = _bursts(outage)
    timeline = " ".join("%.2f:%d" % b for b in bursts)
    conn = [float(out.split("t=")[1]) - t_srv for rc, out in res
            if rc == 0 and out.startswith("connected")]
    steps = _steps_within(t_srv - t0)
    last = max(conn) if conn else None
    bound = (1 + JITTER) * HERD_MAX + HERD_SLACK
    # the first step may see a few processes that started before any
    # failure was known (under load, one may read "no entry" and run its
    # connect up to a step later); later steps one SYN each (a SYN of each
    # of two overlapping steps at most)
    first_step = HERD_INITIAL * (1 + JITTER) + HERD_SLACK
    early = sum(1 for t in outage if t <= first_step)
    big = [(s, c) for s, c in bursts if s > first_step and c > 2]
    figures = ("%d SYNs during a %.1fs outage (about %d steps); bursts (s:count) %s; "
               "%d of %d connected, the last %s after the server's return (one step: %.2fs)"
               % (len(outage), t_srv - t0, steps, timeline, len(conn), HERD_N,
                  "%.2fs" % last if conn else "-", bound))
    check(not big and len(outage) <= steps + 1 + min(early, 5), figures)
    check(len(conn) == HERD_N and last <= bound, figures)

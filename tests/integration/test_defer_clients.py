"""Clients under the default `nonblocking = auto` (issue #9): a process that
never listened is a client, so its non-blocking connects are deferred.

A failed non-blocking connect to a down server is hidden: the socket looks
like one slow connect (SO_ERROR 0, not reported by poll/select/epoll) and the
shim reconnects it at the schedule's due time inside the program's next
readiness call. The program's own timeouts (poll/epoll timeout, alarm(),
open_timeout, ConnectTimeout, connect_timeout) always win, and the shim never
blocks the thread. N concurrent connects to one down destination advance the
schedule one step per failure round, not N.

Each test runs the same unmodified program without the shim too, where the
issue compares with it. Attempts are seen on the wire (SynSniffer) or at the
server; every wait is bounded. Times printed by the programs are
CLOCK_MONOTONIC, the clock of time.monotonic() here.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from lib import (Acceptor, BlackHole, LineReader, Server, SynSniffer, TestFailure, TestSkip,
                 base_env, check, check_gaps, finish, free_port, prog, run, shim_env, spawn)
from servers import HttpServer, Postgres, clean_env

# The production schedule (the issue wants initial_backoff >= 1 s for the
# event-loop tests: one step is then long against the loop's own timers).
PROD = dict(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MULTIPLIER="1.6",
            BACKOFFSHIM_JITTER="0.2", BACKOFFSHIM_MAX_BACKOFF="120s",
            BACKOFFSHIM_MAX_ELAPSED="60s")
P_INITIAL, P_MULT, P_JITTER = 1.0, 1.6, 0.2
STEP_SLACK = 0.3
N = 8
LATE = 3.0                 # how long the server stays down (s)
TICK_P99_MS, TICK_MAX_MS = 50, 250


def step_bound(t_down):
    """The longest a client may wait after the server's return, `t_down`
    seconds after its first failed attempt: the schedule's step in progress
    at that moment (under either extreme of the jitter), +20 %, + slack.
    With one step per failure round this is the bound; a schedule advanced
    once per socket would be far past it."""
    worst = 0.0
    for j in (1 - P_JITTER, 1 + P_JITTER):
        t, w, k = 0.0, P_INITIAL, 0
        while t + (w if k == 0 else w * j) < t_down and k < 50:
            t += w if k == 0 else w * j
            w, k = w * P_MULT, k + 1
        worst = max(worst, P_INITIAL * P_MULT ** k)
    return (1 + P_JITTER) * worst + STEP_SLACK


def ticker_figures(gaps_s, period=0.01):
    stalls = sorted(max(0.0, g - period) * 1e3 for g in gaps_s)
    check(stalls, "the ticker never ticked")
    p99 = stalls[min(len(stalls) - 1, int(0.99 * len(stalls)))]
    return p99, stalls[-1], len(stalls)


def check_ticker(gaps_s, what):
    p99, worst, n = ticker_figures(gaps_s)
    check(p99 < TICK_P99_MS and worst <= TICK_MAX_MS,
          "%s: ticker stalled p99 %.1fms max %.1fms over %d ticks (bounds %d / %d ms)"
          % (what, p99, worst, n, TICK_P99_MS, TICK_MAX_MS))


def _json_line(out, what):
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise TestFailure("%s printed no JSON result: %r" % (what, out[-500:]))


def _late_server(port, server, spawn_client, late=LATE, first_syns=N, what="", timeout=12):
    """Spawn the client against a dead port, wait for its first `first_syns`
    SYNs, keep the port dead until `late` seconds after the first one, then
    start `server` (its .start()) and wait for the client to exit. Returns a
    dict: rc, out, err, t_first (first SYN), t_up (server listening), before
    (SYN times before t_up), syns (all SYN times)."""
    with SynSniffer(port) as sn:
        p = spawn_client()
        seen = sn.wait_for(first_syns, 10)
        if seen < first_syns:
            p.kill()
            _, out, err = finish(p, 5)
            raise TestFailure("%s: only %d of %d first SYNs; out=%r err=%r"
                              % (what, seen, first_syns, out[-300:], err[-300:]))
        t_first = sn.times[0]
        time.sleep(max(0.0, t_first + late - time.monotonic()))  # the outage itself
        try:
            server.start()
        except BaseException:
            p.kill()
            finish(p, 5)
            raise
        t_up = time.monotonic()
        rc, out, err = finish(p, timeout)
        syns = list(sn.times)
    return dict(rc=rc, out=out, err=err, t_first=t_first, t_up=t_up,
                before=[t for t in syns if t < t_up], syns=syns)


def _all_refused_at_once(r, name):
    """Without the shim: N results, each the refusal `name`, all within half
    the schedule's first wait (so that the shim's waits stand out)."""
    check(len(r["res"]) == N and all(x[0] == name for x in r["res"]),
          "without the shim: expected %d x %s, got %r" % (N, name, r["res"]))
    took = max(x[1] for x in r["res"]) - r["t0"]
    check(took < P_INITIAL / 2, "without the shim the refusals took %.2fs" % took)


def _all_connect_within_a_step(port, srv, stop, cmd, what, greeting, skip_gaps=0):
    """With the shim, N connects to a server that starts LATE all succeed
    within one schedule step of its return, paced while it is down, with the
    program's ticker never stalled."""
    try:
        x = _late_server(port, srv, lambda: spawn(cmd, shim_env(**PROD)), what=what)
    finally:
        stop()
    r = _json_line(x["out"], what + " (shim)")
    bound = step_bound(x["t_up"] - x["t_first"])
    lat = [y[1] - x["t_up"] for y in r["res"]]
    msg = ("%s+shim: results %s; done after the server's return: %s s (bound %.2fs); "
           "%d SYNs during the outage, %d in all; stderr %r" % (
               what, sorted(set(y[0] for y in r["res"])), ", ".join("%.2f" % t for t in lat),
               bound, len(x["before"]), len(x["syns"]), x["err"][-300:]))
    check(len(r["res"]) == N and all(y[0] == "ok" and y[2] == greeting for y in r["res"]), msg)
    check(max(lat) <= bound, msg)
    check(len(x["before"]) <= N * 4, "not paced: " + msg)
    check_ticker(r["gaps"][skip_gaps:], msg)


# --- 1. python asyncio: 8 concurrent open_connection to a late server -----

# The head and tail every asyncio script shares: a 10 ms ticker task in the
# same loop, whose gaps are printed with the script's own results.
ASYNCIO_HEAD = r"""
import asyncio, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
async def main():
    ticks, stop = [], [False]
    async def ticker():
        while not stop[0]:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)
    tk = asyncio.create_task(ticker())
"""
ASYNCIO_TAIL = r"""    stop[0] = True
    await tk
    out["gaps"] = [b - a for a, b in zip(ticks, ticks[1:])]
    print(json.dumps(out))
asyncio.run(main())
"""

ASYNCIO_LATE = ASYNCIO_HEAD + r"""    async def one():
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 9)
            data = await asyncio.wait_for(r.readline(), 5)
            w.close()
            return ["ok", time.monotonic(), data.decode().strip()]
        except Exception as e:
            return [type(e).__name__, time.monotonic(), str(e)]
    t0 = time.monotonic()
    out = dict(t0=t0, res=await asyncio.gather(*(one() for _ in range(n))))
""" + ASYNCIO_TAIL


def test_asyncio_8_concurrent_to_late_server():
    port = free_port()
    cmd = [sys.executable, "-c", ASYNCIO_LATE, str(port), str(N)]
    # Without the shim: all 8 fail at once.
    rc, out, err = run(cmd, base_env(), timeout=20)
    r = _json_line(out, "asyncio (no shim)")
    _all_refused_at_once(r, "ConnectionRefusedError")
    # With the shim (auto: a client, so defer).
    srv = Server(port)
    _all_connect_within_a_step(port, srv, srv.close, cmd, "asyncio", "hello from server")


# --- 2. python asyncio: a pool of 8 connections across a server restart ---

ASYNCIO_POOL = ASYNCIO_HEAD + r"""    pool = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
    for r, w in pool:
        await asyncio.wait_for(r.readline(), 5)
    print("up", flush=True)
    async def cycle(r, w):
        await asyncio.wait_for(r.read(100), 10)   # the restart: EOF
        t_eof = time.monotonic()
        w.close()
        try:
            r2, w2 = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 9)
            line = await asyncio.wait_for(r2.readline(), 5)
            w2.close()
            return ["ok", time.monotonic(), t_eof, line.decode().strip()]
        except Exception as e:
            return [type(e).__name__, time.monotonic(), t_eof, str(e)]
    out = dict(res=await asyncio.gather(*(cycle(r, w) for r, w in pool)))
""" + ASYNCIO_TAIL


class HoldServer(Acceptor):
    """Greets each client with "hi" and holds the connection until down():
    the listener is closed first, then every connection (a restart)."""

    def __init__(self, port):
        self.gone = threading.Event()
        super().__init__(port, self._hold, threaded=True)

    def _hold(self, c):
        c.sendall(b"hi\n")
        self.gone.wait(30)

    def down(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()
        self.gone.set()
        for th in list(self.handlers):
            th.join(5)


def _pool_restart(env):
    """Returns (result dict, t_down, t_up, t_first_reconnect_syn, syns_before_up)."""
    port = free_port()
    cmd = [sys.executable, "-c", ASYNCIO_POOL, str(port), str(N)]
    srv = HoldServer(port)
    srv2 = None
    try:
        with SynSniffer(port) as sn:
            p = spawn(cmd, env)
            lr = LineReader(p)
            if lr.wait_for(lambda l: l == "up", 10) is None:
                p.kill()
                raise TestFailure("the pool never came up: %r %r" % (lr.lines, p.stderr.read()))
            n0 = len(sn.times)
            t_down = time.monotonic()
            srv.down()
            if env.get("LD_PRELOAD"):
                # the first reconnect: once its failure is published, the
                # pool's other connects fall inside the window and are
                # parked without a packet (one step per outcome)
                seen = sn.wait_for(n0 + 1, 10)
                check(seen >= n0 + 1, "no reconnect SYN")
                t_first = sn.times[n0]
                time.sleep(max(0.0, t_first + LATE - time.monotonic()))  # the outage
                srv2 = HoldServer(port)
                t_up = time.monotonic()
                before = len([t for t in sn.times[n0:] if t < t_up])
            else:
                t_first, t_up, before = t_down, None, 0
            rc, lines, err = lr.finish(25)
    finally:
        srv.close()
        if srv2:
            srv2.gone.set()
            srv2.close()
    return _json_line("\n".join(lines), "asyncio pool"), t_down, t_up, t_first, before, err


def test_asyncio_pool_across_server_restart():
    r, t_down, _, _, _, _ = _pool_restart(base_env())
    check(all(x[0] == "ConnectionRefusedError" for x in r["res"]),
          "without the shim: expected 8 refused reconnects, got %r" % r["res"])
    check(max(x[1] for x in r["res"]) - t_down < P_INITIAL / 2, "without the shim the refusals took"
          " %.2fs" % (max(x[1] for x in r["res"]) - t_down))
    r, t_down, t_up, t_first, before, err = _pool_restart(shim_env(**PROD))
    bound = step_bound(t_up - t_first)
    lat = [x[1] - t_up for x in r["res"]]
    what = ("pool+shim: results %s; reconnect after the server's return: %s s (bound %.2fs); "
            "%d reconnect SYNs during the outage; stderr %r" % (
                sorted(set(x[0] for x in r["res"])), ", ".join("%.2f" % x for x in lat), bound,
                before, err[-300:]))
    check(all(x[0] == "ok" and x[3] == "hi" for x in r["res"]), what)
    check(max(lat) <= bound, what)
    check(before <= N * 4, "not paced: " + what)
    check_ticker(r["gaps"], what)


# --- 3. node: 8 parallel http.get to a late HTTP server --------------------

NODE_LATE = r"""
const http = require('http');
const [port, n] = process.argv.slice(-2).map(Number);  // node -e: no script name in argv
const mono = () => Number(process.hrtime.bigint()) / 1e9;
const t0 = mono();
let last = t0; const gaps = [];
const tick = setInterval(() => { const t = mono(); gaps.push(t - last); last = t; }, 10);
const agent = new http.Agent({keepAlive: false, maxSockets: Infinity});
const res = []; let pending = n;
function done(x) {
  res.push(x);
  if (--pending === 0) {
    clearInterval(tick);
    console.log(JSON.stringify({t0, res, gaps}));
    process.exit(0);
  }
}
for (let i = 0; i < n; i++) {
  const req = http.get({host: '127.0.0.1', port, path: '/', agent}, r => {
    let b = ''; r.on('data', d => b += d);
    r.on('end', () => done(['ok', mono(), r.statusCode + ' ' + b.trim()]));
  });
  req.on('error', e => done([e.code || e.name, mono(), e.message]));
}
setTimeout(() => { console.log(JSON.stringify({t0, res, gaps, timeout: true})); process.exit(1); }, 10000);
"""


def _node():
    for name in ("node", "nodejs"):
        path = shutil.which(name)
        if path:
            return path
    raise TestFailure("node is not installed (scripts/install-deps test)")


def test_node_8_parallel_http_get_to_late_server():
    port = free_port()
    cmd = [_node(), "-e", NODE_LATE, str(port), str(N)]
    rc, out, err = run(cmd, base_env(), timeout=20)
    r = _json_line(out, "node (no shim)")
    _all_refused_at_once(r, "ECONNREFUSED")
    srv = HttpServer(port)
    # (the first ticker gap includes node's start)
    _all_connect_within_a_step(port, srv, srv.stop, cmd, "node", "200 hello from server", 1)


# --- 4. ssh: ConnectTimeout wins; a late sshd is reached ------------------

def _ssh(port, timeout_s):
    return ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % timeout_s,
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "IdentitiesOnly=yes", "-o", "IdentityFile=none", "-o", "ConnectionAttempts=1",
            "-p", str(port), "-l", "bshimtest", "127.0.0.1", "true"]


def _timed(cmd, env, timeout=15):
    t0 = time.monotonic()
    rc, out, err = run(cmd, env, timeout)
    return rc, out, err, time.monotonic() - t0


def test_ssh_connect_timeout_wins_against_dead_port():
    port = free_port()
    # Without the shim: a dead port is refused at once; a black hole (SYNs
    # dropped) runs into ConnectTimeout: the reference for 2 s.
    ct = 2  # ssh's ConnectTimeout (s)
    rc, _, err, plain = _timed(_ssh(port, ct), base_env())
    check(rc == 255 and "refused" in err, "ssh without shim, dead port: rc=%d %r" % (rc, err))
    check(plain < ct / 2, "ssh without shim took %.2fs to see the refusal" % plain)
    hport = free_port()
    with BlackHole(hport):
        rc, _, err, hole = _timed(_ssh(hport, ct), base_env())
    check(rc == 255 and abs(hole - ct) <= ct / 4, "ssh without shim, black hole: rc=%d %.2fs %r"
          % (rc, hole, err))
    rc, _, err, t = _timed(_ssh(port, ct), shim_env(), timeout=8)
    check(rc == 255 and abs(t - ct) <= ct / 4,
          "ssh+shim against a dead port: rc=%d after %.2fs (expected 2s +- 0.5 as ssh's own "
          "ConnectTimeout; without shim: refused after %.2fs, black hole %.2fs); stderr %r"
          % (rc, t, plain, hole, err[-300:]))


class Sshd:
    """sshd -D on 127.0.0.1:port as an unprivileged user, with a private host
    key and config in a temp dir (no PAM, no pid file). As real root it runs
    as `nobody` (sshd as root needs /run/sshd and privilege separation)."""

    def __init__(self, port):
        self.port, self.proc = port, None
        self.sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        if not os.path.exists(self.sshd):
            raise TestFailure("sshd is not installed (scripts/install-deps test)")
        self.dir = tempfile.mkdtemp(prefix="bshim-sshd-")
        key = os.path.join(self.dir, "hostkey")
        r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "ssh-keygen: %r" % r.stderr)
        self.cfg = os.path.join(self.dir, "sshd_config")
        with open(self.cfg, "w") as f:
            f.write("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile none\nUsePAM no\n"
                    "StrictModes no\nLogLevel VERBOSE\nAuthorizedKeysFile none\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\n" % (port, key))
        self.log = os.path.join(self.dir, "sshd.log")
        self.cmd = [self.sshd, "-D", "-e", "-f", self.cfg]
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("nobody")
            for p in (self.dir, key, key + ".pub", self.cfg):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            self.cmd = ["runuser", "-u", "nobody", "--"] + self.cmd
        prefix = self.cmd[:self.cmd.index(self.sshd)]
        r = subprocess.run(prefix + [self.sshd, "-t", "-f", self.cfg], env=base_env(),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            self.close()
            raise TestSkip("sshd refuses this config here: %s" % (r.stderr or r.stdout)[-300:])

    def start(self):
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self.cmd, env=base_env(), stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        return self

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def close(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.logf.close()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def test_ssh_reaches_late_sshd_on_the_schedule():
    port = free_port()
    sshd = Sshd(port)
    try:
        # The fixture works: without the shim ssh reaches a running sshd.
        sshd.start()
        ok = False
        for _ in range(100):
            rc, _, err = run(_ssh(port, 2), base_env(), timeout=10)
            if "Permission denied" in err:
                ok = True
                break
            if sshd.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not ok:
            raise TestSkip("sshd does not serve here: rc=%r ssh %r; log %r"
                           % (sshd.proc.poll(), err[-200:], sshd.text()[-400:]))
        sshd.close()
        sshd = Sshd(port)
        x = _late_server(port, sshd, lambda: spawn(_ssh(port, 10), shim_env()), first_syns=1,
                         what="ssh", timeout=15)
        rc, err, t_first, t_up, before = x["rc"], x["err"], x["t_first"], x["t_up"], x["before"]
        gaps = [b - a for a, b in zip(before, before[1:])]
        log = sshd.text()
    finally:
        sshd.close()
    what = "ssh+shim, sshd %.1fs late: rc=%d stderr %r; %d SYNs before sshd; sshd log %r" % (
        t_up - t_first, rc, err[-300:], len(before), log[-300:])
    check("Permission denied" in err or "Connection from 127.0.0.1" in log, what)
    check(len(before) >= 4, what)
    check_gaps(gaps[:6], "ssh")


# --- 5. ruby Net::HTTP: open_timeout wins; a late server is reached -------

RUBY = r"""
require 'net/http'
port = ARGV[0].to_i; ot = ARGV[1].to_f
mono = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
gaps = []; stop = false
tk = Thread.new { last = mono.(); until stop; sleep 0.01; t = mono.(); gaps << t - last; last = t; end }
sleep 0.05
res = nil
t0 = mono.()
begin
  http = Net::HTTP.new('127.0.0.1', port)
  http.open_timeout = ot; http.read_timeout = 5
  http.start { |h| r = h.get('/'); res = "ok_#{r.code}_#{r.body.strip.tr(' ', '_')}" }
rescue Exception => e
  res = e.class.to_s
end
t1 = mono.()
stop = true; tk.join
puts "result=#{res} open_s=#{'%.3f' % (t1 - t0)} t1=#{'%.3f' % t1} max_gap_ms=#{'%.1f' % (gaps.max * 1000)} ticks=#{gaps.size}"
"""
RUBY_LINE = re.compile(r"result=(\S+) open_s=([0-9.]+) t1=([0-9.]+) max_gap_ms=([0-9.]+) "
                       r"ticks=(\d+)")


def _ruby(port, open_timeout):
    ruby = shutil.which("ruby")
    if not ruby:
        raise TestFailure("ruby is not installed (scripts/install-deps test)")
    return [ruby, "-e", RUBY, str(port), str(open_timeout)]


def _ruby_result(out, what):
    m = RUBY_LINE.search(out)
    check(m, "%s: no result line: %r" % (what, out[-300:]))
    return m.group(1), float(m.group(2)), float(m.group(3)), float(m.group(4)), int(m.group(5))


def test_ruby_net_http_open_timeout_wins():
    port = free_port()
    rc, out, err = run(_ruby(port, 1), base_env(), timeout=15)
    res, secs, _, _, _ = _ruby_result(out, "ruby (no shim)")
    check(res == "Errno::ECONNREFUSED" and secs < 1 / 2,  # half its open_timeout
          "ruby without shim: %s after %.2fs; %r" % (res, secs, err[-200:]))
    rc, out, err = run(_ruby(port, 1), shim_env(), timeout=6)
    res, secs, _, gap, ticks = _ruby_result(out, "ruby (shim)")
    what = "ruby+shim, open_timeout=1, dead port: %s after %.3fs; ticker max gap %.1fms " \
           "(%d ticks); stderr %r" % (res, secs, gap, ticks, err[-300:])
    check(res == "Net::OpenTimeout" and abs(secs - 1.0) <= 0.3, what)
    check(gap - 10 <= TICK_MAX_MS, what)


def test_ruby_net_http_reaches_late_server():
    port = free_port()
    srv = HttpServer(port)
    try:
        x = _late_server(port, srv, lambda: spawn(_ruby(port, 10), shim_env()), late=2.0,
                         first_syns=1, what="ruby", timeout=15)
    finally:
        srv.stop()
    out, err, t_first, t_up, before = x["out"], x["err"], x["t_first"], x["t_up"], x["before"]
    res, secs, t1, gap, ticks = _ruby_result(out, "ruby (shim, late server)")
    gaps = [b - a for a, b in zip(before, before[1:])]
    what = "ruby+shim, server %.1fs late: %s after %.2fs (%.2fs after the server's return); " \
           "%d SYNs before it; ticker max gap %.1fms; stderr %r" % (
               t_up - t_first, res, secs, t1 - t_up, len(before), gap, err[-300:])
    check(res == "ok_200_hello_from_server", what)
    check(t1 - t_up <= (1 + 0.2) * 0.4 + 0.3, what)   # the scaled schedule's max step
    check(len(before) >= 4, what)
    check(gap - 10 <= TICK_MAX_MS, what)
    check_gaps(gaps[:6], "ruby")


# --- 6. psql failover: the first host is down ------------------------------

def test_psql_failover_to_second_host():
    port = free_port()
    with Postgres(port, host="127.0.0.2") as pg:
        ct = 2  # libpq's connect_timeout (s)
        conn = ("host=127.0.0.1,127.0.0.2 port=%d connect_timeout=%d user=postgres "
                "dbname=postgres" % (port, ct))
        cmd = ["psql", conn, "-tAc", "select 40 + 2"]
        rc, out, err, plain = _timed(cmd, clean_env())
        check(rc == 0 and out.strip() == "42", "psql without shim: rc=%d %r %r"
              % (rc, out, err[-300:]))
        env = shim_env()
        env = {k: v for k, v in env.items() if not k.startswith("PG")}
        rc, out, err, t = _timed(cmd, env, timeout=8)
    # the shim may hold the first host until connect_timeout, no longer
    check(rc == 0 and out.strip() == "42" and t <= plain + 1.5 * ct,
          "psql+shim failover: rc=%d %r after %.2fs (bound: %.2fs without shim + 1.5 x "
          "connect_timeout %ds); %r" % (rc, out.strip(), t, plain, ct, err[-300:]))


# --- 7. python create_connection(timeout=30) under alarm(2) ---------------

ALARM = r"""
import signal, socket, sys, time
class Alarm(Exception):
    pass
def handler(*a):
    raise Alarm()
signal.signal(signal.SIGALRM, handler)
t0 = time.monotonic()
signal.alarm(2)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
    r = "connected"
except Alarm:
    r = "alarm"
except OSError as e:
    r = type(e).__name__
print(r, "%.3f" % (time.monotonic() - t0))
"""


def test_python_create_connection_interrupted_by_alarm():
    port = free_port()
    cmd = [sys.executable, "-c", ALARM, str(port)]
    rc, out, err = run(cmd, base_env(), timeout=10)
    check(out.split()[:1] == ["ConnectionRefusedError"] and float(out.split()[1]) < 0.5,
          "without the shim: %r %r" % (out, err[-200:]))
    rc, out, err = run(cmd, shim_env(), timeout=6)
    parts = out.split()
    check(len(parts) == 2 and parts[0] == "alarm" and abs(float(parts[1]) - 2) <= 0.3,
          "python+shim create_connection(timeout=30), alarm(2): %r (expected 'alarm' at 2s "
          "+- 0.3); stderr %r" % (out.strip(), err[-300:]))


# --- 10. poll and epoll programs: a dead port, a 3 s wait ------------------

WAIT_LINE = re.compile(r"^wait rc=(-?\d+) ms=(\d+)", re.M)
DONE_LINE = re.compile(r"^done waits=(\d+) ready=(\d+) pending=(\d+) wall_ms=(\d+) "
                       r"cpu_ms=([0-9.]+)$", re.M)


def _multiwait(kind):
    port = free_port()
    wait_ms = 3000
    cmd = [prog("multiwait"), kind, "127.0.0.1", str(port), str(N), str(wait_ms)]
    # Without the shim: every socket reports its error at once.
    rc, out, err = run(cmd, base_env(), timeout=10)
    m = DONE_LINE.search(out)
    check(rc == 0 and m, "multiwait %s without shim: rc=%d %r" % (kind, rc, out[-300:]))
    ready = re.findall(r"^ready fd=\d+ events=0x([0-9a-f]+) so_error=(\S+)$", out, re.M)
    check(int(m.group(2)) == N and int(m.group(4)) < wait_ms / 2 and len(ready) == N
          and all(int(e, 16) & 0x8 and s == "ECONNREFUSED" for e, s in ready),
          "multiwait %s without shim: expected 8 fds with ERR and ECONNREFUSED at once: %r"
          % (kind, out))
    # With the shim in defer mode.
    with SynSniffer(port) as sn:
        rc, out, err = run(cmd, shim_env(BACKOFFSHIM_NONBLOCKING="defer"), timeout=8)
        syns = len(sn.times)
    m = DONE_LINE.search(out)
    what = "multiwait %s+shim (defer): rc=%d; %d SYNs; output %r; stderr %r" % (
        kind, rc, syns, out.strip().splitlines()[N:][-12:], err[-300:])
    check(rc == 0 and m, what)
    waits = [(int(a), int(b)) for a, b in WAIT_LINE.findall(out)]
    check(int(m.group(1)) == 1 and waits and waits[0][0] == 0
          and abs(waits[0][1] - wait_ms) <= wait_ms / 10,
          "the wait did not time out at %dms: %s" % (wait_ms, what))
    check(int(m.group(2)) == 0 and int(m.group(3)) == N, "an fd was reported: " + what)
    pend = re.findall(r"^pending fd=\d+ so_error=(\S+)$", out, re.M)
    check(len(pend) == N and all(s == "0" for s in pend), "SO_ERROR not 0: " + what)
    cpu = float(m.group(5))
    check(cpu < 0.02 * int(m.group(4)), "CPU %.1fms over %sms: %s" % (cpu, m.group(4), what))
    check(N <= syns <= N * 15, "SYNs not on the schedule: " + what)


def test_poll_program_8_connects_to_dead_port_times_out():
    _multiwait("poll")


def test_epoll_program_8_connects_to_dead_port_times_out():
    _multiwait("epoll")

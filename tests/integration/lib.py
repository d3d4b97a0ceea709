"""Helpers for backoffshim's integration tests.

Everything here talks only to loopback (127.0.0.1 / ::1). Every wait has a
bound in time; every loop a bound in count. Attempts are observed from the
outside: a raw AF_PACKET socket on `lo` sees each SYN the client sends, and
real listeners record their accepts.
"""
import atexit
import itertools
import json
import os
import random
import shutil
import tempfile
import socket
import struct
import subprocess
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
# The library under test; make sanitize points these at its ASan build, with
# the sanitizer runtime preloaded ahead of it.
SO = os.environ.get("BACKOFFSHIM_TEST_SO", os.path.join(BUILD, "libbackoffshim.so"))
PRELOAD = os.environ.get("BACKOFFSHIM_TEST_PRELOAD", SO)
PROGS = os.path.join(BUILD, "progs")

# The scaled-down schedule the tests use (seconds).
INITIAL, MULT, JITTER, MAXB = 0.05, 1.6, 0.2, 0.4
SLACK = 0.03


class _Lag:
    """How late this machine wakes a sleeping thread right now: a thread
    sleeps TICK at a time and keeps how late each wake-up was. A loaded
    machine wakes the programs under test late too, which moves their
    attempts; slack() widens a timing bound by the worst lateness seen."""
    TICK = 0.01
    WINDOW = 30.0  # a test's measurements lie within it

    def __init__(self):
        self.samples = []  # (wake-up time, lateness), the last WINDOW
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            t0 = time.monotonic()
            time.sleep(self.TICK)
            t1 = time.monotonic()
            with self.lock:
                self.samples.append((t1, t1 - t0 - self.TICK))
                if self.samples[0][0] < t1 - self.WINDOW:
                    self.samples = [x for x in self.samples if x[0] >= t1 - self.WINDOW]

    def worst(self):
        with self.lock:
            return max((late for _, late in self.samples), default=0.0)


_lag = _Lag()


def slack():
    """The slack of a timing bound: SLACK, plus the latest wake-up of the
    last WINDOW seconds (near 0 on an idle machine; tens of ms under
    stress-ng)."""
    return SLACK + _lag.worst()


class TestFailure(Exception):
    pass


class TestSkip(Exception):
    """Raised by a test that cannot run here; run.py reports it as SKIP."""


def need_root(why):
    """Skip the calling test unless it runs as real root (run.py runs the
    tests as the invoking user when that is not root: see its docstring)."""
    if os.geteuid() != 0:
        raise TestSkip("needs root: %s" % why)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def prog(name):
    return os.path.join(PROGS, name)


def free_port():
    """A port below the ephemeral range (a tight loop to a dead port inside
    it can connect to itself) that is free on 127.0.0.1 and ::1."""
    rnd = random.Random(os.getpid() ^ int(time.monotonic() * 1e6))
    for _ in range(200):
        port = rnd.randrange(20000, 32000)
        try:
            for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
                with socket.socket(fam, socket.SOCK_STREAM) as s:
                    s.bind((host, port))
            return port
        except OSError:
            continue
    raise TestFailure("no free port found")


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BACKOFFSHIM_") and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


# Shared tables (issue 10): every shim_env() names a table of its own, so
# tests never see each other's (nor the machine's) per-user table; the
# processes of one test that use one env share theirs.
TABLES = tempfile.mkdtemp(prefix="bs-tables-")
atexit.register(shutil.rmtree, TABLES, True)
_table_ids = itertools.count()


def new_table():
    return os.path.join(TABLES, "table-%d" % next(_table_ids))


def status_rows(table, env=None, ok=(0,)):
    """`backoffshim status --json --table TABLE`: its rows, none while no
    process has made the table yet. env: the settings status judges
    `idle` by; ok: the exit codes the caller accepts."""
    p = subprocess.run([os.path.join(BUILD, "backoffshim"), "status", "--json", "--table", table],
                       capture_output=True, text=True, timeout=10, env=env or base_env())
    if p.returncode == 1 and "no table" in p.stderr:
        return []
    check(p.returncode in ok, "status: %r" % (p,))
    return json.loads(p.stdout)


def wait_status_row(table, pred, timeout=10, env=None, what="a row"):
    """The first row of `status` that satisfies pred. Polled until
    timeout, as no event says when another process changes the table."""
    end = time.monotonic() + timeout
    while True:
        rows = status_rows(table, env)
        for row in rows:
            if pred(row):
                return row
        if time.monotonic() >= end:
            raise TestFailure("status never showed %s: %r" % (what, rows))
        time.sleep(0.02)


def shim_env(**extra):
    """Environment that preloads the shim with the scaled schedule, and a
    shared table of its own."""
    env = base_env(
        BACKOFFSHIM_SHARED=new_table(),
        LD_PRELOAD=PRELOAD,
        BACKOFFSHIM_CONFIG="/dev/null",
        BACKOFFSHIM_INITIAL_BACKOFF="50ms",
        BACKOFFSHIM_MULTIPLIER="1.6",
        BACKOFFSHIM_JITTER="0.2",
        BACKOFFSHIM_MAX_BACKOFF="400ms",
        BACKOFFSHIM_MIN_CONNECT_TIMEOUT="1s",
        BACKOFFSHIM_MAX_ELAPSED="20s",
        BACKOFFSHIM_SEED="42",
    )
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


class SynSniffer:
    """Records the time of every SYN (without ACK) sent to `port` on lo, and
    in `sources` its source port (to tell two clients' SYNs apart)."""

    def __init__(self, port):
        self.port = port
        self.times = []
        self.sources = []
        self.cond = threading.Condition()
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.05)
        self.stop = False
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        # Readiness is an event too: send SYNs to a dead marker port until
        # the observer reports one (the capture hook was seen to miss the
        # very first packets now and then).
        self._marker_seen("SYN observer on lo never became ready")

    def _marker_seen(self, why):
        """Send SYNs to the marker port until the observer reports one."""
        for _ in range(40):
            with socket.socket() as m:
                m.setblocking(False)
                m.connect_ex(("127.0.0.1", self.MARKER))
            if self.ready.wait(0.05):
                return
        raise TestFailure(why)

    MARKER = 1  # tcpmux: nothing listens there; a SYN to it is just refused

    def _syn_dport(self, data):
        ports = self._syn_ports(data)
        return ports and ports[1]

    def _syn_ports(self, data):
        """(source port, destination port) of a SYN, or None."""
        eth_type = struct.unpack("!H", data[12:14])[0]
        p = data[14:]
        if eth_type == 0x0800 and len(p) >= 20 and p[9] == 6:
            tcp = p[(p[0] & 0xF) * 4:]
        elif eth_type == 0x86DD and len(p) >= 40 and p[6] == 6:
            tcp = p[40:]
        else:
            return None
        if len(tcp) < 14:
            return None
        flags = tcp[13]
        if flags & 0x02 and not flags & 0x10:
            return struct.unpack("!HH", tcp[0:4])
        return None

    def _run(self):
        while not self.stop:
            try:
                data, addr = self.sock.recvfrom(256)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] != socket.PACKET_HOST:  # lo shows each packet twice
                continue
            sport, dport = self._syn_ports(data) or (None, None)
            if dport == self.MARKER:
                self.ready.set()
            elif dport == self.port:
                with self.cond:
                    self.times.append(time.monotonic())
                    self.sources.append(sport)
                    self.cond.notify_all()

    def wait_for(self, n, timeout):
        """Block until n SYNs were seen (or timeout); returns the count."""
        end = time.monotonic() + timeout
        with self.cond:
            while len(self.times) < n:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            return len(self.times)

    def settled_count(self):
        """The number of SYNs to `port` seen, once every packet sent before
        this call has been seen: a SYN to the marker port is sent and waited
        for first (lo hands packets over in order)."""
        self.ready.clear()
        self._marker_seen("SYN observer on lo stopped seeing the marker")
        with self.cond:
            return len(self.times)

    def gaps(self):
        with self.cond:
            t = list(self.times)
        return [b - a for a, b in zip(t, t[1:])]

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class Acceptor:
    """A TCP listener on host:port whose thread hands each connection to
    `handle(conn)` (each in a thread of its own with threaded=True), records
    accept times, and closes the connection after. Listens at once, unless a
    subclass sets autostart = False and calls start() when wanted."""

    autostart = True

    def __init__(self, port, handle, threaded=False, host="127.0.0.1"):
        self.port, self.host, self.handle, self.threaded = port, host, handle, threaded
        self.accepts, self.handlers, self.stop = [], [], False
        self.sock = self.thread = None
        if self.autostart:
            self.start()

    def start(self):
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((self.host, self.port))
        self.sock.listen(64)
        self.sock.settimeout(0.05)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepts.append(time.monotonic())
            if self.threaded:
                th = threading.Thread(target=self._serve, args=(c,), daemon=True)
                th.start()
                self.handlers.append(th)
            else:
                self._serve(c)

    def _serve(self, c):
        with c:
            try:
                self.handle(c)
            except OSError:
                pass

    def close(self):
        self.stop = True
        if self.thread:
            self.thread.join(2)
        for th in list(self.handlers):
            th.join(6)
        if self.sock:
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class Server(Acceptor):
    """A real TCP listener that greets each client; start() it when wanted."""

    autostart = False

    def __init__(self, port, host="127.0.0.1", greeting=b"hello from server\n"):
        super().__init__(port, lambda c: c.sendall(greeting), host=host)


class BlackHole:
    """A listener whose accept queue is full, so that further SYNs to it are
    dropped, as by a black hole; drain() frees the queue (then `lst` accepts
    again)."""

    def __init__(self, port, host="127.0.0.1"):
        self.lst = socket.socket()
        self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lst.bind((host, port))
        self.lst.listen(0)
        self.fillers = []
        for _ in range(3):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex((host, port))
            self.fillers.append(f)

    def drain(self):
        for f in self.fillers:
            f.close()
        self.fillers = []

    def close(self):
        self.drain()
        self.lst.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


class FullQueue:
    """A listener (listen(0)) whose one queue place a completed connection
    holds: a further SYN is dropped and its connect hangs, and nothing else
    sends a SYN (unlike BlackHole's fillers, whose own SYNs are resent)."""

    def __init__(self, port, host="127.0.0.1"):
        self.lst = socket.socket()
        self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lst.bind((host, port))
        self.lst.listen(0)
        self.filler = socket.create_connection((host, port))

    def close(self):
        self.filler.close()
        self.lst.close()


class Recorder(Acceptor):
    """Per connection: sends `greeting`, records every byte the client sends
    until it shuts down its side (at most 64 KiB, 5 s), then sends `reply`."""

    def __init__(self, port, greeting=b"", reply=b""):
        self.greeting, self.reply = greeting, reply
        self.conns, self.lock = [], threading.Lock()
        super().__init__(port, self._record, threaded=True)

    def _record(self, c):
        buf = b""
        try:
            if self.greeting:
                c.sendall(self.greeting)
            c.settimeout(5)
            while len(buf) < 65536:
                d = c.recv(4096)
                if not d:
                    break
                buf += d
            if self.reply:
                c.sendall(self.reply)
        finally:
            with self.lock:
                self.conns.append(buf)

    def received(self):
        for th in list(self.handlers):
            th.join(6)
        with self.lock:
            return list(self.conns)

def spawn(cmd, env, **kw):
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, **kw)


def finish(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise TestFailure("timed out after %.0fs; stderr: %s" % (timeout, err[-500:]))
    return p.returncode, out, err


def run(cmd, env, timeout=20):
    return finish(spawn(cmd, env), timeout)


def expected_waits(n):
    """Un-jittered waits after failures 1..n of the scaled schedule."""
    out, b = [], INITIAL
    for i in range(n):
        if i == 0:
            out.append(INITIAL)
        else:
            b = min(b * MULT, MAXB)
            out.append(b)
    return out


def check_gaps(gaps, what=""):
    """gRPC interop bounds: the first gap is INITIAL exactly, each later gap
    within [0.8e - slack, 1.2e + slack], slack() calibrated to the moment."""
    check(gaps, "no gaps observed %s" % what)
    exp = expected_waits(len(gaps))
    sl = slack()
    for i, (g, e) in enumerate(zip(gaps, exp)):
        lo = (e if i == 0 else (1 - JITTER) * e) - sl
        hi = (e if i == 0 else (1 + JITTER) * e) + sl
        check(lo <= g <= hi, "%s gap %d = %.3fs outside [%.3f, %.3f] (slack %.3f; all: %s)" % (
            what, i + 1, g, lo, hi, sl, ", ".join("%.3f" % x for x in gaps)))


# "No delay" is checked against the same program run without the shim in the
# same test, never against a bare number (a loaded machine slows both runs).
# Such a test gives the shim a first wait of NO_DELAY_WAIT (shim_env(**NO_DELAY)),
# so that a wait the shim wrongly adds costs at least that much, and allows the
# run with the shim half of it more than the run without.
NO_DELAY_WAIT = 1.0
NO_DELAY = dict(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MAX_BACKOFF="1s")


def check_not_delayed(what, plain_s, shim_s, wait=NO_DELAY_WAIT):
    """shim_s (seconds, measured with the shim) may exceed plain_s (the same
    measure without it) by less than half of `wait`, the shortest wait the
    shim could wrongly add in the test's settings."""
    check(plain_s is not None and shim_s is not None,
          "%s: no time measured (without the shim %r, with it %r)" % (what, plain_s, shim_s))
    check(shim_s < plain_s + wait / 2,
          "%s took %.3fs with the shim, %.3fs without: more than %.3fs added (its first wait "
          "is %.3fs)" % (what, shim_s, plain_s, wait / 2, wait))


def late_server_run(cmd, env, port, host="127.0.0.1", syns_before=4, timeout=15):
    """Start cmd, let it fail `syns_before` times against a dead port (seen
    on the wire), then start the server. Returns (rc, out, err, gaps)."""
    with SynSniffer(port) as sn:
        p = spawn(cmd, env)
        seen = sn.wait_for(syns_before, timeout=5)
        if seen < syns_before:
            p.kill()
            _, out, err = finish(p, 5)
            raise TestFailure("only %d SYNs before the server started; out=%r err=%r"
                              % (seen, out, err[-400:]))
        gaps = sn.gaps()[:syns_before - 1]
        with Server(port, host).start():
            rc, out, err = finish(p, timeout)
    return rc, out, err, gaps


class LineReader:
    """Reads a process's stdout (or another of its streams) line by line in
    a thread, so a test can wait for a line (an event) with a time bound."""

    def __init__(self, p, stream=None):
        self.p = p
        self.stream = stream or p.stdout
        self.lines = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.stream:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_for(self, pred, timeout):
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for ln in self.lines:
                    if ln is not None and pred(ln):
                        return ln
                left = end - time.monotonic()
                if left <= 0 or (self.lines and self.lines[-1] is None):
                    return None
                self.cond.wait(left)

    def finish(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise TestFailure("timed out; output so far: %r" % self.lines)
        self.thread.join(2)
        err = self.p.stderr.read()
        return self.p.returncode, [l for l in self.lines if l is not None], err


def ms_of(line):
    """'fail errno=X ms=123' -> 123"""
    for part in line.split():
        if part.startswith("ms="):
            return int(part[3:])
    raise TestFailure("no ms= in %r" % line)

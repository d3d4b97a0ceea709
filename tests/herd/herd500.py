#!/usr/bin/env python3
"""make herd500 (issue 20): a herd of N = 500 client processes (HERD_N to
change it), all with the shim and the default shared table (shared = user),
against a server that comes up OUTAGE s after they start. Two cases:

  blocking  build/progs/herdclient: one blocking connect()
  parked    build/progs/herdnb: one non-blocking connect(); the shim parks
            the failed socket (nonblocking = defer) and reconnects it

on a scaled schedule (initial_backoff 200ms, multiplier 1.6, jitter 0.2,
max_backoff 2s). Every SYN to the server's port is recorded on lo (a raw
socket) and every accept() by the server. Per case: the SYNs during the
outage, the schedule's steps in that time (from the configured schedule,
counted from the first SYN), SYNs per step, the time from the server's
return until all N connected (the Nth SYN-ACK, kernel timestamps; the Nth
accept is printed too) and the CPU per process
(user + sys from wait4(), per child; their sum is checked against the
RUSAGE_CHILDREN delta). A reference row per program, the server up from
the start, gives the CPU a process costs without an outage (exec, the
dynamic loader, the shim's start). Prints a table and writes
build/herd500.txt.

Runs in a network, IPC and mount namespace of its own (the shared table is
a System V segment: --ipc gives a private one; its lock files go to a
private /dev/shm); only loopback is used. An experiment: not in make check.
Exit 0 if every process of both cases connected."""
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
SO = os.path.join(BUILD, "libbackoffshim.so")
PROGS = os.path.join(BUILD, "progs")
OUTFILE = os.path.join(BUILD, "herd500.txt")
N = int(os.environ.get("HERD_N", "500"))
OUTAGE = float(os.environ.get("HERD_OUTAGE", "9"))
INITIAL, MULT, JITTER, MAXB = 0.2, 1.6, 0.2, 2.0
PORT = 24556         # case i uses PORT + i: a destination of its own in the table
LIMIT = 60.0          # a case ends at the latest this long after its start
NB_TIMEOUT_MS = 45000  # herdnb's own poll() timeout: longer than LIMIT
MARK = "BACKOFFSHIM_HERD500_NS"
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def reexec():
    if os.geteuid() == 0:
        cmd = ["unshare", "--net", "--ipc", "--mount"]
    else:
        cmd = ["unshare", "--user", "--map-current-user", "--keep-caps",
               "--net", "--ipc", "--mount"]
    env = dict(os.environ, **{MARK: "1"})
    return subprocess.call(cmd + ["--", sys.executable, os.path.abspath(__file__)], env=env)


class Syns:
    """Times of SYNs to port and of SYN-ACKs from it on lo (incoming copies
    only), from the kernel's receive timestamps: the sniffing thread may
    run late while N processes share the CPUs."""

    def __init__(self, port, limit):
        self.port = port
        self.times, self.synacks = [], []
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        for opt in (getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF):
            try:  # N SYNs at once when the server returns: no drops
                self.sock.setsockopt(socket.SOL_SOCKET, opt, 16 << 20)
                break
            except OSError:
                continue
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.05)
        self.offset = time.time() - time.monotonic()  # realtime stamps to monotonic
        self.stop = False
        self.deadline = time.monotonic() + limit
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop and time.monotonic() < self.deadline:
            try:
                data, anc, _, addr = self.sock.recvmsg(128, 64)
            except socket.timeout:
                continue
            if addr[2] != socket.PACKET_HOST or struct.unpack("!H", data[12:14])[0] != 0x800:
                continue
            ip = data[14:]
            if ip[9] != 6:
                continue
            tcp = ip[(ip[0] & 0xF) * 4:]
            sport, dport = struct.unpack("!HH", tcp[0:4])
            flags = tcp[13] & 0x12
            if not ((dport == self.port and flags == 0x02) or
                    (sport == self.port and flags == 0x12)):
                continue
            t = time.monotonic()
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    t = sec + nsec / 1e9 - self.offset
            (self.times if flags == 0x02 else self.synacks).append(t)

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


def serve(port, start, accepts, done, deadline, ready):
    """Listen on port from `start` on, recording every accept()."""
    time.sleep(max(0, start - time.monotonic()))
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4096)
    ready.append(time.monotonic())
    s.settimeout(0.1)
    while not done.is_set() and time.monotonic() < deadline:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        accepts.append(time.monotonic())
        c.close()
    s.close()


def steps_in(seconds):
    """The schedule's attempts (steps) in [0, seconds), the first at 0:
    (nominal, fewest, most); the first wait is initial_backoff, each later
    wait the backoff times 1 -/+ jitter."""
    out = []
    for lo_hi in (0, 1, -1):
        t, b, k = 0.0, INITIAL, 0
        for i in range(10000):
            if t >= seconds:
                break
            k += 1
            t += b if i == 0 else (1 + lo_hi * JITTER) * b
            b = min(b * MULT, MAXB)
        out.append(k)
    return tuple(out)


def shim_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKOFFSHIM_")}
    env.update(LD_PRELOAD=SO, BACKOFFSHIM_CONFIG="/dev/null", BACKOFFSHIM_LOG="off",
               BACKOFFSHIM_INITIAL_BACKOFF="%dms" % (INITIAL * 1000),
               BACKOFFSHIM_MULTIPLIER=str(MULT), BACKOFFSHIM_JITTER=str(JITTER),
               BACKOFFSHIM_MAX_BACKOFF="%gs" % MAXB, BACKOFFSHIM_MAX_ELAPSED="%ds" % LIMIT)
    # BACKOFFSHIM_SHARED unset: the default table (shared = user);
    # BACKOFFSHIM_NONBLOCKING unset: auto, a client, so defer
    return env


def cmd_of(prog, port):
    path = os.path.join(PROGS, prog)
    return [path, str(port)] + ([str(NB_TIMEOUT_MS)] if prog == "herdnb" else [])


def run_case(name, prog, outage, port):
    """N processes of prog, the server up `outage` s after the first is
    started (0: before). Returns the figures."""
    env = shim_env()
    argv = cmd_of(prog, port)
    out = tempfile.TemporaryFile()  # herdnb's lines: appends < PIPE_BUF
    syns = Syns(port, LIMIT + 5)
    accepts, ready, done = [], [], threading.Event()
    t0 = time.monotonic()
    up = t0 + outage
    server = threading.Thread(target=serve, args=(port, up, accepts, done, t0 + LIMIT + 2, ready),
                              daemon=True)
    server.start()
    if outage == 0:
        for _ in range(200):
            if ready:
                break
            time.sleep(0.01)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    pids = {}
    fa = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1)]
    for _ in range(N):
        pids[os.posix_spawn(argv[0], argv, env, file_actions=fa)] = None
    launched = time.monotonic() - t0
    end = t0 + LIMIT
    cpu, status, left = [], {}, set(pids)
    killed = 0
    for _ in range(int(LIMIT * 200) + 1000):  # 5 ms rounds
        if not left:
            break
        if time.monotonic() >= end:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            killed = len(left)
            end = float("inf")
        pid, st, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.005)
            continue
        if pid in left:
            left.discard(pid)
            status[pid] = os.waitstatus_to_exitcode(st)
            cpu.append(ru.ru_utime + ru.ru_stime)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    finished = time.monotonic()
    for _ in range(300):  # the backlog's last connections: accept()ed within 3 s
        if len(accepts) >= N:
            break
        time.sleep(0.01)
    done.set()
    server.join(2)
    time.sleep(0.1)  # the last SYN's capture
    syns.close()
    out.seek(0)
    lines = out.read().decode(errors="replace").splitlines()
    out.close()
    t_up = ready[0] if ready else up
    first = min(syns.times) if syns.times else t_up
    during = [t for t in syns.times if t < t_up]
    accepts.sort()
    synacks = sorted(syns.synacks)
    # connected: the client's connect() returns on the SYN-ACK
    all_in = max(0.0, synacks[N - 1] - t_up) if len(synacks) >= N else None
    acc_in = accepts[N - 1] - t_up if len(accepts) >= N else None
    total = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    cpu.sort()
    steps = steps_in(t_up - first) if during else (0, 0, 0)
    bursts = []  # the outage's SYNs grouped (gaps under 80 ms): [start, count, last]
    for t in during:
        if bursts and t - bursts[-1][2] < 0.08:
            bursts[-1][1] += 1
            bursts[-1][2] = t
        else:
            bursts.append([t, 1, t])
    return {
        "case": name, "prog": prog, "launched": launched, "outage": t_up - t0,
        "syns": len(during), "syns_total": len(syns.times), "steps": steps,
        "per_step": len(during) / steps[0] if steps[0] else None,
        "all_in": all_in, "acc_in": acc_in, "accepts": len(accepts),
        "synacks": len(synacks),
        "ok": sum(1 for v in status.values() if v == 0), "killed": killed,
        "unreaped": len(left), "cpu_total": total, "cpu_sum": sum(cpu),
        "cpu_mean": total / N, "cpu_p50": cpu[len(cpu) // 2] if cpu else 0,
        "cpu_max": cpu[-1] if cpu else 0, "elapsed": finished - t0,
        "timeline": " ".join("%.2f:%d" % (b[0] - t0, b[1]) for b in bursts),
        "nb_failed": sum(1 for l in lines if l.startswith("failed")),
    }


def fmt_rows(rows):
    head = ("%-16s %8s %9s %7s %12s %9s %16s %11s %13s %10s"
            % ("case", "launch", "outage", "SYNs", "steps", "SYNs/step",
               "all in after", "connected", "CPU/process", "CPU max"))
    out = [head]
    for r in rows:
        st = r["steps"]
        steps = "%d (%d-%d)" % st if r["syns"] else "-"
        per = "%.2f" % r["per_step"] if r["per_step"] is not None else "-"
        allin = ("%.2f s" % r["all_in"]) if r["all_in"] is not None else "never"
        outage = "%.2f s" % r["outage"] if r["syns"] or r["outage"] > 0.5 else "none"
        out.append("%-16s %7.2fs %9s %7d %12s %9s %16s %11s %10.2f ms %7.2f ms"
                   % (r["case"], r["launched"], outage, r["syns"], steps, per, allin,
                      "%d/%d" % (r["ok"], N), r["cpu_mean"] * 1e3, r["cpu_max"] * 1e3))
    return out


def main():
    if os.environ.get(MARK) != "1":
        return reexec()
    for p in (SO, os.path.join(PROGS, "herdclient"), os.path.join(PROGS, "herdnb")):
        if not os.access(p, os.X_OK if p != SO else os.R_OK):
            print("herd500: %s missing (make, make build/progs/herdclient build/progs/herdnb)"
                  % p, file=sys.stderr)
            return 2
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"], check=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(soft, 4 * N + 256)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    info = ("herd500: N=%d processes per case on %d CPUs, server down %.1f s; schedule "
            "initial_backoff=%dms multiplier=%g jitter=%g max_backoff=%gs; shared = user "
            "(default), private net+ipc+mount namespace"
            % (N, os.cpu_count(), OUTAGE, INITIAL * 1000, MULT, JITTER, MAXB))
    print(info, flush=True)
    cases = [("blocking", "herdclient", OUTAGE), ("parked", "herdnb", OUTAGE),
             ("ref blocking", "herdclient", 0.0), ("ref parked", "herdnb", 0.0)]
    rows = []
    for i, (name, prog, outage) in enumerate(cases):
        r = run_case(name, prog, outage, PORT + i)
        rows.append(r)
        print("  %s: done in %.1f s (%d SYNs, %d SYN-ACKs, %d accepts in all, the Nth "
              "accept %s after the server's listen()%s%s)"
              % (name, r["elapsed"], r["syns_total"], r["synacks"], r["accepts"],
                 "%.2f s" % r["acc_in"] if r["acc_in"] is not None else "never",
                 ", %d killed" % r["killed"] if r["killed"] else "",
                 ", %d not reaped" % r["unreaped"] if r["unreaped"] else ""), flush=True)
        time.sleep(1)  # TIME_WAIT and the table settle; the port is reused
    lines = fmt_rows(rows)
    notes = [
        "SYNs: to the port during the outage (before the server's listen());",
        "steps: the schedule's attempts from the first SYN to the server's return,",
        "  nominal (fewest-most with jitter); SYNs/step = SYNs / nominal steps;",
        "all in after: from the server's listen() to the Nth SYN-ACK (connect() returns);",
        "CPU/process: user+sys of the case's children (RUSAGE_CHILDREN delta) / N;",
        "  CPU max: the largest single child (wait4); ref rows: server up from the start.",
    ]
    timelines = ["SYNs during the outage, s after the first process's start:count (bursts):"]
    timelines += ["  %-9s %s" % (r["case"], r["timeline"]) for r in rows if r["timeline"]]
    text = "\n".join([info, ""] + lines + [""] + timelines + [""] + notes) + "\n"
    print()
    print(text, end="")
    for r in rows:
        if abs(r["cpu_sum"] - r["cpu_total"]) > 0.05 + 0.01 * r["cpu_total"]:
            print("note: %s: the sum over wait4() %.3f s differs from RUSAGE_CHILDREN %.3f s"
                  % (r["case"], r["cpu_sum"], r["cpu_total"]))
    with open(OUTFILE, "w") as f:
        f.write(text)
    print("written: %s" % OUTFILE)
    return 0 if all(r["ok"] == N for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""make herd: 100 client processes against a server that comes up after
10 s, in three cases: no shim (each client restarted at once by a shell
loop), the shim with `shared = off`, and the shim with `shared = user`.

Every SYN to the server's port is recorded on lo (a raw socket) and every
accept() by the server. Writes build/herd/<case>.dat (attempts per 100 ms),
build/herd.png (gnuplot) and prints one table row per case: SYNs during the
outage, the peak attempts per second, and the time from the server's return
until all 100 clients are connected.

Runs in a network and mount namespace of its own (as run.py does), with a
private /dev/shm; only loopback is used."""
import os
import subprocess
import sys
import threading
import time

from herd500 import Syns, serve  # (SYNs on lo, kernel-stamped; a recording server)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
SO = os.path.join(BUILD, "libbackoffshim.so")
CLIENT = os.path.join(BUILD, "progs", "herdclient")
OUT = os.path.join(BUILD, "herd")
N = 100
OUTAGE = 10.0
PORT = 24555
LIMIT = 60.0  # a case ends at the latest this long after its start
MARK = "BACKOFFSHIM_HERD_NS"


def reexec():
    if os.geteuid() == 0:
        cmd = ["unshare", "--net", "--ipc", "--mount"]
    else:
        cmd = ["unshare", "--user", "--map-current-user", "--keep-caps", "--net", "--ipc", "--mount"]
    env = dict(os.environ, **{MARK: "1"})
    return subprocess.call(cmd + ["--", sys.executable, os.path.abspath(__file__)], env=env)


def launch(case, table):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKOFFSHIM_")}
    env.pop("LD_PRELOAD", None)
    if case == "none":
        cmd = ["sh", "-c", 'until "$0" "$1"; do :; done', CLIENT, str(PORT)]
    else:
        env.update(LD_PRELOAD=SO, BACKOFFSHIM_SHARED=table if case == "user" else "off",
                   BACKOFFSHIM_LOG="off", BACKOFFSHIM_MAX_ELAPSED="0")
        cmd = [CLIENT, str(PORT)]
    return [subprocess.Popen(cmd, env=env) for _ in range(N)]


def run_case(case):
    table = os.path.join("/dev/shm", "herd-table-%s" % case)
    syns = Syns(PORT, LIMIT + 5)
    accepts, done = [], threading.Event()
    t0 = time.monotonic()
    up = t0 + OUTAGE
    server = threading.Thread(target=serve, args=(PORT, up, accepts, done, t0 + LIMIT, []),
                              daemon=True)
    server.start()
    procs = launch(case, table)
    launched = time.monotonic() - t0
    end = t0 + LIMIT
    for p in procs:
        try:
            p.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    all_in = time.monotonic()
    done.set()
    server.join(2)
    time.sleep(0.1)
    syns.close()
    times = [t - t0 for t in syns.times]
    before = [t for t in times if t < OUTAGE]
    bins = {}
    for t in times:
        bins[int(t * 10)] = bins.get(int(t * 10), 0) + 1
    peak = max([sum(bins.get(b + i, 0) for i in range(10)) for b in bins] or [0])
    connected = len(accepts)
    with open(os.path.join(OUT, case + ".dat"), "w") as f:
        for b in range(int((all_in - t0) * 10) + 2):
            f.write("%.1f %d\n" % (b / 10, bins.get(b, 0)))
    return {"case": case, "launched": launched, "outage_syns": len(before), "peak": peak,
            "all_in": all_in - up if connected >= N else None, "connected": connected}


PLOT = """
set terminal pngcairo size 900,420 font ",10"
set output '%(png)s'
set title "100 clients, server down for the first 10 s: attempts (SYNs) per 100 ms"
set xlabel "seconds"
set ylabel "SYNs per 100 ms"
set logscale y
set yrange [0.8:*]
set xrange [0:%(xmax)g]
set arrow from 10,graph 0 to 10,graph 1 nohead dt 2
set key top right
plot '%(dir)s/none.dat' using 1:($2>0?$2:1/0) with impulses lw 2 title 'no shim (shell restart loop)', \\
     '%(dir)s/off.dat' using 1:($2>0?$2:1/0) with impulses lw 2 title 'shim, shared = off', \\
     '%(dir)s/user.dat' using 1:($2>0?$2:1/0) with points pt 7 ps 1 title 'shim, shared = user'
"""


def main():
    if os.environ.get(MARK) != "1":
        return reexec()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"], check=True)
    os.makedirs(OUT, exist_ok=True)
    rows = [run_case(c) for c in ("none", "off", "user")]
    print("%-6s %10s %22s %20s %28s" % ("case", "launched", "SYNs during outage",
                                         "peak attempts/s", "all connected after return"))
    for r in rows:
        allin = "%.2f s" % r["all_in"] if r["all_in"] is not None else \
            "%d of %d" % (r["connected"], N)
        print("%-6s %9.3fs %22d %20d %28s" % (r["case"], r["launched"], r["outage_syns"],
                                              r["peak"] * 1, allin))
    xmax = max(float(open(os.path.join(OUT, c + ".dat")).read().split()[-2])
               for c in ("none", "off", "user"))
    png = os.path.join(BUILD, "herd.png")
    script = PLOT % {"png": png, "dir": OUT, "xmax": xmax}
    r = subprocess.run(["gnuplot"], input=script, text=True)
    if r.returncode == 0:
        print("plot: %s" % png)
    return 0 if all(r["connected"] >= N for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

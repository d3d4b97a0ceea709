"""An event loop under pace mode: a poll()-based server (tests/progs/evloop.c)
keeps answering its clients while it retries a dead upstream in a tight loop.
With BACKOFFSHIM_NONBLOCKING=pace the shim must never block the loop, must
fail the connects inside the backoff window at once, and must let the
upstream's SYNs out on the schedule; without the shim the same program
hammers the upstream."""
import re
import socket
import time

from lib import (slack, SynSniffer, TestFailure, base_env, check,
                 check_not_delayed, finish,
                 free_port, prog, shim_env, spawn)

DURATION = 2.5    # seconds evloop runs
# The schedule, scaled down less than elsewhere: a turn held by a wait of
# it stands well above a loaded machine's preemptions (tens of ms).
INITIAL, MAXB = 0.2, 0.4
PACE = dict(BACKOFFSHIM_NONBLOCKING="pace", BACKOFFSHIM_INITIAL_BACKOFF="200ms",
            BACKOFFSHIM_MAX_BACKOFF="400ms")
PING_EVERY = 0.02
POLL_MS = 10      # evloop's poll timeout per turn
LINE = re.compile(r"upstream_calls=(\d+) refused_fast=(\d+) "
                  r"max_call_ms=([0-9.]+) max_turn_ms=([0-9.]+)$")


def _connect_when_listening(port, p, timeout=3.0):
    """The first client: retried (bounded) until evloop listens."""
    end = time.monotonic() + timeout
    for _ in range(1000):
        if p.poll() is not None or time.monotonic() >= end:
            break
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=0.5)
        except OSError:
            time.sleep(0.01)
    raise TestFailure("evloop never listened on %d (exit %r)" % (port, p.poll()))


def _ping(sock, until):
    """'ping' every PING_EVERY until `until`; returns the round trips (s)."""
    sock.settimeout(1.0)
    rtts, buf = [], b""
    for _ in range(int(DURATION / PING_EVERY) + 10):
        t0 = time.monotonic()
        if t0 >= until:
            break
        sock.sendall(b"ping\n")
        while b"\n" not in buf:
            try:
                chunk = sock.recv(64)
            except socket.timeout:
                raise TestFailure("no pong within 1s (after %d round trips)" % len(rtts))
            check(chunk, "evloop closed the client connection")
            buf += chunk
        rtts.append(time.monotonic() - t0)
        line, buf = buf.split(b"\n", 1)
        check(line == b"pong", "expected pong, got %r" % line)
        time.sleep(max(0.0, t0 + PING_EVERY - time.monotonic()))
    return rtts


def _run_evloop(env, with_client):
    """Run evloop for DURATION against a dead upstream. Returns a dict with
    the parsed result line, the client's round trips, the SYN times to the
    upstream and the wall time."""
    lport, uport = free_port(), free_port()
    with SynSniffer(uport) as sn:
        t0 = time.monotonic()
        p = spawn([prog("evloop"), str(lport), str(uport), str(DURATION)], env)
        rtts = []
        try:
            if with_client:
                with _connect_when_listening(lport, p) as c:
                    rtts = _ping(c, t0 + DURATION - 0.2)
        finally:
            rc, out, err = finish(p, DURATION + 10)
        wall = time.monotonic() - t0
        sn.settled_count()
        syns = list(sn.times)
    check(rc == 0, "evloop exited %r; out=%r err=%r" % (rc, out, err[-500:]))
    m = LINE.search(out.strip())
    check(m, "no result line from evloop: %r (stderr %r)" % (out, err[-500:]))
    return dict(calls=int(m.group(1)), refused_fast=int(m.group(2)),
                max_call_ms=float(m.group(3)), max_turn_ms=float(m.group(4)),
                rtts=rtts, syns=syns, wall=wall, out=out.strip(), err=err)


def _summary(r):
    gaps = [b - a for a, b in zip(r["syns"], r["syns"][1:])]
    return "%s; %d SYNs, gaps %s; max rtt %s; wall %.2fs; stderr tail %r" % (
        r["out"], len(r["syns"]), ", ".join("%.3f" % g for g in gaps[:8]),
        "%.1fms" % (1e3 * max(r["rtts"])) if r["rtts"] else "-", r["wall"],
        r["err"][-300:])


def test_evloop_pace_mode_keeps_the_loop_responsive_and_paces_upstream():
    shim = _run_evloop(shim_env(**PACE), with_client=True)
    base = _run_evloop(base_env(), with_client=True)
    what = "pace: " + _summary(shim)

    # The loop never blocked: every call into the shim returned at once,
    # and no turn, no client round trip and not the whole run took longer
    # than without the shim by as much as half a wait of the schedule (a
    # blocked loop is held at least initial_backoff; the run, at most
    # max_backoff per call), and the clients were answered throughout.
    check_not_delayed("evloop's run (%s)" % what, base["wall"], shim["wall"], 2 * MAXB)
    check(shim["max_call_ms"] <= POLL_MS, "a shim call took %.3fms; %s" % (
        shim["max_call_ms"], what))
    check_not_delayed("the longest loop turn (%s)" % what, base["max_turn_ms"] / 1e3,
                      shim["max_turn_ms"] / 1e3, INITIAL)
    check(len(shim["rtts"]) >= DURATION / PING_EVERY / 2,
          "only %d round trips; %s" % (len(shim["rtts"]), what))
    check(base["rtts"], "no client round trip without the shim: " + _summary(base))
    check_not_delayed("the slowest client round trip (%s)" % what, max(base["rtts"]),
                      max(shim["rtts"]), INITIAL)

    # Inside the window connect() fails at once with the last error and sends
    # nothing, except one real attempt per initial_backoff (so an upstream
    # that comes back is found within about initial_backoff): SYNs never
    # closer than initial_backoff, however often the program connects.
    check(shim["refused_fast"] > 0, "no connect failed fast; " + what)
    n = len(shim["syns"])
    check(n >= 5, "only %d SYN(s) to the upstream in %.1fs; %s" % (n, DURATION, what))
    check(n <= DURATION / INITIAL + 2, "%d SYNs to the upstream: not paced; %s" % (n, what))
    check(shim["refused_fast"] >= shim["calls"] / 2, "%d of %d upstream calls sent a SYN; %s"
          % (shim["calls"] - shim["refused_fast"], shim["calls"], what))
    gaps = [b - a for a, b in zip(shim["syns"], shim["syns"][1:])]
    check(min(gaps) >= 0.8 * INITIAL - slack(), "SYN gaps %s below initial_backoff; %s"
          % (", ".join("%.3f" % g for g in gaps[:8]), what))

    # Without the shim the same loop hammers the dead upstream.
    check(len(base["syns"]) >= max(1000, 50 * n), "without the shim only %d SYNs; %s" % (
        len(base["syns"]), _summary(base)))

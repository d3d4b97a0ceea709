"""One schedule per destination for the whole host (issue 10): processes that
map one shared table send about as many SYNs as one process, a restart loop
is paced, a newcomer joins the schedule, a killed prober does not stall the
others, the operator sees and resets the state, and every unusable table
file falls back to a private table with one line. SYNs are counted on the
wire; each case is also run with `shared = off` or without the shim."""
import json
import os
import re
import subprocess
import sys
import time

from lib import (BUILD, LineReader, Server, SynSniffer, TestSkip, base_env, check, finish,
                 free_port, new_table, prog, run, shim_env, spawn)

CLI = os.path.join(BUILD, "backoffshim")
QUICK = dict(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s",
             BACKOFFSHIM_LOG="off")


def _syns_of(n_procs, env, port, seconds):
    """n_procs legacy clients started at once against a dead port, each
    with a budget of `seconds`: the SYNs seen."""
    env = dict(env, BACKOFFSHIM_MAX_ELAPSED="%gs" % seconds)
    with SynSniffer(port) as sn:
        ps = [spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
              for _ in range(n_procs)]
        for p in ps:
            finish(p, seconds + 10)
        time.sleep(0.05)  # the last SYN's capture
        return len(sn.times)


def test_sixteen_processes_send_about_what_one_sends():
    port = free_port()
    one = _syns_of(1, shim_env(**QUICK), port, 3)
    many = _syns_of(16, shim_env(**QUICK), port, 3)
    private = _syns_of(16, shim_env(BACKOFFSHIM_SHARED="off", **QUICK), port, 3)
    check(one >= 4, "one process sent %d SYNs in 3 s" % one)
    check(many <= 1.5 * one, "16 processes sent %d SYNs, one sends %d" % (many, one))
    check(private >= 8 * one, "with shared = off 16 processes sent only %d (one: %d)"
          % (private, one))


def test_a_restart_loop_is_paced_to_one_attempt_per_initial_backoff():
    """`nc -z` restarted at once for 3 s, each run with max_attempts = 1."""
    port = free_port()
    env = shim_env(BACKOFFSHIM_MAX_ATTEMPTS="1", **QUICK)
    runs = 0
    with SynSniffer(port) as sn:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            subprocess.run(["nc", "-z", "127.0.0.1", str(port)], env=env, timeout=10,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs += 1
        time.sleep(0.05)
        syns = len(sn.times)
        gaps = sn.gaps()
    check(syns <= 3 / 0.2 + 2, "%d SYNs from %d runs in 3 s" % (syns, runs))
    short = [g for g in gaps if g < 0.2 * 0.8 - 0.03]
    check(not short, "attempts closer than initial_backoff: %r" % short)


def _status(table):
    p = subprocess.run([CLI, "status", "--json", "--table", table], capture_output=True,
                       text=True, timeout=10)
    check(p.returncode == 0, "status: %r" % (p,))
    return json.loads(p.stdout)


def _wait_status(table, pred, timeout):
    end = time.monotonic() + timeout
    rows = []
    while time.monotonic() < end:
        rows = _status(table)
        if rows and pred(rows[0]):
            return rows[0]
        time.sleep(0.05)
    raise AssertionError("status never matched: %r" % rows)


def test_a_newcomer_after_the_server_returns_connects_at_once_and_frees_the_waiter():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="300ms",
                   BACKOFFSHIM_MAX_BACKOFF="5s", BACKOFFSHIM_JITTER="0")
    waiter = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
    try:
        row = _wait_status(table, lambda r: r["next_attempt_in"] >= 1.5, 15)
    except AssertionError as e:
        waiter.kill()
        raise
    with Server(port).start():
        t0 = time.monotonic()
        rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
        newcomer = time.monotonic() - t0
        rc_w, out_w, err_w = finish(waiter, 5)
        waited = time.monotonic() - t0
    check(rc == 0 and "hello" in out, "newcomer: rc=%d %r %r" % (rc, out, err[-300:]))
    check(newcomer <= 0.3 + 0.15, "the newcomer took %.2fs (next attempt was %.1fs away)"
          % (newcomer, row["next_attempt_in"]))
    check(rc_w == 0 and "hello" in out_w, "waiter: rc=%d %r" % (rc_w, err_w[-300:]))
    check(waited <= newcomer + 0.3, "the old waiter connected %.2fs after the newcomer's start"
          % waited)


PARKED = r"""
import select, socket, sys, time
port = int(sys.argv[1])
s = socket.socket(); s.setblocking(False)
s.connect_ex(('127.0.0.1', port))
ep = select.epoll(); ep.register(s, select.EPOLLOUT)
if not ep.poll(0.3):
    print('parked', flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:
    ev = ep.poll(1)
    if ev:
        print('event', ev[0][1], s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), flush=True)
        break
"""


def test_reset_puts_blocking_and_parked_waiters_on_the_wire_within_250ms():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="1s",
                   BACKOFFSHIM_MAX_BACKOFF="20s", BACKOFFSHIM_JITTER="0",
                   BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_MAX_ELAPSED="60s")
    blocking = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
    parked = spawn([sys.executable, "-c", PARKED, str(port)], env)
    lines = LineReader(parked)
    try:
        check(lines.wait_for(lambda l: l == "parked", 10), "the socket was never parked")
        _wait_status(table, lambda r: r["failures"] >= 3 and r["waiting_threads"] >= 1 and
                     r["waiting_processes"] == 1, 15)
        with SynSniffer(port) as sn:
            before = len(sn.times)
            p = subprocess.run([CLI, "reset", "--table", table, "127.0.0.1:%d" % port],
                               capture_output=True, text=True, timeout=10)
            t_reset = time.monotonic()
            check(p.returncode == 0 and "reset 127.0.0.1:%d" % port in p.stdout, "reset: %r" % (p,))
            sn.wait_for(before + 2, 1)
            after = [t - t_reset for t in sn.times[before:]]
        check(len(after) >= 2 and after[1] <= 0.25,
              "SYNs after the reset came at %r s (want two within 0.25 s)" % after)
    finally:
        blocking.kill()
        parked.kill()
    _, _, err = finish(blocking, 5)
    check("backoff reset by the operator" in err, "the blocking waiter did not say why: %r"
          % err[-300:])


PROM_PARSE = r"""
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([[s.name, s.labels, s.value] for f in
                  text_string_to_metric_families(sys.stdin.read()) for s in f.samples]))
"""


def test_status_text_json_and_prometheus():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="3", **QUICK)
    rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(rc == 1, "client: rc=%d" % rc)
    rows = _status(table)
    check(len(rows) == 1 and rows[0]["destination"] == "127.0.0.1:%d" % port and
          rows[0]["failures"] == 3 and rows[0]["last_error"] == "ECONNREFUSED" and
          rows[0]["give_ups"] == 1 and rows[0]["attempts"] == 3, "json: %r" % rows)
    p = subprocess.run([CLI, "status", "--table", table], capture_output=True, text=True)
    check(p.returncode == 0 and "127.0.0.1:%d" % port in p.stdout, "text: %r" % (p,))
    p = subprocess.run([CLI, "status", "--prometheus", "--table", table], capture_output=True,
                       text=True)
    check(p.returncode == 0, "prometheus: %r" % (p,))
    parsed = subprocess.run(["/usr/bin/python3", "-c", PROM_PARSE], input=p.stdout,
                            capture_output=True, text=True, timeout=30)
    if "No module named" in parsed.stderr:
        raise TestSkip("python3-prometheus-client is not installed")
    check(parsed.returncode == 0, "the parser refused it: %r %r" % (parsed.stderr, p.stdout))
    samples = json.loads(parsed.stdout)
    want = ["backoffshim_failures_total", {"destination": "127.0.0.1:%d" % port}, 3.0]
    check(want in samples, "parsed: %r" % samples)
    check(len({s[0] for s in samples}) == 9, "9 metrics: %r" % samples)
    run([CLI, "reset", "--all", "--table", table], base_env())
    p = subprocess.run([CLI, "status", "--table", table], capture_output=True, text=True)
    check(p.stdout.strip() == "no destination is backing off", "after reset: %r" % p.stdout)


# ---- tables the shim must not use ----

def _fallback(table_path, prepare, expect_reason, shared=None):
    """With an unusable table at table_path, a client against a live server
    behaves as without the shim, and one line names the file."""
    port = free_port()
    prepare(table_path)
    env = shim_env(BACKOFFSHIM_SHARED=shared or table_path)
    with Server(port).start():
        plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
        got = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(got[0] == plain[0] and got[1] == plain[1], "with %s: %r, without: %r"
          % (expect_reason, got, plain))
    lines = [l for l in got[2].splitlines() if table_path in l]
    check(len(lines) == 1 and expect_reason in lines[0] and "private table" in lines[0],
          "want one line naming %s (%s): %r" % (table_path, expect_reason, got[2]))


def _write(content, mode=0o600):
    def prepare(path):
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, mode)
    return prepare


def test_unusable_table_files_fall_back_to_a_private_table():
    good = new_table()
    run([prog("legacy_client"), "127.0.0.1", "1"],
        shim_env(BACKOFFSHIM_SHARED=good, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    with open(good, "rb") as f:
        image = f.read()
    check(len(image) > 4096 and image[:8] != b"\0" * 8, "no table was made at %s" % good)
    other_layout = bytearray(image)
    other_layout[8] = 99
    corrupt = bytearray(image)
    corrupt[0:8] = b"garbage!"

    def symlink(path):
        os.symlink(good, path)
    cases = [
        (symlink, "symbolic link"),
        (_write(image[:5000]), "wrong size"),
        (_write(bytes(corrupt)), "bad header"),
        (_write(bytes(other_layout)), "another layout"),
        (_write(image, 0o666), "writable by other users"),
        (lambda p: None, "cannot create"),  # (its directory does not exist)
    ]
    for prepare, reason in cases:
        path = new_table() if reason != "cannot create" else "/nonexistent-dir/table"
        _fallback(path, prepare, reason)


FULL_SHM = r"""
set -e
mount -t tmpfs -o %s tmpfs /dev/shm
exec "$@"
"""


def _in_private_shm(opts, cmd, env):
    """cmd in a mount namespace whose /dev/shm is a small (or read-only)
    tmpfs."""
    script = FULL_SHM % opts
    return run(["unshare", "-m", "sh", "-c", script, "sh"] + cmd, env)


def test_full_or_read_only_dev_shm_falls_back_with_one_line():
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        raise TestSkip("no mount namespace here")
    port = free_port()
    env = shim_env(BACKOFFSHIM_SHARED="user")
    cmd = [prog("legacy_client"), "127.0.0.1", str(port)]
    with Server(port).start():
        plain = run(cmd, base_env())
        for opts, reason in (("size=64k", "no room"), ("size=1m,ro", "cannot create")):
            rc, out, err = _in_private_shm(opts, cmd, env)
            check((rc, out) == plain[:2], "%s: %r, without the shim %r" % (reason, (rc, out, err), plain))
            lines = [l for l in err.splitlines() if "/dev/shm/backoffshim-v" in l]
            check(len(lines) == 1 and reason in lines[0], "%s: %r" % (reason, err))


MAPS = r"""
import os, socket, sys
s = socket.socket(); s.connect_ex(('127.0.0.1', 1))
# (the process that made the table maps it under its O_TMPFILE name)
inodes = set(l.split()[4] for l in open('/proc/self/maps') if sys.argv[1] in l)
print(' '.join(sorted(inodes)))
"""


def test_processes_starting_at_once_agree_on_one_table():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="1")
    ps = [spawn([sys.executable, "-c", MAPS, os.path.dirname(table)], env) for _ in range(8)]
    seen, errs = set(), []
    for p in ps:
        rc, out, err = finish(p, 20)
        seen.add(out.strip())
        errs.append(err)
    check(len(seen) == 1 and list(seen)[0], "the processes mapped %r: %r" % (seen, errs))
    leftovers = [f for f in os.listdir(os.path.dirname(table))
                 if f.startswith(os.path.basename(table)) and f != os.path.basename(table)]
    check(not leftovers, "files left next to the table: %r" % leftovers)


def test_a_prober_killed_mid_attempt_is_taken_over_within_a_second():
    """Process A holds the destination's attempt slot in a long attempt (a
    listener whose accept queue is full drops its SYN); B waits on it. A is
    killed with SIGKILL: B's attempt is on the wire within 1 s, not at A's
    attempt deadline (10 s)."""
    import socket
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="200ms",
                   BACKOFFSHIM_MAX_BACKOFF="1s", BACKOFFSHIM_JITTER="0",
                   BACKOFFSHIM_MIN_CONNECT_TIMEOUT="10s", BACKOFFSHIM_MAX_ELAPSED="30s")
    rc, _, err = run([prog("legacy_client"), "127.0.0.1", str(port)],
                     dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    check(rc == 1, "priming: %r" % err)
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(0)
    filler = socket.create_connection(("127.0.0.1", port))  # the queue is full now
    a = b = None
    try:
        with SynSniffer(port) as sn:
            a = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
            check(sn.wait_for(1, 5) >= 1, "A never attempted")
            b = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
            time.sleep(0.8)  # B waits on A's attempt
            seen = len(sn.times)
            check(seen == 1, "B did not wait for A's attempt: %d SYNs" % seen)
            a.kill()
            a.wait()
            t_kill = time.monotonic()
            sn.wait_for(seen + 1, 3)
            after = [t - t_kill for t in sn.times[seen:] if t > t_kill]
        check(after and after[0] <= 1.0, "B attempted %r s after A was killed" % after)
    finally:
        for p in (a, b):
            if p:
                p.kill()
                p.wait()
        filler.close()
        lst.close()


def test_garbage_in_the_table_cannot_crash_or_stall_a_process():
    """Another process with write access fills the table (all but its
    header) with random bytes: clients and `status` still finish within
    their own budgets, with the exit status they have without the shim."""
    import random
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="2s", **QUICK)
    run([prog("legacy_client"), "127.0.0.1", str(port)], dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    size = os.path.getsize(table)
    rnd = random.Random(4)
    with open(table, "r+b") as f:
        f.seek(4096)
        f.write(rnd.randbytes(size - 4096))
    plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
    for _ in range(3):
        t0 = time.monotonic()
        got = run([prog("legacy_client"), "127.0.0.1", str(port)], env, timeout=30)
        took = time.monotonic() - t0
        check(got[0] == plain[0], "rc %d, without the shim %d: %r" % (got[0], plain[0], got[2]))
        check(took < 2 + 1.5, "the client took %.1fs with a 2 s budget" % took)
    p = subprocess.run([CLI, "status", "--json", "--table", table], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 0 and isinstance(json.loads(p.stdout), list), "status: %r" % (p,))


def test_a_table_of_another_user_is_never_used():
    """The per-user table's name, made by another user first: refused (as
    are symlinks, checked above), with one line."""
    path = "/dev/shm/backoffshim-v2-u%d-n%d" % (os.geteuid(), os.stat("/proc/self/ns/net").st_ino)
    good = new_table()
    run([prog("legacy_client"), "127.0.0.1", "1"],
        shim_env(BACKOFFSHIM_SHARED=good, BACKOFFSHIM_MAX_ATTEMPTS="1"))

    def foreign(p):
        with open(good, "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        os.chmod(p, 0o600)
        other = 65534 if os.geteuid() != 65534 else 0
        try:
            os.chown(p, other, other)
        except OSError:
            os.unlink(p)
            raise TestSkip("cannot give a file to another user here")
    try:
        _fallback(path, foreign, "owned by another user", shared="user")
    finally:
        if os.path.exists(path):
            os.unlink(path)


PARKED_TIMED = r"""
import select, socket, sys, time
port = int(sys.argv[1])
s = socket.socket(); s.setblocking(False)
s.connect_ex(('127.0.0.1', port))
ep = select.epoll(); ep.register(s, select.EPOLLOUT)
if not ep.poll(0.3):
    print('parked', flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:
    ev = ep.poll(1)
    if ev:
        print('event %d %d %.6f' % (ev[0][1], s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
                                    time.monotonic()), flush=True)
        break
"""


def test_a_success_in_another_process_releases_a_parked_socket_within_250ms():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="1s",
                   BACKOFFSHIM_MAX_BACKOFF="20s", BACKOFFSHIM_JITTER="0",
                   BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_MAX_ELAPSED="60s")
    parked = spawn([sys.executable, "-c", PARKED_TIMED, str(port)], env)
    lines = LineReader(parked)
    try:
        check(lines.wait_for(lambda l: l == "parked", 10), "the socket was never parked")
        row = _wait_status(table, lambda r: r["failures"] >= 3, 15)
        with Server(port).start():
            rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
            t_success = time.monotonic()
            check(rc == 0, "the other process: rc=%d %r" % (rc, err[-300:]))
            ev = lines.wait_for(lambda l: l.startswith("event"), 5)
    finally:
        parked.kill()
    check(ev, "the parked socket never connected (next attempt was %.1fs away)"
          % row["next_attempt_in"])
    _, events, so_error, at = ev.split()
    check(int(events) & 4 and so_error == "0", "the parked socket reported %r" % ev)
    check(float(at) - t_success <= 0.25, "released %.3fs after the other process connected"
          % (float(at) - t_success))

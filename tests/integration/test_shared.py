"""One schedule per destination for the whole host (issue 10): processes that
map one shared table send about as many SYNs as one process, a restart loop
is paced, a newcomer joins the schedule, a killed prober does not stall the
others, the operator sees and resets the state, and every unusable table
segment (System V, issue 20) leaves the process a private table with one
line (none for another user's segment). SYNs are counted on the
wire; each case is also run with `shared = off` or without the shim."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import sysv
from lib import (BUILD, PRELOAD, SO, FullQueue, LineReader, Server, SynSniffer, TestFailure,
                 TestSkip, base_env, check, finish, free_port, need_root, new_table, prog, run,
                 shim_env, slack, spawn, status_rows, wait_status_row)

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
        return sn.settled_count()


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
        syns = sn.settled_count()
        gaps = sn.gaps()
    check(syns <= 3 / 0.2 + 2, "%d SYNs from %d runs in 3 s" % (syns, runs))
    short = [g for g in gaps if g < 0.2 * 0.8 - slack()]
    check(not short, "attempts closer than initial_backoff: %r" % short)


def test_a_newcomer_after_the_server_returns_connects_at_once_and_frees_the_waiter():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="300ms",
                   BACKOFFSHIM_MAX_BACKOFF="5s", BACKOFFSHIM_JITTER="0")
    waiter = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
    try:
        row = wait_status_row(table, lambda r: r["next_attempt_in"] >= 1.5, 15)
    except TestFailure:
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
        wait_status_row(table, lambda r: r["failures"] >= 3 and r["waiting_threads"] >= 1 and
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


METRICS = ["backoffshim_" + m for m in (
    "consecutive_failures", "next_attempt_timestamp_seconds", "last_attempt_timestamp_seconds",
    "waiting_threads", "waiting_processes", "attempts_total", "failures_total", "waits_total",
    "waited_seconds_total", "give_ups_total")]


def test_status_text_json_and_prometheus():
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="3", **QUICK)
    rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(rc == 1, "client: rc=%d" % rc)
    rows = status_rows(table)
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
    import pwd
    labels = {"destination": "127.0.0.1:%d" % port, "table": table,
              "user": pwd.getpwuid(os.geteuid()).pw_name}
    want = ["backoffshim_failures_total", labels, 3.0]
    check(want in samples, "parsed: %r" % samples)
    names = {s[0] for s in samples}
    check(names == set(METRICS), "the 10 metrics %r, got %r" % (METRICS, sorted(names)))
    odd = [s for s in samples if s[1] != labels]
    check(not odd, "samples without the labels %r: %r" % (labels, odd))
    run([CLI, "reset", "--all", "--table", table], base_env())
    p = subprocess.run([CLI, "status", "--table", table], capture_output=True, text=True)
    check(p.stdout.strip() == "no destination is backing off", "after reset: %r" % p.stdout)


# ---- tables the shim must not use ----

SEG_LINE = "shared table (System V"  # then " key 0x%08x" (newer), "): " and the reason


def _names(line, k, reason):
    """Is line the shim's line about table segment k, naming reason?"""
    m = re.search(r"shared table \(System V(?: key 0x([0-9a-f]{8}))?\): (.*)", line)
    return bool(m) and (m.group(1) is None or int(m.group(1), 16) == k) and \
        m.group(2).startswith(reason)


def _real_header():
    """A table made by a failing client: its segment's size and header."""
    name = new_table()
    run([prog("legacy_client"), "127.0.0.1", "1"],
        shim_env(BACKOFFSHIM_SHARED=name, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    i = sysv.find(sysv.key(name))
    check(i is not None, "a failing client made no table for %s" % name)
    size = sysv.stat(i).segsz
    check(size > sysv.HEADER and sysv.header(i) == (sysv.MAGIC, sysv.LAYOUT),
          "the table made: %d bytes, header %r" % (size, sysv.header(i)))
    return size, sysv.read(i, 0, sysv.HEADER)


def _plant(name, size, mode=0o600, head=None, owner=None):
    """A segment under `name`'s key, as someone else left it: its id."""
    i = sysv.create(sysv.key(name), size, mode)
    if head:
        sysv.write(i, 0, head)
    if owner is not None:
        sysv.give_to(i, owner)
    return i


def _refused(name, seg, reason, lines):
    """With the segment `seg` planted under table `name`'s key: a client
    against a live server behaves as without the shim; one against a dead
    port too, and is still retried (a private table); `lines` lines (at the
    default level) name `reason`; the segment is left as it was, attached by
    nobody, and no lock file is made."""
    k = sysv.key(name)
    image = sysv.read(seg, 0, min(sysv.stat(seg).segsz, 2 * sysv.HEADER))
    env = shim_env(BACKOFFSHIM_SHARED=name)
    port, dead = free_port(), free_port()
    with Server(port).start():
        plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
        got = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(got[:2] == plain[:2], "%s: with the shim %r, without %r" % (reason, got, plain))
    said = [l for l in got[2].splitlines() if "shared table" in l]
    check(len(said) == lines and all(_names(l, k, reason) for l in said),
          "%s: want %d line(s) naming it, got %r" % (reason, lines, got[2]))
    if not lines:
        check(got[2] == plain[2], "%s: stderr %r, without the shim %r" % (reason, got[2], plain[2]))
    plain = run([prog("legacy_client"), "127.0.0.1", str(dead)], base_env())
    with SynSniffer(dead) as sn:
        got = run([prog("legacy_client"), "127.0.0.1", str(dead)],
                  dict(env, BACKOFFSHIM_MAX_ATTEMPTS="3"))
        syns = sn.settled_count()
    check(got[0] == plain[0] and got[1] == plain[1],
          "%s, dead port: with the shim %r, without %r" % (reason, got, plain))
    check(syns == 3, "%s: %d SYNs with max_attempts = 3 (a private table retries)"
          % (reason, syns))
    said = [l for l in got[2].splitlines() if "shared table" in l]
    check(len(said) == lines, "%s, dead port: %r" % (reason, got[2]))
    check(sysv.find(k) == seg and sysv.stat(seg).nattch == 0 and
          sysv.read(seg, 0, len(image)) == image,
          "%s: the planted segment was replaced, kept attached or written" % reason)
    check(not os.path.exists(sysv.lock_path(k)), "%s: a lock file was made" % reason)


def test_unusable_table_segments_leave_a_private_table_with_one_line():
    size, head = _real_header()
    other_layout = bytearray(head)
    other_layout[8:12] = (99).to_bytes(4, "little")
    cases = [
        (dict(size=size, mode=0o666, head=head), "open to other users (mode is not 0600)"),
        (dict(size=size, mode=0o640, head=head), "open to other users (mode is not 0600)"),
        (dict(size=5000, head=head), "of the wrong size"),
        (dict(size=size + 4096, head=head), "of the wrong size"),
        (dict(size=size, head=b"garbage!" + head[8:]), "damaged (bad header)"),
        (dict(size=size, head=bytes(other_layout)), "a table of another layout version"),
    ]
    for how, reason in cases:
        name = new_table()
        seg = _plant(name, **how)
        try:
            _refused(name, seg, reason, 1)
        finally:
            sysv.remove(seg)


def test_a_table_of_another_user_is_never_used_and_not_mentioned():
    """Another user's segment under this user's key (root hands it over):
    never attached; only a debug line says so (the key is a hash: it may be
    another program's segment)."""
    need_root("giving a segment to another user")
    size, head = _real_header()
    name = new_table()
    seg = _plant(name, size, head=head, owner=65534)
    try:
        _refused(name, seg, "owned by another user", 0)
        got = run([prog("legacy_client"), "127.0.0.1", "1"],
                  shim_env(BACKOFFSHIM_SHARED=name, BACKOFFSHIM_MAX_ATTEMPTS="1",
                           BACKOFFSHIM_LOG="debug"))
        said = [l for l in got[2].splitlines() if SEG_LINE in l]
        check(len(said) == 1 and _names(said[0], sysv.key(name), "owned by another user"),
              "at the debug level, want one line: %r" % got[2])
    finally:
        sysv.remove(seg)


RO_SHM = r"""
set -e
mount -t tmpfs -o %s tmpfs /dev/shm
exec "$@"
"""


def _in_private_shm(opts, cmd, env, timeout=20):
    """cmd in a mount namespace whose /dev/shm is a tmpfs mounted with
    `opts` (the IPC namespace, and so the tables, are the test's)."""
    return run(["unshare", "-m", "sh", "-c", RO_SHM % opts, "sh"] + cmd, env, timeout)


def test_a_read_only_dev_shm_leaves_clients_as_without_the_shim():
    """The lock file cannot be made: the table is still used (the probe
    word's deadline guards alone) and clients behave as without the shim."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        raise TestSkip("no mount namespace here")
    port, dead = free_port(), free_port()
    name = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=name, BACKOFFSHIM_MAX_ELAPSED="2s", **QUICK)
    ro = "size=1m,ro"
    with Server(port).start():
        plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
        got = _in_private_shm(ro, [prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(got == plain, "live server: with the shim %r, without %r" % (got, plain))
    plain = run([prog("legacy_client"), "127.0.0.1", str(dead)], base_env())
    with SynSniffer(dead) as sn:
        got = _in_private_shm(ro, [prog("legacy_client"), "127.0.0.1", str(dead)],
                              dict(env, BACKOFFSHIM_MAX_ATTEMPTS="3"))
        syns = sn.settled_count()
    check(got[:2] == plain[:2] and syns == 3,
          "dead port: %d SYNs, with the shim %r, without %r" % (syns, got, plain))
    check(sysv.find(sysv.key(name)) is not None, "no table was made")
    # four at once, none of them able to lock: each still finishes within
    # its budget (2 s), as it does without the shim
    t0 = time.monotonic()
    ps = [spawn(["unshare", "-m", "sh", "-c", RO_SHM % ro, "sh", prog("legacy_client"),
                 "127.0.0.1", str(dead)], env) for _ in range(4)]
    outs = [finish(p, 20) for p in ps]
    took = time.monotonic() - t0
    check(all(o[:2] == plain[:2] for o in outs), "four at once: %r, without the shim %r"
          % (outs, plain))
    check(took < 2 + 2, "four clients with a 2 s budget took %.1fs" % took)
    check(not os.path.exists(sysv.lock_path(sysv.key(name))),
          "a lock file appeared in the test's own /dev/shm")


def test_a_table_the_kernel_will_not_create_leaves_a_private_table_with_one_line():
    """shmget refuses the segment (an IPC namespace whose shmmax is smaller
    than the table): clients behave as without the shim, a dead port is
    still retried (a private table), and one line names the kernel's error."""
    shrunk = ["unshare", "--user", "--map-current-user", "--keep-caps", "--ipc", "sh", "-c",
              'echo 4096 > /proc/sys/kernel/shmmax && exec "$@"', "sh"]
    if subprocess.run(shrunk + ["true"], capture_output=True).returncode != 0:
        raise TestSkip("no IPC namespace with a writable shmmax here")
    port, dead = free_port(), free_port()
    env = shim_env(BACKOFFSHIM_SHARED=new_table(), BACKOFFSHIM_INITIAL_BACKOFF="50ms")
    with Server(port).start():
        plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
        got = run(shrunk + [prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(got[:2] == plain[:2], "live server: with the shim %r, without %r" % (got, plain))
    plain = run([prog("legacy_client"), "127.0.0.1", str(dead)], base_env())
    with SynSniffer(dead) as sn:
        got = run(shrunk + [prog("legacy_client"), "127.0.0.1", str(dead)],
                  dict(env, BACKOFFSHIM_MAX_ATTEMPTS="3"))
        syns = sn.settled_count()
    check(got[:2] == plain[:2] and syns == 3,
          "dead port: %d SYNs, with the shim %r, without %r" % (syns, got, plain))
    said = [l for l in got[2].splitlines() if "shared table" in l]
    check(len(said) == 1 and "cannot be created: Invalid argument; using a private table"
          in said[0], "want one line naming the kernel's error: %r" % got[2])


MAPS = r"""
import os, socket, sys, time
print('ready', flush=True)
end = time.monotonic() + 10
while not os.path.exists(sys.argv[2]) and time.monotonic() < end:
    time.sleep(0.001)
s = socket.socket(); s.connect_ex(('127.0.0.1', 1))
# a shmat mapping: '/SYSV<key, 8 hex digits> (deleted)', the shmid as inode
ids = set(l.split()[4] for l in open('/proc/self/maps') if sys.argv[1] in l)
print(' '.join(sorted(ids)), flush=True)
"""


def test_processes_starting_at_once_agree_on_one_table():
    """Eight processes fail their first connect at the same moment: one
    creates the segment, every one attaches that one."""
    table = new_table()
    k = sysv.key(table)
    go = table + ".go"
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="1")
    ps = [spawn([sys.executable, "-c", MAPS, "SYSV%08x" % k, go], env) for _ in range(8)]
    readers = [LineReader(p) for p in ps]
    try:
        for r in readers:
            check(r.wait_for(lambda l: l == "ready", 15), "a process never started")
    finally:
        open(go, "w").close()
    seen, errs = [], []
    for r in readers:
        rc, lines, err = r.finish(20)
        seen.append(lines[-1] if len(lines) > 1 else "")
        errs.append(err)
    seg = sysv.find(k)
    check(seg is not None, "no table was made: %r" % errs)
    check(seen == [str(seg)] * 8, "the processes attached %r, the key's segment is %d: %r"
          % (seen, seg, errs))
    check(not any("shared table" in e for e in errs), "table lines: %r" % errs)
    check(sysv.stat(seg).nattch == 0, "still attached after every process exited")


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
    hole = FullQueue(port)  # A's SYN is dropped: its attempt hangs
    a = b = None
    try:
        with SynSniffer(port) as sn:
            a = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
            check(sn.wait_for(1, 5) >= 1, "A never attempted")
            b = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
            wait_status_row(table, lambda r: r["waiting_threads"] >= 1, 5, env)  # B waits
            seen = sn.settled_count()
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
        hole.close()


def test_garbage_in_the_table_cannot_crash_or_stall_a_process():
    """Another process of the user fills the segment (all but its header)
    with random bytes: clients and `status` still finish within their own
    budgets, with the exit status they have without the shim."""
    import random
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="2s", **QUICK)
    run([prog("legacy_client"), "127.0.0.1", str(port)], dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    seg = sysv.find(sysv.key(table))
    check(seg is not None, "no table was made")
    size = sysv.stat(seg).segsz
    rnd = random.Random(4)
    sysv.write(seg, sysv.HEADER, rnd.randbytes(size - sysv.HEADER))
    t0 = time.monotonic()
    plain = run([prog("legacy_client"), "127.0.0.1", str(port)], base_env())
    plain_s = time.monotonic() - t0
    for _ in range(3):
        t0 = time.monotonic()
        got = run([prog("legacy_client"), "127.0.0.1", str(port)], env, timeout=30)
        took = time.monotonic() - t0
        check(got[0] == plain[0], "rc %d, without the shim %d: %r" % (got[0], plain[0], got[2]))
        check(took < plain_s + 2 + 1.5, "the client took %.1fs with a 2 s budget" % took)
    p = subprocess.run([CLI, "status", "--json", "--table", table], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 3 and isinstance(json.loads(p.stdout), list) and
          "is damaged" in p.stderr, "status: %r" % (p,))


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
        row = wait_status_row(table, lambda r: r["failures"] >= 3, 15)
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


def test_status_counts_each_wait_between_attempts_once():
    """max_attempts = 3 against a dead port: two waits between attempts,
    each longer than the 500 ms a waiter sleeps at a time with a shared
    table. status says 2 waits (it counted each wake-up: 4 or 5)."""
    table, dead = new_table(), free_port()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="3", BACKOFFSHIM_LOG="off",
                   BACKOFFSHIM_INITIAL_BACKOFF="700ms", BACKOFFSHIM_MAX_BACKOFF="1s",
                   BACKOFFSHIM_JITTER="0")
    rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(dead)], env)
    r = subprocess.run([CLI, "status", "--json", "--table", table], env=base_env(),
                       capture_output=True, text=True, timeout=10)
    rows = [e for e in json.loads(r.stdout or "[]")
            if e["destination"] == "127.0.0.1:%d" % dead]
    check(len(rows) == 1 and rows[0]["waits"] == 2 and rows[0]["seconds_waited"] >= 1.4,
          "status: %r (client %r)" % (rows, (rc, out, err)))


NO_PROC = "ip link set lo up; mount -t tmpfs none /proc; "
SERVE_THEN_CLIENT = r"""
import socket, subprocess, sys
port, client = int(sys.argv[1]), sys.argv[2:]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(8)
p = subprocess.Popen(client)
c, _ = s.accept(); c.sendall(b"hello\n"); c.close()
sys.exit(p.wait())
"""


def test_namespaces_that_cannot_name_themselves_share_no_table():
    """Two network namespaces without /proc: neither can tell its
    namespace, so neither joins a table by a key that would be the other's
    too. B's client connects at once to B's own server, while A backs off
    from the same address in A's namespace (B waited on A's schedule, 1.8 s,
    before)."""
    if not shutil.which("unshare"):
        raise TestSkip("unshare is not installed")
    if PRELOAD != SO:
        raise TestSkip("a sanitizer runtime is preloaded: it needs the /proc this test hides")
    port = free_port()
    ns = ["unshare", "--user", "--map-current-user", "--keep-caps", "--net", "--mount",
          "sh", "-c"]
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="2s", BACKOFFSHIM_MAX_BACKOFF="4s",
                   BACKOFFSHIM_MAX_ELAPSED="8s")
    a = subprocess.Popen(ns + [NO_PROC + 'exec "$@"', "a", prog("legacy_client"), "127.0.0.1",
                               str(port)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = LineReader(a, stream=a.stderr)
        check(lines.wait_for(lambda l: "Connection refused (attempt 1)" in l, 10),
              "A never backed off: %r" % lines.lines)
        rc, out, err = run(ns + [NO_PROC + 'exec "$@"', "b", sys.executable, "-c",
                                 SERVE_THEN_CLIENT, str(port), prog("legacy_client"),
                                 "127.0.0.1", str(port)], env, timeout=20)
        check(rc == 0 and "hello" in out and "waiting" not in err and "refused" not in err,
              "B's client: rc=%d %r %r" % (rc, out, err))
    finally:
        a.kill()
        a.wait()

"""The shared table is advice (issue 20, docs/shared-table.md): whatever
happens to the System V segment, its lock file or the facts in it, a
process never dies of it, never waits past its own schedule and budget,
and behaves as it does without the shim where the shim has nothing to add.
One test per row of the issue's table; each compares with the same program
without the shim where that applies, and synchronises on events (status
polls, output lines, SYNs on the wire) with bounded waits."""
import fcntl
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import sysv
from lib import (BUILD, FullQueue, SLACK, Server, SynSniffer, TestSkip, base_env, check, finish,
                 free_port, need_root, new_table, prog, run, shim_env, spawn, status_rows,
                 wait_status_row)

CLI = os.path.join(BUILD, "backoffshim")


def _client(port):
    return [prog("legacy_client"), "127.0.0.1", str(port)]


def _segment(table):
    seg = sysv.find(sysv.key(table))
    check(seg is not None, "no table segment for %s" % table)
    return seg


# ---- a. the segment removed, the lock file truncated, under waiters ----

def _client_as_without(port, env):
    """The client without the shim, then with env: the two must print and
    exit alike. Returns (seconds without, seconds with, stderr with)."""
    t0 = time.monotonic()
    plain = run(_client(port), base_env())
    plain_s = time.monotonic() - t0
    t0 = time.monotonic()
    rc, out, err = run(_client(port), env, timeout=30)
    took = time.monotonic() - t0
    check((rc, out) == plain[:2], "rc=%d %r, without the shim rc=%d %r (stderr %r)"
          % (rc, out, plain[0], plain[1], err[-400:]))
    return plain_s, took, err


def test_removing_the_segment_and_truncating_the_lock_file_under_eight_waiters():
    port = free_port()
    table = new_table()
    dest = "127.0.0.1:%d" % port
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="3s",
                   BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s")
    plain = run(_client(port), base_env())
    ps = [spawn(_client(port), env) for _ in range(8)]
    try:
        wait_status_row(table, lambda r: r["destination"] == dest and
                        r["waiting_processes"] >= 4, 10)
        seg = _segment(table)
        lock = sysv.lock_path(sysv.key(table))
        check(os.path.exists(lock), "no lock file %s while processes wait" % lock)
        sysv.remove(seg)
        os.truncate(lock, 0)
        # a newcomer after the removal: a new segment, a schedule of its own
        late = spawn(_client(port), env)
        outs = [finish(p, 20) for p in ps + [late]]
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
                p.wait()
    now = sysv.find(sysv.key(table))
    check(now is not None and now != seg, "after the removal the late client made no table of "
          "its own (the key's segment: %r, the removed one: %d)" % (now, seg))
    for i, (rc, out, err) in enumerate(outs):
        check(rc >= 0, "client %d died of signal %d: %r" % (i, -rc, err[-300:]))
        check((rc, out) == plain[:2], "client %d: rc=%d out=%r, without the shim rc=%d out=%r "
              "(stderr %r)" % (i, rc, out, plain[0], plain[1], err[-300:]))


# ---- b. a prober stopped with SIGSTOP ----

def test_a_prober_stopped_mid_attempt_holds_the_others_only_until_its_probe_deadline():
    """A's attempt hangs (the listener's accept queue is full: its SYN is
    dropped) and A is stopped with SIGSTOP: its lock stays held, but counts
    only until the probe's deadline (the attempt timeout, 2 s, plus 1 s).
    B, waiting on it, puts its own attempt on the wire by then, not at the
    end of its 30 s budget; once the server is back, B connects."""
    port = free_port()
    table = new_table()
    timeout, grace = 2.0, 1.0
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="200ms",
                   BACKOFFSHIM_MAX_BACKOFF="1s", BACKOFFSHIM_JITTER="0",
                   BACKOFFSHIM_MIN_CONNECT_TIMEOUT="%gs" % timeout,
                   BACKOFFSHIM_MAX_ELAPSED="30s")
    rc, _, err = run(_client(port), dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    check(rc == 1, "priming: %r" % err)
    hole = FullQueue(port)  # A's SYN is dropped: its attempt hangs
    a = b = None
    try:
        with SynSniffer(port) as sn:
            a = spawn(_client(port), env)
            check(sn.wait_for(1, 5) >= 1, "A never attempted")
            os.kill(a.pid, signal.SIGSTOP)
            t_a, a_src = sn.times[0], sn.sources[0]
            b = spawn(_client(port), env)
            # B's first SYN: the first from another source port (the kernel
            # goes on retransmitting A's SYN while A is stopped)
            deadline = timeout + grace
            end = time.monotonic() + deadline + 5
            first_b = None
            while first_b is None and time.monotonic() < end:
                sn.wait_for(len(sn.times) + 1, 0.2)
                with sn.cond:
                    first_b = next((t for t, s in zip(sn.times, sn.sources) if s != a_src),
                                   None)
            check(first_b is not None, "B put no attempt on the wire within %.0fs of A's "
                  "(probe deadline %.0fs)" % (deadline + 5, deadline))
            after = first_b - t_a
            # B waited on A's live lock at first, and went on by about the
            # probe deadline
            check(after >= timeout / 2, "B attempted %.2fs after A, while A's attempt (%.0fs "
                  "timeout) was in flight" % (after, timeout))
            check(after <= deadline + 1.0, "B attempted %.2fs after A: the probe deadline is "
                  "%.0fs" % (after, deadline))
        # the server is back: B connects
        hole.close()
        with Server(port).start():
            rc, out, err = finish(b, 15)
        check(rc == 0 and "hello" in out, "B once the server was back: rc=%d %r %r"
              % (rc, out, err[-300:]))
    finally:
        for p in (a, b):
            if p and p.poll() is None:
                if p is a:
                    os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
        hole.close()


# ---- c. one process connects to 4 500 dead ports ----

SCAN = r"""
import socket
for port in range(20000, 24500):
    s = socket.socket()
    s.connect_ex(('127.0.0.1', port))
    s.close()
print('scanned', flush=True)
"""


def test_a_port_scan_from_one_process_leaves_room_for_the_others():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, **{"BACKOFFSHIM_INITIAL_BACKOFF": "100ms",
                                                 "BACKOFFSHIM_MAX_BACKOFF": "200ms"})
    rc, out, err = run([sys.executable, "-c", SCAN], dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"),
                       timeout=120)
    check(rc == 0 and out == "scanned\n", "the scan: rc=%d %r %r" % (rc, out, err[-300:]))
    dropped = [l for l in err.splitlines() if "dropped to make room" in l]
    check(len(dropped) <= 3, "%d 'dropped to make room' lines: %r" % (len(dropped), dropped[:5]))
    rows = status_rows(table)
    scanned = [r for r in rows if 20000 <= int(r["destination"].rsplit(":", 1)[1]) < 24500]
    check(0 < len(scanned) <= 4096 // 4, "the scanning process holds %d entries (its share "
          "is a quarter of 4096)" % len(scanned))
    port = free_port()
    while 20000 <= port < 24500:
        port = free_port()
    budget = dict(BACKOFFSHIM_MAX_ELAPSED="1s")
    with SynSniffer(port) as sn:
        plain = run(_client(port), base_env())
        plain_syns = sn.settled_count()
        got = run(_client(port), dict(env, **budget))
        syns = sn.settled_count() - plain_syns
    check(plain_syns == 1, "without the shim: %d SYNs" % plain_syns)
    check(got[:2] == plain[:2], "after the scan: %r, without the shim %r" % (got, plain))
    check(syns >= 3, "after the scan another process was retried %d times in 1 s (a "
          "private schedule: 100 ms, 160 ms, 200 ms...)" % syns)
    rows = status_rows(table)
    check(any(r["destination"] == "127.0.0.1:%d" % port for r in rows),
          "status does not list the second process's destination")


# ---- d. forgetting ----

FORGET = dict(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s",
              BACKOFFSHIM_JITTER="0", BACKOFFSHIM_LOG="info")


def _first_wait(err):
    """The first 'next attempt in X' of a log, in seconds."""
    m = re.search(r"next attempt in ([0-9.]+)(ms|s)\b", err)
    check(m, "no 'next attempt in' line: %r" % err[-500:])
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


def _about(what, got, e, slack=2 * SLACK):
    lo, hi = 0.8 * e - slack, 1.2 * e + slack
    check(lo <= got <= hi, "%s: the first wait is %.3fs, want [%.3f, %.3f]" % (what, got, lo, hi))


def test_an_idle_failing_entry_is_forgotten_and_its_schedule_starts_over():
    port = free_port()
    table = new_table()
    dest = "127.0.0.1:%d" % port
    env = shim_env(BACKOFFSHIM_SHARED=table, **FORGET)
    # status judges `idle` by the policy it is given: the same as the clients'
    status_env = base_env(BACKOFFSHIM_CONFIG="/dev/null", **FORGET)
    rc, _, err = run(_client(port), dict(env, BACKOFFSHIM_MAX_ATTEMPTS="6"))
    check(rc == 1 and "next attempt in 1.00s" in err, "priming to the cap: %r" % err)
    # control: right after, the entry is not idle; a new process waits at the cap
    rc, _, err = run(_client(port), dict(env, BACKOFFSHIM_MAX_ELAPSED="3s"))
    check(rc == 1, "control: rc=%d %r" % (rc, err[-300:]))
    _about("right after priming", _first_wait(err), 1.0)
    row = wait_status_row(table, lambda r: r["destination"] == dest and r["idle"], 15, status_env)
    check(row["failures"] >= 6, "the idle row lost its failures: %r" % row)
    rc, _, err = run(_client(port), dict(env, BACKOFFSHIM_MAX_ELAPSED="3s"))
    check(rc == 1, "after idle: rc=%d %r" % (rc, err[-300:]))
    _about("once idle", _first_wait(err), 0.2)


# ---- e. random bytes over the entries ----

def test_random_bytes_over_the_entries_are_damage_said_once_and_rebuilt():
    port = free_port()
    table = new_table()
    budget = 2.0
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="%gs" % budget,
                   BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s")
    run(_client(port), dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    seg = _segment(table)
    size = sysv.stat(seg).segsz
    head = sysv.read(seg, 0, sysv.HEADER)
    sysv.write(seg, sysv.HEADER, random.Random(20).randbytes(size - sysv.HEADER))
    plain_s, took, err = _client_as_without(port, env)
    check(took < plain_s + budget + 1.0, "the client took %.1fs with a %.0fs budget"
          % (took, budget))
    # "shared table damaged: entries that do not ..." (issue 20), or, newer,
    # "shared table (System V key 0x...): damaged: entries that do not ..."
    damaged = [l for l in err.splitlines() if "damaged" in l]
    check(len(damaged) == 1 and re.search(
        r"shared table (\(System V key 0x%08x\): )?damaged: entries that do not check out "
        r"are taken over; `backoffshim reset --all` rebuilds it" % sysv.key(table),
        damaged[0]), "want one 'damaged' line: %r" % err)
    check(sysv.read(seg, 0, sysv.HEADER) == head, "the header changed")
    p = subprocess.run([CLI, "status", "--table", table], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 3 and re.search(
        r"table %s is damaged: [0-9]+ entries do not check out; backoffshim reset --all "
        r"rebuilds it" % re.escape(table), p.stderr), "status: %r" % (p,))
    p = subprocess.run([CLI, "reset", "--all", "--table", table], capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 0, "reset --all: %r" % (p,))
    p = subprocess.run([CLI, "status", "--table", table], capture_output=True, text=True,
                       timeout=30)
    check(p.returncode == 0 and not p.stderr, "status after reset --all: %r" % (p,))


# ---- f. waiters killed: no longer counted ----

def test_waiting_processes_are_counted_while_alive_only():
    port = free_port()
    table = new_table()
    dest = "127.0.0.1:%d" % port
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="60s",
                   BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s")
    ps = [spawn(_client(port), env) for _ in range(3)]
    try:
        wait_status_row(table, lambda r: r["destination"] == dest and
                        r["waiting_processes"] == 3, 15)
        for p in ps:
            p.send_signal(signal.SIGTERM)
        rcs = [p.wait(10) for p in ps]
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
                p.wait()
    check(rcs == [-signal.SIGTERM] * 3, "the clients' exit statuses: %r" % rcs)
    row = wait_status_row(table, lambda r: r["destination"] == dest and
                          r["waiting_processes"] == 0 and r["waiting_threads"] == 0, 10)
    check(row["failures"] >= 1, "the row: %r" % row)


# ---- g. programs that never connect ----

def test_programs_that_never_connect_make_no_table_and_few_system_calls():
    name = new_table()
    k = sysv.key(name)
    env = shim_env(BACKOFFSHIM_SHARED=name)
    for cmd in (["/bin/true"], ["echo", "hello"]):
        plain = run(cmd, base_env())
        got = run(cmd, env)
        check(got == plain, "%s: with the shim %r, without %r" % (cmd, got, plain))
    check(sysv.find(k) is None, "a segment was made for %s" % name)
    check(not os.path.exists(sysv.lock_path(k)), "a lock file was made")
    if not shutil.which("strace"):
        raise TestSkip("strace is not installed (the rest passed)")
    if os.path.exists("/etc/backoffshim.ini"):
        raise TestSkip("/etc/backoffshim.ini exists: reading it costs system calls of its "
                       "own (the rest passed)")
    # Measured (x86_64, glibc): the shim adds getpid, access (the default
    # config file, absent), fstat (stderr, for the log), two prlimit64
    # (RLIMIT_NOFILE and RLIMIT_AS, which size the descriptor table), one
    # mmap (the table) and one prctl (a supervisor's announcement, EINVAL
    # without one) at start-up; ld.so adds one mmap for the library's
    # larger .bss: 8 lines. Nothing for the table (lazy): no
    # shmget, no stat of /proc/self/ns/net, no lock file. (With a config
    # file named, as shim_env() does with /dev/null, reading it adds 8 more:
    # malloc's first brk/getrandom, a buffer's mmap/munmap, openat, fstat x2,
    # close; so the settings are passed here without one.)
    tmp = tempfile.mkdtemp(prefix="bs-empty-")
    try:
        src = os.path.join(tmp, "empty.c")
        with open(src, "w") as f:
            f.write("int x;\n")
        empty = os.path.join(tmp, "libempty.so")
        r = subprocess.run(["gcc", "-shared", "-fPIC", "-o", empty, src], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise TestSkip("cannot build an empty library: %s" % r.stderr[-200:])
        traces = {}
        for what, lib in (("shim", env["LD_PRELOAD"]), ("empty", empty)):
            out = os.path.join(tmp, "trace." + what)
            tenv = dict(env)
            tenv.pop("LD_PRELOAD")
            tenv.pop("BACKOFFSHIM_CONFIG")
            r = subprocess.run(["strace", "-f", "-o", out, "-E", "LD_PRELOAD=" + lib,
                                "/bin/true"], env=tenv, capture_output=True, text=True,
                               timeout=60)
            check(r.returncode == 0, "strace %s: %r" % (what, r))
            with open(out) as f:
                traces[what] = [l.split(None, 1)[1] for l in f.read().splitlines()]
    finally:
        shutil.rmtree(tmp, True)
    extra = len(traces["shim"]) - len(traces["empty"])
    check(extra <= 8, "the shim adds %d system calls to /bin/true:\n%s" % (
        extra, "\n".join(traces["shim"][-20:])))
    table_calls = [l for l in traces["shim"] if l.startswith(("shmget", "shmat", "shmctl"))
                   or "/dev/shm" in l or "ns/net" in l]
    check(not table_calls, "/bin/true looked for a table: %r" % table_calls)


# ---- h. another user's segment under this user's key ----

def test_another_users_segment_under_our_key_is_silent_and_leaves_a_private_table():
    need_root("giving a segment to another user")
    real = new_table()  # a real table's size and header, for the planted one
    run(_client(1), shim_env(BACKOFFSHIM_SHARED=real, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    size = sysv.stat(_segment(real)).segsz
    head = sysv.read(_segment(real), 0, sysv.HEADER)
    k = sysv.key("")  # the default table's (shared = user)
    old = sysv.find(k)
    if old is not None:  # an earlier test's default table: nobody uses it now
        sysv.remove(old)
    seg = sysv.create(k, size)
    try:
        sysv.write(seg, 0, head)
        sysv.give_to(seg, 65534)
        check(sysv.stat(seg).perm.uid == 65534, "the segment was not handed over")
        env = shim_env(BACKOFFSHIM_SHARED="user")
        plain = run(["echo", "hello"], base_env())
        got = run(["echo", "hello"], env)
        check(got == (0, "hello\n", "") and got == plain,
              "echo: with the shim %r, without %r" % (got, plain))
        port = free_port()
        with Server(port).start():
            plain = run(_client(port), base_env())
            got = run(_client(port), env)
        check(got == plain, "a client: with the shim %r, without %r" % (got, plain))
        dead = free_port()
        with SynSniffer(dead) as sn:
            rc, out, err = run(_client(dead), dict(env, BACKOFFSHIM_MAX_ELAPSED="1s"))
            syns = sn.settled_count()
        check(rc == 1 and syns > 1, "a failing client: rc=%d, %d SYNs (a private table "
              "retries)" % (rc, syns))
        check("shared table" not in err, "a line about the table: %r" % err)
        check(sysv.find(k) == seg and sysv.stat(seg).nattch == 0 and
              sysv.read(seg, 0, 2 * sysv.HEADER) == head + b"\0" * sysv.HEADER,
              "the other user's segment was attached or written")
    finally:
        sysv.remove(seg)


# ---- g. forged words: bounded by the reader's own rules ----

# table.h, layout 3: struct bs_table's entries[] begin 69,696 bytes into the
# table, 128 bytes each; last_used at 16, last_err at 28, interval at 40
ENTRIES, ENTRY, LAST_USED = sysv.HEADER + 69696, 128, 16


def _forge_used_entries(table, field, fmt, value):
    """Write value into field of every entry in use; returns how many."""
    seg, n = _segment(table), 0
    for i in range(4096):
        at = ENTRIES + i * ENTRY
        if struct.unpack("<Q", sysv.read(seg, at + LAST_USED, 8))[0]:
            sysv.write(seg, at + field, struct.pack(fmt, value))
            n += 1
    check(n >= 1, "no entry in use in %s" % table)
    return n


def test_a_forged_last_error_is_never_handed_to_a_program():
    """A failing destination's last error forged to 9999, then a
    non-blocking TCP Fast Open send to it, which the shim answers from the
    table inside a backoff window. The program got OSError 9999 ("Unknown
    error"). The table's error is used only if an attempt can end with it;
    else the window's answer is ECONNREFUSED, as for any refused destination."""
    port, other = free_port(), free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="60s",
                   BACKOFFSHIM_MAX_BACKOFF="60s", BACKOFFSHIM_MAX_ATTEMPTS="1")
    run(_client(port), env)
    _forge_used_entries(table, 28, "<I", 9999)
    send = ("import errno, socket, sys\n"
            "a = socket.socket(); a.setblocking(False); a.connect_ex(('127.0.0.1', %d))\n"
            "s = socket.socket(); s.setblocking(False)\n"
            "try:\n"
            "    s.sendto(b'hi', socket.MSG_FASTOPEN, ('127.0.0.1', %d)); print('sent')\n"
            "except OSError as e:\n"
            "    print(errno.errorcode.get(e.errno, e.errno))\n" % (other, port))
    with Server(port).start():
        rc, plain, _ = run([sys.executable, "-c", send], base_env())
        rc2, out, err = run([sys.executable, "-c", send], env)
    check(rc == rc2 == 0 and plain.strip() in ("EINPROGRESS", "sent")
          and out.strip() in (plain.strip(), "ECONNREFUSED"),
          "with the shim %r, without %r; %s" % (out, plain, err[-300:]))


def test_a_forged_responsive_interval_is_bounded_by_the_policy():
    """Under the responsive policy every connect waits the table's interval.
    Forged to 1000 s, a connect to a live server waited to the end of its
    budget (10 s); it now waits at most the policy's longest wait (max
    backoff and jitter, 2.4 s here)."""
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_POLICY="responsive",
                   BACKOFFSHIM_MAX_BACKOFF="2s", BACKOFFSHIM_MAX_ELAPSED="10s",
                   BACKOFFSHIM_MAX_ATTEMPTS="1")
    run(_client(port), env)
    _forge_used_entries(table, 40, "<Q", 1000 * 10**9)
    with Server(port).start():
        plain_s, took, err = _client_as_without(port, dict(env, BACKOFFSHIM_MAX_ATTEMPTS="0"))
    check(took < plain_s + 2.4 + 1.0, "waited %.1fs with a 2s max backoff" % took)


# a python program's head: conn() makes one blocking connect to the port
_CONN_PY = ("import os, socket, sys, threading\n"
            "def conn():\n"
            "    s = socket.socket()\n"
            "    try: s.connect(('127.0.0.1', %d))\n"
            "    except OSError: pass\n")


def _locks_held(path):
    """Is any byte of the lock file locked (by anyone but this process)?"""
    fd = os.open(path, os.O_RDWR)
    try:
        # struct flock: l_type, l_whence (short), l_start, l_len (off_t), l_pid (int)
        fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        got = fcntl.fcntl(fd, 36, fl)  # F_OFD_GETLK
        return struct.unpack("hhqqi4x", got)[0] != fcntl.F_UNLCK
    finally:
        os.close(fd)


def test_a_fork_child_does_not_keep_the_lock_of_an_attempt_in_flight():
    """A thread's retry is in flight (it holds the destination's probe lock
    through a lock-file descriptor) when the program forks a long-lived
    child; then the thread's connect ends. The child shared the
    descriptor, and the lock with it: other processes took the attempt for
    alive for as long as the child lived. Once the connect has ended, no
    byte of the lock file may be locked while the child lives on."""
    port = free_port()
    table = new_table()
    code = (_CONN_PY % port +
            "t = threading.Thread(target=conn)\n"
            "t.start()\n"
            "sys.stdin.readline()\n"
            "if os.fork() == 0:\n"
            "    sys.stdin.read()\n"
            "    os._exit(0)\n"
            "t.join()\n"
            "print('joined', flush=True)\n"
            "os._exit(0)\n")
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ELAPSED="1500ms")
    with SynSniffer(port) as sn:
        p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hole = None
        try:
            check(sn.wait_for(1, 10) >= 1, "no first SYN")
            hole = FullQueue(port)  # (its own connection is one SYN)
            check(sn.wait_for(3, 10) >= 3, "no retry on the wire")
            lock_file = sysv.lock_path(sysv.key(table))
            check(_locks_held(lock_file), "no lock held by the attempt in flight at the fork")
            p.stdin.write("fork\n")
            p.stdin.flush()
            line = p.stdout.readline()
            check(line == "joined\n", "the program: %r" % line)
            held = _locks_held(lock_file)
        finally:
            p.stdin.close()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            err = p.stderr.read()
            if hole:
                hole.close()
    check(not held, "a byte of the lock file is still locked once the connect ended, "
          "while the fork child lives: %r" % err[-300:])


def test_an_attempt_start_in_the_future_holds_no_newcomer():
    """The destination's last attempt start, as another process wrote it,
    an hour ahead of this clock (a process in a time namespace, or a forged
    word). A newcomer to the backing-off destination, whose server is up
    again, waited: its turn (start + initial_backoff) was recomputed from
    `now` on every pass and never came. Now a start in the future is no
    fact, and the newcomer connects as without the shim."""
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="5s",
                   BACKOFFSHIM_MAX_BACKOFF="5s", BACKOFFSHIM_MAX_ELAPSED="8s")
    run(_client(port), dict(env, BACKOFFSHIM_MAX_ATTEMPTS="1"))
    _forge_used_entries(table, 88, "<Q", time.monotonic_ns() + 3600 * 10**9)
    with Server(port).start():
        plain_s, took, err = _client_as_without(port, env)
    check(took < plain_s + 2.0, "the newcomer took %.1fs (its first wait is 5s): %r"
          % (took, err[-300:]))


def test_a_lock_file_that_is_another_name_of_the_programs_file_is_not_used():
    """The lock file's path made a hard link to a file the program holds a
    POSIX lock on (the same user's doing). The shim's close of its lock
    descriptor dropped the program's lock, which the kernel ties to the
    file, whatever the descriptor: another process then took it. The shim
    now opens no lock file with another name (it goes without the lock)."""
    port = free_port()
    table = new_table()
    lock_file = sysv.lock_path(sysv.key(table))
    if os.path.exists(lock_file):
        os.unlink(lock_file)
    db = os.path.join("/dev/shm", "app-%d.db" % os.getpid())
    code = ("import fcntl, os, socket, sys\n"
            "f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX)\n"
            "s = socket.socket()\n"
            "try: s.connect(('127.0.0.1', %d))\n"
            "except OSError: pass\n"
            "if os.fork() == 0:\n"
            "    g = open(sys.argv[1], 'r+')\n"
            "    try: fcntl.lockf(g, fcntl.LOCK_EX | fcntl.LOCK_NB); print('LOST')\n"
            "    except OSError: print('still held')\n"
            "    os._exit(0)\n"
            "os.wait()\n" % port)
    seen = {}
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="2")
    try:
        for mode, e in (("plain", base_env()), ("shim", env)):
            with open(db, "w") as f:
                f.write("data")
            os.chmod(db, 0o600)
            if mode == "shim":
                os.link(db, lock_file)
            rc, out, err = run([sys.executable, "-c", code, db], e)
            seen[mode] = out or err[-300:]
            for p in (db, lock_file):
                if os.path.exists(p):
                    os.unlink(p)
    finally:
        for p in (db, lock_file):
            if os.path.exists(p):
                os.unlink(p)
    check(seen["plain"] == seen["shim"] == "still held\n",
          "the program's lock with the shim: %r, without: %r" % (seen["shim"], seen["plain"]))


def test_a_fork_childs_own_wait_is_counted():
    """A thread waits on a down destination; the process forks, and the
    child's own connect to it waits too. The child inherited the parent's
    count of waiting threads, so its wait took no waiter cell lock, and
    status left it out: it counted one waiting thread, not two."""
    port = free_port()
    table = new_table()
    code = (_CONN_PY % port +
            "threading.Thread(target=conn, daemon=True).start()\n"
            "sys.stdin.readline()\n"
            "if os.fork() == 0:\n"
            "    conn(); os._exit(0)\n"
            "sys.stdin.read()\n"
            "os._exit(0)\n")
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="10s",
                   BACKOFFSHIM_MAX_BACKOFF="10s", BACKOFFSHIM_MAX_ELAPSED="20s")
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        wait_status_row(table, lambda r: r["waiting_threads"] == 1, 10, what="one waiter")
        p.stdin.write("fork\n")
        p.stdin.flush()
        wait_status_row(table, lambda r: r["waiting_threads"] == 2, 10,
                        what="the parent's and the child's waits")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

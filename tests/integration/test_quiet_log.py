"""A quiet, truthful log (issue 21): a line repeated word for word goes out
once a second with a count, a process waiting on another's attempts says so,
and nothing announces a retry that will not happen. Each case also runs the
program without the shim and compares what the program sees."""
import os
import socket
import sys
import tempfile

from lib import (base_env, check, finish, free_port, prog, run, shim_env, spawn,
                 wait_status_row)

LOOP = r"""
import socket, sys, time
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    s = socket.socket()
    s.connect_ex(('127.0.0.1', int(sys.argv[1])))
    s.close()
    n += 1
print(n)
"""


def test_a_connect_loop_past_its_budget_logs_once_a_second():
    """Connects in a loop to a dead port, each past its budget at once
    ("giving up after 0 attempts"): about one line a second, the next
    saying how many like it were left out."""
    port = free_port()
    cmd = [sys.executable, "-c", LOOP, str(port), "2.5"]
    plain = run(cmd, base_env())
    rc, out, err = run(cmd, shim_env(BACKOFFSHIM_INITIAL_BACKOFF="5s", BACKOFFSHIM_MAX_BACKOFF="5s",
                                     BACKOFFSHIM_MAX_ELAPSED="10ms"), timeout=60)
    check(plain[0] == 0 and rc == 0, "rc %d / %d: %r" % (plain[0], rc, err[-300:]))
    loops = int(out)
    zero = [l for l in err.splitlines() if "giving up after 0 attempts" in l]
    check(loops > 50, "only %d connects in 2.5 s: %r" % (loops, err[-300:]))
    check(1 <= len(zero) <= 4, "%d 'giving up after 0 attempts' lines for %d connects"
          % (len(zero), loops))
    check(len(err.splitlines()) <= 8, "%d lines in all: %r" % (len(err.splitlines()), err[:600]))
    if len(zero) > 1:
        check("more like it left out" in zero[-1], "the count is missing: %r" % zero)


def test_a_waiting_process_says_who_it_waits_for():
    """B waits on a destination A is backing off from: B's log says so
    before its own first attempt, then one line per step at most (its own,
    or one A published)."""
    port = free_port()
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="300ms", BACKOFFSHIM_MAX_BACKOFF="1s",
                   BACKOFFSHIM_JITTER="0", BACKOFFSHIM_MAX_ELAPSED="3s",
                   BACKOFFSHIM_LOG="info")
    a = spawn([prog("legacy_client"), "127.0.0.1", str(port)], env)
    try:
        dest = "127.0.0.1:%d" % port
        wait_status_row(env["BACKOFFSHIM_SHARED"],
                        lambda r: r["destination"] == dest and r["failures"] >= 1,
                        what="A's first failure")
        rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env, timeout=30)
    finally:
        finish(a, 30)
    lines = [l for l in err.splitlines() if "127.0.0.1:%d" % port in l]
    check(lines and "waiting" in lines[0], "B's first line does not say it waits: %r" % lines)
    steps = [l.split("(attempt ")[1].split(")")[0].split(",")[0] for l in lines
             if "(attempt " in l]
    check(len(steps) == len(set(steps)), "a step told twice: %r" % lines)


def test_a_full_unix_backlog_is_not_announced_as_a_retry():
    """unix = on: a non-blocking connect to a listener whose queue is full
    gets EAGAIN, as without the shim, and no 'next attempt' line."""
    d = tempfile.mkdtemp()
    path = os.path.join(d, "sock")
    lst = socket.socket(socket.AF_UNIX)
    lst.bind(path)
    lst.listen(0)
    fillers = []
    try:
        for _ in range(3):
            f = socket.socket(socket.AF_UNIX)
            f.setblocking(False)
            try:
                f.connect(path)
            except BlockingIOError:
                pass
            fillers.append(f)
        code = ("import socket, sys\ns = socket.socket(socket.AF_UNIX); s.setblocking(False)\n"
                "print(s.connect_ex(sys.argv[1]))\n")
        plain = run([sys.executable, "-c", code, path], base_env())
        got = run([sys.executable, "-c", code, path], shim_env(BACKOFFSHIM_UNIX="on",
                                                               BACKOFFSHIM_LOG="info"))
        check(plain[1].strip() == "11" and got[1] == plain[1],
              "without the shim %r, with it %r" % (plain[1], got[1]))
        check("next attempt" not in got[2], "a retry was announced: %r" % got[2])
    finally:
        for f in fillers:
            f.close()
        lst.close()
        os.unlink(path)
        os.rmdir(d)

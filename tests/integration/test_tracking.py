"""The fd table follows the program's descriptors: dup2 + close, fork,
close_range; sendto(MSG_FASTOPEN) counts as a connect; healthy_after
(issue #3)."""
import socket
import sys
import tempfile
import time

from lib import (base_env, Server, SynSniffer, check, check_gaps, finish, free_port, late_server_run,
                 run, shim_env, spawn, INITIAL, slack)

DUP_FORK = r"""
import os, select, socket, sys
port, how = int(sys.argv[1]), sys.argv[2]
s = socket.socket(); s.setblocking(False)
s.connect_ex(('127.0.0.1', port))
fd = s.fileno()
if how == 'dup2':
    os.dup2(fd, 50); s.detach(); os.close(fd); fd = 50
    os.closerange(fd + 1, fd + 20)          # close_range on others: no effect on 50
elif how == 'fork':
    pid = os.fork()
    if pid:
        _, st = os.waitpid(pid, 0); sys.exit(os.waitstatus_to_exitcode(st))
select.select([], [fd], [], 10)
sk = socket.socket(fileno=fd)
err = sk.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR); sk.detach()
if err: print('error', err); sys.exit(1)
os.set_blocking(fd, True)
print(os.read(fd, 64).decode().strip())
"""


def _tracked_through(how):
    """A socket shared by two numbers (dup2) is never parked (defer mode
    cannot hide its failure from the other number), so the dup2 case runs
    in retry mode, where the readiness call itself waits and retries."""
    port = free_port()
    cmd = [sys.executable, "-c", DUP_FORK, str(port), how]
    env = shim_env(BACKOFFSHIM_NONBLOCKING="retry") if how == "dup2" else shim_env()
    rc, out, err, gaps = late_server_run(cmd, env, port, syns_before=3)
    check(rc == 0 and "hello from server" in out, "%s: rc=%d %r %r" % (how, rc, out, err[-300:]))
    check_gaps(gaps, how)


def test_dup2_then_close_keeps_tracking():
    _tracked_through("dup2")


def test_a_connect_in_flight_at_fork_is_left_to_the_kernel():
    """A socket in flight at fork() is shared until the child execs (close-
    on-exec is no protection before): neither process retries or hides it,
    so the child learns the refusal at once, as without the shim."""
    port = free_port()
    cmd = [sys.executable, "-c", DUP_FORK, str(port), "fork"]
    rc0, out0, _ = run(cmd, base_env())
    rc1, out1, err1 = run(cmd, shim_env())
    check(rc0 == 1 and out0 == "error 111\n", "without the shim: %d %r" % (rc0, out0))
    check((rc1, out1) == (rc0, out0), "with the shim: %d %r (%r)" % (rc1, out1, err1[-300:]))


def test_fastopen_counts_as_connect():
    port = free_port()
    code = ("import socket,time\n"
            "for i in range(2):\n"
            "  s=socket.socket()\n"
            "  try: s.sendto(b'hi', socket.MSG_FASTOPEN, ('127.0.0.1', %d))\n"
            "  except OSError as e: print(e.errno, time.monotonic(), flush=True)\n"
            "  s.close()\n" % port)
    with SynSniffer(port) as sn:
        rc, out, err = run([sys.executable, "-c", code], shim_env())
        sn.wait_for(3, 0.3)
    times = [float(l.split()[1]) for l in out.splitlines()]
    check(len(times) == 2 and all(l.startswith("111") for l in out.splitlines()),
          "fastopen: %r %r" % (out, err))
    check("attempt 1" in err, "the failed fastopen was not recorded: %r" % err)
    check(len(sn.times) == 2, "SYNs: %d" % len(sn.times))
    check_gaps(sn.gaps(), "fastopen")


def _silent_server(port):
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(8)
    return lst


def test_healthy_after_without_a_byte():
    """A connection that stays up healthy_after (but never hears a byte)
    resets the schedule when the program closes it; a shorter one does not.
    A [dest] section's healthy_after is the one that counts for its
    destination (issue #8: the close path once read the global one)."""
    for healthy_after, expect_reset in (("200ms", True), ("10s", False), ("dest", True)):
        port = free_port()
        env = shim_env(BACKOFFSHIM_HEALTHY_AFTER=healthy_after)
        if healthy_after == "dest":
            cfgfile = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
            cfgfile.write("healthy_after = 10s\n[dest 127.0.0.1:%d]\nhealthy_after = 200ms\n"
                          % port)
            cfgfile.close()
            env = shim_env(BACKOFFSHIM_CONFIG=cfgfile.name)
        code = ("import socket,sys,time\n"
                "s=socket.create_connection(('127.0.0.1', %d)); print('up', flush=True)\n"
                "sys.stdin.readline(); time.sleep(0.3); s.close()\n"
                "try: socket.create_connection(('127.0.0.1', %d))\n"
                "except OSError as e: print('again', e.errno, flush=True)\n" % (port, port))
        import subprocess
        p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
        try:
            with SynSniffer(port) as sn:
                check(sn.wait_for(6, 5) >= 6, "no failures first")
                lst = _silent_server(port)
                check(p.stdout.readline().strip() == "up", "did not connect")
                lst.close()
                t_w = time.monotonic()
                p.stdin.write("\n")
                p.stdin.flush()
                n0 = len(sn.times)
                sn.wait_for(n0 + 3, 3)
                # the SYNs after the program's close (it sleeps 0.3 s first)
                after = [t for t in sn.times if t > t_w + 0.25]
                gaps = [b - a for a, b in zip(after, after[1:])][:1]
            check(gaps, "no retry SYNs after the close")
            if expect_reset:
                check(abs(gaps[0] - INITIAL) <= slack(), "healthy_after %s: gap %.3f, want %.3f"
                      % (healthy_after, gaps[0], INITIAL))
            else:
                check(gaps[0] > 0.2, "healthy_after %s: the schedule restarted (%.3f)"
                      % (healthy_after, gaps[0]))
        finally:
            p.kill()
            p.communicate(timeout=5)

"""Unanswered SYNs, AF_UNIX, and calls that arrive before the constructor."""
import glob
import os
import socket
import subprocess
import sys
import tempfile
import time

from lib import (BUILD, NO_DELAY, BlackHole, LineReader, Server, TestSkip, base_env, check,
                 check_not_delayed, free_port, prog, run, shim_env, spawn, wait_status_row)


def test_unanswered_syn_is_cut_at_min_connect_timeout():
    """A listener whose accept queue is full drops SYNs, like a black hole.
    Once a destination is failing, each attempt is cut at
    max(wait, min_connect_timeout) (1s here) instead of the kernel's ~2 min."""
    port = free_port()
    p = spawn([prog("conntest"), "127.0.0.1", str(port)],
              shim_env(BACKOFFSHIM_MAX_ELAPSED="25s", BACKOFFSHIM_LOG="debug"))
    hole = None
    try:
        # Let it fail twice with "refused" (read from its log: no listener yet).
        deadline = time.monotonic() + 5
        seen = ""
        while seen.count("next attempt in") < 2 and time.monotonic() < deadline:
            seen += p.stderr.readline()
        check(seen.count("next attempt in") >= 2, "no refused attempts: %r" % seen)
        hole = BlackHole(port)  # later SYNs are dropped
        t_full = time.monotonic()
        line = ""
        while "timed out" not in line and time.monotonic() < t_full + 5:
            line = p.stderr.readline()
        cut_after = time.monotonic() - t_full
        check("Connection timed out" in line, "no timed-out attempt: %r" % line)
        check(0.8 <= cut_after <= 1.6, "attempt cut after %.2fs, expected ~1s" % cut_after)
        # Now drain the queue and serve: the next attempt connects.
        lst = hole.lst
        lst.settimeout(0.2)
        hole.drain()
        end = time.monotonic() + 24
        while p.poll() is None and time.monotonic() < end:
            try:
                c, _ = lst.accept()
                c.close()
            except socket.timeout:
                pass
        out = p.stdout.read()
        took = time.monotonic() - t_full
        check(p.wait(5) == 0 and out.startswith("ok"), "did not connect: %r" % out)
        # The attempt in flight when the queue drains completes (its SYN is
        # retransmitted at 1 s, just when min_connect_timeout cuts it): the
        # shim must keep that connection, not reset it and start over.
        check(took < 3, "connected only %.1fs after the queue was drained" % took)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if hole:
            hole.close()


def test_unix_sockets_off_by_default_and_paced_when_on():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "svc.sock")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)  # bound, not listening: connect() gets ECONNREFUSED
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX)\n"
                "s.connect(sys.argv[1]); print('ok', s.recv(5).decode())\n")
        t0 = time.monotonic()
        run([sys.executable, "-c", code, path], base_env())
        plain = time.monotonic() - t0
        t0 = time.monotonic()
        rc, out, err = run([sys.executable, "-c", code, path], shim_env(**NO_DELAY))
        check(rc != 0 and "refused" in err and "backoffshim" not in err,
              "AF_UNIX must be left alone by default: %r" % err)
        check_not_delayed("the refused AF_UNIX connect", plain, time.monotonic() - t0)

        p = spawn([sys.executable, "-c", code, path], shim_env(BACKOFFSHIM_UNIX="on"))
        line = ""
        end = time.monotonic() + 5
        while line.count("next attempt in") < 2 and time.monotonic() < end:
            line += p.stderr.readline()
        check("unix:" + path in line, "unix destination not paced/named: %r" % line)
        srv.listen(4)
        srv.settimeout(5)
        c, _ = srv.accept()
        c.sendall(b"hi")
        c.close()
        out, err = p.communicate(timeout=10)
        srv.close()
        check(p.returncode == 0 and out.strip() == "ok hi", "unix client: %r %r" % (out, err))


EARLY_LIB = r'''
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
__attribute__((constructor)) static void early(void)
{
	const char *p = getenv("EARLY_PORT");
	if (!p) return;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(p))};
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int r = connect(fd, (struct sockaddr *)&a, sizeof a);
	fprintf(stderr, "early connect: %s\n", r == 0 ? "ok" : strerror(errno));
	close(fd);
}
'''


def test_connect_from_another_constructor():
    """A library constructor may call connect() before the shim's own
    constructor ran; the shim must then initialise on the spot (or pass
    through), never crash or hang."""
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "early.c")
        lib = os.path.join(d, "libearly.so")
        open(src, "w").write(EARLY_LIB)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, src], check=True)
        so = shim_env()["LD_PRELOAD"]
        for order in ((lib, so), (so, lib)):
            env = shim_env(LD_PRELOAD=":".join(order), EARLY_PORT=port,
                           BACKOFFSHIM_MAX_ATTEMPTS=3)
            rc, out, err = run(["true"], env, timeout=10)
            check(rc == 0 and "early connect: Connection refused" in err,
                  "order %s: rc=%d err=%r" % (order, rc, err))
            check("giving up after 3 attempts" in err, "shim inactive in %s: %r" % (order, err))


SYN_BOUND = r"""
import select, socket, sys, time
port, how, blocking = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "blocking"
s = socket.socket()
if how == "syncnt":
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_SYNCNT, 1)
else:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 300)
t0 = time.monotonic()
if blocking:
    err = s.connect_ex(("127.0.0.1", port))
else:
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    p = select.poll()
    p.register(s, select.POLLOUT)
    p.poll(20000)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print(err, "%.2f" % (time.monotonic() - t0))
"""


def test_a_handshake_bound_the_program_set_ends_the_connect():
    """The program bounds its handshake itself with TCP_USER_TIMEOUT (300 ms)
    or TCP_SYNCNT (1), against SYNs that go unanswered: ETIMEDOUT when its
    own bound says, as long after the start as without the shim (the
    listener's queue fillers send SYNs too: no count). The shim retried
    that timeout until max_elapsed (8 s against 1 s here), as if the kernel's
    own ~2 min had ended it."""
    for how, mode in (("user_timeout", "blocking"), ("user_timeout", "nonblocking"),
                      ("syncnt", "blocking")):
        settings = dict(BACKOFFSHIM_MAX_ELAPSED="8s", BACKOFFSHIM_MIN_CONNECT_TIMEOUT="5s")
        port = free_port()
        with BlackHole(port):
            cmd = [sys.executable, "-c", SYN_BOUND, str(port), how, mode]
            rc, plain, err = run(cmd, base_env(), timeout=30)
            rc2, shimmed, err2 = run(cmd, shim_env(**settings), timeout=30)
            # the seccomp engine: its held (blocking) connects, which it
            # retried likewise
            engine = [os.path.join(BUILD, "backoffshim"), "run", "--engine", "seccomp", "--"]
            rc3, held, err3 = (0, shimmed, "") if mode != "blocking" else \
                run(engine + cmd, shim_env(LD_PRELOAD=None, **settings), timeout=30)
        e0, t0 = plain.split()
        check(rc == 0 and e0 == "110", "%s %s without the shim: %r" % (how, mode, plain))
        for what, r, out in (("the shim", rc2, shimmed), ("the engine", rc3, held)):
            e1, t1 = out.split()
            check(r == 0 and e1 == e0 and float(t1) <= 1.5 * float(t0) + 0.5,
                  "%s %s: with %s %r, without %r" % (how, mode, what, out, plain))


def test_a_clock_another_preload_fakes_is_not_the_shims():
    """libfaketime preloaded before the shim (FAKETIME=+1d): the program's
    clock_gettime says tomorrow, the shim's deadlines still follow the
    kernel's clock. It read the faked clock and waited on a futex deadline
    a day away: the blocking connect hung for good."""
    fake = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not fake:
        raise TestSkip("libfaketime is not installed")
    port = free_port()
    cmd = [prog("legacy_client"), "127.0.0.1", str(port)]
    rc, out, err = run(cmd, base_env(LD_PRELOAD=fake[0], FAKETIME="+1d"))
    check(rc == 1 and "Connection refused" in err, "without the shim: %r" % err)
    env = shim_env(BACKOFFSHIM_MAX_ELAPSED="10s", FAKETIME="+1d")
    env["LD_PRELOAD"] = fake[0] + ":" + env["LD_PRELOAD"]
    p = spawn(cmd, env)
    try:
        wait_status_row(env["BACKOFFSHIM_SHARED"], lambda r: r["failures"] >= 2,
                        what="the client backing off")
        with Server(port).start():
            out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(p.returncode == 0 and "connected" in out, "with the shim: %r %r" % (out, err[-300:]))


def test_a_connected_unix_socket_is_not_retried():
    """With `unix = on`, a unix socket already connected to a live path
    connects again to a path whose listener is gone: the kernel refuses at
    once, and no retry could connect a connected socket. The shim retried it
    to the end of its budget (228 s with the defaults, measured)."""
    with tempfile.TemporaryDirectory() as d:
        live, dead = os.path.join(d, "live"), os.path.join(d, "dead")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(live)
        srv.listen(4)
        gone = socket.socket(socket.AF_UNIX)
        gone.bind(dead)  # bound, not listening: refused
        code = ("import socket, sys, time\n"
                "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
                "t = time.monotonic()\n"
                "try: s.connect(sys.argv[2]); print('connected')\n"
                "except OSError as e: print(e.strerror)\n"
                "print('%.2f' % (time.monotonic() - t))\n")
        rc, plain, _ = run([sys.executable, "-c", code, live, dead], base_env())
        rc2, out, err = run([sys.executable, "-c", code, live, dead],
                            shim_env(BACKOFFSHIM_UNIX="on", BACKOFFSHIM_MAX_ELAPSED="10s"),
                            timeout=30)
        srv.close()
        gone.close()
    check(rc == rc2 == 0 and plain.split()[0] == out.split()[0] == "Connection",
          "with the shim %r, without %r; %s" % (out, plain, err[-300:]))
    check_not_delayed("a connected unix socket's refusal", float(plain.split()[-1]),
                      float(out.split()[-1]))

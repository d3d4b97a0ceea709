"""Non-blocking modes, multi-address fallback, the healthy-reset rule and
send-side errors (issue #3)."""
import os
import socket
import sys
import tempfile
import threading
import time

from lib import (NO_DELAY, Server, SynSniffer, base_env, check, check_gaps, check_not_delayed,
                 finish, free_port, run, shim_env, spawn, slack, INITIAL)
from servers import HttpServer

NB_CLIENT = r"""
import errno, select, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    s = socket.socket(); s.setblocking(False)
    t0 = time.monotonic()
    r = s.connect_ex(('127.0.0.1', port))
    if r == errno.EINPROGRESS:
        select.select([], [s], [], 10)
        r = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    print(errno.errorcode.get(r, r), '%.3f' % (time.monotonic() - t0), flush=True)
    s.close()
"""


def test_pace_mode_fails_fast_inside_the_window():
    port = free_port()
    took, slowest = {}, {}
    for name, env in (("plain", base_env()),
                      ("shim", shim_env(BACKOFFSHIM_NONBLOCKING="pace", **NO_DELAY))):
        with SynSniffer(port) as sn:
            t0 = time.monotonic()
            rc, out, err = run([sys.executable, "-c", NB_CLIENT, str(port), "6"], env)
            took[name] = time.monotonic() - t0
            lines = out.split()
            check(lines[0::2] == ["ECONNREFUSED"] * 6, "%s: %r" % (name, out))
            slowest[name] = max(float(x) for x in lines[1::2])
            if name == "shim":
                sn.wait_for(3, 0.3)
                check(len(sn.times) == 1,
                      "inside the window no SYN may be sent; saw %d" % len(sn.times))
    check_not_delayed("the slowest connect in pace mode", slowest["plain"], slowest["shim"])
    check_not_delayed("6 connects in pace mode", took["plain"], took["shim"])


def test_retry_mode_budget_returns_last_real_error():
    port = free_port()
    with SynSniffer(port) as sn:
        rc, out, err = run([sys.executable, "-c", NB_CLIENT, str(port), "1"],
                           shim_env(BACKOFFSHIM_MAX_ATTEMPTS=4))
        check(out.split()[0] == "ECONNREFUSED", "expected the last real error: %r" % out)
        sn.wait_for(5, 0.3)
        check(len(sn.times) == 4, "max_attempts=4 but %d SYNs" % len(sn.times))
        check_gaps(sn.gaps(), "non-blocking retry")


DUAL = r"""
import socket, sys, time
t0 = time.monotonic()
s = socket.create_connection(('dualhost', int(sys.argv[1])), %s)
print('ok %%.3f' %% (time.monotonic() - t0), s.getpeername()[0])
"""


def _in_private_hosts(cmd, env):
    """Run cmd where 'dualhost' resolves to ::1 first, then 127.0.0.1."""
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write("::1 dualhost\n127.0.0.1 dualhost\n127.0.0.1 localhost\n")
        hosts = f.name
    try:
        return run(["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
                    hosts] + cmd, env, timeout=20)
    finally:
        os.unlink(hosts)


def test_multi_address_fallback_is_not_slowed():
    with HttpServer(free_port(), host="127.0.0.1") as srv:
        for timeout in ("", "timeout=30"):
            cmd = [sys.executable, "-c", DUAL % timeout, str(srv.port)]
            rc0, out0, err0 = _in_private_hosts(cmd, base_env())
            rc1, out1, err1 = _in_private_hosts(cmd, shim_env(BACKOFFSHIM_INITIAL_BACKOFF="2s"))
            check(rc0 == 0 and rc1 == 0, "dualhost %s: %r %r / %r" % (timeout, out0, err0, err1))
            t0, t1 = float(out0.split()[1]), float(out1.split()[1])
            check(out1.split()[2] == "127.0.0.1", "connected to %r" % out1)
            check_not_delayed("the fallback to 127.0.0.1", t0, t1, wait=2.0)  # initial_backoff
            check("next attempt" not in err1, "a wait was announced: %r" % err1)
        curl = ["curl", "-sS", "-w", " %{time_connect}", "http://dualhost:%d/" % srv.port]
        conn = []
        for env in (base_env(), shim_env(BACKOFFSHIM_INITIAL_BACKOFF="2s")):
            rc, out, err = _in_private_hosts(curl, env)
            check(rc == 0 and "hello from server" in out, "curl dualhost: %r %r" % (out, err))
            conn.append(float(out.split()[-1]))
        check_not_delayed("curl's connect to dualhost", conn[0], conn[1], wait=2.0)


def test_curl_happy_eyeballs_still_works():
    """::1 black-holes SYNs (full accept queue), 127.0.0.1 serves: curl's
    parallel IPv4 attempt must win after its ~200 ms head start."""
    port = free_port()
    bh = socket.socket(socket.AF_INET6)
    bh.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    bh.bind(("::1", port))
    bh.listen(0)
    fillers = []
    for _ in range(3):
        f = socket.socket(socket.AF_INET6)
        f.setblocking(False)
        f.connect_ex(("::1", port))
        fillers.append(f)
    try:
        with HttpServer(port, host="127.0.0.1"):
            curl = ["curl", "-sS", "-w", " %{time_total}", "http://dualhost:%d/" % port]
            total = []
            for env in (base_env(), shim_env(**NO_DELAY)):
                rc, out, err = _in_private_hosts(curl, env)
                check(rc == 0 and "hello from server" in out, "curl: %r %r" % (out, err))
                total.append(float(out.split()[-1]))
            # holding the ::1 attempt up costs at least min_connect_timeout
            # (1 s) or a first wait (NO_DELAY: 1 s)
            check_not_delayed("happy eyeballs", total[0], total[1])
    finally:
        for f in fillers:
            f.close()
        bh.close()


def _popen(code, env):
    import subprocess
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_success_resets_only_once_a_byte_arrives():
    """After a greeting arrives the schedule starts over at INITIAL_BACKOFF."""
    port = free_port()
    code = ("import socket,sys\n"
            "s=socket.create_connection(('127.0.0.1', %d)); print(s.recv(64).decode().strip(), flush=True)\n"
            "s.close(); sys.stdin.readline()\n"
            "try: socket.create_connection(('127.0.0.1', %d))\n"
            "except OSError as e: print('second', e.errno, flush=True)\n" % (port, port))
    p = _popen(code, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=0))
    try:
        with SynSniffer(port) as sn:
            check(sn.wait_for(5, 5) >= 5, "no failing attempts")
            with Server(port).start():
                line = p.stdout.readline()
            check("hello" in line, "first connect: %r" % line)
        # server gone; the second call fails 3 times: its waits start over
        with SynSniffer(port) as sn:
            p.stdin.write("\n")
            p.stdin.flush()
            env_note = sn.wait_for(3, 5)
            gaps = sn.gaps()
        p.kill()
        p.communicate(timeout=5)
        check(env_note >= 3, "second connect made %d attempts" % env_note)
        check_gaps(gaps[:2], "after a healthy connection")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=5)


def test_send_error_paces_the_next_reconnect():
    """The server resets an established, healthy connection; the client's
    send fails; its immediate reconnect waits INITIAL_BACKOFF first."""
    port = free_port()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(4)
    code = ("import socket,time,sys\n"
            "s=socket.create_connection(('127.0.0.1', %d)); s.recv(5)\n"
            "sys.stdin.readline()\n"
            "try:\n"
            "  for i in range(200): s.send(b'x' * 1000); time.sleep(0.001)\n"
            "except OSError as e: print('send', e.errno, time.monotonic(), flush=True)\n"
            "try: socket.create_connection(('127.0.0.1', %d))\n"
            "except OSError as e: print('reconnect', e.errno, time.monotonic(), flush=True)\n"
            % (port, port))
    p = _popen(code, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=1))
    lst.settimeout(5)
    c, _ = lst.accept()
    c.sendall(b"hello")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()  # RST
    lst.close()  # and the server is gone
    with SynSniffer(port) as sn:
        p.stdin.write("\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=10)
        sn.wait_for(1, 2)  # the capture thread may not have seen it yet
    lines = {l.split()[0]: l.split()[1:] for l in out.splitlines() if l}
    check("send" in lines and "reconnect" in lines, "client: %r %r" % (out, err))
    gap = float(lines["reconnect"][1]) - float(lines["send"][1])
    check(gap >= INITIAL - slack() / 3, "reconnect after a send error came after %.3fs: %r %r"
          % (gap, out, err))
    check("Connection reset" in err or "Broken pipe" in err, "no failure logged: %r" % err)
    check(len(sn.times) == 1, "reconnect SYNs: %d" % len(sn.times))


def test_nonblocking_retry_with_a_stopping_policy_ends():
    port = free_port()
    code = ("import errno,select,socket\n"
            "s=socket.socket(); s.setblocking(False); s.connect_ex(('127.0.0.1', %d))\n"
            "select.select([], [s], [], 10)\n"
            "print(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n" % port)
    with SynSniffer(port) as sn:
        t0 = time.monotonic()
        rc, out, err = run([sys.executable, "-c", code],
                           shim_env(BACKOFFSHIM_POLICY="exponential", BACKOFFSHIM_MULTIPLIER=2,
                                    BACKOFFSHIM_MAX_ELAPSED=0), timeout=10)
        took = time.monotonic() - t0
        sn.wait_for(20, 0.3)
    check(out.strip() == "111", "expected ECONNREFUSED: %r %r" % (out, err[-300:]))
    # unbounded, the program's select() would end it after its 10 s
    check(len(sn.times) <= 5 and took < 10 / 2, "%d SYNs in %.1fs: not bounded"
          % (len(sn.times), took))


def test_error_read_away_by_poll_is_returned_by_send():
    """poll() saw POLLERR, the retries ran out: a send must return the
    connect error (as the kernel would), not EPIPE and SIGPIPE."""
    port = free_port()
    code = ("import select,socket\n"
            "s=socket.socket(); s.setblocking(False); s.connect_ex(('127.0.0.1', %d))\n"
            "p=select.poll(); p.register(s, select.POLLOUT); p.poll(10000)\n"
            "try: s.send(b'x'); print('sent')\n"
            "except OSError as e: print(e.errno)\n" % port)
    rc, out, err = run([sys.executable, "-c", code], shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2))
    check(rc == 0 and out.strip() == "111", "send after poll: rc=%d %r %r" % (rc, out, err))


def test_udp_connect_is_never_delayed():
    port = free_port()
    code = ("import socket,time\n"
            "u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.setblocking(False)\n"
            "u.connect(('127.0.0.1', %d)); u.send(b'a'); time.sleep(0.05)\n"
            "try: u.send(b'b')\n"
            "except OSError as e: print('refused', e.errno)\n"
            "t0=time.monotonic()\n"
            "v=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.connect(('127.0.0.1', %d))\n"
            "print('connect %%.3f' %% (time.monotonic() - t0))\n" % (port, port))
    took = []
    for env in (base_env(), shim_env(**NO_DELAY)):
        rc, out, err = run([sys.executable, "-c", code], env)
        check("refused 111" in out, "setup: %r %r" % (out, err))
        took.append(float([l for l in out.split("\n") if l.startswith("connect")][0].split()[1]))
    check_not_delayed("a UDP connect after a refusal", took[0], took[1])

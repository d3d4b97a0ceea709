"""Regressions from the review of the interposed path: each of these once
crashed, hung, flooded or lied to a program."""
import socket
import sys
import threading
import time

from lib import SynSniffer, check, free_port, run, shim_env


def test_log_line_never_lands_in_the_programs_socket():
    """stderr closed, fd 2 reused for a socket the peer resets: the shim's
    log must neither recurse (crash) nor write into that socket."""
    port = free_port()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(4)
    got = []

    def serve():
        lst.settimeout(5)
        c, _ = lst.accept()
        c.sendall(b"hi")
        c.settimeout(2)
        try:
            got.append(c.recv(4096))
        except OSError:
            pass
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = ("import os,socket,signal,time\n"
            "signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
            "os.close(2)\n"
            "s=socket.create_connection(('127.0.0.1', %d)); assert s.fileno() == 2\n"
            "s.recv(2); s.send(b'payload'); time.sleep(0.3)\n"
            "for i in range(20):\n"
            "  try: s.send(b'x')\n"
            "  except OSError: pass\n"
            "print('alive')\n" % port)
    rc, out, err = run([sys.executable, "-c", code], shim_env())
    t.join(5)
    lst.close()
    check(rc == 0 and "alive" in out, "program died: rc=%d %r" % (rc, out))
    check(got and b"backoffshim" not in got[0], "log text reached the socket: %r" % got)


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
    check(len(sn.times) <= 5 and took < 3, "%d SYNs in %.1fs: not bounded" % (len(sn.times), took))


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
    rc, out, err = run([sys.executable, "-c", code], shim_env(BACKOFFSHIM_INITIAL_BACKOFF="1s"))
    lines = out.split("\n")
    check("refused 111" in out, "setup: %r %r" % (out, err))
    took = float([l for l in lines if l.startswith("connect")][0].split()[1])
    check(took < 0.1, "a UDP connect waited %.3fs" % took)


def _syn_count(cmd, env, port, extra=0.3):
    with SynSniffer(port) as sn:
        rc, out, err = run(cmd, env)
        sn.wait_for(50, extra)
        return rc, out, err, len(sn.times)


def test_global_off_keeps_destination_sections():
    from lib import prog
    port = free_port()
    rc, out, err, n = _syn_count([prog("conntest"), "127.0.0.1", str(port)],
                                 shim_env(BACKOFFSHIM_POLICY="off",
                                          BACKOFFSHIM_DEST_RULES="127.0.0.1:%d=policy:grpc,"
                                                                 "max_attempts:3" % port), port)
    check(n == 3, "the [dest] section must win over a global off: %d SYNs %r" % (n, err))


def test_environment_rule_adds_to_the_file_section():
    import os
    import tempfile
    from lib import prog
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("[dest 127.0.0.1:%d]\nmax_attempts = 2\n" % port)
        path = f.name
    try:
        rc, out, err, n = _syn_count([prog("conntest"), "127.0.0.1", str(port)],
                                     shim_env(BACKOFFSHIM_CONFIG=path,
                                              BACKOFFSHIM_DEST_RULES="127.0.0.1:%d=max_attempts:4"
                                                                     % port), port)
    finally:
        os.unlink(path)
    check(n == 4 and "config:" not in err, "env must override the file: %d SYNs %r" % (n, err))


def test_name_section_matches_a_resolution_without_service():
    port = free_port()
    code = ("import socket,sys\n"
            "ai=socket.getaddrinfo('localhost', None, socket.AF_INET, socket.SOCK_STREAM)\n"
            "try: socket.create_connection((ai[0][4][0], %d))\n"
            "except OSError as e: print(e.errno)\n" % port)
    rc, out, err, n = _syn_count([sys.executable, "-c", code],
                                 shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3,
                                          BACKOFFSHIM_DEST_RULES="localhost:%d=max_attempts:1"
                                                                 % port), port)
    check(n == 1, "[dest localhost:port] should apply: %d SYNs %r" % (n, err))


def test_responsive_interval_above_the_budget_still_tries():
    """An interval longer than max_elapsed must not lock the destination
    out: each call still makes an attempt, so a returning server is found."""
    from lib import Server
    port = free_port()
    code = ("import socket,time\n"
            "for i in range(8):\n"
            "  try: socket.create_connection(('127.0.0.1', %d)).close(); print('ok', i); break\n"
            "  except OSError: print('fail', i, flush=True)\n" % port)
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=shim_env(BACKOFFSHIM_POLICY="responsive",
                                      BACKOFFSHIM_INITIAL_BACKOFF="300ms",
                                      BACKOFFSHIM_MAX_BACKOFF="600ms",
                                      BACKOFFSHIM_MAX_ELAPSED="200ms"))
    lines = [p.stdout.readline(), p.stdout.readline()]
    with Server(port).start():
        out, _ = p.communicate(timeout=20)
    check(all(l.startswith("fail") for l in lines) and "ok" in out,
          "never tried again once the interval passed the budget: %r %r" % (lines, out))

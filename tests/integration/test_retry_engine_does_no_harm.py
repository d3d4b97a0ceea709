"""Do no harm, the engine's side: each test runs the same unmodified program
with and without the shim and compares what it does, what it prints and what
its peers receive. The row numbers are those of the reliability audit
(issue 7)."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

from lib import (Acceptor, BUILD, BlackHole, NO_DELAY, SynSniffer, TestSkip, base_env, check, check_gaps,
                 check_not_delayed, free_port, ms_of, prog, run, shim_env, spawn, wait_status_row)

PY = sys.executable


def _py(code, env, args=(), timeout=20):
    return run([PY, "-c", code] + [str(a) for a in args], env, timeout)


def _shim_lines(err):
    return [l for l in err.splitlines() if l.startswith("backoffshim[")]


# ---- row 3: EOF before the first byte ----

UPLOAD = ("import socket,sys,time\n"
          "t0=time.monotonic()\n"
          "for i in range(6):\n"
          "    s=socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
          "    s.sendall(b'metric.%d 1 1700000000\\n' % i)\n"
          "    s.shutdown(socket.SHUT_WR)\n"
          "    assert s.recv(1) == b''\n"
          "    s.close()\n"
          "print('uploads done')\n"
          "print('took', time.monotonic()-t0, file=sys.stderr)\n")


def _read_all(c):
    """Everything the peer sends until it shuts down its side (5 s bound)."""
    c.settimeout(5)
    data = b""
    while True:
        b = c.recv(4096)
        if not b:
            return data
        data += b


def _upload_server(received):
    def handle(c):
        received.append(_read_all(c))  # read everything, then close without a byte
    return handle


def _took(err):
    return float([l for l in err.splitlines() if l.startswith("took")][-1].split()[1])


def test_upload_only_protocol_runs_as_fast_as_without_the_shim():
    """Row 3: the server reads everything and closes without sending a byte.
    That is a completed upload (the kernel says the server acknowledged our
    data), not a failed connection: no pacing, no log line."""
    results = {}
    for name, env in (("plain", base_env()), ("shim", shim_env(BACKOFFSHIM_LOG="debug", **NO_DELAY))):
        received = []
        port = free_port()
        with Acceptor(port, _upload_server(received)):
            rc, out, err = _py(UPLOAD, env, [port])
        results[name] = (rc, out, received, _took(err), _shim_lines(err))
    plain, shim = results["plain"], results["shim"]
    check(plain[0] == 0 and shim[0] == 0, "exit codes: %r" % ((plain[:2], shim[:2]),))
    check(shim[1] == plain[1], "output differs: %r vs %r" % (shim[1], plain[1]))
    check(shim[2] == plain[2] and len(shim[2]) == 6, "server got %r" % shim[2])
    check_not_delayed("6 uploads", plain[3], shim[3])
    check(not [l for l in shim[4] if "reset" in l or "next attempt" in l],
          "an upload was counted as a failure: %r" % shim[4])


def test_upload_with_nc_half_close():
    """Row 3 with a real client: nc -N sends stdin, half-closes and reads
    until the server closes."""
    took = {}
    for name, env in (("plain", base_env()), ("shim", shim_env(**NO_DELAY))):
        received = []
        port = free_port()
        with Acceptor(port, _upload_server(received)):
            t0 = time.monotonic()
            for i in range(4):
                p = subprocess.run(["nc", "-N", "127.0.0.1", str(port)], input=b"line %d\n" % i,
                                   env=env, capture_output=True, timeout=10)
                check(p.returncode == 0 and not _shim_lines(p.stderr.decode()),
                      "nc (%s): %r" % (name, p))
            took[name] = time.monotonic() - t0
        check(received == [b"line %d\n" % i for i in range(4)],
              "server got %r (%s)" % (received, name))
    check_not_delayed("4 nc uploads", took["plain"], took["shim"])


SEND_FIRST = ("import socket,sys,time\n"
              "end=time.monotonic()+float(sys.argv[2])\n"
              "n=0\n"
              "while time.monotonic()<end and n<500:\n"
              "    try:\n"
              "        s=socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
              "        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
              "        s.recv(100)\n"
              "    except OSError:\n"
              "        pass\n"
              "    s.close(); n+=1\n"
              "print('rounds', n)\n")


def test_send_first_client_against_closing_server_is_still_paced():
    """Row 3, the other side: a request-first client whose server accepts and
    closes at once (its request never taken) keeps being paced."""
    port = free_port()
    with Acceptor(port, lambda c: None) as a:
        rc, out, err = _py(SEND_FIRST, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=1), [port, 1.2])
        shim_accepts = list(a.accepts)
    check(rc == 0, "client: %r %r" % (out, err[-300:]))
    check(4 <= len(shim_accepts) <= 12, "server saw %d connections in 1.2s"
          % len(shim_accepts))
    check_gaps([b - a for a, b in zip(shim_accepts, shim_accepts[1:])][:4], "send-first")
    port = free_port()
    with Acceptor(port, lambda c: None) as a:
        rc, out, err = _py(SEND_FIRST, base_env(), [port, 0.3])
        plain_accepts = len(a.accepts)
    check(plain_accepts > 20, "without the shim only %d connections" % plain_accepts)


# ---- rows 4 and 17: datagrams ----

UDP_FIRE = ("import socket,sys,time\n"
            "port=int(sys.argv[1])\n"
            "t0=time.monotonic(); res=[]\n"
            "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('127.0.0.1', port))\n"
            "u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for i in range(8):\n"
            "    for sock, send in ((s, lambda b: s.send(b)),\n"
            "                       (u, lambda b: u.sendto(b, ('127.0.0.1', port)))):\n"
            "        try:\n"
            "            res.append(send(b'stat.%d:1|c' % i))\n"
            "        except OSError as e:\n"
            "            res.append(e.errno)\n"
            "print(res)\n"
            "print('took', time.monotonic()-t0, file=sys.stderr)\n")


def test_fire_and_forget_udp_is_never_delayed():
    """Row 4: statsd-style sends to a collector that is down return exactly
    what they return without the shim, at once."""
    port = free_port()
    rc0, out0, err0 = _py(UDP_FIRE, base_env(), [port])
    rc1, out1, err1 = _py(UDP_FIRE, shim_env(**NO_DELAY), [port])
    check(rc0 == rc1 == 0, "exit codes %d %d: %r" % (rc0, rc1, err1[-300:]))
    check(out0 == out1, "results differ: %r vs %r" % (out0, out1))
    check("111" in out0, "the collector's refusals were not seen: %r" % out0)
    check_not_delayed("16 sends", _took(err0), _took(err1))
    check(not _shim_lines(err1), "the shim logged about datagrams: %r" % err1)


UDP_THEN_TCP = ("import socket,sys,time\n"
                "port=int(sys.argv[1])\n"
                "u=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect(('127.0.0.1', port))\n"
                "u.send(b'x')\n"
                "try:\n"
                "    u.send(b'y'); print('udp sent')\n"
                "except OSError as e:\n"
                "    print('udp', e.errno)\n"
                "t0=time.monotonic()\n"
                "t=socket.create_connection(('127.0.0.1', port))\n"
                "print('tcp', t.recv(5))\n"
                "print('took', time.monotonic()-t0, file=sys.stderr)\n")


def test_udp_error_never_touches_the_tcp_destination():
    """Row 17: a refused datagram to port P says nothing about the TCP
    server on P; the TCP connect goes at once."""
    results = []
    for env in (base_env(), shim_env(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MAX_BACKOFF="2s")):
        port = free_port()
        with Acceptor(port, lambda c: c.sendall(b"hello")):
            rc, out, err = _py(UDP_THEN_TCP, env, [port])
        results.append((rc, out, _took(err), _shim_lines(err)))
    (rc0, out0, took0, _), (rc1, out1, took, lines) = results
    check(rc0 == rc1 == 0 and out0 == out1, "differs: %r vs %r" % (results[0], results[1]))
    check("udp 111" in out0, "no refusal seen: %r" % out0)
    check(not lines, "the shim logged about the TCP connect: %r" % lines)
    check_not_delayed("the TCP connect", took0, took, wait=1.0)  # its initial_backoff


# ---- row 8: which signal may interrupt ----

def test_crash_handler_does_not_make_sa_restart_interrupt():
    """Row 8: a SIGSEGV handler without SA_RESTART and a SIGCHLD handler with
    it; a child exits during the blocking connect. The kernel restarts
    connect(); so must the shim's waits: no EINTR."""
    port = free_port()
    rc0, out0, _ = run([prog("conntest"), "-S", "127.0.0.1", str(port)], base_env())
    rc1, out1, err1 = run([prog("conntest"), "-S", "127.0.0.1", str(port)],
                          shim_env(BACKOFFSHIM_MAX_ELAPSED="600ms"))
    check(rc0 == rc1 == 1, "exit codes %d %d" % (rc0, rc1))
    check(out0.startswith("fail errno=ECONNREFUSED"), "without the shim: %r" % out0)
    check(out1.startswith("fail errno=ECONNREFUSED") and ms_of(out1) >= 400,
          "with the shim the SIGCHLD interrupted the wait: %r %r" % (out1, err1[-300:]))


# ---- row 9: a floor under every wait ----

def test_no_policy_runs_a_hot_retry_loop():
    """Row 9: a list ending in 0 is refused (by check-config and by the
    library, which keeps the default list), and full jitter over a tiny
    backoff never goes below 10 ms between attempts."""
    with tempfile.NamedTemporaryFile("w", suffix=".ini") as f:
        f.write("[backoff]\npolicy = list\ndelays = 0\n")
        f.flush()
        p = subprocess.run([os.path.join(BUILD, "backoffshim"), "check-config", f.name],
                           capture_output=True, text=True, timeout=10)
        check(p.returncode == 1 and "cannot be 0" in p.stdout + p.stderr,
              "check-config accepted delays = 0: %r" % (p,))
        cases = (("list", shim_env(BACKOFFSHIM_CONFIG=f.name)),
                 ("full jitter", shim_env(BACKOFFSHIM_JITTER_MODE="full",
                                          BACKOFFSHIM_INITIAL_BACKOFF="1ms",
                                          BACKOFFSHIM_MAX_BACKOFF="2ms")))
        for what, env in cases:
            port = free_port()
            env.update(BACKOFFSHIM_MAX_ELAPSED="500ms", BACKOFFSHIM_LOG="off")
            with SynSniffer(port) as sn:
                rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)], env)
                syns = sn.wait_for(1, 1)
            check(rc == 1 and "ECONNREFUSED" in out, "%s: %r %r" % (what, out, err))
            check(2 <= syns <= 55, "%s: %d SYNs in 0.5s" % (what, syns))


# ---- row 10: a retried attempt changes nothing the program can see ----

def test_longjmp_during_a_retried_attempt_leaves_the_socket_as_set():
    """Row 10: siglongjmp out of connect() while the shim's own attempt is in
    flight (a black-holed SYN): the socket keeps the program's SO_SNDTIMEO
    (none) and its blocking mode."""
    port = free_port()
    p = spawn([prog("conntest"), "-c", "-a", "900", "-j", "127.0.0.1", str(port)],
              shim_env(BACKOFFSHIM_MIN_CONNECT_TIMEOUT="2s"))
    try:
        seen, end = "", time.monotonic() + 5
        while seen.count("next attempt in") < 2 and time.monotonic() < end:
            seen += p.stderr.readline()
        check(seen.count("next attempt in") >= 2, "no refused attempts: %r" % seen)
        with BlackHole(port):
            out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(out.startswith("jumped"), "no jump: %r %r" % (out, err[-300:]))
    check("timed out" not in err, "the jump did not land in an attempt: %r" % err[-300:])
    check("check failed" not in out, "the socket was left changed: %r" % out)


# ---- row 2: an owed error belongs to one socket ----

def test_owed_error_is_never_given_to_a_file_that_took_the_number():
    """Row 2: poll() read a failed connect's error away; the program
    fclose()s the fdopen()ed socket (libc closes it past the wrappers) and
    open()s a file that gets the same number: read() returns the file."""
    port = free_port()
    with tempfile.NamedTemporaryFile("w") as f:
        f.write("file bytes")
        f.flush()
        rc0, out0, _ = run([prog("owedfd"), str(port), f.name], base_env())
        rc1, out1, err1 = run([prog("owedfd"), str(port), f.name],
                              shim_env(BACKOFFSHIM_MAX_ATTEMPTS=1))
    check(rc0 == rc1 == 0, "exit codes %d %d" % (rc0, rc1))
    check("same fd: yes" in out0, "the file did not reuse the number: %r" % out0)
    check(out1 == out0, "differs with the shim: %r vs %r" % (out1, out0))


# ---- found by review: what EINTR, cancellation and EOF must not break ----

INTERRUPTED = ("import signal,socket,sys\n"
               "signal.signal(signal.SIGALRM, lambda *a: None)\n"
               "s=socket.socket()\n"
               "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
               "try:\n"
               "    s.connect(('127.0.0.1', int(sys.argv[1])))\n"
               "    print('connected')\n"
               "except OSError as e:\n"
               "    print('connect failed', e.errno)\n")


def test_signal_during_a_wait_is_not_taken_for_a_connection():
    """A signal whose handler lacks SA_RESTART (CPython's) interrupts a wait
    between attempts. EINTR would tell the program "still connecting": CPython
    then polls the unconnected socket, finds it writable with no error and
    reports success. The call ends with the last real error instead."""
    port = free_port()
    rc0, out0, _ = _py(INTERRUPTED, base_env(), [port])
    rc1, out1, err1 = _py(INTERRUPTED, shim_env(), [port])
    check(out0 == "connect failed 111\n", "without the shim: %r" % out0)
    check(out1 == out0, "with the shim %r (%r)" % (out1, _shim_lines(err1)))


def test_cancelled_thread_leaves_the_socket_blocking():
    """pthread_cancel of a thread in a retried connect(): the cancellation
    acts where the socket is as the program set it, never while the shim has
    O_NONBLOCK on for its own attempt."""
    port = free_port()
    rc, out, err = run([prog("cancelconn"), str(port)], base_env())
    check(rc == 0 and out == "canceled=0 nonblocking=0\n", "without the shim: %r" % out)
    rc, out, err = run([prog("cancelconn"), str(port)], shim_env(BACKOFFSHIM_LOG="off"))
    check(rc == 0 and out == "canceled=1 nonblocking=0\n", "with the shim: %r" % out)


RESET_AFTER_EOF = ("import select,socket,sys\n"
                   "s=socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
                   "p=select.poll(); p.register(s, select.POLLIN)\n"
                   "assert p.poll(5000)\n"  # the server's FIN, not read yet
                   "s.send(b'late')\n"       # answered with a reset
                   "p.modify(s, 0)\n"
                   "assert p.poll(5000)\n"  # POLLERR: the reset is pending
                   "print('eof', s.recv(1))\n"
                   "print('error', s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n")


def test_eof_check_leaves_a_pending_reset_to_the_program():
    """The server closes at once; the client writes after its FIN came, the
    server answers with a reset, and the client reads EOF, then SO_ERROR.
    The shim's look at that EOF must not take the pending error away."""
    results = []
    for env in (base_env(), shim_env()):
        port = free_port()
        with Acceptor(port, lambda c: None):
            rc, out, err = _py(RESET_AFTER_EOF, env, [port])
        results.append((rc, out))
    check(results[0][0] == 0 and "error 0" not in results[0][1],
          "without the shim no pending error: %r" % (results[0],))
    check(results[1] == results[0], "with the shim %r, without %r" % (results[1], results[0]))


UNIX_UPLOAD = ("import socket,sys,time\n"
               "t0=time.monotonic()\n"
               "for i in range(4):\n"
               "    s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
               "    s.sendall(b'line %d' % i); s.shutdown(socket.SHUT_WR)\n"
               "    assert s.recv(1) == b''\n"
               "    s.close()\n"
               "print('done')\n"
               "print('took', time.monotonic()-t0, file=sys.stderr)\n")


def _unix_upload(env):
    """UNIX_UPLOAD against a server that reads each upload and closes
    without a reply: (rc, out, err, what the server got)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "up.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(8)
        srv.settimeout(5)
        got = []

        def serve():
            for _ in range(4):
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                with c:
                    got.append(_read_all(c))
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        rc, out, err = _py(UNIX_UPLOAD, env, [path])
        t.join(5)
        srv.close()
    return rc, out, err, got


def test_unix_upload_is_not_paced():
    """unix = on: an AF_UNIX server that reads an upload and closes without
    a reply is up, not failing (the kernel cannot say more for AF_UNIX)."""
    rc0, out0, err0, got0 = _unix_upload(base_env())
    check(rc0 == 0 and out0 == "done\n", "client without the shim: %r %r" % (out0, err0[-300:]))
    rc, out, err, got = _unix_upload(shim_env(BACKOFFSHIM_UNIX="on", **NO_DELAY))
    check(rc == 0 and out == "done\n", "client: %r %r" % (out, err[-300:]))
    check(got == [b"line %d" % i for i in range(4)], "server got %r" % got)
    check(not _shim_lines(err), "paced: %r" % _shim_lines(err))
    check_not_delayed("4 AF_UNIX uploads", _took(err0), _took(err))


# ---- a second thread acts while the first waits in the shim ----


def _waiters(case, env):
    """tests/progs/waiters CASE, told to go once its connecting thread is
    done (without the shim: its line on stdout) or waits in the shim's
    backoff (status counts it). Its stdout lines, sorted (the two threads
    print in either order). Told at once after the shim's log line, a
    program would meet the few instructions in which a lock file's open
    holds the lowest free number before moving it up (shared.c)."""
    p = subprocess.Popen([prog("waiters"), case, str(free_port())], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lines = []
    if "LD_PRELOAD" in env and case == "rlimit":
        # (under a limit of 5 the shim takes no lock, so status counts no
        # waiter, and opens nothing: its first wait's line is the event)
        first = p.stderr.readline()
        check("(attempt 1)" in first, "%s: the thread never waited: %r" % (case, first))
    elif "LD_PRELOAD" in env:
        wait_status_row(env["BACKOFFSHIM_SHARED"], lambda r: r["waiting_threads"] > 0,
                        what="%s: a waiting thread" % case)
    else:
        lines.append(p.stdout.readline())
        check(lines[0].startswith("thread fd="), "%s: %r" % (case, lines))
    out, err = p.communicate("go\n", timeout=20)
    check(p.returncode == 0, "%s: rc=%d %r" % (case, p.returncode, err))
    return sorted(("".join(lines) + out).splitlines())


def _while_waiting(case):
    """waiters CASE without the shim and with it (its main thread acting
    while the other waits in the shim): both runs' sorted stdout lines."""
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="300ms", BACKOFFSHIM_MAX_ELAPSED="2s")
    return _waiters(case, base_env()), _waiters(case, env)


def test_a_thread_waiting_in_the_shim_takes_no_number_from_the_program():
    """While one thread backs off, another's socket() gets the number it gets
    without the shim, even under an fd limit of 5: the shared table's lock
    file sits high (it took the lowest free number, so the other thread got
    5 instead of 4, or EMFILE)."""
    for case in ("socket", "rlimit"):
        plain, shimmed = _while_waiting(case)
        check(shimmed == plain, "%s: with the shim %r, without %r" % (case, shimmed, plain))


def test_a_thread_waiting_in_the_shim_never_closes_a_number_the_program_reused():
    """closefrom(4) while a thread backs off, then a pipe that takes 4 and 5:
    the shim's lock file was among the closed numbers, and its release must
    not close the pipe (it did: the write died of SIGPIPE)."""
    plain, shimmed = _while_waiting("closefrom")
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


def test_a_socket_closed_while_its_connect_backs_off_is_not_replaced_by_a_new_one():
    """Another thread closes the socket a connect backs off on and makes a
    new one, which takes its number: the shim never connects the new socket
    (it did, and bind and listen then failed with EINVAL); the waiting
    connect ends with its last real error, as the kernel's connect on the
    closed socket would."""
    plain, shimmed = _while_waiting("reuse")
    check(shimmed == plain, "with the shim %r, without %r" % (shimmed, plain))


# ---- a healthy server that resets one request ----

PROXY_LIKE = r"""
import select, socket, sys
lst = socket.socket(); lst.bind(("127.0.0.1", 0)); lst.listen()  # a server: auto is pace
port, res = int(sys.argv[1]), []
for req in (b"rst", b"ok", b"ok"):
    s = socket.socket(); s.setblocking(False)
    e = s.connect_ex(("127.0.0.1", port))
    if e == 115:
        select.select([], [s], [], 5)
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if e:
        res.append("connect %d" % e)
    else:
        s.setblocking(True)
        s.sendall(req)
        try:
            res.append("recv %r" % s.recv(100))
        except OSError as ex:
            res.append("recv %d" % ex.errno)
    s.close()
print(res)
"""


def _reset_on_request(conn):
    """Reads the request: 'rst' is answered with a reset (SO_LINGER 0),
    anything else with 'ok'."""
    if conn.recv(16) == b"rst":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
    else:
        conn.sendall(b"ok")


def test_a_server_that_resets_one_request_stays_up_for_a_proxy():
    """A proxy-like server process (pace mode) sends a request upstream; the
    upstream takes it in full and resets it; the next requests go at once,
    as without the shim. The reset still counts as a failed attempt (a
    client that waits is still paced: the test above), but pace makes up
    only a failure a connect() itself could report, and ECONNRESET is none:
    the next connects were refused without a packet for initial_backoff,
    with "connect() failed (104: Connection reset by peer)" in nginx's log."""
    port = free_port()
    with Acceptor(port, _reset_on_request, threaded=True):
        rc, plain, err = _py(PROXY_LIKE, base_env(), [port])
        check(rc == 0 and plain.strip() == "['recv 104', \"recv b'ok'\", \"recv b'ok'\"]",
              "without the shim: %r %r" % (plain, err))
        rc, shimmed, err = _py(PROXY_LIKE, shim_env(BACKOFFSHIM_INITIAL_BACKOFF="1s"), [port])
    check(rc == 0 and shimmed == plain, "with the shim %r, without %r (%r)" % (shimmed, plain, err))


def test_a_sandbox_that_refuses_the_shims_waits_neither_spins_nor_times_out():
    """The program's own seccomp filter answers futex, or ppoll, with EPERM
    (a sandbox's allow-list without them). Its connect to a dead port ends
    with the refusal, as without the shim, after the shim's budget: a futex
    refused became a loop that spun through max_elapsed (thousands of
    futex calls, both cores), a ppoll refused an ETIMEDOUT the kernel never
    gave."""
    if not shutil.which("strace"):
        raise TestSkip("strace is not installed")
    port = free_port()
    for call in ("futex", "ppoll"):
        rc, plain, err = run([prog("denied"), call, str(port)], base_env())
        check(rc == 0 and plain.strip() == "connect=111", "%s without the shim: %r" % (call, plain))
        env = shim_env(BACKOFFSHIM_MAX_ELAPSED="1s", BACKOFFSHIM_LOG="off")
        rc, shimmed, err = run(["strace", "-f", "-qq", "-c", "-e", "trace=futex", "-S", "calls",
                                prog("denied"), call, str(port)], env, timeout=30)
        m = re.search(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?futex$", err, re.M)
        check(m, "%s: strace counted no futex call (the shim waits on one): %r" % (call, err))
        check(rc == 0 and shimmed == plain and int(m.group(1)) <= 100,
              "%s with the shim: %r, %s futex calls" % (call, shimmed, m.group(1)))

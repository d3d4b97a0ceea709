"""Unmodified programs ride out a server that starts late (issue #2)."""
import sys
import time

from lib import (NO_DELAY, base_env, check, check_gaps, check_not_delayed, late_server_run, prog,
                 run, shim_env, free_port, SynSniffer, Server, spawn, finish)

PY_CLIENT = ("import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2]))); "
             "print(s.recv(100).decode().strip())")
BASH_CLIENT = 'exec 3<>/dev/tcp/$0/$1 && head -n1 <&3'


def _fails_without_shim(cmd, what):
    rc, out, err = run(cmd, base_env(), timeout=10)
    check(rc != 0, "%s connected without the shim and without a server?" % what)
    check("refused" in (out + err).lower(), "%s: expected 'refused' without shim: %r" % (what, err))


def _rides_out(cmd, what, host="127.0.0.1", port=None):
    port = port or int(cmd[-1])
    rc, out, err, gaps = late_server_run(cmd, shim_env(), port, host=host)
    check(rc == 0, "%s with shim: rc=%d err=%r" % (what, rc, err[-500:]))
    check("hello from server" in out, "%s: no greeting in %r" % (what, out))
    check("next attempt in" in err, "%s: no wait log line in %r" % (what, err))
    check("connected after" in err, "%s: no 'connected after' line" % what)
    check_gaps(gaps, what)


def test_python_create_connection():
    port = free_port()
    cmd = [sys.executable, "-c", PY_CLIENT, "127.0.0.1", str(port)]
    _fails_without_shim(cmd, "python")
    _rides_out(cmd, "python")


def test_python_create_connection_ipv6():
    port = free_port()
    cmd = [sys.executable, "-c", PY_CLIENT, "::1", str(port)]
    _fails_without_shim(cmd, "python v6")
    _rides_out(cmd, "python v6", host="::1")


def test_bash_dev_tcp():
    port = free_port()
    cmd = ["bash", "-c", BASH_CLIENT, "127.0.0.1", str(port)]
    _fails_without_shim(cmd, "bash")
    _rides_out(cmd, "bash")


def test_legacy_client_c():
    port = free_port()
    cmd = [prog("legacy_client"), "127.0.0.1", str(port)]
    _fails_without_shim(cmd, "legacy_client")
    _rides_out(cmd, "legacy_client")


def test_tight_loop_is_paced():
    port = free_port()
    # Without the shim the loop hammers the dead port.
    with SynSniffer(port) as sn:
        rc, out, err = run([prog("tightloop"), "127.0.0.1", str(port), "1000000", "1"],
                           base_env(), timeout=10)
        check(rc == 1, "tightloop without shim: rc=%d out=%r" % (rc, out))
        n = int(out.split()[3])
        check(n > 1000, "tightloop should hammer without shim, made only %d attempts" % n)
    # With the shim (each connect() call given 2 attempts, so the program's
    # own loop keeps calling), the destination's schedule spans the calls.
    cmd = [prog("tightloop"), "127.0.0.1", str(port), "1000000", "10"]
    rc, out, err, gaps = late_server_run(cmd, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2), port,
                                         syns_before=6)
    check(rc == 0, "tightloop with shim: rc=%d out=%r err=%r" % (rc, out, err[-300:]))
    check_gaps(gaps, "tightloop")
    calls = int(out.split()[2])
    check(calls < 20, "tightloop made %d connect() calls with the shim" % calls)


def test_disable_is_pass_through():
    port = free_port()
    cmd = [sys.executable, "-c", PY_CLIENT, "127.0.0.1", str(port)]
    t0 = time.monotonic()
    rc, out, err = run(cmd, base_env(), timeout=10)
    plain = time.monotonic() - t0
    check(rc != 0, "setup: connected without a server: %r" % out)
    with SynSniffer(port) as sn:
        t0 = time.monotonic()
        rc, out, err = run(cmd, shim_env(BACKOFFSHIM_DISABLE="1", **NO_DELAY), timeout=10)
        check(rc != 0, "disabled shim: the connect did not fail: %r" % out)
        check_not_delayed("disabled shim: the refused connect", plain, time.monotonic() - t0)
        check("backoffshim" not in err, "disabled shim logged: %r" % err)
        sn.wait_for(2, 0.3)
        check(len(sn.times) == 1, "disabled shim: %d SYNs, expected 1" % len(sn.times))


def test_many_calls_share_one_schedule():
    """Two processes are separate; one process's successive calls are not."""
    port = free_port()
    code = ("import socket,sys\n"
            "for i in range(3):\n"
            "  try: socket.create_connection(('127.0.0.1', %d))\n"
            "  except OSError as e: print(e.errno)\n" % port)
    with SynSniffer(port) as sn:
        rc, out, err = run([sys.executable, "-c", code],
                           shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2), timeout=10)
        check(out.split() == ["111"] * 3, "expected 3 refused calls, got %r" % out)
        sn.wait_for(6, 1)
        check(len(sn.times) == 6, "expected 6 SYNs, saw %d" % len(sn.times))
        check_gaps(sn.gaps(), "successive calls")

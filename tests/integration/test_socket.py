"""Retries happen on the program's own socket, which keeps its identity,
flags, options and bound address (issue #2); threads share one schedule."""
import socket
import sys
import time

from lib import (NO_DELAY, Server, SynSniffer, base_env, check, check_gaps, check_not_delayed,
                 free_port, late_server_run, prog, run, shim_env, INITIAL, JITTER)


def _late(opts, host):
    port = free_port()
    cmd = [prog("conntest")] + opts + [host, str(port)]
    rc, out, err, gaps = late_server_run(cmd, shim_env(), port, host=host)
    check(rc == 0, "conntest %s: rc=%d out=%r err=%r" % (" ".join(opts), rc, out, err[-300:]))
    check_gaps(gaps, "conntest " + " ".join(opts))


def test_same_socket_ipv4():
    _late(["-c"], "127.0.0.1")


def test_same_socket_ipv4_bound():
    _late(["-b", str(free_port()), "-c"], "127.0.0.1")
    _late(["-b", "0", "-c"], "127.0.0.1")


def test_same_socket_ipv6():
    _late(["-c"], "::1")


def test_same_socket_ipv6_bound():
    _late(["-b", str(free_port()), "-c"], "::1")
    _late(["-b", "0", "-c"], "::1")


def test_program_sndtimeo_is_restored():
    _late(["-c", "-s", "5000"], "127.0.0.1")


def test_failed_call_leaves_clean_socket():
    port = free_port()
    rc, out, err = run([prog("conntest"), "-b", str(free_port()), "-c", "127.0.0.1",
                        str(port)],
                       shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3))
    check(rc == 1, "expected a plain failure (1), got rc=%d out=%r" % (rc, out))


def test_eight_threads_are_one_destination():
    port = free_port()
    cmd = [prog("conntest"), "-t", "8", "127.0.0.1", str(port)]
    with SynSniffer(port) as sn:
        from lib import spawn, finish
        p = spawn(cmd, shim_env())
        # (up to 8 first attempts, then 4 waits' worth)
        check(sn.wait_for(12, 10) >= 12, "too few SYNs")
        gaps = sn.gaps()
        with Server(port).start():
            rc, out, err = finish(p, 15)
    check(rc == 0 and out.count("ok ") == 8, "8 threads: rc=%d out=%r" % (rc, out))
    # Threads start a little apart, so the first failures may come from
    # several of them at once; after that, one attempt per step.
    # (a gap of half the shortest wait or more is a wait)
    first = next(i for i, g in enumerate(gaps) if g > (1 - JITTER) * INITIAL / 2)
    check(first <= 8, "threads were not serialised: %s" % gaps)
    check_gaps(gaps[first:first + 3], "8 threads")
    fails = len(gaps) + 1  # (SYNs refused before the server came; a few more may follow)
    check(err.count("next attempt in") <= fails + 2,
          "one wait line per failure expected (%d refused): %r" % (fails, err))


def test_nonblocking_off_passes_through():
    port = free_port()
    code = ("import socket,select,errno,sys\n"
            "s=socket.socket(); s.setblocking(False)\n"
            "r=s.connect_ex(('127.0.0.1', %d))\n"
            "select.select([], [s], [], 5)\n"
            "print(r, s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n" % port)
    t0 = time.monotonic()
    run([sys.executable, "-c", code], base_env())
    plain = time.monotonic() - t0
    with SynSniffer(port) as sn:
        t0 = time.monotonic()
        rc, out, err = run([sys.executable, "-c", code],
                           shim_env(BACKOFFSHIM_NONBLOCKING="off", **NO_DELAY))
        check(out.split() == ["115", "111"], "EINPROGRESS then ECONNREFUSED expected: %r" % out)
        check_not_delayed("a non-blocking connect with nonblocking = off", plain,
                          time.monotonic() - t0)
        sn.wait_for(2, 0.3)
        check(len(sn.times) == 1, "non-blocking socket: %d SYNs" % len(sn.times))


def test_udp_connect_untouched():
    port = free_port()
    code = ("import socket\n"
            "s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.connect(('127.0.0.1', %d)); print('ok')\n" % port)
    rc, out, err = run([sys.executable, "-c", code], shim_env())
    check(rc == 0 and out.strip() == "ok" and not err, "udp connect: %r %r" % (out, err))

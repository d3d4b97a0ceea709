"""Real, unmodified clients ride out a late or restarting server (issue #3).

Each client is started while its server is down (after having been up: a
restart), fails without the shim, and connects with it. Attempts are seen
on the wire; the servers are real (HTTP, PostgreSQL, Redis) on loopback.
"""
import sys
import time

from lib import (SynSniffer, base_env, check, check_gaps, finish, free_port, run,
                 shim_env, spawn)
from servers import HttpServer, Postgres, ReadyGate, Redis, clean_env


def _rides_out_restart(server, cmd, env_extra=None, expect="hello from server",
                       syns_before=3, plain_env=None):
    """server: a running fixture. It goes down; the client fails without the
    shim; with the shim the client starts during the outage and connects
    once the server is back (a restart)."""
    port = server.port
    server.stop()
    rc, out, err = run(cmd, plain_env or base_env(), timeout=30)
    check(rc != 0 and expect not in out,
          "%s succeeded without a server and without the shim: %r" % (cmd[0], out[-200:]))
    env = shim_env(**(env_extra or {}))
    with SynSniffer(port) as sn:
        p = spawn(cmd, env)
        seen = sn.wait_for(syns_before, 10)
        check(seen >= syns_before, "%s: only %d SYNs while the server was down"
              % (cmd[0], seen))
        gaps = sn.gaps()[:syns_before - 1]
        server.start()
        rc, out, err = finish(p, 30)
    check(rc == 0, "%s with shim: rc=%d out=%r err=%r" % (cmd[0], rc, out[-300:], err[-600:]))
    check(expect in out, "%s: expected %r in %r" % (cmd[0], expect, out[-300:]))
    check("ECONNABORTED" not in err and "abort" not in err.lower(),
          "%s saw a connection abort: %r" % (cmd[0], err[-300:]))
    check_gaps(gaps, cmd[0])


def test_curl():
    with HttpServer(free_port()) as srv:
        cmd = ["curl", "-sS", "http://127.0.0.1:%d/" % srv.port]
        _rides_out_restart(srv, cmd)


def test_curl_localhost():
    with HttpServer(free_port()) as srv:
        cmd = ["curl", "-sS", "http://localhost:%d/" % srv.port]
        _rides_out_restart(srv, cmd)


def test_wget():
    with HttpServer(free_port()) as srv:
        cmd = ["wget", "-q", "-O-", "--tries=1", "http://127.0.0.1:%d/" % srv.port]
        _rides_out_restart(srv, cmd)


def test_python_create_connection_with_timeout():
    with HttpServer(free_port()) as srv:
        code = ("import socket,sys; s=socket.create_connection(('127.0.0.1', %d), timeout=30);"
                "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(s.makefile('rb').read().decode())" % srv.port)
        cmd = [sys.executable, "-c", code]
        _rides_out_restart(srv, cmd)


def test_python_urllib():
    with HttpServer(free_port()) as srv:
        code = ("import urllib.request; print(urllib.request.urlopen("
                "'http://127.0.0.1:%d/', timeout=30).read().decode())" % srv.port)
        cmd = [sys.executable, "-c", code]
        _rides_out_restart(srv, cmd)


def test_psql():
    """psql rides out a restart of PostgreSQL, seen through a port that opens
    once the server is ready (servers.ReadyGate): a postmaster that listens
    but is still starting answers with an error of its own, shim or not."""
    pg = Postgres(free_port())
    with ReadyGate(pg, free_port()) as gate:
        cmd = ["psql", "-h", "127.0.0.1", "-p", str(gate.port), "-U", "postgres",
               "-d", "postgres", "-tAc", "select 40 + 2"]
        _rides_out_restart(gate, cmd, expect="42", plain_env=clean_env())


def test_redis_cli():
    with Redis(free_port()) as rd:
        cmd = ["redis-cli", "-h", "127.0.0.1", "-p", str(rd.port), "ping"]
        _rides_out_restart(rd, cmd, expect="PONG")


def test_nc_with_timeout():
    with HttpServer(free_port()) as srv:
        cmd = ["sh", "-c", "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -N -w 5 127.0.0.1 %d"
               % srv.port]
        _rides_out_restart(srv, cmd)


def test_server_side_spacing_when_server_closes_at_once():
    """A server that accepts and closes at once: each connection fails before
    a byte arrives, so the reconnecting client stays paced, counted at the
    server's accept()s."""
    import socket
    import threading
    port = free_port()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(64)
    lst.settimeout(0.1)
    accepts, stop = [], [False]

    def serve():
        while not stop[0] and len(accepts) < 50:
            try:
                c, _ = lst.accept()
            except socket.timeout:
                continue
            accepts.append(time.monotonic())
            c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    from lib import prog
    try:
        rc, out, err = run([prog("tightloop"), "127.0.0.1", str(port), "1000000", "1.2"],
                           shim_env(BACKOFFSHIM_MAX_ATTEMPTS=1))
    finally:
        stop[0] = True
        t.join(2)
        lst.close()
    check(rc == 1, "tightloop should give up: %r" % out)
    check(4 <= len(accepts) <= 12, "server saw %d connections in 1.2s" % len(accepts))
    gaps = [b - a for a, b in zip(accepts, accepts[1:])]
    check_gaps(gaps[:4], "accept-and-close")
    rc, out, err = run([prog("tightloop"), "127.0.0.1", str(port), "1000000", "0.5"],
                       base_env())

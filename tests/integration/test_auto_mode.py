"""Servers and proxies under the default `nonblocking = auto` (issue #9): a
process that called listen() or accept(), or that holds an inherited
listening socket (systemd LISTEN_FDS, inetd), is a server, so its
non-blocking connects are paced: inside the backoff window a connect fails at
once without sending anything, and one real attempt per initial_backoff still
goes out. A proxy with a second upstream therefore serves every request at
once while the first upstream is down, sends it fewer SYNs, and uses it again
about one initial_backoff after it comes back.

Each scenario runs without the shim too. The production schedule
(initial_backoff 1 s) is used: its window is what is observable.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from lib import (LineReader, SynSniffer, TestFailure, base_env, check, check_not_delayed,
                 free_port, run, shim_env, spawn)
from servers import HttpServer

PROD = dict(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MULTIPLIER="1.6",
            BACKOFFSHIM_JITTER="0.2", BACKOFFSHIM_MAX_BACKOFF="120s",
            BACKOFFSHIM_MAX_ELAPSED="60s")
REQUESTS = 6
BACK_BOUND = 1.2 + 0.2   # the upstream that came back is used within this (s)
WAIT = 1.0               # PROD's first wait: what a wrongful wait would add (s)


def _get(port, timeout=5.0):
    """One HTTP/1.0 GET / straight to the proxy (no shim here); returns
    (status line, body, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        while len(data) < 65536:
            d = s.recv(4096)
            if not d:
                break
            data += d
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(errors="replace"), body, time.monotonic() - t0


def _wait_listening(port, p, what, timeout=5.0):
    end = time.monotonic() + timeout
    for _ in range(500):
        if p.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() >= end:
                break
            time.sleep(0.01)
    raise TestFailure("%s never listened on %d (exit %r)" % (what, port, p.poll()))


def _back_in_use(port, srv_a, t_up, bound, what):
    """After upstream A came back at t_up: request through the proxy every
    20 ms until one reaches A (its accepts), at most `bound` + 1 s. Returns
    the delay from t_up, or None."""
    end = t_up + bound + 1.0
    for _ in range(1000):
        if srv_a.accepts:
            return srv_a.accepts[0] - t_up
        if time.monotonic() >= end:
            return None
        try:
            _get(port, timeout=2)
        except OSError:
            pass
        time.sleep(0.02)
    return None


# --- 8. nginx: a reverse proxy with one upstream down ----------------------

NGINX_CONF = """
error_log {dir}/error.log info;
pid {dir}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream pair {{
        server 127.0.0.1:{a} max_fails=0;
        server 127.0.0.1:{b} max_fails=0;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://pair;
            proxy_next_upstream error;
            proxy_connect_timeout 5s;
        }}
    }}
}}
"""


def _nginx_bin():
    path = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(path):
        raise TestFailure("nginx is not installed (scripts/install-deps test)")
    return path


def _nginx_scenario(env):
    """nginx (one process, no daemon) with upstreams A (down) and B. Returns
    dict: statuses, times (s) and total of REQUESTS curl requests, SYNs to A
    during them, and how long after A's return a request reached A."""
    d = tempfile.mkdtemp(prefix="bshim-nginx-")
    port, a, b = free_port(), free_port(), free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(dir=d, a=a, b=b, port=port))
    cmd = [_nginx_bin(), "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e",
           os.path.join(d, "error.log"), "-g", "daemon off; master_process off;"]
    srv_b = HttpServer(b).start()
    srv_a = HttpServer(a)
    p = spawn(cmd, env)
    try:
        _wait_listening(port, p, "nginx")
        url = "http://127.0.0.1:%d/" % port
        with SynSniffer(a) as sn:
            t0 = time.monotonic()
            rc, out, err = run(["curl", "-sS", "-m", "1", "-w", "\\n@@ %{http_code} %{time_total}\\n"]
                               + [url] * REQUESTS, base_env(), timeout=15)
            total = time.monotonic() - t0
            syns_a = sn.settled_count()
        res = re.findall(r"^@@ (\d+) ([0-9.]+)$", out, re.M)
        srv_a.start()
        t_up = time.monotonic()
        back = _back_in_use(port, srv_a, t_up, BACK_BOUND, "nginx")
    finally:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        srv_a.stop()
        srv_b.stop()
        try:
            with open(os.path.join(d, "error.log"), errors="replace") as f:
                log = f.read()
        except OSError:
            log = ""
        shutil.rmtree(d, ignore_errors=True)
    return dict(codes=[c for c, _ in res], times=[float(t) for _, t in res], total=total,
                syns_a=syns_a, back=back, curl_err=err[-200:],
                log=" | ".join(l for l in log.splitlines() if "[emerg]" in l or "[alert]" in l
                               or "connect()" in l)[-400:])


def _fmt(r):
    return ("codes %s, times %s, total %.2fs, %d SYNs to the down upstream, back in use "
            "after %s; nginx log %r" % (
                r["codes"], ",".join("%.3f" % t for t in r["times"]), r["total"], r["syns_a"],
                "%.2fs" % r["back"] if r["back"] is not None else "never", r["log"]))


def test_nginx_proxy_serves_at_once_and_paces_the_down_upstream():
    plain = _nginx_scenario(base_env())
    check(plain["codes"] == ["200"] * REQUESTS, "nginx without shim: " + _fmt(plain))
    check(plain["syns_a"] >= REQUESTS // 2, "nginx without shim: " + _fmt(plain))
    check(plain["back"] is not None, "nginx without shim: " + _fmt(plain))
    shim = _nginx_scenario(shim_env(**PROD))
    what = "nginx+shim (auto): %s; without shim: %s" % (_fmt(shim), _fmt(plain))
    check(shim["codes"] == ["200"] * REQUESTS, what)
    check_not_delayed("%d requests (%s)" % (REQUESTS, what), plain["total"], shim["total"], WAIT)
    check_not_delayed("the slowest request (%s)" % what, max(plain["times"]),
                      max(shim["times"]), WAIT)
    # Paced: the first attempt goes out; inside the 1 s window none does.
    check(1 <= shim["syns_a"] <= 2 and shim["syns_a"] < plain["syns_a"], what)
    check(shim["back"] is not None and shim["back"] <= BACK_BOUND, what)


# --- 9. a socket-activated proxy: a server without listen() ----------------

PROXY = r"""
import socket, sys, time
a, b, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
lst = socket.socket(fileno=3)   # LISTEN_FDS=1: never calls listen()
def up(port):
    s = socket.socket()
    s.settimeout(2)             # non-blocking connect + poll(2 s), as event loops do
    try:
        s.connect(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None
t0 = time.monotonic()
w = up(a)                       # a health check before the first accept()
print("warmup %s %.3f" % ("ok" if w else "fail", time.monotonic() - t0), flush=True)
if w:
    w.close()
for _ in range(n):
    c, _ = lst.accept()
    with c:
        c.settimeout(5)
        req = c.recv(4096)
        t0 = time.monotonic()
        s = up(a) or up(b)
        print("upstream %s %.3f" % (s.getpeername()[1] if s else 0, time.monotonic() - t0),
              flush=True)
        if not s:
            continue
        with s:
            s.settimeout(5)
            s.sendall(req)
            while True:
                d = s.recv(4096)
                if not d:
                    break
                c.sendall(d)
"""


def _activate_bin():
    path = shutil.which("systemd-socket-activate")
    if not path:
        raise TestFailure("systemd-socket-activate is missing (scripts/install-deps test)")
    return path


def _activated_scenario(env):
    """systemd-socket-activate -l PORT runs the proxy (with `env` passed by
    -E: the activator itself runs without the shim). Returns dict: warmup
    line, per-request upstream lines and times, SYNs to A, back delay."""
    port, a, b = free_port(), free_port(), free_port()
    n = REQUESTS + 60
    cmd = [_activate_bin(), "-l", "127.0.0.1:%d" % port]
    for k, v in env.items():
        if k == "LD_PRELOAD" or k.startswith("BACKOFFSHIM_"):
            cmd += ["-E", "%s=%s" % (k, v)]
    cmd += [sys.executable, "-c", PROXY, str(a), str(b), str(n)]
    srv_b = HttpServer(b).start()
    srv_a = HttpServer(a)
    p = subprocess.Popen(cmd, env=base_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lr = LineReader(p)
    try:
        if lr.wait_for(lambda l: l.startswith("Listening on"), 5) is None:
            raise TestFailure("systemd-socket-activate did not listen: %r" % lr.lines)
        times, codes = [], []
        with SynSniffer(a) as sn:
            t0 = time.monotonic()
            for _ in range(REQUESTS):
                try:
                    st, body, secs = _get(port, timeout=1.5)
                except OSError as e:
                    st, secs = "error %s" % e, float("nan")
                codes.append(st)
                times.append(secs)
            total = time.monotonic() - t0
            syns_a = sn.settled_count()
        warm = lr.wait_for(lambda l: l.startswith("warmup"), 1)
        srv_a.start()
        t_up = time.monotonic()
        back = _back_in_use(port, srv_a, t_up, BACK_BOUND, "activated proxy")
    finally:
        p.kill()
        p.wait()
        srv_a.stop()
        srv_b.stop()
    return dict(warm=warm, codes=codes, times=times, total=total, syns_a=syns_a, back=back,
                lines=[l for l in lr.lines if l][-12:])


def _fmt9(r):
    return ("%s; codes %s; times %s; total %.2fs; %d SYNs to A; A back in use after %s; "
            "output %r" % (r["warm"], sorted(set(r["codes"])),
                           ",".join("%.3f" % t for t in r["times"]), r["total"], r["syns_a"],
                           "%.2fs" % r["back"] if r["back"] is not None else "never",
                           r["lines"]))


def test_socket_activated_proxy_is_a_server():
    plain = _activated_scenario(base_env())
    ok = ["HTTP/1.0 200 OK"] * REQUESTS
    check(plain["codes"] == ok and plain["warm"] and plain["warm"].startswith("warmup fail"),
          "activated proxy without shim: " + _fmt9(plain))
    shim = _activated_scenario(shim_env(**PROD))
    what = "activated proxy+shim (auto): %s; without shim: %s" % (_fmt9(shim), _fmt9(plain))
    check(shim["warm"] is not None, what)
    warm_s = float(shim["warm"].split()[-1])
    # Paced, not deferred: the health check fails at once (a client would
    # wait out its 2 s timeout), every request is served at once via B.
    check(shim["warm"].startswith("warmup fail"), what)
    check_not_delayed("the health check (%s)" % what, float(plain["warm"].split()[-1]), warm_s,
                      WAIT)
    check(shim["codes"] == ok, what)
    # the first request also starts the proxy (systemd-socket-activate)
    check_not_delayed("the first request (%s)" % what, plain["times"][0], shim["times"][0], WAIT)
    check_not_delayed("the slowest later request (%s)" % what, max(plain["times"][1:]),
                      max(shim["times"][1:]), WAIT)
    check_not_delayed("%d requests (%s)" % (REQUESTS, what), plain["total"], shim["total"], WAIT)
    check(1 <= shim["syns_a"] <= 2, what)
    check(shim["back"] is not None and shim["back"] <= BACK_BOUND, what)

"""Defer mode, call by call (issue 9): a parked socket answers as a socket
still connecting; epoll registrations (one-shot, edge-triggered, MOD and
DEL while parked) keep their meaning; when the budget ends the program sees
the failure as without the shim. Each is compared with the same program
without the shim."""
import json
import sys

from lib import SynSniffer, base_env, check, free_port, run, shim_env

PARKED_VIEW = r"""
import errno, json, select, socket, sys
port = int(sys.argv[1])
s = socket.socket(); s.setblocking(False)
s.connect_ex(('127.0.0.1', port))
p = select.poll(); p.register(s, select.POLLOUT)
out = {'poll': p.poll(300)}
out['so_error'] = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
out['connect'] = s.connect_ex(('127.0.0.1', port))
try:
    s.send(b'x'); out['send'] = 0
except OSError as e:
    out['send'] = e.errno
try:
    s.getpeername(); out['peer'] = 0
except OSError as e:
    out['peer'] = e.errno
out['select'] = len(select.select([s], [s], [s], 0.1)[1])
print(json.dumps(out))
"""


def test_a_parked_socket_looks_like_one_still_connecting():
    port = free_port()
    rc, out, err = run([sys.executable, "-c", PARKED_VIEW, str(port)], base_env())
    plain = json.loads(out)
    check(plain["poll"] and plain["so_error"] == 111, "without the shim: %r" % plain)
    env = shim_env(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_INITIAL_BACKOFF="5s")
    rc, out, err = run([sys.executable, "-c", PARKED_VIEW, str(port)], env)
    check(rc == 0, "rc=%d %r" % (rc, err[-300:]))
    got = json.loads(out)
    want = {"poll": [], "so_error": 0, "connect": 114, "send": 11, "peer": 107, "select": 0}
    check(got == want, "parked socket: %r, want %r (EALREADY, EAGAIN, ENOTCONN)" % (got, want))


EPOLL_FLAGS = r"""
import json, select, socket, sys, threading, time
port, how = int(sys.argv[1]), sys.argv[2]
flags = {'oneshot': select.EPOLLONESHOT, 'et': select.EPOLLET, 'lt': 0}[how.split('-')[0]]
s = socket.socket(); s.setblocking(False)
ep = select.epoll()
ep.register(s, select.EPOLLOUT | flags)          # before connect(), as libuv may
s.connect_ex(('127.0.0.1', port))
first = ep.poll(0.4)                              # parked: nothing
if how.endswith('-mod'):
    ep.modify(s, select.EPOLLOUT | select.EPOLLIN | flags)
if how.endswith('-del'):
    ep.unregister(s)
print('parked', len(first), flush=True)
sys.stdin.readline()                              # the server is up now
t0 = time.monotonic(); events = []
while time.monotonic() - t0 < 3 and not events:
    events = ep.poll(0.5)
later = ep.poll(0.3)
print(json.dumps({'events': [e for _, e in events], 'later': [e for _, e in later],
                  'so_error': s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)}))
"""


def _epoll_case(how):
    import socket
    import subprocess
    port = free_port()
    env = shim_env(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_INITIAL_BACKOFF="100ms",
                   BACKOFFSHIM_MAX_BACKOFF="200ms")
    p = subprocess.Popen([sys.executable, "-c", EPOLL_FLAGS, str(port), how], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    lst = None
    try:
        line = p.stdout.readline().split()
        check(line == ["parked", "0"], "%s: the parked socket was reported: %r" % (how, line))
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", port))
        lst.listen(4)
        p.stdin.write("\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=10)
    finally:
        p.kill()
        if lst:
            lst.close()
    return json.loads(out.strip().splitlines()[-1]), err


def test_epoll_oneshot_fires_once_when_the_parked_socket_connects():
    r, err = _epoll_case("oneshot")
    check(r["events"] == [4] and r["later"] == [] and r["so_error"] == 0,
          "one-shot: %r %r" % (r, err[-300:]))


def test_epoll_edge_triggered_fires_once():
    r, err = _epoll_case("et")
    check(r["events"] == [4] and r["later"] == [], "edge-triggered: %r %r" % (r, err[-300:]))


def test_epoll_level_triggered_keeps_reporting():
    r, err = _epoll_case("lt")
    check(r["events"] == [4] and r["later"] == [4], "level-triggered: %r %r" % (r, err[-300:]))


def test_epoll_mod_while_parked_is_kept():
    r, err = _epoll_case("lt-mod")
    check(r["events"] == [4] and r["so_error"] == 0, "MOD while parked: %r %r" % (r, err[-300:]))


def test_epoll_del_while_parked_is_kept():
    """The program took the socket out of its set while it was parked: it
    is not put back when it reconnects (and still connects)."""
    r, err = _epoll_case("lt-del")
    check(r["events"] == [] and r["so_error"] == 0, "DEL while parked: %r %r" % (r, err[-300:]))


BUDGET_END = r"""
import json, select, socket, sys, time
port = int(sys.argv[1])
s = socket.socket(); s.setblocking(False)
s.connect_ex(('127.0.0.1', port))
ep = select.epoll(); ep.register(s, select.EPOLLOUT)
t0 = time.monotonic(); ev = []
while not ev and time.monotonic() - t0 < 5:
    ev = ep.poll(1)
print(json.dumps({'events': [e for _, e in ev],
                  'so_error': s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR),
                  'took': time.monotonic() - t0}))
"""


def test_budget_end_reports_the_failure_as_without_the_shim():
    port = free_port()
    rc, out, err = run([sys.executable, "-c", BUDGET_END, str(port)], base_env())
    plain = json.loads(out)
    with SynSniffer(port) as sn:
        rc, out, err = run([sys.executable, "-c", BUDGET_END, str(port)],
                           shim_env(BACKOFFSHIM_NONBLOCKING="defer", BACKOFFSHIM_MAX_ATTEMPTS=3))
        sn.wait_for(4, 0.3)
    got = json.loads(out)
    check(plain["so_error"] == 111 and plain["events"][0] & 0x8, "without the shim: %r" % plain)
    check(got["so_error"] == 111 and got["events"] and got["events"][0] & 0x8,
          "EPOLLERR and ECONNREFUSED expected at the end: %r %r" % (got, err[-300:]))
    check(len(sn.times) == 3, "max_attempts=3 but %d SYNs" % len(sn.times))
    check("giving up after 3 attempts" in err, "no give-up line: %r" % err[-300:])

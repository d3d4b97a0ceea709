"""Every address a program tries (issue 21): a refusal is never hidden from
a program that still has another address of the name to try, however it
resolved the name. Each case runs the same program with and without the
shim and compares."""
import shutil
import sys

from lib import TestSkip, base_env, check, check_not_delayed, free_port, run, shim_env
from servers import HttpServer
from test_nonblocking import _in_private_hosts

# libuv's way: the name resolved with no service (port 0 in every address),
# then each address connected in turn to the port, with a timeout of the
# program's own per address
NO_SERVICE = r"""
import socket, sys, time
port = int(sys.argv[1])
t0 = time.monotonic()
for fam, typ, proto, _, sa in socket.getaddrinfo('dualhost', None, type=socket.SOCK_STREAM):
    s = socket.socket(fam, typ, proto)
    s.settimeout(3)
    try:
        s.connect((sa[0], port) + tuple(sa[2:]))
    except OSError as e:
        print('failed', sa[0], e.errno, flush=True)
        s.close()
        continue
    print('ok %.3f' % (time.monotonic() - t0), s.getpeername()[0])
    break
"""


def test_a_lookup_without_a_service_lets_the_program_move_on():
    """::1 refuses, 127.0.0.1 serves: the second address is reached as fast
    as without the shim, not after the program's own 3 s timeout."""
    with HttpServer(free_port(), host="127.0.0.1") as srv:
        cmd = [sys.executable, "-c", NO_SERVICE, str(srv.port)]
        plain = _in_private_hosts(cmd, base_env())
        shim = _in_private_hosts(cmd, shim_env(BACKOFFSHIM_INITIAL_BACKOFF="2s"))
    for name, (rc, out, err) in (("without", plain), ("with", shim)):
        check(rc == 0 and "ok " in out and out.split()[-1] == "127.0.0.1",
              "%s the shim: %r %r" % (name, out, err[-300:]))
        check(out.startswith("failed ::1 111"), "%s the shim, ::1 was not refused: %r"
              % (name, out))
    t0 = float(plain[1].split("ok ")[1].split()[0])
    t1 = float(shim[1].split("ok ")[1].split()[0])
    check_not_delayed("the move to 127.0.0.1", t0, t1, wait=2.0)


NODE_HAPPY_EYEBALLS = r"""
const net = require('net');
const port = +process.argv[process.argv.length - 1];
let n = 0; const times = [];
function one() {
  const t0 = process.hrtime.bigint();
  const s = net.connect({host: 'dualhost', port, autoSelectFamily: true,
                         autoSelectFamilyAttemptTimeout: 250}, () => {
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    s.destroy();
    if (++n < 10) one(); else console.log(times.join(' '));
  });
  s.on('error', e => { console.log('error', e.code); process.exit(1); });
}
one();
"""


def test_node_happy_eyeballs_moves_on_at_once():
    """node (libuv resolves with no service, then tries ::1 and 127.0.0.1
    with a 250 ms timer): 10 connects in a row, each as fast as without
    the shim, not held up to the timer by a hidden refusal."""
    if not shutil.which("node"):
        raise TestSkip("node is not installed")
    with HttpServer(free_port(), host="127.0.0.1") as srv:
        cmd = ["node", "-e", NODE_HAPPY_EYEBALLS, "--", str(srv.port)]
        plain = _in_private_hosts(cmd, base_env())
        # twice, each with a table of its own: a delay the shim adds comes
        # back at the same connect, a loaded machine's stall does not
        shim = [_in_private_hosts(cmd, shim_env(BACKOFFSHIM_INITIAL_BACKOFF="2s"))
                for _ in range(2)]
    check(plain[0] == 0 and all(r[0] == 0 for r in shim), "node: %r / %r" % (plain, shim))
    t0 = [float(x) for x in plain[1].split()]
    runs = [[float(x) for x in r[1].split()] for r in shim]
    check(len(t0) == 10 and all(len(r) == 10 for r in runs),
          "ten times each: %r %r" % (plain[1], [r[1] for r in shim]))
    for i, a in enumerate(t0):
        check_not_delayed("node's connect %d (the better of two runs: %s)"
                          % (i + 1, ", ".join("%.3f" % r[i] for r in runs)),
                          a, min(r[i] for r in runs), wait=0.25)


def test_psql_walking_its_host_list_and_the_dest_setting_that_restores_it():
    """libpq tries host=127.0.0.1,127.0.0.2 in turn; the first is dead. The
    shim cannot see the second host before the first's outcome (libpq
    resolves each host by itself and waits for each connect), so by default
    the failover waits for libpq's own connect_timeout; a [dest] section
    with `nonblocking = pace` for the first host makes it as fast as
    without the shim (docs/limits.md)."""
    import os
    import tempfile
    import time
    from servers import Postgres, clean_env
    port = free_port()
    ct = 2
    conn = ("host=127.0.0.1,127.0.0.2 port=%d connect_timeout=%d user=postgres "
            "dbname=postgres" % (port, ct))
    cmd = ["psql", conn, "-tAc", "select 40 + 2"]

    def timed(env):
        t0 = time.monotonic()
        rc, out, err = run(cmd, env, timeout=ct * 4)
        check(rc == 0 and out.strip() == "42", "psql: rc=%d %r %r" % (rc, out, err[-300:]))
        return time.monotonic() - t0

    def shim(**extra):
        env = shim_env(**extra)
        return {k: v for k, v in env.items() if not k.startswith("PG")}
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("[dest 127.0.0.1:%d]\nnonblocking = pace\n" % port)
        ini = f.name
    try:
        with Postgres(port, host="127.0.0.2"):
            plain = timed(clean_env())
            held = timed(shim())
            paced = timed(shim(BACKOFFSHIM_CONFIG=ini))
    finally:
        os.unlink(ini)
    check(held <= plain + 1.5 * ct, "the default held the first host %.2fs (bound: its "
          "connect_timeout %ds)" % (held - plain, ct))
    check_not_delayed("psql's failover with [dest] nonblocking = pace", plain, paced, wait=ct)


def test_a_client_walking_its_own_list_pays_its_timeout_once():
    """walker (tests/progs/walker.c) walks 127.0.0.1 (dead), 127.0.0.2 (a
    server) with its own 1 s connect timeout, three rounds in one process.
    The shim hides the first refusal in round 1 (the program's timeout
    runs out), learns from the program moving on to the second address on
    the same port that it walks a list, and from then on lets the first
    address's refusal through at once: rounds 2 and 3 take as long as
    without the shim."""
    import socket
    import time
    from lib import prog
    port = free_port()
    cmd = [prog("walker"), "1000", "3", "127.0.0.1:%d" % port, "127.0.0.2:%d" % port]
    with socket.socket() as ls:
        ls.bind(("127.0.0.2", port))
        ls.listen(64)
        rc, out, err = run(cmd, base_env())
        plain = [ln.split() for ln in out.splitlines()]
        rc2, out2, err2 = run(cmd, shim_env(**{"BACKOFFSHIM_MAX_ELAPSED": "20s"}))
        shim = [ln.split() for ln in out2.splitlines()]
    want = "127.0.0.2:%d" % port
    check(rc == rc2 == 0 and len(plain) == len(shim) == 3 and
          all(r[2] == want for r in plain + shim), "plain %r, shim %r %r" % (out, out2, err2))
    check(900 <= float(shim[0][3]) <= 1500, "round 1 with the shim: %r (its own 1 s timeout)"
          % shim[0])
    for i in (1, 2):
        check_not_delayed("round %d" % (i + 1), float(plain[i][3]) / 1e3, float(shim[i][3]) / 1e3)
    check("it walks a list of its own" in err2, "no line about the walk: %r" % err2)


NEVER_ROUTED = r"""
import socket, sys, time
fam, host, v6only = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
s = socket.socket(socket.AF_INET6 if fam == "6" else socket.AF_INET)
if v6only:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
t0 = time.monotonic()
r = s.connect_ex((host, 80))
print(r, "%.3f" % (time.monotonic() - t0))
"""


def test_an_address_no_route_reaches_fails_at_once():
    """TCP to multicast or the limited broadcast, or an IPv4-mapped address
    on an IPV6_V6ONLY socket: the kernel's ENETUNREACH at once, whatever the
    network does. The shim retried it until max_elapsed."""
    cases = (("4", "224.0.0.1", "0"), ("4", "255.255.255.255", "0"), ("6", "ff02::1", "0"),
             ("6", "::ffff:127.0.0.1", "1"))
    for policy, (fam, host, v6only) in [(p, c) for p in ("grpc", "responsive") for c in cases]:
        env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MAX_BACKOFF="1s",
                       BACKOFFSHIM_MAX_ELAPSED="5s", BACKOFFSHIM_SHARED="off",
                       BACKOFFSHIM_POLICY=policy)
        cmd = [sys.executable, "-c", NEVER_ROUTED, fam, host, v6only]
        rc, plain, _ = run(cmd, base_env())
        rc2, out, err = run(cmd, env)
        check(rc == rc2 == 0 and plain.split()[0] == out.split()[0],
              "%s (%s): %r with the shim, %r without; %s" % (host, policy, out, plain, err[-300:]))
        check_not_delayed(host, float(plain.split()[1]), float(out.split()[1]), 1.0)

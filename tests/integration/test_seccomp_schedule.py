"""The seccomp engine (issue 23): its schedule is the library's, shared with
preloaded programs; a non-blocking program that is not Go is paced and keeps
its event loop; and when a call the engine needs is refused, the program
runs as it is, with one line saying why. Each run is compared with the same
program without the engine in the same test."""
import os
import time

import sysv
from lib import (BUILD, SynSniffer, Server, TestSkip, base_env, check, finish, free_port,
                 prog, run, shim_env, slack, spawn)

CLI = os.path.join(BUILD, "backoffshim")
CSTATIC = os.path.join(BUILD, "static", "cstatic")
DIAL = os.path.join(BUILD, "go", "dial")


def need(path):
    if not os.access(path, os.X_OK):
        raise TestSkip("%s not built (make go-progs build/static/cstatic)" % path)
    return path


def under(engine, cmd):
    return [CLI, "run", "--engine", engine, "--"] + cmd


def engine_env(**extra):
    """The scaled schedule and a table of the test's own, no LD_PRELOAD."""
    return shim_env(LD_PRELOAD=None, **extra)


# --- when the engine cannot run ---------------------------------------------

REFUSED = (
    ("pidfd_getfd", "pidfd_getfd is refused"),
    ("kcmp", "kcmp is refused"),
    ("process_vm_readv", "process_vm_readv is refused"),
    ("io_uring_setup", "io_uring is refused"),
    ("seccomp", "a seccomp filter cannot be installed"),
    ("pidfd_open", "pidfd_open is refused"),
)


def test_a_refused_call_runs_the_program_as_it_is_with_one_line():
    cs = need(CSTATIC)
    port = free_port()
    rc0, out0, err0 = run([cs, "127.0.0.1", str(port)], base_env())
    check(rc0 == 1 and out0.startswith("error errno=ECONNREFUSED"), "plain: %r" % out0)
    for call, phrase in REFUSED:
        rc, out, err = run([prog("denycall"), call, "1", "--"] +
                           under("auto", [cs, "127.0.0.1", str(port)]), engine_env())
        lines = [ln for ln in err.splitlines() if ln.strip()]
        check(rc == rc0 and out.split(" ms=")[0] == out0.split(" ms=")[0],
              "%s refused: rc=%d out=%r (plain rc=%d out=%r)" % (call, rc, out, rc0, out0))
        check(len(lines) == 1 and "warning" in lines[0] and phrase in lines[0],
              "%s refused: expected one warning naming it, got %r" % (call, err))


def test_a_nested_supervisor_leaves_the_connects_to_the_outer_one():
    cs = need(CSTATIC)
    port = free_port()
    env = engine_env()
    with SynSniffer(port) as sn:
        p = spawn(under("seccomp", under("seccomp", [cs, "127.0.0.1", str(port)])), env)
        check(sn.wait_for(3, timeout=5) >= 3, "no retries seen under two supervisors")
        with Server(port).start():
            rc, out, err = finish(p, 15)
    check(rc == 0 and out.startswith("connected"), "rc=%d out=%r err=%r" % (rc, out, err[-400:]))
    check("another seccomp supervisor" in err, "the inner one did not say why: %r" % err[-400:])
    gaps = sn.gaps()[:2]
    check(all(g > 0.03 for g in gaps), "a burst: the connects were retried twice: %r" % gaps)


# --- one schedule for Go and preloaded C programs ------------------------------

PY_CONNECT = ("import socket,sys\n"
              "s=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\n"
              "print('connected')\n")


def test_a_go_program_and_a_preloaded_one_share_one_schedule():
    dial = need(DIAL)
    port = free_port()
    settings = dict(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="1s")
    go_env = engine_env(**settings)
    c_env = shim_env(BACKOFFSHIM_SHARED=go_env["BACKOFFSHIM_SHARED"], **settings)
    with SynSniffer(port) as sn:
        go = spawn(under("seccomp", [dial, "127.0.0.1:%d" % port]), go_env)
        check(sn.wait_for(2, timeout=5) >= 2, "the Go program's retries were not seen")
        c = spawn(["python3", "-c", PY_CONNECT, str(port)], c_env)
        joined = len(sn.times)
        check(sn.wait_for(joined + 4, timeout=8) >= joined + 4, "too few SYNs after the join")
        after = sn.times[joined + 1:joined + 4]  # (a newcomer may go once at once)
        with Server(port).start():
            rc_go, out_go, err_go = finish(go, 10)
            rc_c, out_c, err_c = finish(c, 10)
    gaps = [b - a for a, b in zip(after, after[1:])]
    check(all(g >= 0.8 * 0.2 - slack() for g in gaps),
          "two schedules, not one: SYN gaps %s after the second program joined"
          % ", ".join("%.3f" % g for g in gaps))
    check(rc_go == 0 and out_go.startswith("connected"), "go: rc=%d %r %r" % (rc_go, out_go, err_go))
    check(rc_c == 0 and "connected" in out_c, "python: rc=%d %r %r" % (rc_c, out_c, err_c[-300:]))


def test_the_engine_makes_the_table_when_it_first_needs_it():
    """A program that never connects makes no table under the engine (it
    made one when it started); one that fails does."""
    cs = need(CSTATIC)
    env = engine_env()
    name = env["BACKOFFSHIM_SHARED"]
    rc, out, err = run(under("seccomp", ["/bin/true"]), env)
    check(rc == 0 and sysv.find(sysv.key(name)) is None,
          "run --engine seccomp -- true: rc=%d, a table: %r" % (rc, sysv.find(sysv.key(name))))
    rc, out, err = run(under("seccomp", [cs, "127.0.0.1", str(free_port())]),
                       dict(env, BACKOFFSHIM_MAX_ELAPSED="300ms"))
    check(sysv.find(sysv.key(name)) is not None, "a failing program made no table: %r" % err[-300:])


# --- a non-blocking program that is not Go: paced -----------------------------

ASYNC_LOOP = r"""
import asyncio, sys, time
port, dur = int(sys.argv[1]), float(sys.argv[2])
async def ticker(gaps):
    last = time.monotonic()
    while True:
        await asyncio.sleep(0.01)
        now = time.monotonic(); gaps.append(now - last); last = now
async def main():
    gaps = []
    t = asyncio.create_task(ticker(gaps))
    t0 = time.monotonic(); tries = 0; longest = 0.0; connected = 0.0
    while time.monotonic() - t0 < dur:
        a = time.monotonic()
        try:
            r, w = await asyncio.wait_for(asyncio.open_connection('127.0.0.1', port), 1)
            connected = time.monotonic(); w.close(); break
        except (OSError, asyncio.TimeoutError):
            pass
        longest = max(longest, time.monotonic() - a); tries += 1
        await asyncio.sleep(0.02)
    t.cancel()
    print("tries=%d longest=%.3f tick=%.3f connected=%.3f" % (tries, longest, max(gaps), connected))
asyncio.run(main())
"""


def parse(out):
    return dict((k, float(v)) for k, v in (f.split("=") for f in out.split()))


def test_nonblocking_program_is_paced():
    port = free_port()
    cmd = ["python3", "-c", ASYNC_LOOP, str(port), "1.5"]
    with SynSniffer(port) as sn:
        rc, out, err = run(cmd, base_env(), timeout=20)
        plain_syns = sn.settled_count()
    check(rc == 0, "plain: rc=%d %r" % (rc, err[-300:]))
    plain = parse(out)
    settings = dict(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="400ms")
    with SynSniffer(port) as sn:  # the library's pace mode, for comparison
        rc, out, err = run(cmd, shim_env(BACKOFFSHIM_NONBLOCKING="pace", **settings), timeout=20)
        library_syns = sn.settled_count()
    check(rc == 0, "library: rc=%d %r" % (rc, err[-300:]))
    with SynSniffer(port) as sn:
        rc, out, err = run(under("seccomp", cmd), engine_env(**settings), timeout=20)
        syns = sn.settled_count()
        gaps = sn.gaps()
    check(rc == 0, "engine: rc=%d %r" % (rc, err[-300:]))
    paced = parse(out)
    check(paced["tries"] >= plain["tries"] / 2,
          "the loop ran %d times, %d without the engine: its calls were held"
          % (paced["tries"], plain["tries"]))
    check(syns <= library_syns + 3 and syns < plain_syns / 3,
          "%d SYNs in 1.5 s (%d without the engine, %d with the library's pace mode): "
          "not paced; gaps %s; %r" % (syns, plain_syns, library_syns,
                                      ", ".join("%.3f" % g for g in gaps), err[-600:]))
    check(paced["longest"] < plain["longest"] + 0.1 and paced["tick"] < plain["tick"] + 0.1,
          "a call or the event loop was held: longest connect %.3fs, loop turn %.3fs "
          "(%.3fs, %.3fs without)" % (paced["longest"], paced["tick"], plain["longest"],
                                        plain["tick"]))


def test_a_paced_program_sees_the_server_back_within_one_initial_backoff():
    port = free_port()
    env = engine_env(BACKOFFSHIM_INITIAL_BACKOFF="300ms", BACKOFFSHIM_MAX_BACKOFF="2s")
    cmd = under("seccomp", ["python3", "-c", ASYNC_LOOP, str(port), "8"])
    with SynSniffer(port) as sn:
        p = spawn(cmd, env)
        check(sn.wait_for(4, timeout=8) >= 4, "the program's attempts were not seen")
        with Server(port).start():
            up = time.monotonic()
            rc, out, err = finish(p, 15)
    check(rc == 0, "rc=%d %r" % (rc, err[-300:]))
    got = parse(out)["connected"]
    check(got > 0, "never connected: %r" % out)
    check(got - up <= 0.3 + 0.25, "connected %.3fs after the server came back (initial_backoff "
          "0.3s)" % (got - up))


# --- no_new_privs ---------------------------------------------------------------

def no_new_privs(cmd):
    rc, out, err = run(cmd + ["grep", "NoNewPrivs", "/proc/self/status"], base_env())
    check(rc == 0, "%r: rc=%d %r" % (cmd, rc, err))
    return out.split()[-1]


def test_no_new_privs_is_set_for_everything_the_program_runs_unless_it_may_be_skipped():
    """Without CAP_SYS_ADMIN the filter needs no_new_privs, which every
    program the supervised one execs inherits (a set-id one would lose its
    privileges: docs/seccomp-engine.md); with it (root, or these tests'
    user namespace) the filter goes in without."""
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
    if not os.access("/usr/bin/setpriv", os.X_OK):
        raise TestSkip("setpriv (util-linux) not installed")
    check(no_new_privs([]) == "0", "no_new_privs is set without the engine")
    check(no_new_privs(drop) == "0", "setpriv alone sets no_new_privs")
    check(no_new_privs(drop + under("seccomp", [])) == "1",
          "without CAP_SYS_ADMIN the engine's program should run with no_new_privs")
    check(no_new_privs(under("seccomp", [])) == "0",
          "with CAP_SYS_ADMIN the engine should not set no_new_privs")


LIVE_LOOP = r"""
import asyncio, sys
async def main():
    ok = bad = 0
    for _ in range(int(sys.argv[2])):
        try:
            r, w = await asyncio.open_connection('127.0.0.1', int(sys.argv[1]))
            w.close(); ok += 1
        except OSError:
            bad += 1
    print("ok=%d bad=%d" % (ok, bad))
asyncio.run(main())
"""


def test_a_paced_program_connects_to_a_live_server_every_time():
    """The engine watches a non-blocking connect it lets through; an
    unconnected socket (the program's connect not made yet) is no failure:
    a healthy server is never refused in its name."""
    port = free_port()
    cmd = ["python3", "-c", LIVE_LOOP, str(port), "200"]
    with Server(port).start():
        plain = run(cmd, base_env())
        engine = run(under("seccomp", cmd), engine_env())
    check(plain[0] == 0 and plain[1].strip() == "ok=200 bad=0", "plain: %r" % (plain,))
    check(engine[0] == 0 and engine[1] == plain[1], "engine: %r (plain %r)" % (engine[1], plain[1]))


# --- a sandbox stays the program's ------------------------------------------------

def test_a_program_that_sandboxes_itself_keeps_its_sandbox():
    """Landlock judges the task that connects: the engine leaves a process
    that restricted itself, and its children, to the kernel, so its
    connects are refused by its sandbox as without the engine."""
    port = free_port()
    cmd = [prog("sandboxed"), str(port)]
    with Server(port).start():
        plain = run(cmd, base_env())
        if plain[0] == 2:
            raise TestSkip("Landlock cannot restrict TCP connects here: %r" % plain[2])
        engine = run(under("seccomp", cmd), engine_env())
    check(plain[0] == 0 and plain[1] == "parent: EACCES\nchild: EACCES\n", "plain: %r" % (plain,))
    check(engine[:2] == plain[:2], "under the engine: %r (plain %r)" % (engine[:2], plain[:2]))


def test_a_connect_the_kernel_answers_at_once_goes_to_it_under_the_engine():
    """tests/progs/answered under the engine, the destination backing off:
    a connected blocking socket gets EISCONN at once and keeps its peer (the
    engine held it to max_elapsed, then reset it: the program's connection
    was gone); an IPv4 address on an IPv6 socket gets EINVAL at once."""
    for case, want in (("connected", "connect=-1 EISCONN peer=live\n"),
                       ("family", "connect=-1 EINVAL peer=none\n")):
        outs = []
        for cmd_of, env in ((lambda c: c, base_env()),
                            (lambda c: under("seccomp", c), engine_env(
                                BACKOFFSHIM_INITIAL_BACKOFF="5s", BACKOFFSHIM_MAX_BACKOFF="5s",
                                BACKOFFSHIM_SHARED="off"))):
            live = free_port()
            with Server(live).start():
                t0 = time.monotonic()
                rc, out, err = run(cmd_of([prog("answered"), case, str(free_port()), str(live)]),
                                   env)
                outs.append((out, time.monotonic() - t0, err))
        (plain, pt, _), (out, t, err) = outs
        check(plain == out == want and t < pt + 1.0, "%s: %r in %.1fs under the engine, %r in "
              "%.1fs without; %s" % (case, out, t, plain, pt, err[-300:]))


NEVER_ROUTED = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
if sys.argv[2] == "1":
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
t0 = time.monotonic()
print(s.connect_ex((sys.argv[1], 80)), "%.3f" % (time.monotonic() - t0))
"""


def test_an_address_no_route_reaches_fails_at_once_under_the_engine():
    """Multicast, the limited broadcast, an IPv4-mapped address on an
    IPV6_V6ONLY socket: ENETUNREACH at once, as without the engine, which
    retried it to max_elapsed."""
    env = engine_env(BACKOFFSHIM_INITIAL_BACKOFF="1s", BACKOFFSHIM_MAX_BACKOFF="1s",
                     BACKOFFSHIM_MAX_ELAPSED="5s", BACKOFFSHIM_SHARED="off")
    for host, v6only in (("224.0.0.1", "0"), ("255.255.255.255", "0"), ("ff02::1", "0"),
                         ("::ffff:127.0.0.1", "1")):
        cmd = ["python3", "-c", NEVER_ROUTED, host, v6only]
        _, plain, _ = run(cmd, base_env())
        _, out, err = run(under("seccomp", cmd), env)
        check(plain.split()[0] == out.split()[0] and
              float(out.split()[1]) < float(plain.split()[1]) + 0.5,
              "%s: %r under the engine, %r without; %s" % (host, out, plain, err[-300:]))


def test_dissolving_a_socket_the_engine_follows_is_the_kernels_at_once():
    """A blocking connect the program's alarm interrupts (the engine held
    it), then connect(AF_UNSPEC): 0 at once, as the kernel says. The engine
    took the call for the interrupted connect restarted, held it and
    answered the refusal at max_elapsed."""
    port = free_port()
    cmd = [prog("answered"), "unspec", str(port), "0"]
    _, plain, _ = run(cmd, base_env())
    _, out, err = run(under("seccomp", cmd), engine_env(BACKOFFSHIM_MAX_ELAPSED="3s",
                                                        BACKOFFSHIM_SHARED="off"))
    check(plain.startswith("unspec=0  ms=") and out.startswith("unspec=0  ms=") and
          int(out.split("ms=")[1]) < int(plain.split("ms=")[1]) + 500,
          "%r under the engine, %r without; %s" % (out, plain, err[-300:]))


"""Static programs without the shim (groundwork for issue 23, the seccomp
engine): the static Go clients of tests/go (build/go/) and the static C
client tests/static/cstatic.c (build/static/cstatic), run against loopback
servers with no shim, record the plain behaviour the engine will be compared
with; and LD_PRELOAD=libbackoffshim.so does nothing to them (the gap the
engine closes). The binaries are built by `make check` (the Go ones only
where go is installed: `make go-progs`); a test whose binary is missing
reports SKIP.

Every client prints one line with "ms=N", its own time from start to the
outcome (dial: "connected ms=N ..." or "error errno=NAME ms=N msg=..."; see
each tests/go/*/main.go)."""
import os
import time

from lib import (BUILD, NO_DELAY, SO, Server, SynSniffer, TestSkip, base_env, check,
                 check_not_delayed, free_port, ms_of, prog, run, shim_env)
from servers import BODY, HttpServer

GO = os.path.join(BUILD, "go")
CSTATIC = os.path.join(BUILD, "static", "cstatic")

# A refused connect on loopback takes well under this (ms, measured by the
# client itself): "at once", as opposed to a wait of the shim's schedule or
# a 2 s dial timeout. Generous, for a loaded machine.
AT_ONCE_MS = 1000


def go_bin(name):
    path = os.path.join(GO, name)
    if not os.access(path, os.X_OK):
        raise TestSkip("%s not built (make go-progs; needs golang-go)" % path)
    return path


def cstatic():
    if not os.access(CSTATIC, os.X_OK):
        raise TestSkip("%s not built (make build/static/cstatic)" % CSTATIC)
    return CSTATIC


def built(paths):
    """The ones of paths that are built; SKIP if none is."""
    have = [p for p in paths if os.access(p, os.X_OK)]
    if not have:
        raise TestSkip("none of %s built (make go-progs build/static/cstatic)" % ", ".join(paths))
    return have


def need_shim():
    if not os.path.exists(SO):
        raise TestSkip("%s not built (make)" % SO)


def the_line(out, what):
    lines = [ln for ln in out.splitlines() if ln.strip()]
    check(len(lines) == 1, "%s: expected one line, got %r" % (what, out))
    return lines[0]


def refused_at_once(cmd, env, what):
    """cmd fails with ECONNREFUSED at once; returns its ms."""
    rc, out, err = run(cmd, env, timeout=20)
    line = the_line(out, what)
    check(rc == 1, "%s: rc=%d (expected 1) out=%r err=%r" % (what, rc, out, err[-300:]))
    check(line.startswith("error errno=ECONNREFUSED "), "%s: %r" % (what, line))
    ms = ms_of(line)
    check(ms < AT_ONCE_MS, "%s: refused after %d ms, not at once" % (what, ms))
    check("backoffshim[" not in err, "%s: a shim log line: %r" % (what, err[-300:]))
    return ms


# --- the plain behaviour ---------------------------------------------------

def test_go_dial_dead_port_refused_at_once():
    port = free_port()
    for host in ("127.0.0.1:%d" % port, "[::1]:%d" % port):
        refused_at_once([go_bin("dial"), host], base_env(), "go dial " + host)


def test_go_dialtimeout_dead_port_refused_at_once():
    # the 2 s timeout plays no part: the refusal comes first
    port = free_port()
    refused_at_once([go_bin("dial"), "127.0.0.1:%d" % port, "2s"], base_env(),
                    "go DialTimeout(2s)")


def test_go_dial_live_server_connects():
    port = free_port()
    with Server(port).start() as srv:
        rc, out, err = run([go_bin("dial"), "127.0.0.1:%d" % port], base_env())
        line = the_line(out, "go dial")
        check(rc == 0 and line.startswith("connected ms="), "go dial: rc=%d %r %r" % (rc, out, err))
        check(ms_of(line) < AT_ONCE_MS, "go dial took %d ms" % ms_of(line))
        rc, out, err = run([go_bin("dial"), "127.0.0.1:%d" % port, "2s"], base_env())
        check(rc == 0 and out.startswith("connected ms="), "go DialTimeout: rc=%d %r" % (rc, out))
    check(len(srv.accepts) == 2, "server saw %d connections, not 2" % len(srv.accepts))


def test_go_httpget_live_server():
    port = free_port()
    with HttpServer(port) as srv:
        rc, out, err = run([go_bin("httpget"), "http://127.0.0.1:%d/" % port], base_env())
        line = the_line(out, "go httpget")
        check(rc == 0, "go httpget: rc=%d out=%r err=%r" % (rc, out, err[-300:]))
        check(line.startswith("status=200 ") and line.endswith(" body=" + BODY.decode().strip()),
              "go httpget: %r" % line)
        rc, out, _ = run([go_bin("httpget"), "http://127.0.0.1:%d/nope" % port], base_env())
        check(rc == 0 and out.startswith("status=404 "), "go httpget 404: rc=%d %r" % (rc, out))
    check(len(srv.accepts) == 2, "server saw %d requests, not 2" % len(srv.accepts))


def test_go_httpget_dead_port_refused_at_once():
    refused_at_once([go_bin("httpget"), "http://127.0.0.1:%d/" % free_port()], base_env(),
                    "go httpget")


def test_go_goroutines_all_connect():
    port, n = free_port(), 20
    with Server(port).start() as srv:
        rc, out, err = run([go_bin("goroutines"), str(n), "127.0.0.1:%d" % port], base_env())
        line = the_line(out, "go goroutines")
        check(rc == 0 and line.startswith("connected=%d of=%d ms=" % (n, n)),
              "goroutines: rc=%d %r %r" % (rc, out, err[-300:]))
        # the last handshakes may still wait in the listen queue when the
        # program exits: the server's thread accepts them soon after
        end = time.monotonic() + 5
        while len(srv.accepts) < n and time.monotonic() < end:
            time.sleep(0.01)
    check(len(srv.accepts) == n, "server saw %d connections, not %d" % (len(srv.accepts), n))


def test_go_goroutines_dead_port_all_refused_at_once():
    n = 20
    rc, out, _ = run([go_bin("goroutines"), str(n), "127.0.0.1:%d" % free_port()], base_env())
    line = the_line(out, "go goroutines")
    check(rc == 1 and line.startswith("connected=0 of=%d " % n)
          and line.endswith(" errno=ECONNREFUSED:%d" % n), "goroutines: rc=%d %r" % (rc, line))
    check(ms_of(line) < AT_ONCE_MS, "goroutines refused after %d ms" % ms_of(line))


def test_go_spawn_passes_exit_status():
    spawn = go_bin("spawn")
    for code in (0, 1, 7, 125):
        rc, _, err = run([spawn, "sh", "-c", "exit %d" % code], base_env())
        check(rc == code and "spawn: pid=" in err and " exit=%d " % code in err,
              "spawn exit %d: rc=%d err=%r" % (code, rc, err))
    rc, _, err = run([spawn, "sh", "-c", "kill -TERM $$"], base_env())
    check(rc == 128 + 15, "spawn of a child killed by SIGTERM: rc=%d err=%r" % (rc, err))
    rc, _, err = run([spawn, "/nonexistent/cmd"], base_env())
    check(rc == 127 and "cannot start" in err, "spawn of nothing: rc=%d err=%r" % (rc, err))


def test_go_spawn_grandchildren():
    """spawn -> spawn -> dial (all static Go): the grandchild's output and
    status come through, and a live server sees its connect."""
    spawn, dial = go_bin("spawn"), go_bin("dial")
    port = free_port()
    refused_at_once([spawn, spawn, dial, "127.0.0.1:%d" % port], base_env(),
                    "spawn spawn dial (dead port)")
    with Server(port).start() as srv:
        rc, out, err = run([spawn, spawn, dial, "127.0.0.1:%d" % port], base_env())
        check(rc == 0 and out.startswith("connected ms="), "spawn spawn dial: rc=%d %r %r"
              % (rc, out, err))
        check(err.count("spawn: pid=") == 2, "two spawn lines expected: %r" % err)
    check(len(srv.accepts) == 1, "server saw %d connections, not 1" % len(srv.accepts))


def test_cstatic_dead_port_refused_at_once():
    port = free_port()
    for host in ("127.0.0.1", "::1"):
        refused_at_once([cstatic(), host, str(port)], base_env(), "cstatic " + host)


def test_cstatic_live_server():
    port = free_port()
    with Server(port).start() as srv:
        rc, out, err = run([cstatic(), "-r", "127.0.0.1", str(port)], base_env())
        line = the_line(out, "cstatic")
        check(rc == 0 and line.startswith("connected ms=")
              and line.endswith(" greeting=hello from server"), "cstatic: rc=%d %r %r"
              % (rc, out, err))
    check(len(srv.accepts) == 1, "server saw %d connections, not 1" % len(srv.accepts))


# --- LD_PRELOAD has no effect on them (issue 23 closes this gap) -----------

def test_preload_control():
    """The control: the environment of the next test makes a dynamic C client
    (tests/progs/conntest) wait 1 s and log, so that its having no effect on
    the static clients is the clients' doing, not the environment's."""
    need_shim()
    port = free_port()
    env = shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2, **NO_DELAY)
    rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)], env)
    check(rc == 1 and "fail errno=ECONNREFUSED" in out, "conntest: rc=%d %r" % (rc, out))
    check(ms_of(out) >= 800, "conntest with the shim failed after %d ms, no wait" % ms_of(out))
    check("backoffshim[" in err, "conntest: no shim log line: %r" % err)


def test_preload_has_no_effect():
    need_shim()
    port = free_port()
    dead = "127.0.0.1:%d" % port
    env = shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2, **NO_DELAY)
    dial, httpget, spawn, goroutines = (os.path.join(GO, n) for n in
                                        ("dial", "httpget", "spawn", "goroutines"))
    have = built([dial, httpget, spawn, goroutines, CSTATIC])
    cases = [
        ("go dial", [dial, dead]),
        ("go DialTimeout(2s)", [dial, dead, "2s"]),
        ("go httpget", [httpget, "http://%s/" % dead]),
        ("spawn dial", [spawn, dial, dead]),
        ("cstatic", [CSTATIC, "127.0.0.1", str(port)]),
    ]
    cases = [(what, cmd) for what, cmd in cases if all(c in have for c in cmd if c.startswith(BUILD))]
    with SynSniffer(port) as sn:
        for what, cmd in cases:
            before = sn.settled_count()
            plain = refused_at_once(cmd, base_env(), what)
            shim = refused_at_once(cmd, env, what + " under LD_PRELOAD")
            check_not_delayed(what, plain / 1000, shim / 1000)
            syns = sn.settled_count() - before
            check(syns == 2, "%s: %d SYNs for two runs (one each expected)" % (what, syns))
        if goroutines not in have:
            return
        before = sn.settled_count()
        rc, out, _ = run([goroutines, "10", dead], env)
        check(rc == 1 and "connected=0 of=10 " in out and "errno=ECONNREFUSED:10" in out,
              "goroutines under LD_PRELOAD: rc=%d %r" % (rc, out))
        check(ms_of(out) < AT_ONCE_MS, "goroutines under LD_PRELOAD: %d ms" % ms_of(out))
        syns = sn.settled_count() - before
        check(syns == 10, "goroutines under LD_PRELOAD: %d SYNs, not 10" % syns)


def test_preload_reaches_a_dynamic_grandchild():
    """What a static parent does not stop: its environment reaches its own
    children, so a dynamic program spawn starts is shimmed (conntest waits
    and logs); only the static processes are out of reach."""
    need_shim()
    port = free_port()
    env = shim_env(BACKOFFSHIM_MAX_ATTEMPTS=2, **NO_DELAY)
    rc, out, err = run([go_bin("spawn"), prog("conntest"), "127.0.0.1", str(port)], env)
    check(rc == 1 and "fail errno=ECONNREFUSED" in out, "spawn conntest: rc=%d %r" % (rc, out))
    check(ms_of(out) >= 800 and "backoffshim[" in err,
          "spawn conntest: the grandchild was not shimmed: %r %r" % (out, err[-300:]))


def test_run_with_the_preload_engine_warns():
    """`backoffshim run --engine preload` says the library cannot act on
    them, and runs them anyway (auto picks the seccomp engine for them:
    test_seccomp_engine.py)."""
    cli = os.path.join(BUILD, "backoffshim")
    if not os.access(cli, os.X_OK):
        raise TestSkip("%s not built (make)" % cli)
    port = free_port()
    env = shim_env(**NO_DELAY)
    dial = os.path.join(GO, "dial")
    for what, cmd in (("go dial", [dial, "127.0.0.1:%d" % port]),
                      ("cstatic", [CSTATIC, "127.0.0.1", str(port)])):
        if cmd[0] not in built([dial, CSTATIC]):
            continue
        rc, out, err = run([cli, "run", "--engine", "preload", "--"] + cmd, env)
        check(rc == 1 and out.startswith("error errno=ECONNREFUSED "),
              "run %s: rc=%d %r" % (what, rc, out))
        check("will have no effect on" in err and "backoffshim[" not in err,
              "run %s: %r" % (what, err))

"""Another library that wraps connect() beside the shim (a proxy's wrapper,
socket_wrapper): tests/preload/redirect.so sends a connect to port FROM to
port TO instead. Loaded after the shim, it would see the program's connect
but not the shim's retries, which would reach FROM: the shim passes
connects through and says so once. Loaded before it, the shim's retries go
through it."""
import os
import sys

from lib import (BUILD, PRELOAD, LineReader, Server, base_env, check, free_port, run, shim_env,
                 spawn)

REDIRECT = os.path.join(BUILD, "preload", "redirect.so")
# (under `make sanitize` PRELOAD is the ASan runtime, which must come first,
# then the shim)
SHIM_LAST = PRELOAD.split(":")
CONNECT = "import socket, sys; print(socket.socket().connect_ex(('127.0.0.1', int(sys.argv[1]))))"


def _env(preload, frm, to, **extra):
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="100ms", BACKOFFSHIM_SHARED="off", **extra)
    env.update(LD_PRELOAD=preload, REDIRECT_FROM=str(frm), REDIRECT_TO=str(to))
    return env


def test_a_wrapper_loaded_after_the_shim_sees_every_connect():
    """FROM is up, TO (where the wrapper sends it) is down: the program is
    refused, with the wrapper alone and with the shim before it. The shim
    retried FROM itself, past the wrapper, and connected there."""
    frm, to = free_port(), free_port()
    srv = Server(frm).start()
    try:
        plain = dict(base_env(), LD_PRELOAD=REDIRECT, REDIRECT_FROM=str(frm),
                     REDIRECT_TO=str(to))
        rc, out, err = run([sys.executable, "-c", CONNECT, str(frm)], plain)
        check(rc == 0 and out == "111\n", "the wrapper alone: %r %r" % (out, err))
        rc, out2, err = run([sys.executable, "-c", CONNECT, str(frm)],
                            _env(":".join(SHIM_LAST + [REDIRECT]), frm, to))
        said = [ln for ln in err.splitlines() if "is wrapped by" in ln]
        check(out2 == out and len(said) == 1 and not srv.accepts,
              "shim, then the wrapper: %r (%d connections to FROM); %r"
              % (out2, len(srv.accepts), err[-400:]))
    finally:
        srv.close()


def test_a_wrapper_loaded_before_the_shim_carries_its_retries():
    """The wrapper first: the program's connect reaches the shim as one to
    TO, whose server starts after the shim's first attempt; the retry
    connects there."""
    frm, to = free_port(), free_port()
    preload = ":".join(SHIM_LAST[:-1] + [REDIRECT] + SHIM_LAST[-1:])
    p = spawn([sys.executable, "-c", CONNECT, str(frm)], _env(preload, frm, to))
    log = LineReader(p, stream=p.stderr)
    srv = Server(to)
    try:
        first = log.wait_for(lambda ln: "(attempt 1)" in ln, 10)
        srv.start()
        log.finish(20)
        out = p.stdout.read()
        check(first and ":%d" % to in first and out == "0\n" and len(srv.accepts) == 1,
              "wrapper, then the shim: %r, %d connections to TO; %r"
              % (out, len(srv.accepts), log.lines[-4:]))
    finally:
        srv.close()


def test_a_sanitizers_runtime_after_the_shim_leaves_it_on():
    """A program built with ThreadSanitizer loads libtsan after any preload,
    and libtsan defines connect(), which only forwards: the shim stays on
    (it turned itself off). A copy of the wrapper named as the runtime,
    with no redirection set, stands for it."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp()
    tsan = os.path.join(d, "libtsan.so.2")
    shutil.copy(REDIRECT, tsan)
    port = free_port()
    try:
        env = _env(":".join(SHIM_LAST + [tsan]), 0, 0)
        del env["REDIRECT_FROM"], env["REDIRECT_TO"]
        rc, out, err = run([sys.executable, "-c", CONNECT, str(port)],
                           dict(env, BACKOFFSHIM_MAX_ELAPSED="300ms"))
        check(out == "111\n" and "is wrapped by" not in err and "(attempt 1)" in err,
              "%r; %r" % (out, err[-400:]))
    finally:
        shutil.rmtree(d)


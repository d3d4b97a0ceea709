"""What the shim's own log lines and config files must never do to a
program: kill it (SIGPIPE), block it (a full pipe, a FIFO), write into its
sockets or files, take its standard fds, forge lines with control bytes, or
follow a planted symlink. Each test runs the same unmodified program with and
without the shim and compares exit status, output and what peers receive."""
import fcntl
import os
import re
import shutil
import socket
import sys
import subprocess
import tempfile
import threading

from lib import (BUILD, Recorder, SynSniffer, TestFailure, base_env, check, free_port,
                 need_root, prog, run, shim_env)

F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, Python >= 3.10

LOGHARM = prog("logharm")
CLI = os.path.join(BUILD, "backoffshim")
# Any control byte but the line ends, or DEL: a forged or garbled line.
CTRL = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]")
LINE = re.compile(rb"^backoffshim\[\d+\](?: [^ :]+)?: [\x20-\x7e]*$")


def _run(cmd, env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
         stderr=subprocess.PIPE, close=(), timeout=20):
    """Run cmd with the given fds; `close` lists standard fds the program
    starts without. Returns (rc, stdout bytes, stderr bytes)."""
    pre = None
    if close:
        def pre():
            for fd in close:
                os.close(fd)
    p = subprocess.Popen(cmd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                         preexec_fn=pre)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise TestFailure("%s hung (killed after %ds)" % (" ".join(cmd), timeout))
    return p.returncode, out or b"", err or b""


def _shim_lines(err):
    lines = err.splitlines()
    check(not CTRL.search(err), "control bytes on stderr: %r" % err[-600:])
    for ln in lines:
        check(LINE.match(ln), "not a shim line: %r" % ln)
    return lines


def _dead_port():
    return str(free_port())


# --- row 1: SIGPIPE ------------------------------------------------------

def _with_dead_stderr(cmd, env):
    r, w = os.pipe()
    os.close(r)  # the reader is gone: a write gets EPIPE (and SIGPIPE)
    try:
        return _run(cmd, env, stderr=w)[:2]
    finally:
        os.close(w)


def test_stderr_pipe_without_reader_does_not_kill_the_program():
    cmd = [LOGHARM, "connect", "127.0.0.1", _dead_port()]
    want = _with_dead_stderr(cmd, base_env())
    check(want == (0, b"fd=3\nfail ECONNREFUSED\n"), "baseline: %r" % (want,))
    # A config line (at start-up), then connect lines (wait, give-up).
    for env in (shim_env(BACKOFFSHIM_JITTER="5", BACKOFFSHIM_POLICY="off"),
                shim_env(BACKOFFSHIM_MAX_ATTEMPTS="2")):
        got = _with_dead_stderr(cmd, env)
        check(got == want, "with the shim: %r (exit -13 is SIGPIPE), without: %r"
              % (got, want))


# --- row 16: a full stderr pipe -------------------------------------------

def test_log_never_blocks_on_a_full_stderr_pipe():
    """The parent reads the child's stderr only after it exited; the wait
    lines fill the pipe (shrunk to one page, so that a short run fills it):
    they are dropped, the child is not blocked, and the pipe's O_NONBLOCK is
    untouched."""
    port = _dead_port()
    cmd = [LOGHARM, "connect", "127.0.0.1", port]
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="10ms", BACKOFFSHIM_MAX_BACKOFF="10ms",
                   BACKOFFSHIM_MULTIPLIER="1", BACKOFFSHIM_JITTER="0",
                   BACKOFFSHIM_MAX_ATTEMPTS="150", BACKOFFSHIM_MAX_ELAPSED="60s")
    outs = []
    for e in (base_env(), env):
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
            rc, out, _ = _run(cmd, e, stderr=w, timeout=30)
            check(os.get_blocking(w), "the program's stderr became O_NONBLOCK")
            os.set_blocking(r, False)
            err = b""
            for _ in range(100):  # bounded: at most one page is in the pipe
                try:
                    chunk = os.read(r, 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                err += chunk
        finally:
            os.close(r)
            os.close(w)
        outs.append((rc, out))
    check(outs[0] == (0, b"fd=3\nfail ECONNREFUSED\n"), "baseline: %r" % (outs[0],))
    check(outs[1] == outs[0], "with the shim %r, without %r" % (outs[1], outs[0]))
    lines = _shim_lines(err)
    check(20 <= len(lines) < 150, "expected a full pipe's worth of lines, got %d"
          % len(lines))


# --- row 5: started with stderr closed ------------------------------------

def test_program_started_without_stderr_gets_no_log_in_its_socket():
    """fd 2 closed at start: the program's socket becomes fd 2. Wait lines and
    the "connected" line must not be sent to the program's server."""
    port = free_port()
    cmd = [LOGHARM, "connect", "127.0.0.1", str(port)]
    srv = Recorder(port, reply=b"pong\n")
    try:
        rc0, out0, _ = _run(cmd, base_env(), stderr=None, close=(2,))
    finally:
        srv.close()
    check((rc0, out0) == (0, b"fd=2\ngot pong\n") and srv.received() == [b"ping\n"],
          "baseline: %r %r %r" % (rc0, out0, srv.received()))
    env = shim_env(BACKOFFSHIM_LOG="debug")
    with SynSniffer(port) as sn:
        res = []
        t = threading.Thread(target=lambda: res.append(
            _run(cmd, env, stderr=None, close=(2,), timeout=20)), daemon=True)
        t.start()
        seen = sn.wait_for(3, timeout=10)
        srv = Recorder(port, reply=b"pong\n")
        try:
            t.join(25)
        finally:
            srv.close()
    check(res, "the program did not finish")
    rc1, out1, _ = res[0]
    check((rc1, out1) == (rc0, out0), "with the shim %r (-13: SIGPIPE from a line written "
          "into its unconnected socket), without %r" % ((rc1, out1), (rc0, out0)))
    check(srv.received() == [b"ping\n"], "the server received %r" % srv.received())
    check(seen >= 3, "only %d SYNs before the server started" % seen)


# --- row 6: the log file and the standard fds -----------------------------

def test_log_file_never_takes_a_standard_fd():
    d = tempfile.mkdtemp()
    try:
        log = os.path.join(d, "shim.log")
        for closed in (0, 1, 2):
            env0 = base_env()
            env1 = shim_env(BACKOFFSHIM_LOG_FILE=log)
            outs = []
            for env in (env0, env1):
                rc, out, err = _run([LOGHARM, "write"], env, close=(closed,),
                                    stdout=None if closed == 1 else subprocess.PIPE,
                                    stderr=None if closed == 2 else subprocess.PIPE)
                outs.append((rc, out, err))
            check(outs[1] == outs[0], "fd %d closed: with the shim %r, without %r"
                  % (closed, outs[1], outs[0]))
            text = open(log, "rb").read() if os.path.exists(log) else b""
            check(b"out" not in text and b"err\n" not in text,
                  "the program's output went to the shim's log: %r" % text)
    finally:
        shutil.rmtree(d)


# --- row 7: FIFOs as config or log file -----------------------------------

def test_fifo_config_or_log_file_never_hangs_the_program():
    d = tempfile.mkdtemp()
    try:
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)
        cmd = [LOGHARM, "connect", "127.0.0.1", _dead_port()]
        rc0, out0, err0 = _run(cmd, base_env())
        for env, what in ((shim_env(BACKOFFSHIM_CONFIG=fifo, BACKOFFSHIM_MAX_ATTEMPTS="1"),
                           "1 problem; see them with: backoffshim check-config --env " + fifo),
                          (shim_env(BACKOFFSHIM_MAX_ATTEMPTS="1", BACKOFFSHIM_LOG_FILE=fifo),
                           "no reader")):
            rc1, out1, err1 = _run(cmd, env, timeout=10)
            check((rc1, out1) == (rc0, out0), "with the shim %r, without %r"
                  % ((rc1, out1), (rc0, out0)))
            lines = _shim_lines(err1)
            check(lines and what.encode() in lines[0], "no warning: %r" % lines)
        # /dev/null as the config file stays quiet.
        rc1, out1, err1 = _run(cmd, shim_env(BACKOFFSHIM_CONFIG="/dev/null",
                                             BACKOFFSHIM_POLICY="off"))
        check((rc1, out1, err1) == (rc0, out0, b""), "/dev/null: %r" % ((rc1, out1, err1),))
        # check-config on a FIFO answers instead of waiting for a writer.
        rc, out, _ = _run([CLI, "check-config", fifo], base_env(), timeout=10)
        check(rc == 1 and b"not a regular file" in out, "check-config: %r %r" % (rc, out))
    finally:
        shutil.rmtree(d)


def test_fifo_as_etc_backoffshim_ini_never_hangs_the_program():
    """The default config path, in a private mount namespace where
    /etc/backoffshim.ini is a FIFO (an overlay over /etc)."""
    d = tempfile.mkdtemp()
    try:
        cmd = [LOGHARM, "connect", "127.0.0.1", _dead_port()]
        script = ('mount -t tmpfs none "$0" && mkdir "$0/u" "$0/w" && '
                  'mount -t overlay overlay -o lowerdir=/etc,upperdir="$0/u",workdir="$0/w" /etc'
                  ' && rm -f /etc/backoffshim.ini && mkfifo /etc/backoffshim.ini && exec "$@"')
        wrap = ["unshare", "-m", "sh", "-c", script, d]
        rc0, out0, _ = _run(wrap + cmd, base_env())
        rc1, out1, err1 = _run(wrap + cmd, shim_env(BACKOFFSHIM_CONFIG=None,
                                                    BACKOFFSHIM_POLICY="off"), timeout=10)
        check((rc1, out1) == (rc0, out0) and rc0 == 0, "with the shim %r, without %r"
              % ((rc1, out1), (rc0, out0)))
        lines = _shim_lines(err1)
        check(len(lines) == 1 and b"see them with: backoffshim check-config --env /etc/backoffshim.ini"
              in lines[0], "expected one warning: %r" % lines)
    finally:
        shutil.rmtree(d)


# --- row 14: control bytes from config text --------------------------------

def test_control_bytes_in_config_never_reach_stderr():
    spec = b"unix:/tmp/a\x1b[2K\x1b[1Gb\xff"
    ini = b"[dest " + spec + b"]\npolicy = off\n[dest " + spec + b"]\npolicy = off\n"
    rule = "unix:/x\nbackoffshim[1]: forged=policy:off"
    with tempfile.NamedTemporaryFile("wb", suffix=".ini", delete=False) as f:
        f.write(ini)
        path = f.name
    try:
        cmd = [LOGHARM, "connect", "127.0.0.1", _dead_port()]
        rc0, out0, _ = _run(cmd, base_env())
        env = shim_env(BACKOFFSHIM_CONFIG=path, BACKOFFSHIM_POLICY="off", BACKOFFSHIM_UNIX="on",
                       BACKOFFSHIM_DEST_RULES=rule + ";" + rule,
                       BACKOFFSHIM_LOG_FILE="/nonexistent/\x1b]0;x\x07")
        rc1, out1, err1 = _run(cmd, env)
        check((rc1, out1) == (rc0, out0), "with the shim %r, without %r"
              % ((rc1, out1), (rc0, out0)))
        lines = _shim_lines(err1)
        check(len(lines) == 1 and b": config: 3 problems; see them with: backoffshim "
              b"check-config --env " + path.encode() in lines[0],
              "expected one line telling of three problems: %r" % lines)
        rc, out, _ = _run([CLI, "check-config", path], base_env())
        check(rc == 1 and not CTRL.search(out) and b"\\x1b[2K" in out and b"\\xff" in out,
              "check-config output: %r" % out)
        rc, out, _ = _run([CLI, "check-config", "--env"], env)
        check(rc == 1 and not CTRL.search(out) and b"\\x0abackoffshim" in out,
              "check-config --env output: %r" % out)
    finally:
        os.unlink(path)


# --- row 15: a planted symlink ---------------------------------------------

def test_log_file_symlink_in_sticky_directory_is_not_followed():
    need_root("a directory and symlink owned by another uid (65534)")
    d = tempfile.mkdtemp()
    try:
        sticky = os.path.join(d, "tmp")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        os.chown(sticky, 65534, 65534)  # another user's directory, as /tmp can be
        victim = os.path.join(d, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        link = os.path.join(sticky, "shim.log")
        os.symlink(victim, link)
        os.lchown(link, 65534, 65534)
        cmd = [LOGHARM, "connect", "127.0.0.1", _dead_port()]
        rc0, out0, _ = _run(cmd, base_env())
        rc1, out1, err1 = _run(cmd, shim_env(BACKOFFSHIM_LOG_FILE=link,
                                             BACKOFFSHIM_MAX_ATTEMPTS="2"))
        check(open(victim).read() == "precious\n", "the symlink was followed")
        check((rc1, out1) == (rc0, out0), "with the shim %r, without %r"
              % ((rc1, out1), (rc0, out0)))
        lines = _shim_lines(err1)
        check(lines and b"symbolic link" in lines[0], "no warning: %r" % lines)
    finally:
        shutil.rmtree(d)


# --- found on the way: a log file named through /dev/stderr ----------------

REUSES_FD2 = ("import os,socket,sys\n"
              "os.close(2)\n"
              "fd=os.open(sys.argv[1], os.O_WRONLY|os.O_CREAT|os.O_TRUNC)\n"
              "assert fd == 2\n"
              "try:\n"
              "    socket.create_connection(('127.0.0.1', int(sys.argv[2])))\n"
              "except OSError as e:\n"
              "    print('connect', e.errno)\n"
              "os.write(fd, b'data\\n')\n")


def test_log_file_dev_stderr_never_follows_fd_2_to_the_programs_file():
    """BACKOFFSHIM_LOG_FILE=/dev/stderr names "whatever fd 2 is". The program
    closes fd 2 and opens its data file, which gets number 2: the shim's
    lines must not land in that file."""
    port = _dead_port()
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "data")
        results = []
        for env in (base_env(), shim_env(BACKOFFSHIM_LOG_FILE="/dev/stderr",
                                         BACKOFFSHIM_MAX_ATTEMPTS="3")):
            rc, out, err = _run([sys.executable, "-c", REUSES_FD2, data, port], env)
            with open(data, "rb") as f:
                results.append((rc, out, f.read()))
            if env.get("LD_PRELOAD"):
                logged = err
    check(results[0] == (0, b"connect 111\n", b"data\n"), "baseline: %r" % (results[0],))
    check(results[1] == results[0], "with the shim %r, without %r" % (results[1], results[0]))
    check(logged.count(b"backoffshim[") >= 2, "the log lines went nowhere: %r" % logged)


def test_log_line_never_lands_in_the_programs_socket():
    """stderr closed, fd 2 reused for a socket the peer resets: the shim's
    log must neither recurse (crash) nor write into that socket."""
    port = free_port()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(4)
    got = []

    def serve():
        lst.settimeout(5)
        c, _ = lst.accept()
        c.sendall(b"hi")
        c.settimeout(2)
        try:
            got.append(c.recv(4096))
        except OSError:
            pass
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = ("import os,socket,signal,time\n"
            "signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
            "os.close(2)\n"
            "s=socket.create_connection(('127.0.0.1', %d)); assert s.fileno() == 2\n"
            "s.recv(2); s.send(b'payload'); time.sleep(0.3)\n"
            "for i in range(20):\n"
            "  try: s.send(b'x')\n"
            "  except OSError: pass\n"
            "print('alive')\n" % port)
    rc, out, err = run([sys.executable, "-c", code], shim_env())
    t.join(5)
    lst.close()
    check(rc == 0 and "alive" in out, "program died: rc=%d %r" % (rc, out))
    check(got and b"backoffshim" not in got[0], "log text reached the socket: %r" % got)

"""Configuration from the environment and the INI file; bad input never
changes what the host program does (issue #2)."""
import os
import random
import re
import subprocess
import sys
import tempfile

from lib import (BUILD, ROOT, SynSniffer, base_env, check, check_gaps, free_port, prog, run,
                 shim_env, slack)

HOST_PROG = [sys.executable, "-c", "import sys; print('out'); sys.stderr.write('err\\n'); sys.exit(7)"]
LINE = re.compile(r"^backoffshim\[\d+\](?: [^ :]+)?: config: ")
CLI = os.path.join(BUILD, "backoffshim")


def _same_behaviour(env, expect_problems):
    """The program's behaviour unchanged; the library's one line counts the
    problems and names the command that lists them, which is run: its
    lines (one per problem) are returned."""
    rc0, out0, err0 = run(HOST_PROG, base_env())
    rc, out, err = run(HOST_PROG, env)
    check(rc == rc0 == 7, "exit code changed: %d vs %d" % (rc, rc0))
    check(out == out0, "stdout changed: %r vs %r" % (out, out0))
    lines = err.splitlines()
    check(lines[-1] == "err", "program's own stderr lost: %r" % err)
    if not expect_problems:
        check(lines == ["err"], "unexpected stderr: %r" % lines)
        return []
    m = re.match(r"^backoffshim\[\d+\] python3: config: (\d+) problems?; see them "
                 r"with: backoffshim (check-config .*)$", lines[0])
    check(len(lines) == 2 and m and int(m.group(1)) == expect_problems,
          "expected one line telling of %d problems, got %r" % (expect_problems, lines))
    rc, listed, _ = run([CLI] + m.group(2).split(), env)
    problems = [l for l in listed.splitlines() if not l.endswith(": ok")]
    check(rc == 1 and len(problems) == expect_problems, "%s: %r" % (m.group(2), listed))
    return problems


def test_bad_env_values_are_reported_and_ignored():
    env = shim_env(BACKOFFSHIM_JITTER="1.5", BACKOFFSHIM_MULTIPLIER="nan",
                   BACKOFFSHIM_INITIAL_BACKOFF="-1s", BACKOFFSHIM_MAX_ATTEMPTS="99999999999999999999",
                   BACKOFFSHIM_RETRY_ON="ECONNREFUSED,EBOGUS", BACKOFFSHIM_LOG="loud",
                   BACKOFFSHIM_MAX_BACKOFF="\x01\x02junk")
    problems = _same_behaviour(env, 7)
    text = "\n".join(problems)
    for var in ("JITTER", "MULTIPLIER", "INITIAL_BACKOFF", "MAX_ATTEMPTS", "RETRY_ON",
                "BACKOFFSHIM_LOG=", "MAX_BACKOFF"):
        check(var in text, "%s not named in %r" % (var, text))
    check("between 0 and 1" in text and "negative" in text, "reasons missing: %r" % text)


def test_bad_ini_file_is_reported_with_lines():
    with tempfile.NamedTemporaryFile("wb", suffix=".ini", delete=False) as f:
        f.write(b"[backoff]\n"            # 1
                b"jitter = 2\n"           # 2 out of range
                b"colour = blue\n"        # 3 unknown key
                b"no equals here\n"       # 4 syntax
                b"[mystery\n"             # 5 syntax
                b"[other]\n"              # 6 unknown section (its keys ignored)
                b"x = 1\n"                # 7
                b"[backoff]\n"            # 8
                b"multiplier = 0.5\n"     # 9 below 1
                b"initial_backoff = 200ms\n"  # 10 fine
                + b"a" * 300 + b"\n")      # 11 too long
        path = f.name
    try:
        problems = _same_behaviour(shim_env(BACKOFFSHIM_CONFIG=path,
                                            BACKOFFSHIM_INITIAL_BACKOFF=None), 7)
        for n in (2, 3, 4, 5, 6, 9, 11):
            check(any("%s:%d:" % (path, n) in p for p in problems),
                  "line %d not reported: %r" % (n, problems))
    finally:
        os.unlink(path)


def test_binary_junk_and_unreadable_files():
    rnd = random.Random(1234)
    with tempfile.NamedTemporaryFile("wb", suffix=".ini", delete=False) as f:
        f.write(bytes(rnd.randrange(256) for _ in range(4000)))
        junk = f.name
    try:
        env = shim_env(BACKOFFSHIM_CONFIG=junk)
        rc, out, err = run(HOST_PROG, env)
        check(rc == 7 and out == "out\n", "junk config changed the program: %d %r" % (rc, out))
        check(all(LINE.match(l) or l == "err" for l in err.splitlines()),
              "junk produced odd stderr: %r" % err[:300])
    finally:
        os.unlink(junk)
    for bad in ("/nonexistent/backoffshim.ini", "/tmp"):
        problems = _same_behaviour(shim_env(BACKOFFSHIM_CONFIG=bad), 1)
        check(bad in problems[0], "path not named: %r" % problems)


def test_ini_then_env_precedence():
    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write("[backoff]\ninitial_backoff = 150ms\nmax_attempts = 2\n")
        path = f.name
    try:
        for env_initial, expect in ((None, 0.150), ("50ms", 0.050)):
            env = shim_env(BACKOFFSHIM_CONFIG=path)
            env.pop("BACKOFFSHIM_INITIAL_BACKOFF")
            if env_initial:
                env["BACKOFFSHIM_INITIAL_BACKOFF"] = env_initial
            with SynSniffer(port) as sn:
                rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)], env)
                sn.wait_for(3, 0.3)
                g = sn.gaps()
            check(len(g) == 1, "max_attempts=2 from the file: gaps %r" % g)
            check(abs(g[0] - expect) <= slack(), "first wait %.3f, expected %.3f" % (g[0], expect))
    finally:
        os.unlink(path)


def test_example_config_is_valid_and_documents_defaults():
    path = os.path.join(ROOT, "config", "backoffshim.ini")
    text = open(path).read()
    for key in ("initial_backoff", "multiplier", "jitter", "max_backoff",
                "min_connect_timeout", "max_attempts", "max_elapsed", "retry_on", "unix",
                "nonblocking", "healthy_after", "shared", "seed", "disable", "level", "file",
                "time", "format"):
        check(re.search(r"^;?\s*%s\s*=" % key, text, re.M), "%s missing from example" % key)
    # Uncommented as-is, it must load without a single complaint.
    live = re.sub(r"^;\s*(\w+\s*=)", r"\1", text, flags=re.M)
    live = "\n".join(l for l in live.splitlines() if not l.startswith("file"))
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
        f.write(live)
        tmp = f.name
    try:
        _same_behaviour(base_env(LD_PRELOAD=shim_env()["LD_PRELOAD"], BACKOFFSHIM_CONFIG=tmp), 0)
    finally:
        os.unlink(tmp)


def test_log_levels_and_log_file():
    port = free_port()
    cmd = [prog("conntest"), "127.0.0.1", str(port)]
    rc, out, err = run(cmd, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3, BACKOFFSHIM_LOG="off"))
    check(rc == 1 and err == "", "LOG=off still wrote: %r" % err)
    rc, out, err = run(cmd, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3, BACKOFFSHIM_LOG="error"))
    check(len(err.splitlines()) == 1 and "giving up" in err, "LOG=error: %r" % err)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "shim.log")
        rc, out, err = run(cmd, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=3, BACKOFFSHIM_LOG_FILE=path))
        check(err == "", "with LOG_FILE, stderr should stay clean: %r" % err)
        lines = open(path).read().splitlines()
        # a log file's lines carry an ISO-8601 UTC time by default
        stamped = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z backoffshim\[\d+\] ")
        check(len(lines) == 3 and all(stamped.match(l) for l in lines), "log file: %r" % lines)
        check(re.search(r"Connection refused \(attempt 1\), next attempt in 50ms", lines[0]),
              "first line format: %r" % lines[0])


def test_seed_makes_jitter_reproducible():
    port = free_port()
    cmd = [prog("conntest"), "127.0.0.1", str(port)]

    def waits(seed):
        rc, out, err = run(cmd, shim_env(BACKOFFSHIM_MAX_ATTEMPTS=6, BACKOFFSHIM_SEED=seed,
                                         BACKOFFSHIM_MAX_BACKOFF="2s",
                                         BACKOFFSHIM_INITIAL_BACKOFF="20ms"))
        return re.findall(r"\(attempt (\d+)\), next attempt in (\S+)", err)
    a, b, c = waits(7), waits(7), waits(8)
    check(len(a) == 5, "expected 5 wait lines: %r" % a)
    # waits are relative to "now", so compare the jittered part loosely: same
    # seed gives the same draws, a different seed other draws
    check([x[0] for x in a] == [x[0] for x in b], "attempt numbering differs")
    check(a == b or sum(x != y for x, y in zip(a, b)) <= 1, "same seed, different waits: %r %r" % (a, b))
    check(a != c, "different seeds gave identical waits: %r" % a)


def test_retry_on_selects_errors():
    port = free_port()
    with SynSniffer(port) as sn:
        rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)],
                           shim_env(BACKOFFSHIM_RETRY_ON="ETIMEDOUT"))
        check("fail errno=ECONNREFUSED" in out and err == "", "not retried: %r %r" % (out, err))
        sn.wait_for(2, 0.3)
        check(len(sn.times) == 1, "ECONNREFUSED not in retry_on, yet %d SYNs" % len(sn.times))


def test_debug_says_it_is_loaded_and_what_it_lets_through():
    """At debug level: one line at load (version, config, policy, mode,
    table) and one per connect the shim leaves alone; at info, neither."""
    from lib import Server
    port = free_port()
    with Server(port).start():
        rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)],
                           shim_env(BACKOFFSHIM_LOG="debug"))
        check(rc == 0, "rc=%d %r" % (rc, err))
        loaded = [l for l in err.splitlines() if "loaded libbackoffshim" in l]
        check(len(loaded) == 1 and "policy grpc" in loaded[0] and "nonblocking auto" in loaded[0]
              and "config /dev/null" in loaded[0], "load line: %r" % err)
        check("connect 127.0.0.1:%d: passed through (connected at once)" % port in err, err)
        rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], shim_env())
        check(rc == 0 and err == "", "at info level: %r" % err)


def test_log_format_json_time_program_and_journal():
    """[log] format = json: one JSON object per line with its fields;
    time = on: an ISO-8601 UTC time first; every line names the program;
    with stderr as the journal's stream, lines carry the <N> priority."""
    import json
    port = free_port()
    cmd = [prog("legacy_client"), "127.0.0.1", str(port)]
    rc, out, err = run(cmd, shim_env(BACKOFFSHIM_LOG_FORMAT="json", BACKOFFSHIM_MAX_ATTEMPTS="2"))
    rows = [json.loads(l) for l in err.splitlines() if l.startswith("{")]
    check(len(rows) == 2, "json lines: %r" % err)
    retry, give_up = rows
    check(retry["event"] == "retry" and retry["destination"] == "127.0.0.1:%d" % port and
          retry["attempt"] == 1 and retry["error"] == "ECONNREFUSED" and
          retry["wait"] == 0.05 and retry["program"] == "legacy_client" and
          retry["pid"] > 1 and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", retry["time"]),
          "retry: %r" % retry)
    check(give_up["event"] == "give_up" and give_up["level"] == "error" and
          give_up["attempt"] == 2 and "giving up" in give_up["message"], "give-up: %r" % give_up)
    rc, out, err = run(cmd, shim_env(BACKOFFSHIM_LOG_TIME="on", BACKOFFSHIM_MAX_ATTEMPTS="1"))
    check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z backoffshim\[\d+\] legacy_client: "
                   r"connect 127\.0\.0\.1:%d: giving up" % port, err), "time = on: %r" % err)
    r_fd, w_fd = os.pipe()
    st = os.fstat(w_fd)
    env = shim_env(BACKOFFSHIM_MAX_ATTEMPTS="1", JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=w_fd)
    os.close(w_fd)
    with os.fdopen(r_fd) as f:
        err = f.read()
    p.wait(20)
    check(re.match(r"^<3>backoffshim\[\d+\] legacy_client: connect ", err), "journal: %r" % err)


def test_log_file_rotated_away_is_followed():
    """A log file renamed (logrotate) or unlinked between two lines: the
    next line goes to a new file at the configured path, never to the old
    one. Lines in a file carry a time by default."""
    # three destinations: a give-up repeated to one is held back (one a second)
    ports = sorted({free_port() for _ in range(8)})[:3]
    check(len(ports) == 3, "three free ports: %r" % ports)
    code = ("import socket, sys\n"
            "for port in %r:\n"
            "    try: socket.create_connection(('127.0.0.1', port))\n"
            "    except OSError: pass\n"
            "    print('tried', flush=True); sys.stdin.readline()\n" % (ports,))
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "shim.log")
        env = shim_env(BACKOFFSHIM_LOG_FILE=log, BACKOFFSHIM_MAX_ATTEMPTS="1")
        p = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lines = []
            for step in ("rename", "unlink", None):
                check(p.stdout.readline().strip() == "tried", "the client did not try")
                lines.append(open(log).read())
                if step == "rename":
                    os.rename(log, log + ".1")
                elif step == "unlink":
                    os.unlink(log)
                p.stdin.write("\n")
                p.stdin.flush()
            out, err = p.communicate(timeout=20)
        finally:
            p.kill()
        check(p.returncode == 0 and err == "", "rc=%r stderr %r" % (p.returncode, err))
        first = open(log + ".1").read().splitlines()
        check(len(first) == 1 and "giving up" in first[0], "the rotated file: %r" % first)
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z backoffshim\[", first[0]),
              "no time on a file's line: %r" % first[0])
        # the second line went to a new file, which was then unlinked; the
        # third to another new one
        check(lines[1].count("giving up") == 1, "after the rename: %r" % lines[1])
        last = open(log).read().splitlines()
        check(len(last) == 1 and "giving up" in last[0], "after the unlink: %r" % last)

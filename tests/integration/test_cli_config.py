"""The backoffshim command: check-config (every problem with its line) and
schedule (the effective policy per destination, seeded waits within their
ranges, stops) (issue #4)."""
import os
import re

from cli_helpers import CLI, GOOD_INI, cli_env, rows_of, secs, shown, write_ini
from lib import SO, check, run


# --- check-config --------------------------------------------------------

def test_check_config_good_file():
    rc, out, err = run([CLI, "check-config", GOOD_INI], cli_env())
    check(rc == 0 and out == GOOD_INI + ": ok\n" and err == "",
          "rc=%d out=%r err=%r" % (rc, out, err))


def test_check_config_reports_every_problem_with_its_line():
    path = write_ini("[backoff]\n"             # 1
                "jitter = 2\n"            # 2
                "colour = blue\n"         # 3
                "no equals here\n"        # 4
                "[mystery\n"              # 5
                "initial_backoff = 2s\n"  # 6 fine
                "[other]\n"               # 7
                "x = 1\n"                 # 8
                "[backoff]\n"             # 9
                "multiplier = 0.5\n"      # 10
                "policy = sometimes\n"    # 11
                + "a" * 300 + "\n"        # 12
                "[log]\n"                 # 13
                "level = loud\n"          # 14
                "[dest *:5432]\n"         # 15
                "policy = list\n"         # 16 fine
                "seed = 3\n"              # 17 global only
                "[dest 10.0.0.0/33]\n"    # 18 bad prefix
                "[dest *:5432]\n")        # 19 same as line 15
    try:
        rc, out, err = run([CLI, "check-config", path, "/nonexistent.ini"], cli_env())
    finally:
        os.unlink(path)
    check(rc == 1, "rc=%d" % rc)
    want = [
        '%s:2: jitter = "2": must be between 0 and 1' % path,
        '%s:3: colour = "blue": unknown key' % path,
        "%s:4: not a 'key = value' line" % path,
        "%s:5: section header without ']'" % path,
        "%s:7: unknown section (expected [backoff], [log] or [dest SPEC])" % path,
        '%s:10: multiplier = "0.5": must be between 1 and 100' % path,
        '%s:11: policy = "sometimes": not one of grpc, list, exponential, ' % path,
        "%s:12: line too long (at most 198 characters)" % path,
        '%s:14: level = "loud": not one of off, error, info, debug' % path,
        '%s:17: seed = "3": applies to the whole process, not to one destination' % path,
        "%s:18: [dest 10.0.0.0/33]: " % path,
        "%s:19: [dest *:5432]: matches exactly what [dest *:5432] at %s:15 matches"
        % (path, path),
        "/nonexistent.ini: cannot open file",
    ]
    got = out.splitlines()
    check(len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want)),
          "output:\n%s" % out)


def test_check_config_accepts_destination_sections():
    path = write_ini("[backoff]\nmax_backoff = 30s\nunix = on\n[dest 127.0.0.1:6379]\npolicy = list\n"
                "delays = 0, 100ms, 1s\n[dest 10.0.0.0/8]\nmax_attempts = 3\n"
                "[dest 10.1.2.3]\njitter_mode = full\n[dest unix:/run/app.sock]\n"
                "policy = off\n[dest db.internal:5432]\nnonblocking = pace\n")
    try:
        rc, out, err = run([CLI, "check-config", path], cli_env())
    finally:
        os.unlink(path)
    check(rc == 0 and out == path + ": ok\n", "rc=%d out=%r" % (rc, out))


def test_check_config_never_says_ok_wrongly():
    """Problems no single value has, and each problem names its bad entry."""
    path = write_ini("[backoff]\nretry_on = ECONNREFUSED, EFOO\ninitial_backoff = 10s\n"
                     "max_backoff = 1s\nmax_elapsed = 2d\n[dest unix:/run/x.sock]\npolicy = off\n")
    try:
        rc, out, err = run([CLI, "check-config", path], cli_env())
    finally:
        os.unlink(path)
    lines = out.splitlines()
    check(rc == 1 and len(lines) == 3, "rc=%d out=%r" % (rc, out))
    check("%s:2: retry_on = \"ECONNREFUSED, EFOO\": unknown errno name 'EFOO'" % path
          in lines[0], lines[0])
    check("max_backoff: 1.00s is below initial_backoff 10.00s" in lines[1], lines[1])
    check("%s:6: [dest unix:/run/x.sock]: unix = off" % path in lines[2], lines[2])
    # schedule: exit 1 when its config cannot be read; it shows every key
    rc, out, err = run([CLI, "schedule", "--config", "/nonexistent.ini", "-n", "1"], cli_env())
    check(rc == 1 and "cannot open file" in err, "schedule: rc=%d %r" % (rc, err))
    for key in ("disable", "shared", "level", "file", "time", "format"):
        check(re.search(r"^  %s\s+= " % key, out, re.M), "schedule does not show %s: %r" % (key, out))
    # paths the library could not use on this machine
    path = write_ini("[log]\nfile = /nonexistent/dir/log\n[backoff]\nshared = /nonexistent/t\n")
    try:
        rc, out, err = run([CLI, "check-config", path], cli_env())
        env = dict(cli_env(), BACKOFFSHIM_CONFIG=path, LD_PRELOAD=SO)
        _, _, lib_err = run(["/bin/true"], env)
    finally:
        os.unlink(path)
    # (shared = /path is a table's name, hashed into its key: the library
    # uses it wherever the path would lie, and so does status --table)
    check(rc == 1 and '%s: [log] file = "/nonexistent/dir/log": its directory' % path in out
          and "shared" not in out, "rc=%d %r" % (rc, out))
    check(re.match(r"backoffshim\[\d+\] true: config: 1 problem; see them with: "
                   r"backoffshim check-config --env %s; the log file: cannot open for appending: "
                   r"No such file or directory, logging to stderr\n$" % re.escape(path), lib_err),
          "the library does not name the file the log file came from: %r" % lib_err)
    # a config that is no regular file cannot be read either: schedule says so
    # with 1, run refuses it with 125 (its own error) before CMD starts
    for bad in ("/tmp", "/nonexistent.ini"):
        rc, out, err = run([CLI, "schedule", "--config", bad, "-n", "1"], cli_env())
        check(rc == 1 and bad in err, "schedule --config %s: rc=%d %r" % (bad, rc, err))
        rc, out, err = run([CLI, "run", "--config", bad, "--", "true"], cli_env())
        check(rc == 125 and bad in err, "run --config %s: rc=%d %r" % (bad, rc, err))
    # a run line without "--" is previewed as run takes it
    rc, out, err = run([CLI, "schedule", "--max-backoff", "3s", "/bin/echo", "hi"], cli_env())
    check(rc == 0 and re.search(r"^  max_backoff\s+= 3s$", out, re.M), "rc=%d %r %r"
          % (rc, out, err))
    # schedule takes run's options, so that a run line can be previewed
    rc, out, err = run([CLI, "schedule", "--initial-backoff", "2s", "--max-backoff", "3s",
                        "--pace", "-n", "1", "--seed", "1", "--", "./client", "x"], cli_env())
    check(rc == 0 and re.search(r"^  initial_backoff\s+= 2s$", out, re.M) and
          re.search(r"^  nonblocking\s+= pace$", out, re.M), "run options: rc=%d %r %r"
          % (rc, out, err))


def test_check_config_names_every_bad_entry():
    """A value continued on an indented line (inih joins it, replacing the
    value above), a key in the wrong section, a section of no kind, a
    [dest] without its SPEC, a line with no key, a bad item of a list, an
    unknown unit: each is reported once, where it is, naming the entry;
    the keys of a reported section are not reported again."""
    path = write_ini("[backoff]\n"                   # 1
                     "delays = 0, 100ms,\n"          # 2
                     "  1s, 5s\n"                    # 3 continues delays
                     "policy = list\n"               # 4
                     "level = debug\n"               # 5 belongs in [log]
                     "[log]\n"                       # 6
                     "initial_backoff = 1s\n"        # 7 belongs in [backoff]
                     "[bogus]\n"                     # 8
                     "x = 1\n"                       # 9 (its section is reported)
                     "[dest]\n"                      # 10
                     "y = 2\n"                       # 11
                     "= 0.1\n"                       # 12
                     "[backoff]\n"                   # 13
                     "max_elapsed = 5 weeks\n"       # 14
                     "[dest 127.0.0.1:14001 ]\n"     # 15 fine (trailing space)
                     "delays = 0, 1s, zz\n")         # 16
    try:
        rc, out, err = run([CLI, "check-config", path], cli_env())
        rc2, sched, _ = run([CLI, "schedule", "--config", path, "-n", "1"], cli_env())
    finally:
        os.unlink(path)
    want = [
        '%s:3: delays = "1s, 5s": an indented line continues the value above' % path,
        '%s:5: level = "debug": belongs in [log], not here' % path,
        '%s:7: initial_backoff = "1s": belongs in [backoff], not here' % path,
        "%s:8: unknown section" % path,
        "%s:10: a [dest SPEC] section needs its SPEC" % path,
        "%s:12: no key before the '='" % path,
        "%s:14: max_elapsed = \"5 weeks\": unknown unit 'weeks'" % path,
        "%s:16: delays = \"0, 1s, zz\": delay 'zz': not a number" % path,
    ]
    got = out.splitlines()
    check(rc == 1 and len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want)),
          "output:\n%s" % out)
    check(re.search(r"^  delays\s+= 0, 100ms$", sched, re.M),
          "the continued line replaced the value: %r" % sched)


def test_check_config_usage():
    rc, out, err = run([CLI, "check-config"], cli_env())
    check(rc == 2 and "missing the file" in err, "rc=%d err=%r" % (rc, err))


# --- schedule ------------------------------------------------------------

def test_schedule_is_reproducible_and_within_its_ranges():
    path = write_ini("[backoff]\ninitial_backoff = 250ms\nmultiplier = 2\njitter = 0.3\n"
                "max_backoff = 5s\nmax_elapsed = 0\n")
    try:
        cmd = [CLI, "schedule", "--config", path, "-n", "12", "--seed", "1234"]
        outs = [run(cmd, cli_env())for _ in range(2)]
        rc3, other, _ = run(cmd[:-1] + ["99"], cli_env())
    finally:
        os.unlink(path)
    (rc, out, err), (rc2, out2, _) = outs
    check(rc == rc2 == 0 and err == "", "rc=%d err=%r" % (rc, err))
    check(out == out2, "same seed, different output:\n%s\n---\n%s" % (out, out2))
    check(rc3 == 0 and rows_of(other) != rows_of(out), "another seed gave the same waits")
    check("seed: 1234" in out and "policy: grpc" in out, out)
    for key, val in (("initial_backoff", "250ms"), ("multiplier", "2"), ("jitter", "0.3"),
                     ("max_backoff", "5s"), ("max_elapsed", "0")):
        check(shown(out, key) == val, "%s = %s not shown:\n%s" % (key, val, out))
    rows = rows_of(out)
    check([r[0] for r in rows] == list(range(1, 13)), "rows:\n%s" % out)
    check(rows[0][1:4] == ("250ms",) * 3, "first wait not exactly initial: %r" % (rows[0],))
    total = 0.0
    for k, wait, lo, hi, tot in rows:
        b = min(0.25 * 2 ** (k - 1), 5.0)
        elo, ehi = (b, b) if k == 1 else (0.7 * b, 1.3 * b)
        check(abs(secs(lo) - elo) < 1e-3 and abs(secs(hi) - ehi) < 1e-3,
              "row %d range %s..%s, expected %.3f..%.3f" % (k, lo, hi, elo, ehi))
        check(secs(lo) - 1e-3 <= secs(wait) <= secs(hi) + 1e-3, "row %d outside" % k)
        total += secs(wait)
        check(abs(secs(tot) - total) < 0.01, "row %d total %s, sum %.3f" % (k, tot, total))


def test_schedule_exponential_stops():
    env = cli_env(BACKOFFSHIM_POLICY="exponential", BACKOFFSHIM_INITIAL_BACKOFF="1s",
               BACKOFFSHIM_MULTIPLIER="2", BACKOFFSHIM_MAX_BACKOFF="10s")
    rc, out, err = run([CLI, "schedule", "-n", "10"], env)
    check(rc == 0, "rc=%d err=%r" % (rc, err))
    rows = rows_of(out)
    check([r[1] for r in rows] == ["1s", "2s", "4s", "8s", "stop"], "rows:\n%s" % out)
    check(all(r[2] == r[3] == r[1] for r in rows[:4]), "exponential ranges not exact:\n%s" % out)
    check(rows[4][4] == "15s", "the 5th attempt starts at 15s:\n%s" % out)
    check("policy: exponential" in out and "environment: " in out, out)


def test_schedule_budget_and_list():
    rc, out, err = run([CLI, "schedule", "-n", "10"],
                       cli_env(BACKOFFSHIM_POLICY="list", BACKOFFSHIM_MAX_ATTEMPTS="4"))
    rows = rows_of(out)
    check(rc == 0 and [r[1] for r in rows][-1] == "stop" and len(rows) == 4, out)
    check("max_attempts reached" in out and "(the default list)" in out, out)
    # 10ms jittered x[0.5, 1.5], lifted by the 10 ms floor under every wait
    check(rows[1][2:4] == ("10ms", "15ms"), "list range of 10ms: %r" % (rows[1],))


def test_schedule_responsive_rises_within_its_ranges():
    rc, out, err = run([CLI, "schedule", "-n", "8", "--seed", "9"],
                       cli_env(BACKOFFSHIM_POLICY="responsive", BACKOFFSHIM_MAX_BACKOFF="20s",
                            BACKOFFSHIM_MAX_ELAPSED="0"))
    rows = rows_of(out)
    check(rc == 0 and "policy: responsive" in out and len(rows) == 8, out)
    check(shown(out, "up_multiplier") == "1.5" and shown(out, "down_threshold") == "10", out)
    check(rows[0][1:4] == ("1s",) * 3, "first interval is initial_backoff: %r" % (rows[0],))
    prev = 1.0
    for k, wait, lo, hi, tot in rows[1:]:
        v = prev * 1.5
        elo, ehi = min(v * 0.7, 20.0), min(v * 1.3, 20.0)
        check(abs(secs(lo) - elo) < 2e-3 and abs(secs(hi) - ehi) < 2e-3,
              "row %d range %s..%s, expected %.3f..%.3f" % (k, lo, hi, elo, ehi))
        check(secs(lo) - 1e-3 <= secs(wait) <= secs(hi) + 1e-3, "row %d outside" % k)
        prev = secs(wait)


def test_schedule_prints_config_problems_and_still_the_schedule():
    path = write_ini("[backoff]\njitter = 2\nmax_backoff = 3s\n")
    try:
        rc, out, err = run([CLI, "schedule", "--config", path, "-n", "3",
                            "--dest", "127.0.0.1:5432"],
                           cli_env(BACKOFFSHIM_MULTIPLIER="nan"))
    finally:
        os.unlink(path)
    check(rc == 0, "rc=%d err=%r" % (rc, err))
    lines = err.splitlines()
    check(len(lines) == 2 and re.match(
        r'backoffshim\[\d+\](?: [^ :]+)?: config: %s:2: jitter = "2": must be between 0 and 1; '
        r'value ignored$' % re.escape(path), lines[0]), "stderr: %r" % err)
    check(re.match(r'backoffshim\[\d+\](?: [^ :]+)?: config: BACKOFFSHIM_MULTIPLIER="nan": ', lines[1]),
          "stderr: %r" % err)
    check(shown(out, "max_backoff") == "3s" and shown(out, "jitter") == "0.2", out)
    check(len(rows_of(out)) == 3, out)
    check("destination: 127.0.0.1:5432\n  settings: the global [backoff] ones" in out, out)


def test_schedule_destination_sections():
    path = write_ini("[backoff]\n"                    # 1
                "max_backoff = 30s\n"            # 2
                "[dest 127.0.0.1:6379]\n"        # 3
                "policy = list\n"                # 4
                "delays = 0, 100ms, 1s\n"        # 5
                "[dest 10.0.0.0/8]\n"            # 6
                "max_attempts = 3\n"             # 7
                "[dest *:5432]\n"                # 8
                "policy = exponential\n"         # 9
                "[dest localhost:8080]\n"        # 10
                "jitter_mode = equal\n")         # 11
    cases = [
        ("127.0.0.1:6379", "[dest 127.0.0.1:6379] (%s:3)" % path, "policy: list"),
        ("10.1.2.3:5432", "[dest 10.0.0.0/8] (%s:6)" % path, "max_attempts = 3"),
        ("[::1]:5432", "[dest *:5432] (%s:8)" % path, "policy: exponential"),
        ("localhost:8080", "[dest localhost:8080] (%s:10)" % path, "jitter_mode = equal"),
        ("127.0.0.1:7000", None, "policy: grpc"),
        ("127.0.0.1:7001", "[dest 127.0.0.1:7001] (BACKOFFSHIM_DEST_RULES)", "policy: off"),
    ]
    try:
        env = cli_env(BACKOFFSHIM_DEST_RULES="127.0.0.1:7001=policy:off")
        for dest, section, what in cases:
            rc, out, err = run([CLI, "schedule", "--config", path, "--dest", dest, "-n", "4",
                                "--seed", "5"], env)
            check(rc == 0 and err == "", "%s: rc=%d err=%r" % (dest, rc, err))
            want = ("  settings: %s over the global [backoff] ones" % section if section
                    else "  settings: the global [backoff] ones")
            if " = " in what:
                key, val = what.split(" = ")
                found = shown(out, key) == val
            else:
                found = what in out
            check(want in out and found, "%s: expected %r and %r in:\n%s"
                  % (dest, want, what, out))
            check(shown(out, "max_backoff") == "30s" or "policy: list" in out
                  or "policy: off" in out, "global keys not inherited:\n%s" % out)
        rc, out, err = run([CLI, "schedule", "--config", path, "-n", "0"], cli_env())
        check("destination sections" in out and "[dest *:5432] (%s:8)" % path in out, out)
    finally:
        os.unlink(path)


def test_schedule_usage_errors():
    for args, what in ((["--dest", "nowhere"], "--dest 'nowhere'"),
                       (["--dest", "::1:80"], "expected ADDR:PORT"),
                       (["-n", "x"], "-n 'x'"), (["--seed", "-3"], "negative"),
                       (["--bogus"], "unknown option"),
                       (["--engine", "bogus"], "--engine 'bogus'")):
        rc, out, err = run([CLI, "schedule"] + args, cli_env())
        check(rc == 2 and what in err and out == "", "%r: rc=%d err=%r" % (args, rc, err))
    # a run line with run replaced by schedule, --engine and --resolve too
    rc, out, err = run([CLI, "schedule", "--engine", "seccomp", "--resolve", "wait", "-n", "1",
                        "--seed", "1", "--", "true"], cli_env())
    check(rc == 0 and "initial_backoff" in out, "a run line: rc=%d %r" % (rc, err))
    for dest in ("[::1]:6379", "unix:/run/app.sock", "nosuch.invalid:80"):
        rc, out, err = run([CLI, "schedule", "-n", "1", "--dest", dest], cli_env())
        check(rc == 0 and "destination: " + dest in out, "rc=%d err=%r" % (rc, err))



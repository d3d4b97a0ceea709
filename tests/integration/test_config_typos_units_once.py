"""What an operator meets (issue 24, items 1-3): a mistyped BACKOFFSHIM_*
variable is named with the one meant; a duration without its unit, a budget
no retry fits in and a relative log path are problems; a preloaded process
tells its config problems in one line, where the log goes, and
`check-config` lists them."""
import os
import re
import tempfile

from cli_helpers import CLI, cli_env, shown, write_ini
from lib import SO, check, run

ONE_LINE = re.compile(r"^backoffshim\[\d+\] (\S+): config: (\d+) problems?; "
                      r"see them with: backoffshim (check-config .*)$")


def test_a_typo_in_a_variable_is_named_with_the_intended_one():
    env = cli_env(BACKOFFSHIM_MAX_BACKOF="30s")
    rc, out, err = run([CLI, "check-config", "--env"], env)
    check(rc == 1 and out == 'BACKOFFSHIM_MAX_BACKOF="30s": unknown variable '
          "(did you mean BACKOFFSHIM_MAX_BACKOFF?)\n", "rc=%d out=%r" % (rc, out))
    rc, out, err = run([CLI, "check-config", "--env"], cli_env())
    check(rc == 0 and out == "environment: ok\n", "clean: rc=%d out=%r" % (rc, out))
    # schedule: not listed as if it applied, reported as a problem
    rc, out, err = run([CLI, "schedule", "-n", "1"], env)
    check(rc == 0 and "MAX_BACKOF=" not in out and shown(out, "max_backoff") == "2m"
          and "did you mean BACKOFFSHIM_MAX_BACKOFF?" in err and "problems: 1" in out,
          "schedule: %r %r" % (out, err))
    # the library: one line, which names the command
    rc, out, err = run(["/bin/true"], dict(env, LD_PRELOAD=SO))
    m = ONE_LINE.match(err.rstrip("\n"))
    check(rc == 0 and m and m.group(2) == "1" and m.group(3) == "check-config --env"
          and err.count("\n") == 1, "library: %r" % err)


def test_a_duration_needs_its_unit():
    path = write_ini("[backoff]\ninitial_backoff = 50\nmax_elapsed = 0\n"
                     "[log]\nfile = relative.log\n")
    try:
        rc, out, err = run([CLI, "check-config", path], cli_env())
        rc2, sched, _ = run([CLI, "schedule", "--config", path, "-n", "1"], cli_env())
    finally:
        os.unlink(path)
    check(rc == 1 and out.splitlines() == [
        '%s:2: initial_backoff = "50": a duration needs its unit: write 50ms or 50s' % path,
        '%s:5: file = "relative.log": not an absolute path (write it from /)' % path],
        "check-config: rc=%d %r" % (rc, out))
    check(shown(sched, "initial_backoff") == "1s", "the bare number was used: %r" % sched)
    rc, out, err = run([CLI, "run", "--initial-backoff", "50", "--", "true"], cli_env())
    check(rc == 125 and "write 50ms or 50s" in err, "run: rc=%d %r" % (rc, err))
    rc, out, err = run([CLI, "run", "--help"], cli_env())
    check("bare number is seconds" not in out and "write 50ms or 50s" in out.replace("\n", " "),
          "run --help: %r" % out)


def test_a_budget_shorter_than_the_first_wait_is_a_problem():
    rc, out, err = run([CLI, "schedule", "--max-elapsed", "1s", "-n", "1"], cli_env())
    check(rc == 0 and "max_elapsed: 1.00s is not above the first wait 1.00s: no failed "
          "connect is ever retried" in err, "schedule: %r" % err)
    rc, out, err = run([CLI, "check-config", "--env"], cli_env(BACKOFFSHIM_MAX_ELAPSED="500ms"))
    check(rc == 1 and out.startswith("environment: max_elapsed: 500ms is not above the first "
                                     "wait 1.00s"), "check-config --env: %r" % out)
    rc, out, err = run([CLI, "check-config", "--env"],
                       cli_env(BACKOFFSHIM_MAX_ELAPSED="1s", BACKOFFSHIM_INITIAL_BACKOFF="250ms"))
    check(rc == 0, "a budget above the first wait: %r" % out)


def test_cannot_names_the_error():
    rc, out, err = run([CLI, "check-config", "/nonexistent/x.ini"], cli_env())
    check(rc == 1 and out == "/nonexistent/x.ini: cannot open file: No such file or "
          "directory\n", "%r" % out)
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "no", "such.log")
        rc, out, err = run(["/bin/true"], cli_env(LD_PRELOAD=SO, BACKOFFSHIM_LOG_FILE=log))
        check(rc == 0 and err.count("\n") == 1 and err.rstrip().endswith(
            "the log file: cannot open for appending: No such file or directory, logging to "
            "stderr"), "library: %r" % err)


def test_config_problems_are_one_line_per_process_where_the_log_goes():
    text = "[backoff]\n" + "".join("bogus%d = 1\n" % i for i in range(20))
    path = write_ini(text)
    try:
        env = dict(cli_env(LD_PRELOAD=SO), BACKOFFSHIM_CONFIG=path)
        rc, out, err = run(["timeout", "5", "sh", "-c", "/bin/true; exit 0"], env)
        lines = err.splitlines()
        check(rc == 0 and len(lines) == 3, "one line per process: %r" % lines)
        for line, prog in zip(lines, ("timeout", "sh", "true")):
            m = ONE_LINE.match(line)
            check(m and m.group(1) == prog and m.group(2) == "20" and
                  m.group(3) == "check-config --env " + path, "line: %r" % line)
        rc, listed, _ = run([CLI, "check-config", path], cli_env())
        check(rc == 1 and len(listed.splitlines()) == 20, "check-config: %r" % listed)
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "shim.log")
            rc, out, err = run(["/bin/true"], dict(env, BACKOFFSHIM_LOG_FILE=log))
            logged = open(log).read().splitlines()
            check(rc == 0 and err == "" and len(logged) == 1 and
                  "config: 20 problems; see them" in logged[0], "log file: %r %r" % (err, logged))
        rc, out, err = run(["/bin/true"], dict(env, BACKOFFSHIM_LOG="off"))
        check(rc == 0 and err == "", "level off: %r" % err)
    finally:
        os.unlink(path)

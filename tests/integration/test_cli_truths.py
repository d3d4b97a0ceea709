"""Operator truths of the backoffshim command: a destination reset cannot
parse, two output formats at once, and check-config on the settings the
library merges from the file and the environment."""
import os

from cli_helpers import CLI, cli_env, write_ini
from lib import SO, check, new_table, run


def test_reset_of_a_destination_that_cannot_be_parsed_is_a_usage_error():
    """An address with a bad port, or no port, is no destination and no name
    lookup the library keeps (it keeps none of an address written out): a
    usage error naming the argument, not 'is not backing off'."""
    table = new_table()
    for dest in ("127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1", "10.1.2.3:http",
                 "[::1]:99999", "[::1]", "::1:80"):
        rc, out, err = run([CLI, "reset", "--table", table, dest], cli_env())
        check(rc == 2 and out == "" and
              err == "backoffshim reset: '%s' is not ADDR:PORT, [V6]:PORT or NAME[:SERVICE]\n"
                     "Try 'backoffshim reset --help'.\n" % dest,
              "reset %s: rc=%d out=%r err=%r" % (dest, rc, out, err))
    # a name lookup, with or without a service (libuv resolves with none), is
    # a destination the table may hold: still taken
    for dest in ("db.internal:5432", "db.internal:postgres", "bogus"):
        rc, out, err = run([CLI, "reset", "--table", table, dest], cli_env())
        check(rc == 0 and err == "", "reset %s: rc=%d out=%r err=%r" % (dest, rc, out, err))


def test_two_output_formats_of_status_are_a_usage_error():
    """--json and --prometheus exclude each other, as the usage line says
    ([--json | --prometheus]); the last one won before. The same one twice
    is still one format."""
    for args in (["--json", "--prometheus"], ["--prometheus", "--json"],
                 ["--json", "--table", "x", "--prometheus"]):
        rc, out, err = run([CLI, "status"] + args, cli_env())
        check(rc == 2 and out == "" and
              err == "backoffshim status: --json and --prometheus exclude each other\n"
                     "Try 'backoffshim status --help'.\n",
              "status %s: rc=%d out=%r err=%r" % (" ".join(args), rc, out, err))
    rc, out, err = run([CLI, "status", "--json", "--json"], cli_env())
    check(rc == 0 and out.startswith("[") and err == "", "--json twice: %d %r %r" % (rc, out, err))


def test_check_config_env_judges_the_file_and_the_variables_together():
    """A clash that needs both the file (initial_backoff = 10s) and a
    variable (BACKOFFSHIM_MAX_ELAPSED=5s) is the one the library counts in
    its problems line and schedule prints: check-config --env FILE reports
    it, as the file's, as it reports a clash within the file. Without
    --env the file alone is judged; the variables alone are still ok."""
    path = write_ini("[backoff]\ninitial_backoff = 10s\n")
    try:
        env = dict(cli_env(BACKOFFSHIM_MAX_ELAPSED="5s"), BACKOFFSHIM_CONFIG=path)
        rc, out, err = run(["/bin/true"], dict(env, LD_PRELOAD=SO))
        check("config: 1 problem" in err, "the library: %r" % err)
        rc, out, err = run([CLI, "schedule", "-n", "1"], env)
        check("max_elapsed: 5.00s is not above the first wait 10.00s" in err,
              "schedule: %r" % err)
        rc, out, err = run([CLI, "check-config", "--env", path], env)
        check(rc == 1 and out == "%s: max_elapsed: 5.00s is not above the first wait 10.00s: no "
              "failed connect is ever retried (raise max_elapsed, or lower initial_backoff)\n"
              "environment: ok\n" % path, "check-config --env FILE: rc=%d %r" % (rc, out))
        rc, out, err = run([CLI, "check-config", path], env)
        check(rc == 0 and out == path + ": ok\n", "check-config FILE: rc=%d %r" % (rc, out))
        # a variable that mends the file's own clash: ok together
        with open(path, "a") as f:
            f.write("max_elapsed = 2s\n")
        rc, out, err = run([CLI, "check-config", path], env)
        check(rc == 1 and "max_elapsed: 2.00s is not above" in out, "the file alone: %r" % out)
        env["BACKOFFSHIM_MAX_ELAPSED"] = "1m"
        rc, out, err = run([CLI, "check-config", "--env", path], env)
        check(rc == 0 and out == "%s: ok\nenvironment: ok\n" % path,
              "mended by the variable: rc=%d %r" % (rc, out))
        # a clash of the variables alone is counted once, as the library
        # counts it: in the settings it reads, named by the file
        with open(path, "w") as f:
            f.write("[backoff]\njitter = 0.1\n")
        env["BACKOFFSHIM_MAX_ELAPSED"] = "500ms"
        rc, out, err = run([CLI, "check-config", "--env", path], env)
        check(rc == 1 and out.count("max_elapsed: 500ms is not above") == 1 and
              out.startswith(path + ": max_elapsed") and out.endswith("environment: ok\n"),
              "the variables' clash: rc=%d %r" % (rc, out))
        rc, out, err = run(["/bin/true"], dict(env, LD_PRELOAD=SO))
        check("config: 1 problem; see them with: backoffshim check-config --env " + path in err,
              "the library: %r" % err)
    finally:
        os.unlink(path)


def test_run_of_a_fifo_fails_as_env_does():
    """An executable FIFO as the command: 'Permission denied', 126, at once,
    as env says. run opened it to read its header first, and hung."""
    import tempfile
    d = tempfile.mkdtemp()
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    os.chmod(fifo, 0o755)
    try:
        rc_env, _, _ = run(["env", fifo], cli_env(), timeout=10)
        rc, out, err = run([CLI, "run", "--", fifo], cli_env(), timeout=10)
        check(rc == rc_env == 126 and "Permission denied" in err, "run: rc=%d (env: %d) %r"
              % (rc, rc_env, err))
    finally:
        os.unlink(fifo)
        os.rmdir(d)


def test_run_from_a_path_ld_preload_cannot_carry_says_so():
    """The command and library installed under a directory with a space:
    the loader splits LD_PRELOAD at spaces and colons, so every process
    printed two loader errors and ran without the shim. run refuses (125),
    saying why."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(suffix=" with space")
    try:
        shutil.copy(CLI, d)
        shutil.copy(SO, d)
        rc, out, err = run([os.path.join(d, "backoffshim"), "run", "--", "true"], cli_env())
        check(rc == 125 and "its path has a space or a colon" in err and "ld.so" not in err,
              "rc=%d %r" % (rc, err))
    finally:
        shutil.rmtree(d)


def test_output_that_cannot_be_written_is_an_error():
    """status into a full disk, or help into a closed stdout: the output is
    lost, and the exit status said 0, so a monitoring script took nothing
    for success. Now 1 and a line, as coreutils do; `run` keeps the
    program's status."""
    env = cli_env(BACKOFFSHIM_SHARED=new_table())
    for what, cmd in (("status --json into /dev/full", 'exec "$@" status --json >/dev/full'),
                      ("--help into a closed stdout", 'exec "$@" --help >&-')):
        rc, _, err = run(["sh", "-c", cmd, "sh", CLI], env)
        check(rc == 1 and "write error" in err, "%s: rc=%d %r" % (what, rc, err))
    rc, _, err = run(["sh", "-c", 'exec "$@" run -- sh -c "exit 4" >&-', "sh", CLI], env)
    check(rc == 4, "run keeps the program's status: rc=%d %r" % (rc, err))

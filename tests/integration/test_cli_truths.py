"""Operator truths of the backoffshim command: a destination reset cannot
parse, two output formats at once, and check-config on the settings the
library merges from the file and the environment."""
from cli_helpers import CLI, cli_env
from lib import check, new_table, run


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

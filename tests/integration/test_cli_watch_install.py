"""Issue 24, items 4-6: status --watch, completion of reset's destinations
(bash, zsh, fish), make install/uninstall into an empty PREFIX, and the
package's documentation."""
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time

from cli_helpers import CLI, cli_env
from lib import ROOT, TestSkip, base_env, check, free_port, new_table, prog, run, shim_env

HEADING = "Every 0.2s: backoffshim status"


def _failing_table():
    """A table with one destination that refused: (table, "127.0.0.1:PORT")."""
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_MAX_ATTEMPTS="2")
    rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
    check(rc == 1, "client: rc=%d %r" % (rc, err))
    return table, "127.0.0.1:%d" % port


def _read_until(fd, want, count, timeout=20):
    data = b""
    end = time.monotonic() + timeout
    while data.count(want) < count and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace")


def test_status_watch_redraws_until_interrupted():
    table, dest = _failing_table()
    # not a terminal: tables one after another, a blank line between
    p = subprocess.Popen([CLI, "status", "--watch", "0.2", "--table", table],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    out = _read_until(p.stdout.fileno(), HEADING.encode(), 3)
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=10)
    out += rest.decode()
    check(p.returncode == 0 and err == b"", "Ctrl-C: rc=%r %r" % (p.returncode, err))
    frames = out.split("\n\n" + HEADING)
    check(len(frames) >= 3 and out.startswith(HEADING) and "\x1b" not in out,
          "frames: %r" % out[:600])
    check(all(dest in f and "DESTINATION" in f for f in frames), "a frame lacks %s: %r" % (dest, out))
    # a terminal: the screen cleared each time (no colour), the rows cut to
    # its height; SIGTERM ends it too
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(cli_env())
        os.execv(CLI, [CLI, "status", "--watch=0.2", "--table", table])
    try:
        text = _read_until(fd, b"\x1b[2J", 2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "tty: status %r" % status)
    check(text.count("\x1b[H\x1b[2J") >= 2 and dest in text, "tty: %r" % text[:400])
    codes = set(re.findall(r"\x1b\[[0-9;?]*[A-Za-z]", text))
    check(codes == {"\x1b[H", "\x1b[2J"} and text.count("\x1b") == 2 * text.count("\x1b[2J"),
          "escape codes other than home and clear: %r" % text[:400])
    # bounds and usage errors
    for args in (["--watch", "0"], ["--watch", "99999"], ["--watch=x"], ["--watch", "--json"],
                 ["--watch", "1", "2"], ["--gc", "--watch"]):
        rc, out, err = run([CLI, "status"] + args, cli_env())
        check(rc == 2 and out == "" and "status --help" in err, "%r: %d %r" % (args, rc, err))
    # the other subcommand's options, named as typed (as getopt names an
    # option it does not know), abbreviated or not
    for sub, arg in (("reset", "--watch"), ("reset", "--wat=3"), ("reset", "--js"),
                     ("reset", "--prometheus"), ("reset", "--gc"), ("status", "--al")):
        rc, out, err = run([CLI, sub, arg], cli_env())
        check(rc == 2 and out == "" and "unknown option '%s'" % arg.split("=")[0] in err,
              "%s %s: %d %r" % (sub, arg, rc, err))


def test_completion_of_reset_names_the_tables_destinations():
    table, dest = _failing_table()
    port = dest.rsplit(":", 1)[1]
    env = dict(cli_env(), PATH=os.path.dirname(CLI) + ":" + os.environ.get("PATH", ""))
    # bash, as bash splits the line at ':'
    line = "backoffshim reset --table %s 127.0.0.1:" % table
    script = ('source %s; complete() { :; }; c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'COMPREPLY=(); _backoffshim; echo "${COMPREPLY[*]}"; }; '
              'c backoffshim reset --table %s ""; COMP_LINE="%s"; COMP_POINT=${#COMP_LINE}; '
              'c backoffshim reset --table %s 127.0.0.1 : ""; unset COMP_LINE; '
              'c backoffshim reset --a; c backoffshim status --wa'
              % (os.path.join(ROOT, "completions", "backoffshim"), table, line, table))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, env=env)
    check(r.returncode == 0 and r.stdout.splitlines() == [dest, port, "--all", "--watch"],
          "bash: %r %r" % (r.stdout, r.stderr))
    if shutil.which("fish"):
        r = subprocess.run(["fish", "--no-config", "-c",
                            "source %s; complete -C 'backoffshim reset --table %s '; "
                            "complete -C 'backoffshim st'"
                            % (os.path.join(ROOT, "completions", "backoffshim.fish"), table)],
                           capture_output=True, text=True, timeout=30, env=env)
        got = [l.split("\t")[0] for l in r.stdout.splitlines()]
        check(r.returncode == 0 and dest in got and "status" in got, "fish: %r %r"
              % (r.stdout, r.stderr))
    if shutil.which("zsh"):
        zfile = os.path.join(ROOT, "completions", "_backoffshim")
        r = subprocess.run(["zsh", "-n", zfile], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "zsh -n: %r" % r.stderr)
        # its destination lister, with zsh's completion builtins stood in for
        script = ('_arguments() { return 1 }; _call_program() { shift; "$@" }; '
                  'compadd() { print -rl -- ${(P)2} }; source %s; '
                  'words=(backoffshim reset --table %s ""); CURRENT=5; _backoffshim_dests'
                  % (zfile, table))
        r = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True,
                           timeout=30, env=env)
        check(r.returncode == 0 and r.stdout.split() == [dest], "zsh: %r %r" % (r.stdout, r.stderr))


def _make(target, build, **vars):
    cmd = ["make", "-s", target, "BUILD=" + build] + ["%s=%s" % kv for kv in vars.items()]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "%s failed: %s" % (" ".join(cmd), r.stderr[-1500:]))


def _tree(top):
    return sorted(os.path.relpath(os.path.join(d, n), top)
                  for d, ds, fs in os.walk(top) for n in ds + fs)


def test_install_then_uninstall_leaves_an_empty_prefix_empty():
    tmp = tempfile.mkdtemp()
    try:
        build, pfx = os.path.join(tmp, "build"), os.path.join(tmp, "pfx")
        os.mkdir(pfx)
        _make("install", build, PREFIX=pfx)
        _make("install", build, PREFIX=pfx)  # again: the first's record is kept
        tree = _tree(pfx)
        for f in ("share/zsh/site-functions/_backoffshim",
                  "share/fish/vendor_completions.d/backoffshim.fish",
                  "share/bash-completion/completions/backoffshim"):
            check(f in tree, "%s not installed: %r" % (f, tree))
        _make("uninstall", build, PREFIX=pfx)
        check(_tree(pfx) == [], "left after uninstall: %r" % _tree(pfx))
        # a directory that was there before (an existing PREFIX/bin) stays,
        # and so does one that holds another file
        os.mkdir(os.path.join(pfx, "bin"))
        _make("install", build, PREFIX=pfx)
        open(os.path.join(pfx, "share", "man", "man1", "other.1"), "w").close()
        _make("uninstall", build, PREFIX=pfx)
        check(_tree(pfx) == ["bin", "share", "share/man", "share/man/man1",
                             "share/man/man1/other.1"], "after uninstall: %r" % _tree(pfx))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_example_config_points_to_pages_that_exist():
    with open(os.path.join(ROOT, "config", "backoffshim.ini")) as f:
        text = f.read()
    check("README's policy table" not in text and "docs/configuration.md" in text and
          "backoffshim.ini(5)" in text, "config/backoffshim.ini's pointers")
    with open(os.path.join(ROOT, "docs", "configuration.md")) as f:
        check("| `policy =` |" in f.read(), "docs/configuration.md has no policy table")

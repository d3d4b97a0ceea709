"""The backoffshim command: run (exec with the shim preloaded, end to end
against a late server), --help/--version, and make install (issue #4).
schedule and check-config: test_cli_config.py."""
import os
import re
import shutil
import subprocess
import tempfile

from cli_helpers import CLI, GOOD_INI, cli_env
from lib import (BUILD, ROOT, SO, TestSkip, base_env, check, check_gaps, finish, free_port, late_server_run,
                 prog, run, spawn)


# --- run ---------------------------------------------------------------

def test_run_rides_out_a_late_server():
    port = free_port()
    cmd = [CLI, "run", "--initial-backoff", "50ms", "--max-backoff", "400ms",
           "--multiplier", "1.6", "--jitter", "0.2", "--max-elapsed", "20s", "--",
           prog("legacy_client"), "127.0.0.1", str(port)]
    rc, out, err, gaps = late_server_run(cmd, cli_env(), port)
    check(rc == 0, "rc=%d err=%r" % (rc, err[-600:]))
    check("server says: hello" in out, "no greeting: %r" % out)
    check_gaps(gaps, "backoffshim run")
    check(re.search(r"backoffshim\[\d+\](?: [^ :]+)?: connect 127\.0\.0\.1:%d: .*next attempt in" % port, err),
          "no wait lines from the preloaded shim: %r" % err[-600:])


def test_run_without_a_server_gives_up_with_the_programs_exit_code():
    port = free_port()
    rc, out, err = run([CLI, "run", "--initial-backoff", "20ms", "--max-attempts", "3",
                        "--", prog("legacy_client"), "127.0.0.1", str(port)], cli_env())
    check(rc == 1, "legacy_client's own failure code expected: rc=%d err=%r" % (rc, err))
    check("giving up after 3 attempts" in err and "Connection refused" in err,
          "budget not applied: %r" % err)


def test_run_propagates_exit_code():
    for code in (0, 7, 255):
        rc, out, err = run([CLI, "run", "--", "sh", "-c", "exit %d" % code], cli_env())
        check(rc == code, "exit %d came back as %d (%r)" % (code, rc, err))


def test_run_execs_in_place():
    p = spawn([CLI, "run", "--", "sh", "-c", "echo $$; grep -c libbackoffshim /proc/$$/maps"],
              cli_env())
    rc, out, err = finish(p, 10)
    lines = out.split()
    check(rc == 0 and lines[0] == str(p.pid),
          "sh runs as pid %r, backoffshim was %d (a fork?): %r" % (lines[:1], p.pid, err))
    check(int(lines[1]) > 0, "library not mapped in the command: %r" % out)


def test_run_appends_to_ld_preload():
    show = ["sh", "-c", 'echo "$LD_PRELOAD"; grep -c -e libbackoffshim -e libm /proc/$$/maps']
    rc, out, err = run([CLI, "run", "--"] + show, cli_env(LD_PRELOAD="libm.so.6"))
    check(rc == 0, "rc=%d err=%r" % (rc, err))
    lines = out.splitlines()
    check(lines[0] == "libm.so.6:" + os.path.realpath(SO), "LD_PRELOAD=%r" % lines[0])
    rc, out, err = run([CLI, "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], cli_env())
    check(out.strip() == os.path.realpath(SO), "alone: LD_PRELOAD=%r" % out)
    # already preloaded: not a second copy
    rc, out, err = run([CLI, "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
                       cli_env(LD_PRELOAD="libm.so.6 " + SO))
    check(out.strip() == "libm.so.6 " + SO, "shim preloaded twice: %r" % out)


def test_run_options_set_the_variables():
    cmd = [CLI, "run", "--initial-backoff", "250ms", "--max-backoff=30s", "--multiplier", "2",
           "--jitter", "0.1", "--max-elapsed", "1m", "--max-attempts", "5", "--policy",
           "exponential", "--config", "config/backoffshim.ini", "--pace", "--log", "debug",
           "--", "sh", "-c", "env | grep ^BACKOFFSHIM_ | sort"]
    p = spawn(cmd, base_env(BACKOFFSHIM_MAX_BACKOFF="1h"), cwd=ROOT)
    rc, out, err = finish(p, 10)
    check(rc == 0, "rc=%d err=%r" % (rc, err))
    got = dict(l.split("=", 1) for l in out.splitlines())
    want = {"INITIAL_BACKOFF": "250ms", "MAX_BACKOFF": "30s", "MULTIPLIER": "2",
            "JITTER": "0.1", "MAX_ELAPSED": "1m", "MAX_ATTEMPTS": "5", "POLICY": "exponential",
            "CONFIG": GOOD_INI, "NONBLOCKING": "pace", "LOG": "debug"}
    want = {"BACKOFFSHIM_" + k: v for k, v in want.items()}
    check(got == want, "variables: %r" % got)


def test_run_usage_errors():
    cases = [
        (["--jitter", "1.5", "--", "true"], "--jitter '1.5': must be between 0 and 1"),
        (["--initial-backoff", "2 weeks", "--", "true"], "unknown unit"),
        (["--max-attempts", "-1", "--", "true"], "must not be negative"),
        (["--policy", "bogus", "--", "true"], "not one of grpc"),
        (["--log", "loud", "--", "true"], "not one of off"),
        (["--config", "/nonexistent.ini", "--", "true"], "/nonexistent.ini"),
        (["--bogus", "--", "true"], "unknown option '--bogus'"),
        (["--jitter"], "needs a value"),
        ([], "missing the command"),
        (["--"], "missing the command"),
    ]
    for args, what in cases:
        rc, out, err = run([CLI, "run"] + args, cli_env())
        check(rc == 125, "%r: rc=%d, expected 125 (as env and timeout)" % (args, rc))
        check(what in err and "backoffshim run --help" in err, "%r: stderr %r" % (args, err))
        check(out == "", "%r: stdout %r" % (args, out))
    rc, out, err = run([CLI, "run", "--", "/nonexistent/cmd"], cli_env())
    check(rc == 127 and "cannot run '/nonexistent/cmd'" in err, "rc=%d err=%r" % (rc, err))
    with tempfile.TemporaryDirectory() as d:
        plain = os.path.join(d, "not-executable")
        open(plain, "w").close()
        rc, out, err = run([CLI, "run", "--", plain], cli_env())
        check(rc == 126 and "cannot run" in err, "not executable: rc=%d err=%r" % (rc, err))


GO_NOTE_C = r"""
/* the note the Go linker puts in every Go program */
__asm__(".section .note.go.buildid,\"a\",@note\n"
        ".balign 4\n.long 4, 8, 4\n.asciz \"Go\"\n.byte 0\n.ascii \"abcdefgh\"\n"
        ".previous\n");
int main(void) { return 3; }
"""


def build_program(d, name, source, *flags):
    src = os.path.join(d, name + ".c")
    with open(src, "w") as f:
        f.write(source)
    out = os.path.join(d, name)
    r = subprocess.run(["cc", "-o", out, src] + list(flags), capture_output=True, text=True)
    return out if r.returncode == 0 else None


def setid_cases(d):
    """Set-id programs that do and do not make the loader ignore
    LD_PRELOAD, for whoever runs the test."""
    cases = []
    mine = os.path.join(d, "setuid-mine")
    shutil.copy("/bin/true", mine)
    os.chmod(mine, 0o4755)  # owned by the runner: exec changes no id
    cases.append(([mine], 0, None))
    if os.getuid() == 0:
        other = os.path.join(d, "setuid-other")
        shutil.copy("/bin/true", other)
        os.chown(other, 65534, 65534)
        os.chmod(other, 0o4755)
        cases.append(([other], 0, "setuid"))
    elif os.path.exists("/bin/su") and os.stat("/bin/su").st_mode & 0o4000 and \
            os.stat("/bin/su").st_uid != os.getuid():
        # (in a user namespace that does not map root, su's owner shows as
        # the overflow uid, the set-id bit is ignored and no warning is due)
        cases.append((["/bin/su", "--version"], 0, "setuid"))
    return cases


def test_run_warns_when_the_shim_cannot_act():
    """With the preload engine, a static binary, a Go one (told by the Go
    linker's note), a script whose interpreter is static and a program whose
    set-id bit changes the runner's id get one warning line each and run
    anyway with their own exit status; a dynamic one, a set-id one that
    changes no id and a C program that prints Go's build-id text get none.
    With auto, the static and Go ones run under the seccomp engine without a
    warning (--log debug says so), and the set-id one still gets its line."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        cases = [(["true"], 0, None)] + setid_cases(d)
        static = build_program(d, "static", "int main(void) { return 3; }\n", "-static")
        if static:
            cases.append(([static], 3, "statically linked"))
            script = os.path.join(d, "script")
            with open(script, "w") as f:
                f.write("#!%s\n" % static)
            os.chmod(script, 0o755)
            cases.append(([script], 3, "its interpreter %s: it is statically linked" % static))
        go = build_program(d, "go", GO_NOTE_C)
        cases.append(([go], 3, "Go program"))
        text = build_program(d, "text", 'const char *s = "Go build ID: \\"x\\"";\n'
                             "int main(void) { return 3; }\n")
        cases.append(([text], 3, None))
        for cmd, want_rc, why in cases:
            rc, out, err = run([CLI, "run", "--engine", "preload", "--"] + cmd, cli_env())
            warnings = [l for l in err.splitlines() if "warning" in l]
            check(rc == want_rc, "%r: rc=%d" % (cmd, rc))
            if why:
                check(len(warnings) == 1 and why in warnings[0] and "no effect" in warnings[0],
                      "%r: %r" % (cmd, err))
            else:
                check(not warnings, "%r: %r" % (cmd, err))
            rc, out, err = run([CLI, "run", "--log", "debug", "--"] + cmd, cli_env())
            warnings = [l for l in err.splitlines() if "warning" in l]
            seccomp = why and ("statically linked" in why or "Go program" in why)
            check(rc == want_rc, "auto %r: rc=%d %r" % (cmd, rc, err))
            check(("engine seccomp for" in err) == bool(seccomp), "auto %r: %r" % (cmd, err))
            check(len(warnings) == (1 if why and not seccomp else 0), "auto %r: %r" % (cmd, err))


def test_run_warns_about_the_file_execvp_runs():
    """The warning looks along PATH as execvp does: a directory of the
    command's name earlier on PATH is passed over, and an empty entry is
    the current directory."""
    with tempfile.TemporaryDirectory() as d:
        static = build_program(d, "prog", "int main(void) { return 3; }\n", "-static")
        if not static:
            return
        first, second = os.path.join(d, "first"), os.path.join(d, "second")
        os.makedirs(os.path.join(first, "stcmd"))
        os.makedirs(second)
        shutil.copy(static, os.path.join(second, "stcmd"))
        for path, cwd in ((first + ":" + second, None), (first + ":", second)):
            env = cli_env()
            env["PATH"] = path
            r = subprocess.run([CLI, "run", "--engine", "preload", "--", "stcmd"], env=env, cwd=cwd,
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 3 and r.stderr.count("statically linked") == 1,
                  "PATH=%r: rc=%d %r" % (path, r.returncode, r.stderr))


# --- help, version -------------------------------------------------------

def test_help_and_version():
    with open(os.path.join(ROOT, "shim", "common", "version.h")) as f:
        version = re.search(r'#define BS_VERSION "([^"]+)"', f.read()).group(1)
    rc, out, err = run([CLI, "--version"], cli_env())
    want = "backoffshim %s\nlibrary: %s (%s)\n" % (version, os.path.realpath(SO), version)
    check(rc == 0 and out == want, "version: %r, want %r" % (out, want))
    for sub in (None, "run", "schedule", "check-config", "status", "reset"):
        args = [CLI] + ([sub] if sub else []) + ["--help"]
        rc, out, err = run(args, cli_env())
        want = "Usage: backoffshim " + (sub or "COMMAND")
        check(rc == 0 and out.startswith(want) and err == "", "%r: rc=%d %r" % (args, rc, out))
        check("\x1b" not in out, "colour codes in %r" % args)
    rc, out, err = run([CLI, "help", "schedule"], cli_env())
    check(rc == 0 and out.startswith("Usage: backoffshim schedule"), out)
    for args in ([], ["frobnicate"], ["--bogus"]):
        rc, out, err = run([CLI] + args, cli_env())
        check(rc == 2 and "backoffshim --help" in err and out == "", "%r: %d %r" % (args, rc, err))


# --- make install --------------------------------------------------------

def _make_install(build, **vars):
    cmd = ["make", "-s", "install", "BUILD=" + build] + ["%s=%s" % kv for kv in vars.items()]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "%s failed: %s" % (" ".join(cmd), r.stderr[-1500:]))


def test_make_install_destdir_prefix():
    tmp = tempfile.mkdtemp()
    try:
        # A build directory of its own: the shared build/ keeps its PREFIX.
        build = os.path.join(tmp, "build")
        _make_install(build, DESTDIR=os.path.join(tmp, "dest"), PREFIX="/usr")
        usr = os.path.join(tmp, "dest", "usr")
        binary = os.path.join(usr, "bin", "backoffshim")
        lib = os.path.join(usr, "lib", "libbackoffshim.so")
        ini = os.path.join(usr, "share", "backoffshim", "backoffshim.ini")
        extra = [os.path.join(usr, "share", "man", "man1", "backoffshim.1"),
                 os.path.join(usr, "share", "man", "man5", "backoffshim.ini.5"),
                 os.path.join(usr, "share", "bash-completion", "completions", "backoffshim")]
        for f in [binary, lib, ini] + extra:
            check(os.path.isfile(f), "%s not installed" % f)
        written = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(tmp, "dest"))
                         for f in fs)
        # and the zsh and fish completions, and the list of the directories
        # it made (test_cli_watch_install.py)
        check(len(written) == 9, "make install wrote %r" % written)
        check(os.access(binary, os.X_OK), "binary not executable")
        with open(ini) as a, open(GOOD_INI) as b:
            check(a.read() == b.read(), "installed config differs")
        # The installed command finds the installed library (bin/../lib).
        rc, out, err = run([binary, "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], cli_env())
        check(rc == 0 and out.strip() == os.path.realpath(lib), "rc=%d out=%r err=%r"
              % (rc, out, err))
        rc, out, err = run([binary, "check-config", ini], cli_env())
        check(rc == 0, "installed example config: %r" % out)
        # Alone, with nothing at the compiled-in /usr/lib: a clear error.
        alone = os.path.join(tmp, "alone", "backoffshim")
        os.makedirs(os.path.dirname(alone))
        shutil.copy(binary, alone)
        if not os.path.exists("/usr/lib/libbackoffshim.so"):
            rc, out, err = run([alone, "run", "--", "true"], cli_env())
            check(rc == 125 and "cannot find libbackoffshim.so" in err and
                  "/usr/lib/libbackoffshim.so" in err, "rc=%d err=%r" % (rc, err))
        # PREFIX is compiled in: a copy elsewhere finds PREFIX/lib.
        pfx = os.path.join(tmp, "pfx")
        _make_install(build, PREFIX=pfx)
        shutil.copy(os.path.join(pfx, "bin", "backoffshim"), alone)
        rc, out, err = run([alone, "run", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], cli_env())
        want = os.path.realpath(os.path.join(pfx, "lib", "libbackoffshim.so"))
        check(rc == 0 and out.strip() == want, "rc=%d out=%r err=%r" % (rc, out, err))
        # make uninstall removes every file make install wrote, and nothing else
        dest = os.path.join(tmp, "dest")
        keep = os.path.join(usr, "share", "man", "man1", "other.1")
        open(keep, "w").close()
        cmd = ["make", "-s", "uninstall", "BUILD=" + build, "DESTDIR=" + dest, "PREFIX=/usr"]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
        left = sorted(os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs)
        check(r.returncode == 0 and left == [keep], "after make uninstall: %r %r" % (left, r.stderr))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_man_pages_and_completion():
    """man --warnings reports nothing on the pages make installs (made from
    man/ with the version and the library's place filled in); the
    completion offers the commands."""
    if not shutil.which("man"):
        raise TestSkip("man is not installed")
    with open(os.path.join(ROOT, "shim", "common", "version.h")) as f:
        version = re.search(r'#define BS_VERSION "([^"]+)"', f.read()).group(1)
    for page in ("backoffshim.1", "backoffshim.ini.5"):
        path = os.path.join(BUILD, "man", page)
        with open(path) as f:
            text = f.read()
        check("@" not in text.replace("\\(at", "") and '"backoffshim %s"' % version in text,
              "%s: placeholders left or another version: %r" % (page, text[:200]))
        r = subprocess.run(["man", "--warnings", "-l", path],
                           capture_output=True, text=True, timeout=60,
                           env=dict(base_env(), MANWIDTH="80", LC_ALL="C.UTF-8"))
        check(r.returncode == 0 and r.stderr == "" and "backoffshim" in r.stdout,
              "%s: rc=%d %r" % (page, r.returncode, r.stderr))
    script = ('source %s; complete() { :; }; c() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'COMPREPLY=(); _backoffshim; echo "${COMPREPLY[*]}"; }; '
              'c backoffshim st; c backoffshim status --; c backoffshim schedule --ini; '
              'c backoffshim run -- bas' % os.path.join(ROOT, "completions", "backoffshim"))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and len(lines) == 4 and lines[0] == "status" and
          "--json" in lines[1].split() and lines[2] == "--initial-backoff" and
          "bash" in lines[3].split(),
          "completion: %r %r" % (r.stdout, r.stderr))

"""make deb (issue 11): a Debian package that lintian finds no error in,
that installs with dpkg into a throwaway root, works from there, and is
purged without leaving a file."""
import gzip
import os
import re
import shutil
import subprocess
import tempfile

from lib import ROOT, TestSkip, base_env, check, free_port, prog, run


def _dpkg(root, *args):
    cmd = ["dpkg", "--root=" + root, "--force-not-root", "--force-depends",
           "--force-script-chrootless", "--log=/dev/null"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_make_deb_installs_works_and_purges():
    if not shutil.which("dpkg-deb"):
        raise TestSkip("dpkg-deb is not installed")
    r = subprocess.run(["make", "-s", "deb"], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    check(r.returncode == 0, "make deb: %s" % r.stderr[-1500:])
    debs = [l for l in r.stdout.splitlines() if l.endswith(".deb")]
    deb = debs[-1] if debs else r.stdout
    check(re.search(r"build/backoffshim_[0-9.]+_\w+\.deb$", deb) and os.path.isfile(deb),
          "make deb wrote %r" % deb)
    if shutil.which("lintian"):
        li = subprocess.run(["lintian", "--tag-display-limit", "0", deb], capture_output=True,
                            text=True, timeout=600)
        errors = [l for l in li.stdout.splitlines() if l.startswith("E:")]
        check(not errors, "lintian: %r" % errors)
    with tempfile.TemporaryDirectory() as root:
        for d in ("var/lib/dpkg/updates", "var/lib/dpkg/info"):
            os.makedirs(os.path.join(root, d))
        open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
        r = _dpkg(root, "-i", deb)
        if r.returncode != 0 and os.geteuid() != 0:
            raise TestSkip("dpkg cannot install into a directory as this user: %s"
                           % r.stderr[-300:])
        check(r.returncode == 0, "dpkg -i: %s" % r.stderr[-1500:])
        files = sorted(os.path.relpath(os.path.join(d, f), root)
                       for d, _, fs in os.walk(root) for f in fs
                       if not os.path.join(d, f).startswith(os.path.join(root, "var")))
        for want in ("usr/bin/backoffshim", "etc/backoffshim.ini",
                     "usr/share/man/man1/backoffshim.1.gz",
                     "usr/share/man/man5/backoffshim.ini.5.gz",
                     "usr/share/bash-completion/completions/backoffshim",
                     "usr/share/doc/backoffshim/copyright",
                     "usr/share/zsh/vendor-completions/_backoffshim",
                     "usr/share/fish/vendor_completions.d/backoffshim.fish",
                     "usr/share/doc/backoffshim/README.md"):
            check(want in files, "%s not installed: %r" % (want, files))
        # the docs, and a changelog that says what the release holds
        docs = sorted(f for f in os.listdir(os.path.join(ROOT, "docs")))
        shipped = sorted(os.path.basename(f) for f in files
                         if f.startswith("usr/share/doc/backoffshim/docs/"))
        check(shipped == docs, "docs shipped %r, docs/ holds %r" % (shipped, docs))
        with gzip.open(os.path.join(root, "usr/share/doc/backoffshim/changelog.gz"), "rt") as f:
            log = f.read()
        items = [l for l in log.splitlines() if l.startswith("  * ")]
        check(log.startswith("backoffshim (") and len(items) >= 5 and
              "see the git history" not in log and "seccomp engine" in log,
              "changelog: %r" % log[:600])
        libs = [f for f in files if f.endswith("/backoffshim/libbackoffshim.so")]
        check(len(libs) == 1, "the library: %r" % files)
        # the packaged man page shows the packaged library's path, and the
        # package asks for the glibc the README names (the binaries' newest
        # symbol version), not the build machine's
        with gzip.open(os.path.join(root, "usr/share/man/man1/backoffshim.1.gz"), "rt") as f:
            page = f.read()
        check("LD_PRELOAD=/%s" % libs[0] in page, "backoffshim(1) does not name /%s" % libs[0])
        with open(os.path.join(ROOT, "README.md")) as f:
            glibc = re.search(r"glibc (\d+\.\d+) or later", f.read()).group(1)
        depends = subprocess.run(["dpkg-deb", "-f", deb, "Depends"], capture_output=True,
                                 text=True).stdout.strip()
        check(depends == "libc6 (>= %s)" % glibc, "Depends: %r, README: glibc %s"
              % (depends, glibc))
        cli, lib = os.path.join(root, "usr/bin/backoffshim"), os.path.join(root, libs[0])
        rc, out, err = run([cli, "--version"], base_env())
        check(rc == 0 and "library: %s (" % os.path.realpath(lib) in out, "--version: %r" % out)
        port = free_port()
        env = base_env(LD_PRELOAD=lib, BACKOFFSHIM_CONFIG="/dev/null",
                       BACKOFFSHIM_MAX_ATTEMPTS="2", BACKOFFSHIM_INITIAL_BACKOFF="50ms",
                       BACKOFFSHIM_SHARED="off")
        rc, out, err = run([prog("legacy_client"), "127.0.0.1", str(port)], env)
        check(rc == 1 and "(attempt 1)" in err and "giving up after 2 attempts" in err,
              "the packaged library did not retry: %r" % err)
        r = _dpkg(root, "-P", "backoffshim")
        check(r.returncode == 0, "dpkg -P: %s" % r.stderr[-1500:])
        left = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                for f in fs if not os.path.join(d, f).startswith(os.path.join(root, "var"))]
        check(not left, "left after purge: %r" % left)

"""The built library exports only interposed calls and needs only glibc;
and a preloaded run is clean under valgrind memcheck."""
import os
import re
import subprocess

from lib import BUILD, SO, Server, check, free_port, late_server_run, prog, shim_env

# The version script the library was linked with, made by the Makefile from
# shim/lib/interposed.def: the one list of interposed calls.
EXPORTS_MAP = os.path.join(BUILD, "exports.map")


def _out(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _interposed():
    """The global names of the generated export map."""
    text = re.sub(r"/\*.*?\*/", "", open(EXPORTS_MAP).read(), flags=re.S)
    m = re.search(r"global:(.*?)local:", text, re.S)
    check(m, "no global: ... local: in %s" % EXPORTS_MAP)
    return sorted(n.strip() for n in m.group(1).split(";") if n.strip())


def _exported():
    return sorted(l.split()[-1] for l in _out(["nm", "-D", "--defined-only", SO]).splitlines())


def test_exports_only_interposed_symbols():
    syms, want = _exported(), _interposed()
    check(len(want) >= 29, "export map too short: %r" % want)
    check(syms == want, "exported: %r, interposed.def: %r" % (syms, want))


def test_no_relocation_binds_an_export_to_itself():
    # a call from inside the library to one of its own exported names (say
    # poll() from __poll_chk) goes through the PLT back into the wrapper
    exported = set(_exported())
    bad = []
    for l in _out(["readelf", "-rW", SO]).splitlines():
        f = l.split()
        if len(f) >= 5 and re.search(r"_(JUMP_SLOT|GLOB_DAT)$", f[2]):
            name = f[4].split("@")[0]
            if name in exported:
                bad.append("%s %s" % (f[2], f[4]))
    check(not bad, "relocations against the library's own exports: %r" % bad)


def test_needs_only_glibc():
    libs = [l.split()[0] for l in _out(["ldd", SO]).splitlines() if l.strip()]
    allowed = re.compile(r"^(linux-vdso\.so\.1|libc\.so\.6|/lib64/ld-linux-x86-64\.so\.2|"
                         r"ld-linux.*|libm\.so\.6)$")
    check(all(allowed.match(l) for l in libs), "unexpected dependencies: %r" % libs)
    check("inih" not in _out(["nm", "-D", SO]), "inih symbols visible")


def test_full_relro():
    dyn = _out(["readelf", "-d", SO])
    check("BIND_NOW" in dyn or "NOW" in dyn, "no BIND_NOW: %s" % dyn)
    check("GNU_RELRO" in _out(["readelf", "-l", SO]), "no GNU_RELRO segment")


def test_preloaded_run_is_valgrind_clean():
    port = free_port()
    cmd = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full",
           "--errors-for-leak-kinds=definite", prog("legacy_client"), "127.0.0.1", str(port)]
    rc, out, err, gaps = late_server_run(cmd, shim_env(), port, syns_before=3, timeout=60)
    check(rc == 0, "valgrind run: rc=%d err=%r" % (rc, err[-1500:]))
    check("server says: hello" in out, "no greeting: %r" % out)


def test_no_circle_of_files_in_shim_lib():
    """shim/lib is layered: a file calls only files below it (docs/layout.md).
    scripts/lib-circles counts circles from the object files' symbols."""
    root = os.path.dirname(BUILD)
    r = subprocess.run([os.path.join(root, "scripts", "lib-circles"),
                        os.path.join(BUILD, "obj")], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and re.search(r"^circles: 0 ", r.stdout, re.M),
          "lib-circles: %r %r" % (r.stdout[-1500:], r.stderr[-300:]))

"""The built library exports only interposed calls and needs only glibc;
and a preloaded run is clean under valgrind memcheck."""
import re
import subprocess

from lib import SO, Server, check, free_port, late_server_run, prog, shim_env


def _out(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def test_exports_only_interposed_symbols():
    syms = sorted(l.split()[-1] for l in _out(["nm", "-D", "--defined-only", SO]).splitlines())
    want = sorted("""__poll_chk __ppoll_chk __read_chk __recv_chk __recvfrom_chk accept accept4
        close close_range closefrom connect dup2 dup3 freeaddrinfo getaddrinfo getsockopt poll
        ppoll read readv recv recvfrom recvmsg send sendmsg sendto socket write writev""".split())
    check(syms == want, "exported: %r" % syms)


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

"""The fast path stays near the floor (issues 11, 19 and 21), counted, never
timed: tests/bench/counts.py --check runs the bench loops under callgrind
and strace -c, with and without the shim. It fails if a send or recv on an
unwatched descriptor costs more than 10 added instructions, if the client's
socket+connect+close to a never-failed destination costs more than 150 (or
its bound with the shared table in use: counts.py), if the client's side of
a short request connection (socket, connect, send, recv, close) to such a
destination costs more than 200, or if any loop makes a system call more
(the shared table in use)."""
import os
import shutil
import subprocess
import sys

from lib import BUILD, ROOT, TestSkip, check

BENCH = os.path.join(BUILD, "bench", "connect_bench")


def test_counted_fast_path():
    for tool in ("valgrind", "strace"):
        if not shutil.which(tool):
            raise TestSkip("%s is not installed" % tool)
    so = os.path.join(BUILD, "libbackoffshim.so")
    if os.environ.get("BACKOFFSHIM_TEST_SO", so) != so:
        raise TestSkip("the counts are the release build's, not %s"
                       % os.environ["BACKOFFSHIM_TEST_SO"])
    check(os.path.exists(BENCH), "make check builds %s" % BENCH)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "bench", "counts.py"),
                        BENCH, so, "--check"], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0 and "target missed" not in r.stdout,
          "counts: rc=%d\n%s\n%s" % (r.returncode, r.stdout, r.stderr[-1000:]))
    check("(equal)" in r.stdout and "DIFFERENT" not in r.stdout, r.stdout)

#!/usr/bin/env python3
"""Runs every test_* function in tests/integration/test_*.py.

Usage: run.py [-k SUBSTRING]... [-x SUBSTRING]... (a test runs if it matches
any -k and no -x). Prints one line per test and a closing
"integration: N passed, N failed, N skipped" line; exits 1 if anything failed.

The tests run in a network namespace of their own, with only `lo` (brought
up here), an IPC namespace (the shared tables are System V segments: none
outlives the run, and no run sees another's) and a mount namespace with a
private /dev/shm (the tables' lock files): they need a raw AF_PACKET socket on lo and `unshare -m`, and must
not meet anything on the host's loopback. run.py re-executes itself there:
  - as an ordinary user: unshare --user --map-current-user --keep-caps --net --ipc --mount.
    The user namespace gives CAP_NET_RAW and CAP_SYS_ADMIN over the new
    network and mount namespaces only; processes keep the invoking uid, so
    initdb and postgres run as that user (they refuse to run as root, mapped
    root included). A test that needs real root or a second uid raises
    lib.TestSkip and is reported as SKIP.
  - as root: unshare --net --ipc --mount alone (no user namespace, so runuser to the
    postgres user and chown to other uids work as before): the same
    isolation, and every test runs.
BACKOFFSHIM_TEST_NETNS=1 in the environment marks the re-executed run.
"""
import importlib.util
import glob
import os
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


NS_MARK = "BACKOFFSHIM_TEST_NETNS"


def unshare_cmd():
    if os.geteuid() == 0:
        return ["unshare", "--net", "--ipc", "--mount"]
    return ["unshare", "--user", "--map-current-user", "--keep-caps", "--net", "--ipc", "--mount"]


def refuse(why):
    print("integration tests cannot run: %s" % why)
    print("integration: 0 passed, 1 failed, 0 skipped", flush=True)
    return 1


def reexec_in_namespace():
    """Run this script again in a fresh network namespace; returns its exit
    status. A failing probe first, so that a host without (unprivileged) user
    namespaces gets one clear line instead of a run that never starts."""
    cmd = unshare_cmd()
    try:
        r = subprocess.run(cmd + ["--", "true"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return refuse("%s: %s" % (" ".join(cmd), e))
    if r.returncode != 0:
        return refuse("%s failed (%s); unprivileged user namespaces may be "
                      "disabled (sysctl user.max_user_namespaces, "
                      "kernel.apparmor_restrict_unprivileged_userns)"
                      % (" ".join(cmd), r.stdout.strip()))
    sys.stdout.flush()
    env = dict(os.environ, **{NS_MARK: "1"})
    rc = subprocess.call(cmd + ["--", sys.executable, os.path.abspath(__file__)]
                         + sys.argv[1:], env=env, stdin=subprocess.DEVNULL)
    return rc if rc >= 0 else 1  # killed by a signal


def main():
    args = sys.argv[1:]
    patterns = [args[i + 1] for i in range(len(args) - 1) if args[i] == "-k"] or [""]
    skip = [args[i + 1] for i in range(len(args) - 1) if args[i] == "-x"]
    if os.environ.get(NS_MARK) != "1":
        return reexec_in_namespace()
    # a missing library is no pass: every run "with the shim" would be a
    # plain run, and every comparison would agree
    for so in lib.PRELOAD.split(":"):
        if not os.path.isfile(so):
            return refuse("%s is not built (make)" % so)
    try:
        r = subprocess.run(["ip", "link", "set", "lo", "up"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        up = r.returncode == 0
        why = r.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        up, why = False, str(e)
    if not up:
        return refuse("ip link set lo up: %s" % why)
    # a /dev/shm of the run's own: the per-user shared tables (issue 10) of
    # earlier runs or of the host's programs are never seen
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,size=64m", "tmpfs", "/dev/shm"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    if r.returncode != 0:
        return refuse("mount a private /dev/shm: %s" % r.stdout.strip())
    mode = "root" if os.geteuid() == 0 else "uid %d in a user namespace" % os.geteuid()
    print("integration: private network namespace, as %s" % mode, flush=True)
    passed = failed = skipped = 0
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "test_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for fname in sorted(f for f in dir(mod) if f.startswith("test_")):
            full = "%s.%s" % (name, fname)
            if not any(p in full for p in patterns) or any(x in full for x in skip):
                continue
            t0 = time.monotonic()
            try:
                getattr(mod, fname)()
                passed += 1
                print("PASS %s (%.1fs)" % (full, time.monotonic() - t0), flush=True)
            except lib.TestSkip as e:
                skipped += 1
                print("SKIP %s: %s" % (full, e), flush=True)
            except lib.TestFailure as e:
                failed += 1
                print("FAIL %s: %s" % (full, e), flush=True)
            except Exception:
                failed += 1
                print("FAIL %s: %s" % (full, traceback.format_exc()), flush=True)
    print("integration: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs every test_* function in tests/integration/test_*.py.

Usage: run.py [-k SUBSTRING]... [-x SUBSTRING]... (a test runs if it matches
any -k and no -x). Prints one line per test and a closing
"integration: N passed, N failed" line; exits 1 if anything failed.
"""
import importlib.util
import glob
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def main():
    args = sys.argv[1:]
    patterns = [args[i + 1] for i in range(len(args) - 1) if args[i] == "-k"] or [""]
    skip = [args[i + 1] for i in range(len(args) - 1) if args[i] == "-x"]
    if os.geteuid() != 0:
        print("integration tests need root (raw socket observer, netns); run as root")
        print("integration: 0 passed, 1 failed")
        return 1
    passed = failed = 0
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
            except lib.TestFailure as e:
                failed += 1
                print("FAIL %s: %s" % (full, e), flush=True)
            except Exception:
                failed += 1
                print("FAIL %s: %s" % (full, traceback.format_exc()), flush=True)
    print("integration: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Helpers for the backoffshim command's tests (test_cli*.py)."""
import os
import re
import tempfile

from lib import BUILD, ROOT, base_env, check

CLI = os.path.join(BUILD, "backoffshim")
GOOD_INI = os.path.join(ROOT, "config", "backoffshim.ini")
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def cli_env(**extra):
    """No config file from the machine, a fixed seed, the tests' timeouts."""
    return base_env(BACKOFFSHIM_CONFIG="/dev/null", BACKOFFSHIM_SEED="42",
                    BACKOFFSHIM_MIN_CONNECT_TIMEOUT="1s", **extra)


def secs(text):
    if text == "0":
        return 0.0
    m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s|m|h)", text)
    check(m, "not a duration: %r" % text)
    return float(m.group(1)) * UNITS[m.group(2)]


def write_ini(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False)
    f.write(text)
    f.close()
    return f.name


def shown(out, key):
    """The value shown for `key` in the effective settings (None if absent)."""
    m = re.search(r"^  %s +=  ?(\S+)" % re.escape(key), out, re.M)
    return m.group(1) if m else None


def rows_of(out):
    """The schedule table: [(attempt, wait or 'stop', min, max, total)]."""
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[1], parts[2], parts[3], parts[4]))
    return rows

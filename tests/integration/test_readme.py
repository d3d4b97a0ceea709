"""The README tells the truth (issue 11): every ```sh block runs as shown
(from the source tree, with build/ on PATH), the systemd unit passes
`systemd-analyze verify`, and the page stays a front page (at most 12 KB)."""
import os
import re
import shutil
import subprocess
import tempfile

from lib import BUILD, ROOT, TestSkip, base_env, check, new_table

README = os.path.join(ROOT, "README.md")


def _blocks(kind):
    text = open(README).read()
    return re.findall(r"^```%s\n(.*?)^```" % kind, text, re.M | re.S)


def test_readme_is_a_front_page():
    check(os.path.getsize(README) <= 12 * 1024, "README.md is %d bytes" % os.path.getsize(README))
    for link in re.findall(r"\]\(([^)#]+)\)", open(README).read()):
        if "://" not in link:
            check(os.path.exists(os.path.join(ROOT, link)), "broken link %s" % link)


def test_every_sh_block_runs_as_shown():
    blocks = _blocks("sh")
    check(len(blocks) >= 3, "sh blocks: %r" % blocks)
    env = base_env(PATH=BUILD + os.pathsep + os.environ["PATH"], BACKOFFSHIM_SHARED=new_table())
    said = ""
    for block in blocks:
        r = subprocess.run(["bash", "-e", "-c", block], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0, "%r: rc=%d %r %r" % (block, r.returncode, r.stdout[-300:],
                                                   r.stderr[-300:]))
        check("command not found" not in r.stderr, "%r: %r" % (block, r.stderr))
        said += r.stdout + r.stderr
    for what in ("loaded libbackoffshim", "initial_backoff      = 500ms", "backing off"):
        check(what in said, "the README's commands never said %r: %r" % (what, said[-500:]))


def test_the_systemd_unit_verifies():
    if not shutil.which("systemd-analyze"):
        raise TestSkip("systemd-analyze is not installed")
    units = [b for b in _blocks("ini") if b.startswith("[Service]")]
    check(len(units) == 1, "the unit: %r" % units)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "myapp.service")
        with open(path, "w") as f:
            f.write("[Unit]\nDescription=a client with the shim\n\n" + units[0] +
                    "ExecStart=/bin/true\n")
        r = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                           timeout=60)
        problems = [l for l in (r.stdout + r.stderr).splitlines() if "myapp.service" in l]
        check(r.returncode == 0 and not problems, "verify: %r %r" % (r.stdout, r.stderr))

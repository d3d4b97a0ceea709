"""The README tells the truth (issue 11): every ```sh block runs as shown
(from the source tree, with build/ on PATH), the systemd unit passes
`systemd-analyze verify`, the Dockerfile lines are checked statically (no
container engine here) and the page stays a front page (at most 12 KB)."""
import json
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


# Dockerfile instructions (the Dockerfile reference's list)
DOCKER_INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY",
                       "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD",
                       "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def test_the_dockerfile_lines_hold_together():
    """Every line is a Dockerfile instruction; COPY copies files the build
    makes; ENTRYPOINT is an exec-form JSON array whose `run` line passes
    run's own checks (through `schedule`, which takes run's options); and
    with the files where the COPY lines put them, `run` finds the library
    and preloads it."""
    blocks = _blocks("dockerfile")
    check(len(blocks) == 1, "the Dockerfile: %r" % blocks)
    copies, entry = {}, None
    for line in blocks[0].splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        check(word in DOCKER_INSTRUCTIONS, "not an instruction: %r" % line)
        if word == "COPY":
            src, dest = rest.split()
            check(os.path.exists(os.path.join(BUILD, src)), "COPY of %s: the build makes no"
                  " such file" % src)
            check(dest.startswith("/") and dest.endswith("/"), "COPY into %r" % dest)
            copies[src] = dest
        if word == "ENTRYPOINT":
            entry = json.loads(rest)
    check(isinstance(entry, list) and all(isinstance(a, str) for a in entry),
          "ENTRYPOINT is not an exec-form array: %r" % entry)
    check(entry[0] in copies and entry[1] == "run" and "--" in entry,
          "ENTRYPOINT: %r" % entry)
    dash = entry.index("--")
    r = subprocess.run([os.path.join(BUILD, "backoffshim"), "schedule"] + entry[2:],
                       env=base_env(), capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, "the run line's options: rc=%d %r" % (r.returncode, r.stderr))
    with tempfile.TemporaryDirectory() as root:
        for src, dest in copies.items():
            os.makedirs(root + dest, exist_ok=True)
            shutil.copy2(os.path.join(BUILD, src), root + dest)
        # the program itself (/app/client) replaced by one that says what
        # it was given
        argv = [root + copies[entry[0]] + entry[0]] + entry[1:dash + 1] + [
            "/bin/sh", "-c", 'echo "$LD_PRELOAD"']
        r = subprocess.run(argv, env=base_env(BACKOFFSHIM_SHARED="off"), capture_output=True,
                           text=True, timeout=30)
        want = root + copies["libbackoffshim.so"] + "libbackoffshim.so"
        check(r.returncode == 0 and os.path.realpath(r.stdout.strip()) == os.path.realpath(want),
              "run did not preload %s: rc=%d %r %r" % (want, r.returncode, r.stdout, r.stderr))


def test_the_glibc_it_names_is_the_builds():
    """The README's "glibc 2.NN or later" is the newest symbol version the
    library and the command need, as built."""
    said = re.search(r"glibc (2\.\d+) or later", open(README).read())
    check(said, "the README names no glibc version")
    newest = (2, 0)
    for f in (os.path.join(BUILD, "libbackoffshim.so"), os.path.join(BUILD, "backoffshim")):
        r = subprocess.run(["objdump", "-T", f], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "objdump -T %s: %r" % (f, r.stderr))
        for v in re.findall(r"\(GLIBC_(2\.\d+)\)", r.stdout):
            newest = max(newest, tuple(int(x) for x in v.split(".")))
    check("%d.%d" % newest == said.group(1), "the build needs glibc %d.%d, the README says %s"
          % (newest + (said.group(1),)))

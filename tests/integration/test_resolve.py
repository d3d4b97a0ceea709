"""A name that does not resolve yet (issue 22): `resolve = off|temporary|wait`.

Every test runs a private resolver (dns.private_resolver: timeout:1
attempts:1) against the fixture's DNS server on 127.0.0.1:53, observes the
lookups at the server (its query log), and runs the same program without
the shim where the behaviour must match it.
"""
import json
import os
import signal
import subprocess
import sys
import time

from dns import EAI_AGAIN, EAI_NONAME, DnsServer, gai, private_resolver
from lib import (BUILD, LineReader, base_env, check, check_gaps, check_not_delayed,
                 finish, free_port, new_table, prog, run, shim_env, spawn, wait_status_row)
from servers import HttpServer

CLI = os.path.join(BUILD, "backoffshim")


def _lookups(srv, name):
    """Start times of the lookups of `name` the server saw: glibc asks A and
    AAAA together, so one A query is one lookup."""
    return [q.t for q in srv.queries(name, qtype="A")]


def _gaps(times):
    return [b - a for a, b in zip(times, times[1:])]


def _ini(text):
    path = os.path.join(os.path.dirname(new_table()), "resolve-%d.ini" % os.getpid())
    with open(path, "w") as f:
        f.write(text)
    return path


def test_wait_resolves_a_name_that_appears_late_on_the_schedule():
    env = shim_env(BACKOFFSHIM_RESOLVE="wait")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        plain = gai("db", base_env())
        check(plain.code == EAI_NONAME, "without the shim: %r" % (plain,))
        srv.clear()
        # the name appears once the shim has looked it up 5 times (both
        # queries of the 5th lookup answered: a query's answer is decided
        # when it is logged)
        p = subprocess.Popen([sys.executable, "-c", "import socket,sys\n"
                              "print(socket.getaddrinfo('db', 80)[0][4][0])"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(srv.wait_for(10, name="db", timeout=10) >= 10, "lookups: %r" % _lookups(srv, "db"))
        srv.set("db", "answer", v4=["127.0.0.1"])
        out, err = p.communicate(timeout=10)
        check(p.returncode == 0 and out.strip() == "127.0.0.1", "with the shim: %r %r" % (out, err))
        times = _lookups(srv, "db")
        check_gaps(_gaps(times[:5]), "lookups")
        check("resolve db:80: Name or service not known (attempt 1), next attempt in" in err and
              "resolve db:80: resolved after" in err, "log: %r" % err)


def test_temporary_retries_servfail_but_leaves_nxdomain_to_the_program():
    env = shim_env(BACKOFFSHIM_RESOLVE="temporary", **{"BACKOFFSHIM_MAX_ELAPSED": "20s"})
    with DnsServer(default="nxdomain") as srv, private_resolver():
        srv.set("late", "servfail")
        p = spawn([sys.executable, "-c", "import socket\n"
                   "print(socket.getaddrinfo('late', 80)[0][4][0])"], env)
        check(srv.wait_for(6, name="late", timeout=10) >= 6, "no retries")
        srv.set("late", "answer", v4=["127.0.0.1"])
        rc, out, err = finish(p, 10)
        check(rc == 0 and out.strip() == "127.0.0.1", "servfail then an answer: %r %r" % (out, err))
        # NXDOMAIN is not temporary: the program learns it at once, as without the shim
        plain = gai("missing", base_env())
        n_plain = len(_lookups(srv, "missing"))
        shim = gai("missing", env)
        check(plain.code == shim.code == EAI_NONAME, "codes %r %r" % (plain, shim))
        check(len(_lookups(srv, "missing")) == 2 * n_plain, "lookups %r" % _lookups(srv, "missing"))
        check_not_delayed("an NXDOMAIN under temporary", plain.seconds, shim.seconds,
                          wait=0.05)


def test_a_schedule_kept_for_an_error_this_process_leaves_alone_is_not_waited_on():
    """Process A (resolve = wait) backs off on a name that does not exist;
    process B (resolve = temporary) looks the same name up in the same table.
    NXDOMAIN is not B's to retry, so B does not join A's schedule: its lookup
    goes at once and fails as without the shim (it waited for A's next step
    first, up to its initial_backoff)."""
    table = new_table()
    slow = dict(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="800ms",
                BACKOFFSHIM_MAX_BACKOFF="2s")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        plain = gai("nothere", base_env())
        a = spawn([sys.executable, "-c", "import socket\n"
                   "socket.getaddrinfo('nothere', 80)"],
                  shim_env(BACKOFFSHIM_RESOLVE="wait", BACKOFFSHIM_MAX_ELAPSED="5s", **slow))
        try:
            wait_status_row(table, lambda r: r["destination"].startswith("nothere:") and
                            r["failures"] > 0, what="A backing off on the name")
            b = gai("nothere", shim_env(BACKOFFSHIM_RESOLVE="temporary", **slow))
        finally:
            a.kill()
            a.wait()
        check(plain.code == b.code == EAI_NONAME, "codes %r %r" % (plain, b))
        check_not_delayed("B's NXDOMAIN while A backs off", plain.seconds, b.seconds, wait=0.8)

def test_off_by_default_every_failure_is_the_programs():
    env = shim_env()
    with DnsServer(default="servfail") as srv, private_resolver():
        plain = gai("flaky", base_env())
        n_plain = len(_lookups(srv, "flaky"))
        shim = gai("flaky", env)
        check(plain.code == shim.code == EAI_AGAIN, "codes %r %r" % (plain, shim))
        check(len(_lookups(srv, "flaky")) == 2 * n_plain, "lookups %r" % _lookups(srv, "flaky"))


def test_the_budget_ends_the_wait_with_the_real_error():
    env = shim_env(BACKOFFSHIM_RESOLVE="temporary", BACKOFFSHIM_MAX_ELAPSED="600ms")
    with DnsServer(default="servfail") as srv, private_resolver():
        r = subprocess.run([sys.executable, "-c", "import socket\n"
                            "try: socket.getaddrinfo('down', 80)\n"
                            "except socket.gaierror as e: print(e.errno)"],
                           env=env, capture_output=True, text=True, timeout=20)
        check(r.stdout.strip() == str(EAI_AGAIN), "result %r %r" % (r.stdout, r.stderr))
        check("resolve down:80: giving up after" in r.stderr and
              "Temporary failure in name resolution" in r.stderr, "log %r" % r.stderr)
        n = len(_lookups(srv, "down"))
        check(3 <= n <= 8, "%d lookups in a 600 ms budget (50 ms, x1.6)" % n)


def test_a_dest_section_picks_the_names_that_wait():
    ini = _ini("[dest db:*]\nresolve = wait\n[dest cache:6379]\nresolve = temporary\n")
    env = shim_env(BACKOFFSHIM_CONFIG=ini, BACKOFFSHIM_MAX_ELAPSED="500ms")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        other = gai("other", env)
        check(other.code == EAI_NONAME and len(_lookups(srv, "other")) == 1,
              "a name with no section: %r %r" % (other, _lookups(srv, "other")))
        db = gai("db", env)
        check(db.code == EAI_NONAME and len(_lookups(srv, "db")) >= 3,
              "db:* waits: %r %r" % (db, _lookups(srv, "db")))
        cache = gai("cache", env)  # (gai asks for port 80: not cache:6379's)
        check(len(_lookups(srv, "cache")) == 1, "cache:80: %r" % _lookups(srv, "cache"))


def test_curl_reaches_a_server_whose_name_appears_late():
    port = free_port()
    ini = _ini("[dest web:*]\nresolve = wait\n")
    url = "http://web:%d/" % port
    cmd = ["curl", "-sS", "--max-time", "15", url]
    with DnsServer(default="nxdomain") as srv, private_resolver(), HttpServer(port):
        rc, out, err = run(cmd, base_env())
        check(rc == 6, "without the shim curl cannot resolve: rc=%d %r" % (rc, err))
        p = spawn(cmd, shim_env(BACKOFFSHIM_CONFIG=ini))
        check(srv.wait_for(6, name="web", timeout=10) >= 6, "no retries")
        srv.set("web", "answer", v4=["127.0.0.1"])
        rc, out, err = finish(p, 20)
        check(rc == 0 and "hello from server" in out, "with the shim: rc=%d %r %r" % (rc, out, err))


def test_processes_waiting_on_one_name_share_one_lookup_per_step():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_RESOLVE="wait",
                   BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_BACKOFF="400ms",
                   BACKOFFSHIM_MAX_ELAPSED="30s")
    code = "import socket\nprint(socket.getaddrinfo('herd', 80)[0][4][0])"
    with DnsServer(default="nxdomain") as srv, private_resolver():
        first = spawn([sys.executable, "-c", code], env)
        check(srv.wait_for(2, name="herd", qtype="A", timeout=10) >= 2, "no retry")
        n0 = len(_lookups(srv, "herd"))
        others = [spawn([sys.executable, "-c", code], env) for _ in range(5)]
        got = srv.wait_for(n0 + 6, name="herd", qtype="A", timeout=15)
        after = _lookups(srv, "herd")[n0:n0 + 6]
        srv.set("herd", "answer", v4=["127.0.0.1"])
        outs = [finish(p, 15) for p in [first] + others]
    check(all(rc == 0 and out.strip() == "127.0.0.1" for rc, out, _ in outs),
          "results: %r" % [(rc, out, err[-200:]) for rc, out, err in outs])
    # one schedule for all six: lookups at least one step (200 ms, jitter
    # 0.2) apart; six schedules would send the newcomers' lookups together
    gaps = _gaps(after)
    check(got >= n0 + 6 and min(gaps) >= 0.8 * 0.2 - 0.05,
          "lookups after 5 newcomers joined, gaps: %r" % [round(g, 3) for g in gaps])


def _left_then_newcomer(mode):
    """lookupjump leaves a lookup of a dropped name (`mode`: jump or cancel)
    while the shim's retry holds the probe; a newcomer must not wait for
    that probe's deadline (min_connect_timeout, 20 s here)."""
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_RESOLVE="temporary",
                   BACKOFFSHIM_MIN_CONNECT_TIMEOUT="20s", BACKOFFSHIM_MAX_ELAPSED="30s")
    with DnsServer(default="drop") as srv, private_resolver(timeout=1, attempts=1):
        p = subprocess.Popen([prog("lookupjump"), mode, "gone"], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = LineReader(p)
        try:
            check(lines.wait_for(lambda l: l == "ready", 5), "not ready: %r" % lines.lines)
            # the second lookup is the shim's retry: it holds the probe
            check(srv.wait_for(2, name="gone", qtype="A", timeout=10) >= 2, "no retry")
            p.send_signal(signal.SIGUSR1)
            check(lines.wait_for(lambda l: l == "left", 5), "never left: %r" % lines.lines)
            left = time.monotonic()
            n = len(_lookups(srv, "gone"))
            newcomer = spawn([sys.executable, "-c", "import socket\n"
                              "print(socket.getaddrinfo('gone', 80)[0][4][0])"], env)
            got = srv.wait_for(n + 1, name="gone", qtype="A", timeout=10)
            first = _lookups(srv, "gone")[n] if got > n else None
            newcomer.kill()
            finish(newcomer, 5)
        finally:
            p.stdin.close()
            p.wait(timeout=10)
    check(first is not None and first - left < 1.5,
          "the newcomer's first lookup %s after the %s" % (
              "never came" if first is None else "came %.2fs" % (first - left), mode))


def test_a_lookup_left_by_siglongjmp_holds_nothing():
    _left_then_newcomer("jump")


def test_a_lookup_ended_by_pthread_cancel_holds_nothing():
    _left_then_newcomer("cancel")


def test_wget_dns_timeout_is_kept():
    """wget --dns-timeout leaves getaddrinfo with siglongjmp from SIGALRM:
    its own timeout stands, with or without the shim."""
    port = free_port()
    cmd = ["wget", "-q", "-O", "/dev/null", "--tries=1", "--dns-timeout=1",
           "http://slow:%d/" % port]
    env = shim_env(BACKOFFSHIM_RESOLVE="temporary", BACKOFFSHIM_MAX_ELAPSED="20s")
    with DnsServer(default="drop") as srv, private_resolver(timeout=3, attempts=1):
        t0 = time.monotonic()
        rc_plain, _, err_plain = run(cmd, base_env())
        plain = time.monotonic() - t0
        t0 = time.monotonic()
        rc, _, err = run(cmd, env)
        shim = time.monotonic() - t0
    check(rc == rc_plain != 0, "wget exit %d with the shim, %d without (%r)" % (
        rc, rc_plain, err[-300:]))
    check_not_delayed("wget --dns-timeout=1", plain, shim)


def test_status_lists_a_name_that_is_backing_off():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_RESOLVE="wait",
                   BACKOFFSHIM_MAX_ATTEMPTS="2")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        r = gai("pending", env)
        check(r.code == EAI_NONAME, "%r" % (r,))
    p = subprocess.run([CLI, "status", "--json", "--table", table], capture_output=True,
                       text=True, timeout=10)
    check(p.returncode == 0, "status: %r" % (p,))
    rows = json.loads(p.stdout)
    check(len(rows) == 1 and rows[0]["destination"] == "pending:80" and
          rows[0]["last_error"] == "EAI_NONAME" and rows[0]["failures"] == 2,
          "status rows: %r" % rows)


def test_getent_and_python_create_connection_wait_for_the_name():
    port = free_port()
    ini = _ini("[dest api:*]\nresolve = wait\n")
    env = shim_env(BACKOFFSHIM_CONFIG=ini)
    py = [sys.executable, "-c", "import socket\n"
          "s = socket.create_connection(('api', %d), timeout=10)\nprint('connected')" % port]
    with DnsServer(default="nxdomain") as srv, private_resolver(), HttpServer(port):
        rc_plain, _, _ = run(["getent", "ahosts", "api"], base_env())
        rc_py, _, err_py = run(py, base_env())
        check(rc_plain == 2 and rc_py == 1 and "gaierror" in err_py,
              "without the shim: getent %d, python %d %r" % (rc_plain, rc_py, err_py[-200:]))
        srv.clear()
        procs = [spawn(["getent", "ahosts", "api"], env), spawn(py, env)]
        check(srv.wait_for(6, name="api", timeout=10) >= 6, "no retries")
        srv.set("api", "answer", v4=["127.0.0.1"])
        (rc, out, err), (rc2, out2, err2) = [finish(p, 15) for p in procs]
    check(rc == 0 and "127.0.0.1" in out, "getent: %d %r %r" % (rc, out, err))
    check(rc2 == 0 and out2.strip() == "connected", "python: %d %r %r" % (rc2, out2, err2))


def test_errno_after_a_retried_lookup_is_libcs():
    """A program that perror()s after getaddrinfo prints what it printed
    without the shim: the shim's own waits leave nothing in errno."""
    env = shim_env(BACKOFFSHIM_RESOLVE="wait", BACKOFFSHIM_MAX_ELAPSED="300ms")
    with DnsServer(default="nxdomain"), private_resolver():
        plain = run([prog("gaierrno"), "nosuch"], base_env())
        shim = run([prog("gaierrno"), "nosuch"], env)
    check(plain[0] == shim[0] == 0 and plain[1] == shim[1], "without the shim %r, with it %r"
          % (plain[1], shim[1]))
    check("giving up" in shim[2], "the lookup was not retried: %r" % shim[2])


def test_a_name_that_resolved_starts_its_next_outage_afresh():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_RESOLVE="wait",
                   BACKOFFSHIM_MAX_ELAPSED="5s")
    code = "import socket\nprint(socket.getaddrinfo('blip', 80)[0][4][0])"
    with DnsServer(default="nxdomain") as srv, private_resolver():
        for outage in (1, 2):
            srv.clear()
            srv.set("blip", "nxdomain")
            p = spawn([sys.executable, "-c", code], env)
            check(srv.wait_for(6, name="blip", timeout=10) >= 6, "no retries")
            srv.set("blip", "answer", v4=["127.0.0.1"])
            rc, out, err = finish(p, 10)
            check(rc == 0 and "resolved after 3 failed attempts" in err,
                  "outage %d: %r %r" % (outage, out, err))
            check("(attempt 1)" in err and "(attempt 4)" not in err,
                  "outage %d did not start afresh: %r" % (outage, err))


def test_a_jump_inside_a_handler_then_out_of_connect_leaves_no_waiter():
    """jumptwice: the first signal's handler longjmps inside itself (the
    connect goes on waiting), the second leaves the connect with
    siglongjmp; the process stays alive. Nothing it held is left held:
    status counts no waiter."""
    port = free_port()
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="300ms",
                   BACKOFFSHIM_MAX_BACKOFF="300ms")
    p = subprocess.Popen([prog("jumptwice"), str(port)], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = LineReader(p)
    try:
        check(lines.wait_for(lambda l: l == "ready", 5), "not ready: %r" % lines.lines)
        wait_status_row(table, lambda r: r["waiting_threads"] == 1, 5)
        p.send_signal(signal.SIGUSR1)
        check(lines.wait_for(lambda l: l == "inner", 5), "no first handler: %r" % lines.lines)
        # the call goes on: its next wait (after another attempt) counts again
        wait_status_row(table, lambda r: r["failed_attempts"] >= 2 and r["waiting_threads"] == 1, 5)
        p.send_signal(signal.SIGUSR1)
        check(lines.wait_for(lambda l: l == "left", 5), "never left: %r" % lines.lines)
        row = wait_status_row(table, lambda r: r["waiting_threads"] == 0, 5)
        check(row["waiting_processes"] == 0, "still counted: %r" % row)
    finally:
        p.kill()
        p.wait(timeout=10)


def test_reset_takes_a_name_as_status_shows_it():
    table = new_table()
    env = shim_env(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_RESOLVE="wait",
                   BACKOFFSHIM_MAX_ATTEMPTS="2")
    with DnsServer(default="nxdomain"), private_resolver():
        check(gai("stuck", env).code == EAI_NONAME, "no lookup")
    r = subprocess.run([CLI, "reset", "--table", table, "stuck:80"], capture_output=True,
                       text=True, timeout=10)
    check(r.returncode == 0 and "reset stuck:80 (2 failures)" in r.stdout, "reset: %r" % (r,))
    r = subprocess.run([CLI, "status", "--json", "--table", table], capture_output=True,
                       text=True, timeout=10)
    check(json.loads(r.stdout) == [], "still listed: %r" % r.stdout)


def test_a_signal_ends_a_lookups_wait_as_it_ends_a_connects():
    """A Python program whose SIGALRM handler raises, around a lookup the
    shim waits on (`wait`, NXDOMAIN): the handler's exception must come when
    the alarm does. The lookup's wait rode out every signal to the end of
    its budget (Ctrl-C in a service ignored for minutes). Without the shim
    the lookup fails before the alarm."""
    code = ("import signal, socket, time\n"
            "def ring(*a): raise TimeoutError\n"
            "signal.signal(signal.SIGALRM, ring)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0.5)\n"
            "t = time.monotonic()\n"
            "try:\n"
            "    try:\n"
            "        socket.getaddrinfo('db', 80); what = 'resolved'\n"
            "    except socket.gaierror: what = 'gaierror'\n"
            "    signal.setitimer(signal.ITIMER_REAL, 0)\n"
            "except TimeoutError: what = 'alarm'\n"
            "print(what, '%.2f' % (time.monotonic() - t))\n")
    with DnsServer(default="nxdomain"), private_resolver():
        rc, plain, _ = run([sys.executable, "-c", code], base_env())
        check(rc == 0 and plain.startswith("gaierror "), "without the shim: %r" % plain)
        env = shim_env(BACKOFFSHIM_RESOLVE="wait", BACKOFFSHIM_MAX_ELAPSED="20s")
        t0 = time.monotonic()
        rc, out, err = run([sys.executable, "-c", code], env, timeout=30)
        took = time.monotonic() - t0
    check(rc == 0 and out.split()[0] in ("alarm", "gaierror"), "with the shim: %r %r"
          % (out, err[-300:]))
    check(took < 0.5 + float(plain.split()[1]) + 3.0, "the lookup ended %.1fs after its start "
          "with a 0.5s alarm (budget 20s): %r" % (took, out))


def test_a_name_that_fails_for_one_family_does_not_hold_up_the_other():
    """Process A asks for db's IPv6 addresses, which do not exist (NXDOMAIN
    for AAAA), and backs off under `wait`; process B asks for its IPv4
    address in the same table. B waited for A's schedule (keyed by the name
    alone), where without the shim it is answered at once."""
    table = new_table()
    slow = dict(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="3s",
                BACKOFFSHIM_MAX_BACKOFF="3s", BACKOFFSHIM_RESOLVE="wait")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        srv.set("db", "answer", v4=["127.0.0.1"], qtype="A")
        plain = gai("db", base_env(), family="inet")
        a = spawn([sys.executable, "-c", "import socket\n"
                   "socket.getaddrinfo('db', 80, socket.AF_INET6)"],
                  shim_env(BACKOFFSHIM_MAX_ELAPSED="10s", **slow))
        try:
            wait_status_row(table, lambda r: r["destination"].startswith("db:") and
                            r["failures"] > 0, what="A backing off on the name")
            b = gai("db", shim_env(**slow), family="inet")
        finally:
            a.kill()
            a.wait()
    check(plain.code == b.code == 0 and plain.addrs == b.addrs, "results %r %r" % (plain, b))
    check_not_delayed("B's IPv4 lookup while A backs off on IPv6", plain.seconds, b.seconds,
                      wait=3.0)


def test_a_lookup_libc_fails_without_asking_is_not_waited_on():
    """Under `wait`, lookups that libc answers "not known" without asking a
    name server were retried to the end of the budget, though nothing on a
    server could change them: a malformed name, a service name under
    AI_NUMERICSERV, AI_ADDRCONFIG for a family the host lacks (only lo is
    up here). Each must fail as fast as without the shim."""
    code = ("import json, socket, sys, time\n"
            "out = []\n"
            "for host, svc, fam, flags in [(b'a..b', 80, 0, 0), (b'-x', 80, 0, 0),\n"
            "        (b'db1,db2', 80, 0, 0), (b'user@db', 80, 0, 0), (b'10.0.0.300', 80, 0, 0),\n"
            "        (b'db', 'http', 0, socket.AI_NUMERICSERV),\n"
            "        (b'db', 80, socket.AF_INET, socket.AI_ADDRCONFIG)]:\n"
            "    t = time.monotonic()\n"
            "    try: socket.getaddrinfo(host, svc, fam, socket.SOCK_STREAM, 0, flags); c = 0\n"
            "    except socket.gaierror as e: c = e.errno\n"
            "    out.append([host.decode(), c, time.monotonic() - t])\n"
            "print(json.dumps(out))\n")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        srv.set("db", "answer", v4=["127.0.0.1"])
        rc, plain, _ = run([sys.executable, "-c", code], base_env())
        env = shim_env(BACKOFFSHIM_RESOLVE="wait", BACKOFFSHIM_MAX_ELAPSED="10s")
        rc2, out, err = run([sys.executable, "-c", code], env, timeout=60)
    check(rc == rc2 == 0, "rc %d %d: %r" % (rc, rc2, err[-300:]))
    plain, out = json.loads(plain), json.loads(out)
    check(all(c == EAI_NONAME for _, c, _ in plain), "without the shim: %r" % plain)
    for (host, c, s), (_, c2, s2) in zip(plain, out):
        check(c2 == c, "%s: %d with the shim, %d without" % (host, c2, c))
        check_not_delayed("the lookup of %r" % host, s, s2, wait=1.0)


def test_a_lookup_of_one_family_that_resolves_frees_the_names_other_waiters():
    """Process A waits on a name (any family) that does not exist yet; the
    name appears, and process B's IPv4 lookup of it succeeds. A's wait must
    end on that news, as it does when B's lookup is of any family: with a
    key per family, B's success left A's schedule standing, and A slept out
    its step (3 s)."""
    table = new_table()
    slow = dict(BACKOFFSHIM_SHARED=table, BACKOFFSHIM_INITIAL_BACKOFF="3s",
                BACKOFFSHIM_MAX_BACKOFF="3s", BACKOFFSHIM_RESOLVE="wait")
    with DnsServer(default="nxdomain") as srv, private_resolver():
        a = spawn([sys.executable, "-c", "import socket, time\n"
                   "socket.getaddrinfo('db', 80)\n"
                   "print('%.3f' % time.monotonic())"],
                  shim_env(BACKOFFSHIM_MAX_ELAPSED="20s", **slow))
        try:
            wait_status_row(table, lambda r: r["destination"].startswith("db:") and
                            r["failures"] > 0, what="A backing off on the name")
            srv.set("db", "answer", v4=["127.0.0.1"])
            b = gai("db", shim_env(**slow), family="inet")
            _, out, err = finish(a, 20)
        finally:
            if a.poll() is None:
                a.kill()
    check(b.code == 0 and a.returncode == 0, "B %r; A rc=%r %r" % (b, a.returncode, err[-300:]))
    check(float(out) - b.end < 1.5, "A ended %.2fs after B's success (its step is 3s)"
          % (float(out) - b.end))

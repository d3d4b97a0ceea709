"""The DNS fixture of issue 22 (dns.py), and what plain programs do, WITHOUT
the shim, when a name fails to resolve in each way the server can fail:

| server mode | getaddrinfo (python) | getent ahosts | curl   | queries (timeout:1 attempts:1)  |
|-------------|----------------------|---------------|--------|---------------------------------|
| answer      | 0                    | exit 0        | exit 0 | A + AAAA, in parallel           |
| nxdomain    | -2 EAI_NONAME        | exit 2        | exit 6 | A + AAAA                        |
| servfail    | -3 EAI_AGAIN         | exit 2        | exit 6 | A + AAAA (re-sent at once per   |
| refused     | -3 EAI_AGAIN         | exit 2        | exit 6 |   further attempt)              |
| drop        | -3 EAI_AGAIN, ~1 s   | exit 2, ~1 s  | exit 6 | A + AAAA, once per attempt,     |
|             |                      |               |        |   `timeout` s apart             |

and a name that appears 1 s after the first lookup is not waited for.
Every test here runs in a private resolver configuration (dns.private_resolver)
against the fixture's server on 127.0.0.1:53.
"""
import os
import socket
import threading
import time

from dns import (EAI_AGAIN, EAI_NODATA, EAI_NONAME, MODES, DnsServer, gai, nsswitch_hosts,
                 private_resolver)
from lib import base_env, check, free_port, run
from servers import HttpServer

def _note(line):
    """The measured baseline, printed when DNS_FIXTURE_VERBOSE=1."""
    if os.environ.get("DNS_FIXTURE_VERBOSE") == "1":
        print(line, flush=True)


FAILING = {"nxdomain": EAI_NONAME, "servfail": EAI_AGAIN, "refused": EAI_AGAIN,
           "drop": EAI_AGAIN}


def _read(path):
    with open(path) as f:
        return f.read()


def _timed(cmd, env, timeout=20):
    t0 = time.monotonic()
    rc, out, err = run(cmd, env, timeout=timeout)
    return rc, out, err, time.monotonic() - t0


def _curl(name, port):
    return ["curl", "-sS", "-o", "/dev/null", "--max-time", "8",
            "http://%s:%d/" % (name, port)]


def test_dns_fixture_resolver_files_are_private_and_restored():
    before = {p: _read(p) for p in ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf")}
    with private_resolver(timeout=2, attempts=3, search="example.test",
                          hosts=["127.0.0.9 pinned"]) as pr:
        rc = _read("/etc/resolv.conf")
        check(rc == "nameserver 127.0.0.1\nsearch example.test\n"
                   "options timeout:2 attempts:3\n", "resolv.conf: %r" % rc)
        hosts = _read("/etc/hosts")
        check("localhost" in hosts and "pinned" in hosts and "runsc" not in hosts,
              "hosts: %r" % hosts)
        check(nsswitch_hosts() == ["files", "dns"], "nsswitch hosts: %r" % nsswitch_hosts())
        # a child sees the same files (the mounts are the namespace's)
        r = run(["cat", "/etc/resolv.conf"], base_env())
        check(r[1] == rc, "a child read %r" % (r,))
        # /etc/hosts comes first: no query for a name it has
        with DnsServer() as srv:
            g = gai("pinned", base_env(), "inet")
            check(g.code == 0 and g.addrs == ["127.0.0.9"], "pinned: %r" % (g,))
            check(srv.count() == 0, "queries for a name in hosts: %r" % srv.queries())
        check(pr.mounted and "/etc/resolv.conf" in pr.mounted, "mounted %r" % pr.mounted)
    after = {p: _read(p) for p in before}
    check(after == before, "files not restored: %r != %r" % (after, before))


def test_dns_fixture_answers_a_and_aaaa():
    env = base_env()
    with DnsServer(names={"dual": ["127.0.0.1", "::1"]}) as srv, private_resolver():
        srv.set("v4only", "answer", v4=["127.0.0.2", "127.0.0.3"])
        g = gai("dual", env)
        check(g.code == 0 and sorted(g.addrs) == ["127.0.0.1", "::1"], "dual: %r" % (g,))
        g = gai("V4ONLY.", env, "inet")
        check(g.code == 0 and sorted(g.addrs) == ["127.0.0.2", "127.0.0.3"], "v4only: %r" % (g,))
        # a name with no AAAA: NOERROR with an empty answer -> EAI_NODATA for
        # AF_INET6, and just the A records for AF_UNSPEC
        g = gai("v4only", env, "inet6")
        check(g.code == EAI_NODATA, "v4only AF_INET6: %r" % (g,))
        g = gai("v4only", env)
        check(g.code == 0 and sorted(g.addrs) == ["127.0.0.2", "127.0.0.3"], "unspec: %r" % (g,))
        # AF_INET asks A, AF_INET6 AAAA, AF_UNSPEC both (in parallel)
        check(srv.wait_for(4, name="v4only", timeout=2) == 4, "v4only queries: %r"
              % srv.queries("v4only"))
        q = srv.queries("v4only")
        check(len(q) == 4 and [x.qtype for x in q[:2]] == ["A", "AAAA"]
              and sorted(x.qtype for x in q[2:]) == ["A", "AAAA"]
              and all(x.proto == "udp" for x in q), "v4only queries: %r" % q)
        check(srv.count("dual", "A") == 1 and srv.count("dual", "AAAA") == 1,
              "dual queries: %r" % srv.queries("dual"))
        check(all(x.mode == "answer" for x in srv.queries()), "modes %r" % srv.queries())
        check(not srv.errors, "malformed queries: %r" % srv.errors)


def test_dns_fixture_truncation_falls_back_to_tcp():
    """glibc re-asks over TCP (A and AAAA on one connection) after a
    truncated UDP reply."""
    with DnsServer() as srv, private_resolver():
        srv.set("big", "truncate", v4=["127.0.0.4"], v6=["::1"])
        g = gai("big", base_env())
        check(g.code == 0 and sorted(g.addrs) == ["127.0.0.4", "::1"], "big: %r" % (g,))
        check(srv.count("big", proto="udp") == 2 and srv.count("big", proto="tcp") == 2,
              "queries: %r" % srv.queries())
        rc, out, err = run(["getent", "ahosts", "big"], base_env())
        check(rc == 0 and "127.0.0.4" in out, "getent: %r %r" % (out, err))


def test_dns_fixture_per_type_mode():
    """A answered, AAAA SERVFAIL (a resolver broken for AAAA): glibc's
    AF_UNSPEC lookup succeeds with the A record (the AAAA failure is
    hidden), AF_INET6 fails with EAI_AGAIN."""
    env = base_env()
    with DnsServer() as srv, private_resolver():
        srv.set("half", "answer", v4=["127.0.0.5"])
        srv.set("half", "servfail", qtype="AAAA")
        check(srv.mode_of("half", "AAAA").mode == "servfail"
              and srv.mode_of("half", "A").mode == "answer", "mode_of")
        g4 = gai("half", env, "inet")
        check(g4.code == 0 and g4.addrs == ["127.0.0.5"], "AF_INET: %r" % (g4,))
        g = gai("half", env)
        check(g.code == 0 and g.addrs == ["127.0.0.5"], "AF_UNSPEC: %r" % (g,))
        g6 = gai("half", env, "inet6")
        check(g6.code == EAI_AGAIN, "AF_INET6: %r" % (g6,))
        srv.unset("half", qtype="AAAA")
        g = gai("half", env, "inet6")
        check(g.code == EAI_NODATA, "after unset: %r" % (g,))


def test_dns_fixture_plain_getaddrinfo_per_mode():
    """Without the shim, one lookup per mode: the code, its time, and the
    queries that reached the server (attempts:1: one A and one AAAA)."""
    env = base_env()
    with DnsServer(default="nxdomain") as srv, private_resolver(timeout=1, attempts=1):
        for mode, code in sorted(FAILING.items()):
            name = "plain-%s" % mode
            srv.set(name, mode, v4=["127.0.0.1"])
            g = gai(name, env)
            check(g.code == code, "%s: code %d, want %d (%r)" % (mode, g.code, code, g))
            check(srv.wait_for(2, name=name, timeout=2) == 2, "%s queries" % mode)
            q = srv.queries(name)
            check(sorted(x.qtype for x in q) == ["A", "AAAA"], "%s queries %r" % (mode, q))
            if mode == "drop":
                check(0.9 <= g.seconds < 3.0, "drop took %.3fs" % g.seconds)
            else:
                check(g.seconds < 0.9, "%s took %.3fs" % (mode, g.seconds))
            _note("    getaddrinfo %-8s -> %d in %.3fs, %d queries" % (
                mode, g.code, g.seconds, len(q)))
        # the default applies to every other name
        g = gai("never-set", env)
        check(g.code == EAI_NONAME, "default nxdomain: %r" % (g,))
        srv.set_default("servfail")
        g = gai("never-set", env)
        check(g.code == EAI_AGAIN, "default servfail: %r" % (g,))


def test_dns_fixture_plain_getent_and_curl_per_mode():
    """getent ahosts exits 2 for every failure (it cannot tell them apart);
    curl exits 6 "Could not resolve host"; both succeed in mode answer."""
    env = base_env()
    with HttpServer(free_port()) as http, DnsServer() as srv, private_resolver():
        for mode in ("answer",) + tuple(sorted(FAILING)):
            name = "tool-%s" % mode
            srv.set(name, mode, v4=["127.0.0.1"])
            rc, out, err, s = _timed(["getent", "ahosts", name], env)
            want = 0 if mode == "answer" else 2
            check(rc == want, "getent %s: rc %d, want %d (%r %r)" % (mode, rc, want, out, err))
            n_getent = srv.wait_for(2, name=name, timeout=2)
            rc2, out2, err2, s2 = _timed(_curl(name, http.port), env)
            want = 0 if mode == "answer" else 6
            check(rc2 == want, "curl %s: rc %d, want %d (%r)" % (mode, rc2, want, err2))
            if want:
                check("Could not resolve host" in err2, "curl %s: %r" % (mode, err2))
            if mode == "drop":
                check(s >= 0.9 and s2 >= 0.9, "drop: getent %.3fs, curl %.3fs" % (s, s2))
            n = srv.count(name)
            check(n_getent == 2 and n == 4, "%s: %d queries (getent %d)" % (mode, n, n_getent))
            _note("    %-8s getent rc %d %.3fs, curl rc %d %.3fs" % (mode, rc, s, rc2, s2))
        check(len(http.accepts) == 1, "curl's connects: %r" % http.accepts)


def test_dns_fixture_name_appearing_late_is_not_waited_for():
    """The name fails (NXDOMAIN, then SERVFAIL) until 1 s after the first
    query for it arrives: plain getaddrinfo and curl, started together,
    fail at once and ask no more; the same lookup after the change
    succeeds. (The change is scheduled only once all 4 queries arrived, so
    the outcome does not depend on how fast the machine is.)"""
    env = base_env()
    with HttpServer(free_port()) as http, DnsServer() as srv, private_resolver():
        for mode, code in (("nxdomain", EAI_NONAME), ("servfail", EAI_AGAIN)):
            name = "late-%s" % mode
            srv.set(name, mode)
            res = {}
            clients = [
                threading.Thread(target=lambda: res.update(gai=gai(name, env)), daemon=True),
                threading.Thread(target=lambda: res.update(curl=run(_curl(name, http.port), env)),
                                 daemon=True)]
            for th in clients:
                th.start()
            check(srv.wait_for(4, name=name, timeout=10) == 4,
                  "%s: queries %r" % (mode, srv.queries(name)))
            appeared = srv.set_later(1.0, name, "answer", v4=["127.0.0.1"])
            for th in clients:
                th.join(15)
            check(appeared.wait(5), "the name never appeared")
            srv.settled(0.3, timeout=3)
            g, (rc, out, err) = res.get("gai"), res.get("curl", (None, "", ""))
            check(g is not None and g.code == code, "%s: getaddrinfo %r" % (mode, g))
            check(rc == 6, "%s: curl rc %r %r" % (mode, rc, err))
            q = srv.queries(name)
            check(len(q) == 4 and all(x.t < appeared.at and x.mode == mode for x in q),
                  "%s: queries %r, change at %.3f" % (mode, q, appeared.at))
            g2 = gai(name, env)
            check(g2.code == 0 and g2.addrs == ["127.0.0.1"], "%s: after: %r" % (mode, g2))
            _note("    %s: plain lookup failed at +%.3fs, name appeared at +%.3fs"
                  % (mode, g.end - q[0].t, appeared.at - q[0].t))
        check(len(http.accepts) == 0, "curl connected: %r" % http.accepts)


def test_dns_fixture_glibc_resends_per_attempt():
    """glibc's own retries (attempts:2): SERVFAIL and REFUSED are re-asked at
    once (no wait), a dropped query after `timeout`; NXDOMAIN is never
    re-asked. With `single-request` a failed A stops the lookup: no AAAA."""
    env = base_env()
    with DnsServer() as srv, private_resolver(timeout=1, attempts=2):
        for mode in ("servfail", "refused", "nxdomain", "drop"):
            name = "att-%s" % mode
            srv.set(name, mode)
            g = gai(name, env)
            check(g.code == FAILING[mode], "%s: %r" % (mode, g))
            want = 2 if mode == "nxdomain" else 4
            check(srv.wait_for(want, name=name, timeout=2) == want, "%s queries" % mode)
            t = srv.times(name)
            if mode == "drop":
                check(0.8 <= t[2] - t[0] <= 1.6 and 1.8 <= g.seconds < 4,
                      "drop: queries at %r, %.3fs" % ([x - t[0] for x in t], g.seconds))
            else:
                check(t[-1] - t[0] < 0.5 and g.seconds < 0.9,
                      "%s: queries at %r" % (mode, [x - t[0] for x in t]))
    with DnsServer() as srv, private_resolver(timeout=1, attempts=2, options=["single-request"]):
        srv.set("sr", "servfail")
        g = gai("sr", env)
        check(g.code == EAI_AGAIN, "single-request: %r" % (g,))
        srv.settled(0.2, timeout=2)
        check([x.qtype for x in srv.queries("sr")] == ["A", "A"],
              "single-request: %r" % srv.queries("sr"))


def test_dns_fixture_search_domains():
    """`search example.test`: a dotless name is asked qualified first, then
    as is; a name with a dot (ndots:1) as is first; a trailing dot never
    qualified. A SERVFAIL on any candidate makes the whole lookup
    EAI_AGAIN, even when the last candidate says NXDOMAIN."""
    env = base_env()
    with DnsServer() as srv, private_resolver(search="example.test"):
        cases = [("db", ["db.example.test", "db"]), ("db.", ["db"]),
                 ("db.svc", ["db.svc", "db.svc.example.test"])]
        for name, order in cases:
            srv.clear()
            g = gai(name, env)
            check(g.code == EAI_NONAME, "%s: %r" % (name, g))
            srv.settled(0.2, timeout=2)
            check(srv.names() == order, "%s asked as %r" % (name, srv.names()))
        srv.clear()
        srv.set("db.example.test", "servfail")
        g = gai("db", env)
        check(g.code == EAI_AGAIN and srv.wait_for(4, timeout=2) == 4,
              "servfail then nxdomain: %r %r" % (g, srv.queries()))
        srv.set("db", "answer", v4=["127.0.0.1"])
        g = gai("db", env)
        check(g.code == 0 and g.addrs == ["127.0.0.1"], "servfail then answer: %r" % (g,))


def test_dns_fixture_stops_cleanly():
    srv = DnsServer(default="answer")
    ev = srv.set_later(30, "x", "nxdomain")
    threads = list(srv.threads)
    srv.close()
    check(not any(th.is_alive() for th in threads), "server threads still running")
    check(not any(t.is_alive() for t in srv.timers), "a timer still running")
    check(not ev.is_set(), "the timer fired")
    # port 53 is free again at once, UDP and TCP
    with DnsServer(default="drop") as again:
        check(again.count() == 0, "a fresh server has queries")
    for bad in ("nx", "NXDOMAIN"):
        try:
            again.set("x", bad)
            accepted = True
        except ValueError:
            accepted = False
        check(not accepted, "mode %r accepted" % bad)
    check(set(MODES) >= set(FAILING) | {"answer", "truncate"}, "modes %r" % (MODES,))


def test_dns_fixture_tcp_drop_holds_the_connection():
    """Mode drop over TCP: the connection is accepted and never answered
    (a client's own timeout ends it); the server still stops at once."""
    with DnsServer(default="drop") as srv:
        c = socket.create_connection(("127.0.0.1", 53), timeout=2)
        q = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
             b"\x02db\x00\x00\x01\x00\x01")
        c.sendall(len(q).to_bytes(2, "big") + q)
        check(srv.wait_for(1, name="db", proto="tcp", timeout=2) == 1, "no TCP query seen")
        c.settimeout(0.3)
        try:
            got = c.recv(100)
        except socket.timeout:
            got = None
        check(got is None, "an answer came: %r" % got)
        srv.set("db", "answer", v4=["127.0.0.1"])
        c.sendall(len(q).to_bytes(2, "big") + q)
        c.settimeout(2)
        head = c.recv(2)
        check(len(head) == 2, "no answer on the same connection")
        body = b""
        for _ in range(20):
            if len(body) >= int.from_bytes(head, "big"):
                break
            body += c.recv(512)
        check(body[:2] == b"\x12\x34" and body[3] & 0xF == 0 and body[-4:] == bytes(
            [127, 0, 0, 1]), "answer %r" % body)
        c.close()

"""A DNS fixture for the getaddrinfo tests (issue 22): a small DNS server on
127.0.0.1:53 whose answer for each name a test sets and changes at run time,
and a private resolver configuration that sends the C library's lookups to it.

    from dns import DnsServer, private_resolver, gai
    with DnsServer(default="nxdomain") as srv, private_resolver():
        srv.set("db", "answer", v4=["127.0.0.1"])  # db. -> 127.0.0.1, AAAA: NODATA
        srv.set("late", "drop")                     # no reply at all
        srv.set("half", "servfail", qtype="AAAA")   # per query type, if needed
        srv.set_later(1.0, "late", "answer", v4=["127.0.0.1"])  # appears at +1 s
        r = gai("missing", base_env())              # a fresh process's getaddrinfo
        # r.code == -2 (EAI_NONAME), r.seconds, r.addrs
        srv.wait_for(2, name="missing", timeout=5)  # the A and AAAA queries arrived
        srv.queries("missing")                      # [Query(t, name, qtype, proto, mode, id)]

Modes, per name or the default for every name not set: "answer" (the name's
addresses: A and AAAA records, an empty NOERROR answer for a type it has none
of, or for any other query type), "nxdomain" (RCODE 3), "servfail" (RCODE 2),
"refused" (RCODE 5), "drop" (no reply; over TCP the connection is held open
and never answered) and "truncate" (over UDP an empty reply with TC set, over
TCP the answer, as "answer": glibc's fallback to TCP).

Names are compared without case and without the trailing dot: "db", "db." and
"DB." are one name. A name the resolver qualifies with a search domain
arrives (and is counted) as the qualified name, e.g. "db.example.test".

Everything is loopback only. private_resolver() bind-mounts files over
/etc/resolv.conf, /etc/hosts and, when needed, /etc/nsswitch.conf, so it
refuses to run in the machine's own mount namespace: use it under run.py
(which unshares one per run) or under `unshare --mount`.
"""
import collections
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

MODES = ("answer", "nxdomain", "servfail", "refused", "drop", "truncate")
RCODE = {"answer": 0, "truncate": 0, "nxdomain": 3, "servfail": 2, "refused": 5}
QTYPE_A, QTYPE_AAAA = 1, 28
QTYPE_NAMES = {1: "A", 28: "AAAA", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT",
               33: "SRV", 64: "SVCB", 65: "HTTPS", 255: "ANY"}

# getaddrinfo's errors (glibc's <netdb.h>)
EAI_NONAME, EAI_AGAIN, EAI_FAIL, EAI_NODATA = -2, -3, -4, -5

Query = collections.namedtuple("Query", "t name qtype proto mode id")
Entry = collections.namedtuple("Entry", "mode v4 v6 ttl")


def norm(name):
    return name.lower().rstrip(".")


class DnsError(Exception):
    pass


def _parse_query(data):
    """(id, flags, qname, qtype, qclass, end of question) of a query; raises
    DnsError on a malformed one."""
    if len(data) < 12:
        raise DnsError("short header")
    qid, flags, qd = struct.unpack("!HHH", data[:6])
    if qd != 1:
        raise DnsError("qdcount %d" % qd)
    labels, i = [], 12
    for _ in range(128):
        if i >= len(data):
            raise DnsError("name runs off the end")
        n = data[i]
        i += 1
        if n == 0:
            break
        if n & 0xC0:
            raise DnsError("compressed question name")
        labels.append(data[i:i + n].decode("ascii", "replace"))
        i += n
    else:
        raise DnsError("too many labels")
    if i + 4 > len(data):
        raise DnsError("no qtype/qclass")
    qtype, qclass = struct.unpack("!HH", data[i:i + 4])
    return qid, flags, ".".join(labels), qtype, qclass, i + 4


def _reply(data, qid, flags, qend, rcode, answers=(), tc=False):
    """A reply echoing the question (data[12:qend]) with `answers`, a list
    of (type, rdata) records for the question's name, TTL per record."""
    rd = flags & 0x0100
    opcode = flags & 0x7800
    out_flags = 0x8000 | opcode | 0x0400 | rd | 0x0080 | (0x0200 if tc else 0) | rcode
    head = struct.pack("!HHHHHH", qid, out_flags, 1, len(answers), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, t, 1, ttl, len(rdata)) + rdata
                    for t, ttl, rdata in answers)
    return head + data[12:qend] + body


class DnsServer:
    """An authoritative-looking DNS server on host:port (UDP, and TCP unless
    tcp=False) in threads of its own. `default` is the mode of every name
    not set(); `names` maps names to lists of addresses (v4 and v6 mixed) to
    answer, as set(name, "answer", ...) would. Thread-safe: set(),
    set_default() and set_later() may be called from any thread while
    lookups run, and queries()/count()/wait_for() observe the lookups that
    arrived (each with a time.monotonic() stamp taken on arrival)."""

    def __init__(self, host="127.0.0.1", port=53, default="nxdomain", names=None, ttl=0,
                 tcp=True):
        self.host, self.port, self.ttl = host, port, ttl
        self.cond = threading.Condition()
        self.entries = {}
        self.default = self._entry(default, (), (), ttl)
        self.log = []
        self.errors = []
        self.stopping = False
        self.timers = []
        for name, addrs in (names or {}).items():
            self.set(name, "answer", addrs=addrs)
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.udp = socket.socket(fam, socket.SOCK_DGRAM)
        self.udp.bind((host, port))
        self.udp.settimeout(0.05)
        self.tcp = None
        if tcp:
            self.tcp = socket.socket(fam, socket.SOCK_STREAM)
            self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                self.tcp.bind((host, port))
            except OSError:
                self.udp.close()
                self.tcp.close()
                raise
            self.tcp.listen(16)
            self.tcp.settimeout(0.05)
        self.threads = [threading.Thread(target=self._udp_loop, daemon=True)]
        if self.tcp:
            self.threads.append(threading.Thread(target=self._tcp_loop, daemon=True))
        self.conn_threads = []
        for th in self.threads:
            th.start()

    # ---- configuration (thread-safe) ----

    @staticmethod
    def _entry(mode, v4, v6, ttl):
        if mode not in MODES:
            raise ValueError("unknown mode %r (one of %s)" % (mode, ", ".join(MODES)))
        return Entry(mode, tuple(v4), tuple(v6), ttl)

    def set(self, name, mode, v4=(), v6=(), addrs=(), ttl=None, qtype=None):
        """Make `name` answer per `mode`; its addresses: v4 and v6, or addrs
        (both kinds mixed), used by "answer" and "truncate". With qtype ("A",
        "AAAA", ...), only the queries of that type: a setting for the name
        and type wins over one for the name, which wins over the default."""
        v4, v6 = list(v4), list(v6)
        for a in addrs:
            (v6 if ":" in a else v4).append(a)
        for a in v4:
            socket.inet_pton(socket.AF_INET, a)
        for a in v6:
            socket.inet_pton(socket.AF_INET6, a)
        e = self._entry(mode, v4, v6, self.ttl if ttl is None else ttl)
        with self.cond:
            self.entries[(norm(name), qtype)] = e
            self.cond.notify_all()

    def unset(self, name, qtype=None):
        """`name` (its `qtype` queries only, with qtype) falls back to the
        default mode."""
        with self.cond:
            self.entries.pop((norm(name), qtype), None)

    def set_default(self, mode):
        with self.cond:
            self.default = self._entry(mode, (), (), self.ttl)

    def set_later(self, delay, name, mode, **kw):
        """set(name, mode, **kw) after `delay` seconds, from a timer thread.
        Returns a threading.Event set once the change is in force (its
        attribute `at` is then the time.monotonic() of the change). The timer
        is cancelled by close() if it has not fired."""
        done = threading.Event()
        done.at = None

        def fire():
            if self.stopping:
                return
            self.set(name, mode, **kw)
            done.at = time.monotonic()
            done.set()

        t = threading.Timer(delay, fire)
        t.daemon = True
        with self.cond:
            self.timers.append(t)
        t.start()
        return done

    def _lookup(self, name, qtype):
        return (self.entries.get((name, qtype)) or self.entries.get((name, None))
                or self.default)

    def mode_of(self, name, qtype="A"):
        """The Entry(mode, v4, v6, ttl) a query would get now."""
        with self.cond:
            return self._lookup(norm(name), qtype)

    # ---- observation (thread-safe) ----

    def queries(self, name=None, qtype=None, proto=None):
        """The queries that arrived, oldest first, optionally only those for
        `name` (normalised), of `qtype` ("A", "AAAA", ...) and over `proto`
        ("udp", "tcp")."""
        with self.cond:
            log = list(self.log)
        return [q for q in log
                if (name is None or q.name == norm(name))
                and (qtype is None or q.qtype == qtype)
                and (proto is None or q.proto == proto)]

    def count(self, name=None, qtype=None, proto=None):
        return len(self.queries(name, qtype, proto))

    def times(self, name=None, qtype=None, proto=None):
        return [q.t for q in self.queries(name, qtype, proto)]

    def names(self):
        """Every name asked for, in order of first arrival."""
        seen = []
        for q in self.queries():
            if q.name not in seen:
                seen.append(q.name)
        return seen

    def wait_for(self, n, name=None, qtype=None, proto=None, timeout=5.0):
        """Block until at least n matching queries arrived, or timeout;
        returns the number that arrived."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                c = sum(1 for q in self.log
                        if (name is None or q.name == norm(name))
                        and (qtype is None or q.qtype == qtype)
                        and (proto is None or q.proto == proto))
                left = end - time.monotonic()
                if c >= n or left <= 0:
                    return c
                self.cond.wait(left)

    def settled(self, quiet=0.3, timeout=5.0):
        """Wait until no query arrived for `quiet` seconds (or timeout);
        returns the number of queries then."""
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                last = self.log[-1].t if self.log else 0.0
                now = time.monotonic()
                if now - last >= quiet or now >= end:
                    return len(self.log)
                self.cond.wait(min(quiet - (now - last), end - now))

    def clear(self):
        """Forget the queries seen so far."""
        with self.cond:
            self.log = []

    # ---- serving ----

    def _answer(self, data, proto):
        """The reply to one query, or None to send nothing."""
        t = time.monotonic()
        try:
            qid, flags, qname, qtype, qclass, qend = _parse_query(data)
        except DnsError as e:
            with self.cond:
                self.errors.append(str(e))
            return None
        name, tname = norm(qname), QTYPE_NAMES.get(qtype, str(qtype))
        with self.cond:
            e = self._lookup(name, tname)
            self.log.append(Query(t, name, tname, proto, e.mode, qid))
            self.cond.notify_all()
        if e.mode == "drop":
            return None
        if e.mode == "truncate" and proto == "udp":
            return _reply(data, qid, flags, qend, 0, tc=True)
        answers = []
        if e.mode in ("answer", "truncate") and qclass == 1:
            if qtype == QTYPE_A:
                answers = [(QTYPE_A, e.ttl, socket.inet_pton(socket.AF_INET, a)) for a in e.v4]
            elif qtype == QTYPE_AAAA:
                answers = [(QTYPE_AAAA, e.ttl, socket.inet_pton(socket.AF_INET6, a))
                           for a in e.v6]
        return _reply(data, qid, flags, qend, RCODE[e.mode], answers)

    def _udp_loop(self):
        while not self.stopping:
            try:
                data, peer = self.udp.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            out = self._answer(data, "udp")
            if out is not None:
                try:
                    self.udp.sendto(out, peer)
                except OSError:
                    pass

    def _tcp_loop(self):
        while not self.stopping:
            try:
                c, _ = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            th = threading.Thread(target=self._tcp_conn, args=(c,), daemon=True)
            th.start()
            with self.cond:
                self.conn_threads = [x for x in self.conn_threads if x.is_alive()] + [th]

    def _recv_exact(self, c, n):
        buf = b""
        while len(buf) < n and not self.stopping:
            try:
                d = c.recv(n - len(buf))
            except socket.timeout:
                continue
            if not d:
                return None
            buf += d
        return buf if len(buf) == n else None

    def _tcp_conn(self, c):
        """Several queries may come on one connection (glibc sends A and
        AAAA on one); each is a 2-byte length and the message."""
        with c:
            c.settimeout(0.05)
            try:
                for _ in range(64):
                    head = self._recv_exact(c, 2)
                    if head is None:
                        return
                    data = self._recv_exact(c, struct.unpack("!H", head)[0])
                    if data is None:
                        return
                    out = self._answer(data, "tcp")
                    if out is not None:
                        c.sendall(struct.pack("!H", len(out)) + out)
            except OSError:
                return

    def close(self):
        self.stopping = True
        with self.cond:
            timers, conns = list(self.timers), list(self.conn_threads)
        for t in timers:
            t.cancel()
        for th in self.threads + conns:
            th.join(2)
        self.udp.close()
        if self.tcp:
            self.tcp.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# ---- a private resolver configuration ----

HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def _private_mount_ns():
    """True if this process's mount namespace is known not to be the
    machine's (so a bind mount here is seen by this process and its children
    only): run.py's re-executed run marks its environment; a process that
    `unshare --mount` started is in another namespace than its parent. (PID
    1 is no reference: on some machines it is in a namespace of its own, and
    from inside a namespace its link cannot be read.)"""
    if os.environ.get("BACKOFFSHIM_TEST_NETNS") == "1":
        return True
    try:
        return os.readlink("/proc/self/ns/mnt") != os.readlink("/proc/%d/ns/mnt" % os.getppid())
    except OSError:
        return False


def nsswitch_hosts(path="/etc/nsswitch.conf"):
    """The sources of the hosts line of nsswitch.conf, e.g. ["files", "dns"]."""
    try:
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line.startswith("hosts:"):
                    return line.split(":", 1)[1].split()
    except OSError:
        pass
    return []


def _mount_bind(src, dst):
    r = subprocess.run(["mount", "--bind", src, dst], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    if r.returncode != 0:
        raise OSError("mount --bind %s %s: %s" % (src, dst, r.stdout.strip()))


def _umount(dst):
    subprocess.run(["umount", dst], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=10)


class private_resolver:
    """Context manager: within it, this mount namespace's /etc/resolv.conf
    is `nameserver NS` + `options timeout:T attempts:A` (+ `search`, + more
    options), /etc/hosts holds only localhost (+ `hosts`, extra lines of
    "ADDR NAME"), and nsswitch.conf's hosts line is `files dns` (a private
    copy is mounted only if the machine's says otherwise, or if
    nsswitch=... asks for another line). Every mount is undone at exit.

    .resolv_conf, .hosts_file: the text mounted; .mounted: the paths covered."""

    def __init__(self, nameserver="127.0.0.1", timeout=1, attempts=1, options=(),
                 search=None, hosts=(), nsswitch=None):
        self.resolv_conf = "nameserver %s\n" % nameserver
        if search:
            self.resolv_conf += "search %s\n" % " ".join(
                [search] if isinstance(search, str) else search)
        opts = ["timeout:%d" % timeout, "attempts:%d" % attempts] + list(options)
        self.resolv_conf += "options %s\n" % " ".join(opts)
        self.hosts_file = HOSTS + "".join("%s\n" % h for h in hosts)
        self.nsswitch = nsswitch
        self.mounted = []
        self.tmp = None

    def __enter__(self):
        if not _private_mount_ns():
            raise RuntimeError("private_resolver: this is the machine's mount namespace; "
                               "run under run.py or `unshare --mount`")
        self.tmp = tempfile.mkdtemp(prefix="bs-dns-")
        os.chmod(self.tmp, 0o755)
        files = [("/etc/resolv.conf", self.resolv_conf), ("/etc/hosts", self.hosts_file)]
        want = self.nsswitch.split() if self.nsswitch else ["files", "dns"]
        if nsswitch_hosts() != want:
            with open("/etc/nsswitch.conf") as f:
                lines = [ln for ln in f if not ln.strip().startswith("hosts:")]
            files.append(("/etc/nsswitch.conf",
                          "".join(lines) + "hosts: %s\n" % " ".join(want)))
        try:
            for dst, text in files:
                src = os.path.join(self.tmp, os.path.basename(dst))
                with open(src, "w") as f:
                    f.write(text)
                os.chmod(src, 0o644)
                _mount_bind(src, dst)
                self.mounted.append(dst)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *a):
        for dst in reversed(self.mounted):
            _umount(dst)
        self.mounted = []
        if self.tmp:
            for n in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, n))
            os.rmdir(self.tmp)
            self.tmp = None


# ---- a plain getaddrinfo caller ----

# Prints one JSON line: {"code": 0 or the EAI_ code, "addrs": [...],
# "seconds": the time getaddrinfo took}. A fresh process, so that a test can
# run it with and without LD_PRELOAD.
GAI_PY = r"""
import json, socket, sys, time
name, fam = sys.argv[1], {"unspec": socket.AF_UNSPEC, "inet": socket.AF_INET,
                          "inet6": socket.AF_INET6}[sys.argv[2]]
t0 = time.monotonic()
try:
    r = socket.getaddrinfo(name, 80, fam, socket.SOCK_STREAM)
    code, addrs = 0, [a[4][0] for a in r]
except socket.gaierror as e:
    code, addrs = e.errno, []
print(json.dumps({"code": code, "addrs": addrs, "seconds": time.monotonic() - t0,
                  "start": t0}))
"""

GaiResult = collections.namedtuple("GaiResult", "code addrs seconds start end")


def gai(name, env, family="unspec", timeout=20):
    """getaddrinfo(name, "80", family, SOCK_STREAM) in a fresh python3
    process run with `env`. Returns GaiResult(code: 0 or EAI_*, addrs,
    seconds spent in getaddrinfo, start and end: time.monotonic() of the
    call's start and of the process's exit, comparable with the server's
    query stamps: CLOCK_MONOTONIC is system-wide)."""
    r = subprocess.run([sys.executable, "-c", GAI_PY, name, family], env=env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    end = time.monotonic()
    if r.returncode != 0 or not r.stdout.strip():
        raise RuntimeError("gai %s: rc %d, %r %r" % (name, r.returncode, r.stdout,
                                                      r.stderr[-400:]))
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return GaiResult(d["code"], d["addrs"], d["seconds"], d["start"], end)

"""Real servers on loopback for integration tests: HttpServer, Postgres, Redis.

Each is a context manager with start() / stop() / restart(); start() may
come after the client started (against a dead port), and stop() + start()
reuse the same port. Readiness is checked by connecting, with a bound on the
tries and on each try; between tries the fixture waits on the server itself
(its process or thread exiting), never on a bare sleep. start() returns self
and keeps its duration in `start_seconds`. Only 127.0.0.1 (HttpServer also
::1) is used.
"""
import glob, os, pwd, shutil, signal, socket, subprocess, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lib import TestFailure, base_env, check, free_port  # noqa: F401  (re-exported)

BODY = b"hello from server\n"


def wait_ready(what, probe, died, tries, interval, log=lambda: ""):
    """Call probe() up to `tries` times; between tries wait up to `interval`
    seconds in died(interval), which says whether the server has exited."""
    t0 = time.monotonic()
    for _ in range(tries):
        if probe():
            return time.monotonic() - t0
        if died(interval):
            raise TestFailure("%s exited before it was ready; log: %s" % (what, log()[-800:]))
    raise TestFailure("%s not ready after %d tries (%.1fs); log: %s"
                      % (what, tries, time.monotonic() - t0, log()[-800:]))


def clean_env():
    """Environment without the shim and without any libpq PG* variable."""
    return {k: v for k, v in base_env().items() if not k.startswith("PG")}


class _Fixture:
    start_seconds = None

    def restart(self):
        self.stop()
        return self.start()

    def close(self):
        self.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


class _Handler(BaseHTTPRequestHandler):
    timeout = 5  # a client that connects and never sends a request

    def do_GET(self):
        body = BODY if self.path == "/" else b"not found\n"
        self.send_response(200 if self.path == "/" else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class HttpServer(_Fixture):
    """Threaded HTTP/1.0 server: GET / -> 200 "hello from server\\n".
    `accepts` holds the time.monotonic() of every accepted client connection,
    across restarts (the readiness probe's own connection is not counted)."""

    def __init__(self, port, host="127.0.0.1", tries=100, interval=0.05):
        self.port, self.host, self.tries, self.interval = port, host, tries, interval
        self.family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.accepts, self._srv, self._thread, self._probe_addr = [], None, None, None

    def start(self):
        check(self._srv is None, "HttpServer :%d already started" % self.port)
        t0, owner = time.monotonic(), self

        class Srv(ThreadingHTTPServer):
            address_family = self.family
            allow_reuse_address = True
            daemon_threads = True

            def get_request(self):
                conn, addr = self.socket.accept()
                if addr[:2] != owner._probe_addr:
                    owner.accepts.append(time.monotonic())
                return conn, addr

            def handle_error(self, request, client_address):
                pass  # a client resetting its connection is not a server error

        self._srv = Srv((self.host, self.port), _Handler)
        self._thread = threading.Thread(target=self._srv.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        wait_ready("HttpServer :%d" % self.port, self._probe, self._died,
                   self.tries, self.interval)
        self.start_seconds = time.monotonic() - t0
        return self

    def _died(self, interval):
        self._thread.join(interval)
        return not self._thread.is_alive()

    def _probe(self):
        try:
            with socket.socket(self.family, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.bind((self.host, 0))  # known before connect: not counted as an accept
                self._probe_addr = s.getsockname()[:2]
                s.connect((self.host, self.port))
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                with s.makefile("rb") as f:
                    data = f.read(4096)  # to EOF: one response, then the server closes
                return data.startswith(b"HTTP/1.0 200") and data.endswith(BODY)
        except OSError:
            return False

    def stop(self):
        if self._srv is None:
            return
        self._srv.shutdown()
        self._srv.server_close()
        self._thread.join(5)
        self._srv = self._thread = None


class _ProcFixture(_Fixture):
    """A server run as a child process; output goes to self.dir/LOG."""
    LOG, STOP_SIGNAL = "server.log", signal.SIGTERM

    def __init__(self, port, tries, interval):
        self.port, self.tries, self.interval = port, tries, interval
        self.proc = self._logf = None

    def _spawn(self, cmd, env):
        self._logf = open(os.path.join(self.dir, self.LOG), "ab")
        self.proc = subprocess.Popen(cmd, env=env, cwd=self.dir, stdin=subprocess.DEVNULL,
                                     stdout=self._logf, stderr=subprocess.STDOUT)

    def _ready(self, what, probe, t0):
        try:
            wait_ready(what, probe, self._died, self.tries, self.interval, self.log)
        except TestFailure:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _died(self, interval):
        try:
            return self.proc.wait(interval) is not None
        except subprocess.TimeoutExpired:
            return False

    def log(self):
        try:
            with open(os.path.join(self.dir, self.LOG), errors="replace") as f:
                return f.read()
        except (OSError, TypeError):
            return ""

    def _signal_target(self):
        return self.proc.pid

    def stop(self):
        """Signal the server and wait for it (bounded); SIGKILL as a last resort."""
        if self.proc is None:
            return
        for how in ("signal", "terminate", "kill"):
            if self.proc.poll() is not None:
                break
            try:
                if how == "signal":
                    os.kill(self._signal_target(), self.STOP_SIGNAL)
                else:
                    getattr(self.proc, how)()
                self.proc.wait(30 if how == "signal" else 10)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                continue
        self.proc = None
        self._logf.close()

    def close(self):
        self.stop()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


class Postgres(_ProcFixture):
    """A throwaway PostgreSQL cluster on host:port (127.0.0.1 unless given; any
    127/8 address works, lo covers them all) (trust auth, no fsync).

    The first start() runs initdb into a tempfile.mkdtemp() dir owned by the
    `postgres` user (initdb and postgres run as that user via runuser; the Unix
    socket lives there too). restart() keeps the data; close() removes the dir.
    Ready when `pg_isready -h HOST -p P` succeeds. Client: self.psql + [sql].

    Leave PGCONNECT_TIMEOUT (and PGHOST, PGPORT, PGOPTIONS, ...) unset in the
    client's environment: libpq's connect_timeout bounds the whole connect,
    shim retries included (without it libpq polls with an infinite timeout).
    clean_env() gives an environment without any PG* variable.
    """
    USER, LOG = "postgres", "postgres.log"
    STOP_SIGNAL = signal.SIGINT  # fast shutdown: does not wait for clients
    clean_env = staticmethod(clean_env)

    def __init__(self, port, tries=200, interval=0.05, host="127.0.0.1"):
        super().__init__(port, tries, interval)
        self.host = host  # any 127/8 address: lo covers them all
        dirs = glob.glob("/usr/lib/postgresql/*/bin")
        check(dirs, "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
        self.bindir = max(dirs, key=lambda d: int(d.split("/")[-2].split(".")[0]))
        self.dir = None
        self.psql = ["psql", "-h", host, "-p", str(port), "-U", "postgres",
                     "-d", "postgres", "-tAc"]

    def _bin(self, name, *args):
        argv = [os.path.join(self.bindir, name)] + list(args)
        return (["runuser", "-u", self.USER, "--"] if os.geteuid() == 0 else []) + argv

    def _initdb(self):
        self.dir = tempfile.mkdtemp(prefix="bshim-pg-")
        if os.geteuid() == 0:
            pw = pwd.getpwnam(self.USER)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        r = subprocess.run(self._bin("initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                                     "-E", "UTF8", "--locale=C", "--no-sync",
                                     "--no-instructions"),
                           env=clean_env(), cwd=self.dir, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        check(r.returncode == 0, "initdb failed (%d): %s" % (r.returncode, r.stdout[-800:]))

    @property
    def data(self):
        return os.path.join(self.dir, "data")

    def start(self):
        check(self.proc is None, "Postgres :%d already started" % self.port)
        t0 = time.monotonic()
        if self.dir is None:
            self._initdb()
        self._spawn(self._bin("postgres", "-D", self.data, "-p", str(self.port), "-k", self.dir,
                              "-h", self.host, "-c", "fsync=off",
                              "-c", "full_page_writes=off", "-c", "synchronous_commit=off"),
                    clean_env())
        isready = [os.path.join(self.bindir, "pg_isready"), "-q", "-h", self.host,
                   "-p", str(self.port), "-U", "postgres", "-t", "1"]

        def probe():
            try:
                return subprocess.run(isready, env=clean_env(), stdin=subprocess.DEVNULL,
                                      timeout=5).returncode == 0
            except subprocess.TimeoutExpired:
                return False
        return self._ready("postgres :%d" % self.port, probe, t0)

    def _signal_target(self):
        # runuser is only the postmaster's waiting parent: signal the postmaster,
        # after checking that the pid file names our child (not a stale pid).
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pm = int(f.readline())
        if pm != self.proc.pid:
            with open("/proc/%d/stat" % pm) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != self.proc.pid:
                raise ValueError("postmaster.pid names pid %d, not our child" % pm)
        return pm


class Redis(_ProcFixture):
    """redis-server on 127.0.0.1:port without persistence; ready when a PING
    on a raw socket gets +PONG. stop() is SIGTERM and a bounded wait."""
    LOG = "redis.log"

    def __init__(self, port, tries=200, interval=0.05):
        super().__init__(port, tries, interval)
        self.dir = tempfile.mkdtemp(prefix="bshim-redis-")

    def start(self):
        check(self.proc is None, "Redis :%d already started" % self.port)
        t0 = time.monotonic()
        self._spawn(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--daemonize", "no",
                     "--dir", self.dir, "--logfile", ""], base_env())
        return self._ready("redis :%d" % self.port, self._probe, t0)

    def _probe(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False


class ReadyGate:
    """A server fixture seen through a port of its own that opens only once
    the server is ready: start() starts `inner` (on another port) and waits
    for its readiness probe, then listens on `port` and relays every
    connection to inner's. A client on `port` never meets a server that
    listens but is still starting (PostgreSQL answers "the database system
    is starting up" for a moment after it listens, longer on a loaded
    machine): what a late server means to a client is then one thing, the
    port refusing until the server can serve. stop() closes the port and the
    relays, then stops inner."""

    def __init__(self, inner, port):
        self.inner, self.port = inner, port
        self.lst, self.conns = None, []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        self.inner.close()

    def start(self):
        self.inner.start()
        self.lst = socket.socket()
        self.lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lst.bind(("127.0.0.1", self.port))
        self.lst.listen(64)
        threading.Thread(target=self._accept, args=(self.lst,), daemon=True).start()

    def stop(self):
        lst, self.lst = self.lst, None
        if lst is not None:
            lst.shutdown(socket.SHUT_RDWR)
            lst.close()
        for c in self.conns:
            c.close()
        self.conns = []
        self.inner.stop()

    def _accept(self, lst):
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return  # closed by stop()
            u = socket.create_connection(("127.0.0.1", self.inner.port), timeout=10)
            self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    @staticmethod
    def _relay(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass

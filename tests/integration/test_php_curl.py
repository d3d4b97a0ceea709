"""PHP's curl and pgsql extensions (issue 21). PHP opens every extension with
RTLD_DEEPBIND, so libcurl inside it binds connect() to libc, past the
preloaded shim; deepbind.c points the interposed calls of each object such
a dlopen newly loads at the shim, as a normal load binds them. mysqli
needs none of that: mysqlnd connects through PHP's stream layer, whose
connect() and poll() are the php executable's own. Each case runs PHP
with and without the shim and compares."""
import glob
import os
import shutil
import socket
import tempfile
import time

from lib import TestSkip, base_env, check, free_port, run, shim_env
from servers import _ProcFixture

CURL = r"""
$c = curl_init("http://127.0.0.1:" . $argv[1] . "/");
curl_setopt($c, CURLOPT_RETURNTRANSFER, true);
curl_setopt($c, CURLOPT_CONNECTTIMEOUT, 20);
$r = curl_exec($c);
echo $r === false ? "error " . curl_errno($c) . "\n" : "ok " . trim($r) . "\n";
"""


def _php():
    if not shutil.which("php") or not glob.glob("/usr/lib/php/*/curl.so"):
        raise TestSkip("php-cli and php-curl are not installed (scripts/install-deps test)")
    return ["php", "-r", CURL]


def test_php_curl_rides_out_a_late_server():
    """Without the shim: curl error 7 at once. With it: the connect is
    retried on the schedule (SYNs on the wire) and the transfer completes
    once the server is up."""
    from lib import SynSniffer, finish, spawn
    from servers import HttpServer
    port = free_port()
    cmd = _php() + [str(port)]
    rc, out, err = run(cmd, base_env())
    check(rc == 0 and out.strip() == "error 7", "without the shim: %r %r" % (out, err))
    with SynSniffer(port) as sn:
        p = spawn(cmd, shim_env(BACKOFFSHIM_LOG="info"))
        check(sn.wait_for(3, 10) >= 3, "too few attempts before the server started")
        with HttpServer(port, host="127.0.0.1"):
            rc, out, err = finish(p, 30)
    check(rc == 0 and out.strip() == "ok hello from server",
          "with the shim: rc=%d %r %r" % (rc, out, err[-400:]))
    check("next attempt" in err, "no retry was announced: %r" % err[-400:])


def test_php_with_the_shim_loads_the_same_extensions_and_says_nothing():
    """php -m (every extension loaded with RTLD_DEEPBIND) and a script that
    connects nowhere: the same output, nothing on stderr."""
    _php()
    for cmd in (["php", "-m"], ["php", "-r", 'echo "hello\\n";']):
        plain = run(cmd, base_env())
        got = run(cmd, shim_env())
        check(got == plain, "%s: with the shim %r, without %r" % (cmd[1], got, plain))


PGSQL = r"""
$c = @pg_connect("host=127.0.0.1 port=" . $argv[1] .
                 " user=postgres dbname=postgres connect_timeout=20");
if (!$c) { echo "error\n"; exit(0); }
$r = pg_query($c, "select 40 + 2");
echo "ok " . pg_fetch_result($r, 0, 0) . "\n";
"""


def _relay(to_port):
    """An Acceptor handler that pipes a connection to 127.0.0.1:to_port."""
    import select
    import socket

    def handle(c):
        with socket.create_connection(("127.0.0.1", to_port)) as u:
            for _ in range(100000):  # (bounded: a test's connection is short)
                r, _, _ = select.select([c, u], [], [], 10)
                if not r:
                    return
                for a in r:
                    data = a.recv(65536)
                    if not data:
                        return
                    (u if a is c else c).sendall(data)
    return handle


def test_php_pgsql_rides_out_a_late_server():
    """PHP's pgsql extension (libpq inside it, bound with RTLD_DEEPBIND):
    without the shim it fails at once; with it the connect is retried until
    the server is up (a ready PostgreSQL behind a relay that starts late,
    so that no attempt meets a server still starting)."""
    from lib import Acceptor, SynSniffer, finish, spawn
    from servers import Postgres, clean_env
    if not shutil.which("php") or not glob.glob("/usr/lib/php/*/pgsql.so"):
        raise TestSkip("php-pgsql is not installed")
    port, pg_port = free_port(), free_port()
    cmd = ["php", "-r", PGSQL, str(port)]
    rc, out, err = run(cmd, clean_env())
    check(rc == 0 and out.strip() == "error", "without the shim: %r %r" % (out, err))
    env = {k: v for k, v in shim_env(BACKOFFSHIM_INITIAL_BACKOFF="300ms").items()
           if not k.startswith("PG")}
    with Postgres(pg_port), SynSniffer(port) as sn:
        p = spawn(cmd, env)
        check(sn.wait_for(3, 10) >= 3, "too few attempts before the server started")
        with Acceptor(port, _relay(pg_port), threaded=True):
            rc, out, err = finish(p, 30)
    check(rc == 0 and out.strip() == "ok 42", "with the shim: rc=%d %r %r" % (rc, out, err[-400:]))


MYSQLI = r"""
mysqli_report(MYSQLI_REPORT_OFF);
$c = @mysqli_connect("127.0.0.1", "root", "", "", (int)$argv[1]);
if (!$c) { echo "error " . mysqli_connect_errno() . " " . mysqli_connect_error() . "\n"; exit(0); }
$r = mysqli_query($c, "SELECT 40+2");
echo $r ? "ok " . mysqli_fetch_row($r)[0] . "\n" : "error " . mysqli_errno($c) . "\n";
"""


def _mariadbd():
    """The MariaDB (or MySQL) server binary, or None; sbin may be off PATH."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/usr/local/sbin"
    return shutil.which("mariadbd", path=path) or shutil.which("mysqld", path=path)


class MariaDB(_ProcFixture):
    """mariadbd on 127.0.0.1:port with an empty datadir, its socket, pid
    file and log in a temp dir of its own, no grant tables (any user
    connects without a password) and no binlog. Runs as the invoking user;
    as real root it needs --user=root. Ready when a raw connection gets the
    server's handshake (protocol version 10). close() removes the dir."""
    LOG = "mariadb.log"

    def __init__(self, port, tries=300, interval=0.05):
        super().__init__(port, tries, interval)
        self.dir = tempfile.mkdtemp(prefix="bshim-mariadb-")
        os.mkdir(os.path.join(self.dir, "data"))

    def start(self):
        check(self.proc is None, "MariaDB :%d already started" % self.port)
        t0, d = time.monotonic(), self.dir
        self._spawn([_mariadbd(), "--no-defaults", "--datadir=" + os.path.join(d, "data"),
                     "--socket=" + os.path.join(d, "sock"),
                     "--pid-file=" + os.path.join(d, "pid"),
                     "--log-error=" + os.path.join(d, self.LOG),
                     "--skip-grant-tables", "--skip-log-bin", "--skip-name-resolve",
                     "--skip-networking=0", "--bind-address=127.0.0.1",
                     "--port=%d" % self.port, "--innodb-buffer-pool-size=16M",
                     "--innodb-log-file-size=4M"]
                    + (["--user=root"] if os.geteuid() == 0 else []), base_env())
        return self._ready("mariadbd :%d" % self.port, self._probe, t0)

    def _probe(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                return s.recv(64)[4:5] == b"\x0a"
        except OSError:
            return False


def test_php_mysqli_rides_out_a_late_server():
    """PHP's mysqli (mysqlnd, which connects through PHP's own stream layer:
    the php executable's connect(), bound to the preloaded shim as any
    program's is, no RTLD_DEEPBIND in the way): without the shim error 2002
    (refused) at once; with it the connect is retried (SYNs on the wire)
    until a MariaDB server started late answers, well inside mysqlnd's
    connect timeout (default_socket_timeout, 60 s; the shim's schedule
    gives up after 20 s)."""
    from lib import SynSniffer, finish, spawn
    if not shutil.which("php") or not glob.glob("/usr/lib/php/*/mysqli.so"):
        raise TestSkip("php-mysql is not installed (scripts/install-deps test)")
    if not _mariadbd():
        raise TestSkip("mariadb-server is not installed (scripts/install-deps test)")
    port = free_port()
    cmd = ["php", "-r", MYSQLI, str(port)]
    t0 = time.monotonic()
    rc, out, err = run(cmd, base_env())
    plain_s = time.monotonic() - t0
    check(rc == 0 and out.startswith("error 2002 ") and "refused" in out,
          "without the shim: rc=%d %r %r" % (rc, out, err[-400:]))
    db, p = MariaDB(port), None
    try:
        with SynSniffer(port) as sn:
            t0 = time.monotonic()
            p = spawn(cmd, shim_env(BACKOFFSHIM_LOG="info"))
            check(sn.wait_for(3, 10) >= 3, "too few attempts before the server started")
            db.start()
            rc, out, err = finish(p, 30)
            shim_s = time.monotonic() - t0
    finally:
        if p and p.poll() is None:
            p.kill()
            p.communicate()
        db.close()
    check(rc == 0 and out.strip() == "ok 42",
          "with the shim: rc=%d %r %r (%.1fs, without it %.1fs; server started in %.1fs)"
          % (rc, out, err[-400:], shim_s, plain_s, db.start_seconds))
    check("next attempt" in err, "no retry was announced: %r" % err[-400:])

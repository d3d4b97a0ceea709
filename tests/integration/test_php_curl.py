"""PHP's curl and pgsql extensions (issue 21). PHP opens every extension with
RTLD_DEEPBIND, so libcurl inside it binds connect() to libc, past the
preloaded shim; deepbind.c points the interposed calls of each object such
a dlopen newly loads at the shim, as a normal load binds them. Each case
runs PHP with and without the shim and compares."""
import glob
import shutil

from lib import TestSkip, base_env, check, free_port, run, shim_env

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

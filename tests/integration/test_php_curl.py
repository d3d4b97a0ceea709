"""PHP's curl extension (issue 21). PHP opens every extension with
RTLD_DEEPBIND, so libcurl inside it binds connect() to libc, past the
preloaded shim; deepbind.c points the interposed calls of each object such
a dlopen newly loads at the shim, as a normal load binds them. Each case
runs PHP with and without the shim and compares."""
import glob
import shutil

from lib import (TestSkip, base_env, check, free_port, late_server_run, run, shim_env)

CURL = r"""
$c = curl_init("http://127.0.0.1:" . $argv[1] . "/");
curl_setopt($c, CURLOPT_RETURNTRANSFER, true);
curl_setopt($c, CURLOPT_CONNECTTIMEOUT, 20);
curl_setopt($c, CURLOPT_HTTP09_ALLOWED, true); /* (the test server only greets) */
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
    port = free_port()
    cmd = _php() + [str(port)]
    rc, out, err = run(cmd, base_env())
    check(rc == 0 and out.strip() == "error 7", "without the shim: %r %r" % (out, err))
    rc, out, err, gaps = late_server_run(cmd, shim_env(BACKOFFSHIM_LOG="info"), port)
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

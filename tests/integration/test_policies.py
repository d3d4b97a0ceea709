"""Policies other than gRPC's, seen on the wire (issue #4, first part)."""
from lib import SynSniffer, check, free_port, ms_of, prog, run, shim_env, SLACK


def _syns(env, n_expect_max=30):
    port = free_port()
    with SynSniffer(port) as sn:
        rc, out, err = run([prog("conntest"), "127.0.0.1", str(port)], env)
        sn.wait_for(n_expect_max, 0.3)
        return rc, out, err, sn.gaps(), len(sn.times)


def test_exponential_makes_its_last_attempt_and_stops():
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="exponential",
                                           BACKOFFSHIM_INITIAL_BACKOFF="50ms",
                                           BACKOFFSHIM_MULTIPLIER="2",
                                           BACKOFFSHIM_MAX_BACKOFF="500ms"))
    check(rc == 1 and "errno=ECONNREFUSED" in out, "exponential: %r %r" % (out, err))
    check(n == 5, "waits of 50, 100, 200, 400 ms mean 5 attempts; saw %d" % n)
    for g, e in zip(gaps, (0.05, 0.1, 0.2, 0.4)):
        check(abs(g - e) <= SLACK, "exponential gaps (no jitter): %r" % gaps)
    check("no more attempts" in err, "give-up line: %r" % err)


def test_list_policy_follows_its_delays():
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="list",
                                           BACKOFFSHIM_DELAYS="0, 60ms, 120ms",
                                           BACKOFFSHIM_MAX_ATTEMPTS=6))
    check(n == 6, "max_attempts=6 but %d SYNs" % n)
    for g, d in zip(gaps, (0, 0.06, 0.12, 0.12, 0.12)):
        check(0.5 * d - SLACK <= g <= 1.5 * d + SLACK, "list gaps %r vs %s" % (gaps, d))


def test_policy_off_is_pass_through():
    rc, out, err, gaps, n = _syns(shim_env(BACKOFFSHIM_POLICY="off"))
    check(n == 1 and err == "" and ms_of(out) < 100, "policy=off: %d SYNs %r %r" % (n, out, err))

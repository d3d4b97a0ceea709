"""Do no harm on the connect fast path (tests/progs/fastedge): addresses
the kernel cannot read, and a socket number reused by another thread while
a connect blocks. Each runs with and without the shim and compares what
the program prints and its exit status."""
import re

from lib import base_env, check, check_not_delayed, free_port, prog, run, shim_env

LATER = re.compile(r"later connect: Success in (\d+) tenths")


def _both(args, **shim_settings):
    plain = run([prog("fastedge")] + [str(a) for a in args], base_env())
    shimmed = run([prog("fastedge")] + [str(a) for a in args], shim_env(**shim_settings))
    return plain, shimmed


def test_an_address_the_kernel_cannot_read_fails_with_efault():
    """NULL and kernel-half pointers as the address: EFAULT, as without the
    shim (it once read them first: SIGSEGV)."""
    (rc0, out0, _), (rc1, out1, err1) = _both(["badaddr", free_port()])
    check(rc0 == 0 and out0.count("Bad address") == 3, "without the shim: %d %r" % (rc0, out0))
    check(rc1 == rc0 and out1 == out0, "with the shim: %d %r, without %r (%r)"
          % (rc1, out1, out0, err1[-300:]))


def test_a_failure_belongs_to_the_destination_its_call_named():
    """Thread A's blocking connect to a slow destination is in flight when
    the main thread closes the number and connects a new socket on it to a
    healthy one; A is then refused. The failure is A's destination's: a
    later connect to the healthy one does not wait (it once waited out A's
    4 s backoff)."""
    (rc0, out0, _), (rc1, out1, err1) = _both(
        ["reuse", free_port(), free_port()],
        BACKOFFSHIM_INITIAL_BACKOFF="4s", BACKOFFSHIM_MAX_BACKOFF="4s",
        BACKOFFSHIM_MAX_ELAPSED="6s")
    m0, m1 = LATER.search(out0), LATER.search(out1)
    check(rc0 == 0 and m0, "without the shim: %d %r" % (rc0, out0))
    check(rc1 == 0 and m1, "with the shim: %d %r (%r)" % (rc1, out1, err1[-400:]))
    check_not_delayed("the later connect (%r, %r)" % (out1, err1[-400:]),
                      int(m0.group(1)) / 10, int(m1.group(1)) / 10, wait=4.0)  # A's backoff

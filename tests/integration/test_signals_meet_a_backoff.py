"""A program's signals while the shim backs off a connect: a signal mask
its wait blocks stays blocked for the whole wait, a handler that resets
itself (SA_RESETHAND) still ends a blocking connect as its alarm meant, and
a deferred pthread_cancel acts as soon as it would in connect(). Each case
runs tests/progs/signalwait with the shim and without it, to a dead port."""
import subprocess

from lib import LineReader, base_env, check, free_port, prog, run, shim_env

LONG = dict(BACKOFFSHIM_INITIAL_BACKOFF="100ms", BACKOFFSHIM_MAX_BACKOFF="200ms",
            BACKOFFSHIM_MAX_ELAPSED="20s", BACKOFFSHIM_SHARED="off")


def _masked(case):
    port = free_port()
    rc, plain, err = run([prog("signalwait"), case, str(port)], base_env())
    check(rc == 0 and plain == "sent=1 inside=0\n", "without the shim: %r %r" % (plain, err))
    rc, out, err = run([prog("signalwait"), case, str(port)], shim_env(**LONG))
    check(rc == 0 and out == plain, "%s with a socket parked: %r, without the shim %r; %s"
          % (case, out, plain, err[-300:]))


def test_a_signal_that_ppolls_mask_blocks_waits_for_its_return():
    """ppoll's mask blocks SIGUSR1; the signal comes 0.3 s in, and a pipe
    write ends the wait a second later. The kernel runs the handler after
    the wait returns. While a socket was parked in the set, the shim's
    rounds (several kernel waits) ran it between two rounds, inside the
    call."""
    _masked("ppoll")


def test_a_signal_that_pselects_mask_blocks_waits_for_its_return():
    _masked("pselect")


def test_a_signal_that_epoll_pwaits_mask_blocks_waits_for_its_return():
    _masked("epoll_pwait")


def test_an_alarm_whose_handler_resets_itself_ends_a_blocking_connect():
    """alarm(1), caught by a handler installed with SA_RESETHAND and no
    SA_RESTART (glibc's signal() under -std=c99): the kernel's connect
    would end with EINTR when it runs. The shim, judging restarts by the
    dispositions after the handler ran, found SIG_DFL and waited to
    max_elapsed (20 s). It ends at the alarm with the refusal."""
    port = free_port()
    rc, plain, err = run([prog("signalwait"), "resethand", str(port)], base_env())
    check(rc == 0 and plain.startswith("connect=Connection refused"), "plain: %r" % plain)
    rc, out, err = run([prog("signalwait"), "resethand", str(port)], shim_env(**LONG), timeout=40)
    secs, plain_secs = float(out.split("secs=")[1]), float(plain.split("secs=")[1])
    # (the alarm at 1 s ends it, not the 20 s budget: less than half of it
    # after the plain run's time and the alarm)
    check(rc == 0 and out.startswith("connect=Connection refused") and
          0.9 <= secs < plain_secs + 1 + 20 / 2,
          "with the shim: %r, without %r (the alarm came at 1 s, the budget is 20 s); %s"
          % (out, plain, err[-300:]))


def _joined_ms(env, wait_for_backoff):
    port = free_port()
    p = subprocess.Popen([prog("signalwait"), "cancel", str(port)], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    log = LineReader(p, stream=p.stderr)
    if wait_for_backoff:
        check(log.wait_for(lambda ln: "next attempt in" in ln, 10), "no backoff: %r" % log.lines)
    p.stdin.write("go\n")
    p.stdin.flush()
    out = p.stdout.readline()
    log.finish(30)
    check(p.returncode == 0 and out.startswith("joined ms="), "%r %r" % (out, log.lines[-3:]))
    return float(out.split("=")[1])


def test_a_deferred_cancel_ends_a_connect_that_backs_off_at_once():
    """A thread loops on blocking connects to a dead port; it is cancelled
    (deferred) while the shim waits 10 s before its next attempt. connect()
    is a cancellation point: without the shim the join is immediate. The
    shim's wait was a raw futex, which glibc's deferred cancel does not
    interrupt: the join took the rest of the wait."""
    plain = _joined_ms(base_env(), False)
    slow = dict(LONG, BACKOFFSHIM_INITIAL_BACKOFF="10s", BACKOFFSHIM_MAX_BACKOFF="10s")
    shimmed = _joined_ms(shim_env(**slow), True)
    check(shimmed < plain + 4000, "joined after %.0f ms with the shim (its wait: 8 to 12 s), "
          "%.0f ms without" % (shimmed, plain))


def _cancel_type_after(case, step):
    """signalwait CASE, without the shim and with it (every wait `step`):
    the thread's cancel type after the jump must be deferred in both."""
    port = free_port()
    rc, plain, _ = run([prog("signalwait"), case, str(port)], base_env())
    sched = dict(LONG, BACKOFFSHIM_INITIAL_BACKOFF=step, BACKOFFSHIM_MAX_BACKOFF=step)
    rc2, out, err = run([prog("signalwait"), case, str(port)], shim_env(**sched))
    check(rc == rc2 == 0 and plain == out == "async=0\n", "%r with the shim, %r without; %s"
          % (out, plain, err[-300:]))


def test_a_jump_out_of_the_backoff_leaves_the_cancel_type_as_it_was():
    """alarm(1) whose handler siglongjmps out of a blocking connect waiting
    in the shim: the thread's cancel type stays deferred. The shim's wait
    had made it asynchronous for the wait, and a jump out left it so: a
    later pthread_cancel then killed the thread at any instruction."""
    _cancel_type_after("jumped", "10s")


def test_a_handlers_own_backoff_then_a_jump_leaves_the_cancel_type():
    """The alarm's handler makes a blocking connect of its own to the same
    down destination (the shim backs it off inside the thread's wait), then
    jumps out of the outer connect. The inner wait cleared the outer wait's
    record, and the thread stayed in asynchronous cancel mode."""
    _cancel_type_after("nested", "300ms")


def test_a_mask_the_kernel_cannot_read_is_its_efault():
    """ppoll with a mask pointer of 8 while a socket is parked: EFAULT, as
    the kernel says. The shim read the mask itself, and the program died of
    SIGSEGV."""
    port = free_port()
    rc, plain, _ = run([prog("signalwait"), "badmask", str(port)], base_env())
    rc2, out, err = run([prog("signalwait"), "badmask", str(port)], shim_env(**LONG))
    check(rc == rc2 == 0 and plain == out == "ppoll=-1 EFAULT\n",
          "rc=%d %r with the shim, %r without; %s" % (rc2, out, plain, err[-300:]))

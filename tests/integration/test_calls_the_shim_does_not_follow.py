"""Calls on a socket's data that the shim does not follow (sendmmsg,
recvmmsg, splice, sendfile) and listen(), made on a socket the shim parked:
they must answer as on a socket the kernel holds in its handshake, which is
what the program was told it is. The shim's abort of the kernel's connect
left the socket unconnected, and the kernel answered EPIPE with SIGPIPE (the
program died), ENOTCONN, or made it a listener. Each case runs
tests/progs/unfollowed without the shim against a listener whose full queue
drops the SYN (a socket really connecting), and with the shim against a
dead port."""
from lib import FullQueue, base_env, check, free_port, prog, run, shim_env


def _like_a_connecting_socket(what):
    port = free_port()
    q = FullQueue(port)
    try:
        rc, plain, err = run([prog("unfollowed"), what, str(port)], base_env())
    finally:
        q.close()
    check(rc == 0 and plain.startswith("poll=0\n"), "without the shim: rc=%d %r %r"
          % (rc, plain, err))
    env = shim_env(BACKOFFSHIM_INITIAL_BACKOFF="200ms", BACKOFFSHIM_MAX_ELAPSED="10s",
                   BACKOFFSHIM_SHARED="off")
    rc, out, err = run([prog("unfollowed"), what, str(free_port())], env)
    check(rc == 0 and out == plain, "%s on a parked socket: rc=%d %r; on a connecting one %r; %s"
          % (what, rc, out, plain, err[-300:]))


def test_sendmmsg_on_a_parked_socket_says_try_again():
    _like_a_connecting_socket("sendmmsg")


def test_recvmmsg_on_a_parked_socket_says_try_again():
    _like_a_connecting_socket("recvmmsg")


def test_splice_into_a_parked_socket_says_try_again():
    _like_a_connecting_socket("splice_out")


def test_splice_from_a_parked_socket_says_try_again():
    _like_a_connecting_socket("splice_in")


def test_sendfile_to_a_parked_socket_says_try_again():
    _like_a_connecting_socket("sendfile")


def test_a_parked_socket_cannot_listen():
    _like_a_connecting_socket("listen")

#!/bin/sh
# make demo: an unmodified client against a server that starts ~3 s late,
# first without the shim (it fails), then with it (it rides the outage out).
set -eu
cd "$(dirname "$0")/.."
SO=$PWD/build/libbackoffshim.so
CLIENT=build/progs/legacy_client
PORT=$(python3 -c 'import random,socket
for _ in range(100):
    p = random.randrange(20000, 32000)
    try:
        socket.socket().bind(("127.0.0.1", p)); print(p); break
    except OSError: pass')

serve_late() {
	python3 - "$PORT" "$1" <<'PY' &
import socket, sys, time
port, delay = int(sys.argv[1]), float(sys.argv[2])
time.sleep(delay)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(8); s.settimeout(30)
print("  [server] listening on 127.0.0.1:%d after %.0fs" % (port, delay), flush=True)
c, _ = s.accept(); c.sendall(b"hello, you made it\n"); c.close()
PY
	SERVER=$!
}
trap 'kill $SERVER 2>/dev/null || true' EXIT INT TERM

echo "== 1. Without the shim: the server is not up yet, so the client fails"
echo "   \$ $CLIENT 127.0.0.1 $PORT"
if $CLIENT 127.0.0.1 "$PORT"; then echo "(unexpected: it connected)"; fi
echo
echo "== 2. With the shim: the server starts 3 s later; the same client waits for it"
echo "   \$ LD_PRELOAD=$SO $CLIENT 127.0.0.1 $PORT"
serve_late 3
now() { python3 -c "import time; print(time.time())"; }
start=$(now)
LD_PRELOAD=$SO $CLIENT 127.0.0.1 "$PORT"
rc=$?
wait "$SERVER" 2>/dev/null || true
printf '   client exit code %d after %.1f s (gRPC schedule: waits of 1 s, then ~1.6 s, ~2.6 s ...)\n' \
	"$rc" "$(python3 -c "print($(now) - $start)")"

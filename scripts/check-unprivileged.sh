#!/bin/sh
# Run `make check` as an ordinary user, the way any contributor would: a
# copy of this tree (without build/) in a fresh temporary directory owned by
# that user, HOME there too, built and tested as that user. Run as root,
# after the dependencies are installed (the user cannot install them).
#   scripts/check-unprivileged.sh [USER]     # USER defaults to nobody
# The integration tests then run in a user + network namespace of their own
# (tests/integration/run.py), and the tests that need real root report SKIP.
set -eu
cd "$(dirname "$0")/.."
user=${1:-nobody}
if [ "$(id -u)" != 0 ]; then
	echo "check-unprivileged: run as root (an ordinary user just runs make check)" >&2
	exit 2
fi
id -u "$user" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bshim-unpriv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir "$tmp/home"
cp -a . "$tmp/tree"
rm -rf "$tmp/tree/build"
chown -R "$user:" "$tmp"
chmod 0755 "$tmp"
echo "check-unprivileged: make check as $user (uid $(id -u "$user")) in $tmp/tree"
# HOME and PATH as a login of that user would have them (Debian's default
# user PATH has no sbin directory).
runuser -u "$user" -- env HOME="$tmp/home" PATH=/usr/local/bin:/usr/bin:/bin \
	make -C "$tmp/tree" check

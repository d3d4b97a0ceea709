#!/bin/sh
# make check: integration tests (the built .so preloaded into real programs
# against real loopback servers, in a network namespace of their own that
# run.py enters, so root is not needed), then the cmocka unit tests under valgrind
# memcheck (the binaries are passed as arguments). Exits non-zero if
# anything fails.
set -u
cd "$(dirname "$0")/.."
status=0

echo "== integration tests (build/libbackoffshim.so preloaded into real programs)"
python3 tests/integration/run.py || status=1

echo "== unit tests under valgrind memcheck"
for t in "$@"; do
	valgrind --quiet --error-exitcode=1 --leak-check=full \
		--errors-for-leak-kinds=definite --show-leak-kinds=definite "$t" || {
		echo "FAILED: $t"
		status=1
	}
done
exit $status

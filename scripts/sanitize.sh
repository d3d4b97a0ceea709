#!/bin/sh
# make sanitize: the unit tests built with ASan+UBSan, the threaded unit tests
# built with TSan, and an ASan+UBSan build of the library preloaded (after the
# shared ASan runtime) into a subset of the integration tests. Any sanitizer
# report fails the run.
#   scripts/sanitize.sh ASAN_DIR TSAN_DIR ASAN_SO ASAN_UNIT_BIN... -- TSAN_UNIT_BIN...
# make fuzz: each libFuzzer target for SECONDS on a scratch copy of its seed
# corpus (tests/fuzz/corpus/TARGET); findings are kept in DIR/artifacts.
#   scripts/sanitize.sh --fuzz DIR SECONDS FUZZ_BIN...
set -u
cd "$(dirname "$0")/.."

fuzz() {
	dir=$1 secs=$2
	shift 2
	status=0 summary=""
	for bin in "$@"; do
		name=$(basename "$bin")
		work=$dir/work/$name art=$dir/artifacts/$name log=$dir/$name.log
		rm -rf "$work" "$art"
		mkdir -p "$work" "$art"
		cp tests/fuzz/corpus/"$name"/* "$work"/ 2>/dev/null
		echo "== $name: ${secs}s"
		# -timeout: one input may take 10 s at most; the run gets a
		# minute's grace past its time before it counts as hung.
		timeout $((secs + 60)) "$bin" -max_total_time="$secs" -timeout=10 \
			-rss_limit_mb=2048 -dict=tests/fuzz/config.dict \
			-artifact_prefix="$art"/ "$work" >"$log" 2>&1
		rc=$?
		runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log")
		if [ $rc = 0 ]; then
			warn=""
			grep -q '^FUZZ CHECK WARNING' "$log" &&
				warn=" (BACKOFFSHIM_FUZZ_CTRL=warn: a control byte was let through, see $log)"
			summary="$summary
  $name: ok, ${runs:-?} runs$warn"
			continue
		fi
		status=1
		echo "FAILED: $name (exit $rc); from its log ($log):"
		grep -E -A12 '^FUZZ CHECK|ERROR: AddressSanitizer|runtime error|ERROR: libFuzzer' \
			"$log" | grep -v '^	NEW_FUNC' | head -60
		for f in "$art"/*; do
			[ -f "$f" ] || continue
			echo "input $f (shown with od -c):"
			od -c "$f" | head -20
			echo "replay: $bin $f"
		done
		summary="$summary
  $name: FAILED (see above)"
	done
	echo "fuzz summary:$summary"
	return $status
}

if [ "${1:-}" = --fuzz ]; then
	shift
	fuzz "$@"
	exit $?
fi

asan_dir=$1 tsan_dir=$2 asan_so=$3
shift 3
# The integration tests run with the ASan library (module prefixes), less
# those that cannot work under the ASan runtime whatever the shim does:
#  - curl hangs with libclang_rt.asan preloaded, even without the shim;
#  - the ASan runtime's own SIGSEGV/SIGBUS/SIGFPE handlers lack SA_RESTART,
#    so the shim rightly returns EINTR where the SA_RESTART test expects it
#    to keep waiting: that test runs apart, with those handlers off.
INTEGRATION_SUBSET=${INTEGRATION_SUBSET:-"test_socket. test_budget. test_nonblocking. test_tracking. test_config. test_retry_engine_does_no_harm. test_noharm. test_harm_log. test_defer. test_defer_edges. test_shared. test_giveup."}
INTEGRATION_SKIP="test_curl_ test_multi_address_fallback_is_not_slowed test_signal_with_sa_restart"
NOHANDLER_TESTS="test_budget.test_signal_with_sa_restart_keeps_waiting"
status=0
fail() { echo "FAILED: $*"; status=1; }

echo "== unit tests under ASan+UBSan ($asan_dir)"
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$1" >"$1.log" 2>&1 || { cat "$1.log"; fail "$1"; }
	shift
done
[ $# -gt 0 ] && shift

echo "== threaded unit tests under TSan ($tsan_dir)"
# test_clock's signal tests cannot work under TSan (see
# tests/fuzz/cmocka_skip.c); its threaded futex-wake test still runs.
for t in "$@"; do
	case $t in */test_clock) skip='*eintr*' ;; *) skip= ;; esac
	BACKOFFSHIM_CMOCKA_SKIP=$skip TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		"$t" >"$t.log" 2>&1 || { cat "$t.log"; fail "$t"; }
done

echo "== integration subset with $asan_so preloaded: $INTEGRATION_SUBSET"
rt=$(${CLANG:-clang-14} -print-file-name=libclang_rt.asan-x86_64.so)
if [ ! -f "$rt" ]; then
	fail "no shared ASan runtime ($rt)"
	exit $status
fi
reports=$(pwd)/$asan_dir/reports
rm -rf "$reports"
mkdir -p "$reports"
ks=""
for k in $INTEGRATION_SUBSET; do ks="$ks -k $k"; done
for x in $INTEGRATION_SKIP; do ks="$ks -x $x"; done
# Reports go to files (the tests compare the programs' stderr), named
# asan.PID / ubsan.PID; any such file fails the run. Leak checking is off:
# the host programs (python3, curl, ...) are not ours.
export BACKOFFSHIM_TEST_SO="$(pwd)/$asan_so"
export BACKOFFSHIM_TEST_PRELOAD="$rt:$(pwd)/$asan_so"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
asan_options="detect_leaks=0:halt_on_error=1:abort_on_error=0:log_path=$reports/asan"
# shellcheck disable=SC2086
ASAN_OPTIONS=$asan_options python3 tests/integration/run.py $ks ||
	fail "integration subset under ASan+UBSan"
ks=""
for k in $NOHANDLER_TESTS; do ks="$ks -k $k"; done
# shellcheck disable=SC2086
ASAN_OPTIONS=$asan_options:handle_segv=0:handle_sigbus=0:handle_sigfpe=0 \
	python3 tests/integration/run.py $ks || fail "integration subset under ASan+UBSan"
if [ -n "$(ls -A "$reports")" ]; then
	for f in "$reports"/*; do echo "--- $f"; cat "$f"; done
	fail "sanitizer reports from the preloaded library (above)"
fi
[ $status = 0 ] && echo "sanitize: all passed"
exit $status

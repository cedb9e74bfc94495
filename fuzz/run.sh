#!/usr/bin/env bash
# Runs libFuzzer harnesses one after another, each for SECONDS over its
# committed corpus (fuzz/corpus/NAME, read only) and a scratch corpus of what
# it finds (build-fuzz/corpus/NAME), one job, with build-fuzz/dict/NAME.dict (fuzz/mkdict.sh) when present.
# A crash, a timeout (FUZZ_TIMEOUT s for one input), a leak or a sanitizer
# report stops that harness and leaves the input in build-fuzz/artifacts/NAME/.
# Prints one line per harness (executions, seconds, corpus size) and exits 1
# if any harness found something.
#
#   fuzz/run.sh BIN_DIR SECONDS NAME...      e.g. fuzz/run.sh bin-fuzz 30 scenario sweep
#
# FUZZ_RUNS=N also stops a harness after N executions (whichever comes first);
# FUZZ_TIMEOUT (default 10) is the seconds one input may take; FUZZ_SEED fixes
# libFuzzer's random seed (CI: the same mutations on every run); FUZZ_FORK=1
# runs the harness in a child process that is restarted after a timeout, so a
# known slow input (recorded, in build-fuzz/artifacts/NAME/) does not end a
# long run: the summary counts the timeouts.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$1 seconds=$2
shift 2
timeout_s=${FUZZ_TIMEOUT:-10}
export SHARDCAST_MODELS=${SHARDCAST_MODELS:-$PWD/models}
# the input is a file the loaders open: in memory, not on disk (10x faster)
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for name in "$@"; do
	work=build-fuzz/corpus/$name art=build-fuzz/artifacts/$name log=build-fuzz/logs/$name.log
	mkdir -p "$work" "$art" "$(dirname "$log")" "fuzz/corpus/$name"
	extra=()
	[ -f "build-fuzz/dict/$name.dict" ] && extra+=(-dict="build-fuzz/dict/$name.dict")
	[ -n "${FUZZ_RUNS:-}" ] && extra+=(-runs="$FUZZ_RUNS")
	[ -n "${FUZZ_SEED:-}" ] && extra+=(-seed="$FUZZ_SEED")
	[ "${FUZZ_FORK:-0}" = 1 ] && extra+=(-fork=1 -ignore_timeouts=1)
	start=$(date +%s)
	"$bin/fuzz_$name" "$work" "fuzz/corpus/$name" "${extra[@]}" -max_total_time="$seconds" \
		-timeout="$timeout_s" -rss_limit_mb=2048 -max_len=4096 -artifact_prefix="$art/" \
		-print_final_stats=1 >"$log" 2>&1
	rc=$? took=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	if [ "${FUZZ_FORK:-0}" = 1 ]; then   # fork mode: "#N: cov: ... oom/timeout/crash: a/b/c ..."
		execs=$(sed -n 's/^#\([0-9]*\): cov.*/\1/p' "$log" | tail -1)
		timeouts=$(sed -n 's|.*oom/timeout/crash: [0-9]*/\([0-9]*\)/.*|\1|p' "$log" | tail -1)
		execs="${execs:-?} (${timeouts:-0} timeouts)"
	fi
	secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	corpus=$(find "$work" "fuzz/corpus/$name" -type f | wc -l)
	if [ "$rc" -eq 0 ]; then
		printf 'fuzz %-9s ✓ %s executions in %s s (%s/s), corpus %s\n' "$name" "${execs:-?}" \
			"$took" "${secs:-?}" "$corpus"
	else
		failed=1
		printf 'fuzz %-9s ✗ exit %d after %s executions: see %s and %s\n' "$name" "$rc" \
			"${execs:-?}" "$log" "$art"
		grep -m3 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | sed 's/^/    /'
	fi
done
exit $failed

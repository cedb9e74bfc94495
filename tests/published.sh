#!/usr/bin/env bash
# published.sh BIN — the published-throughput benchmark (bench/published.sh) runs:
# every scenario of scenarios/published/ is a row of table.csv and every row's
# scenario exists and simulates; the harness prints one line per row and the
# summary; the table keeps at least 20 rows from at least 5 independent sources
# (issue 15); a malformed table is refused with file:line and exit 2.
# Errors are not checked against a bound: the step model is judged by them, and
# they are reported, not asserted.
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
cd "$root" || exit 1
table=scenarios/published/table.csv

# the table and the folder agree, and every scenario loads
rows=$(tail -n +2 "$table" | sed '/^$/d' | wc -l)
listed=$(tail -n +2 "$table" | cut -d, -f3 | sort)
on_disk=$(ls scenarios/published/*.ini | sort)
if [ "$listed" = "$on_disk" ]; then ok; else
	bad "table.csv and scenarios/published/*.ini differ: $(diff <(echo "$listed") <(echo "$on_disk") | grep '^[<>]' | head -5 | tr '\n' ' ')"; fi
for f in $on_disk; do
	if "$root/$bin/simulate" "$f" --json >"$tmp/out" 2>"$tmp/err" &&
	   jq -e '.step.time_s > 0 and .step.tokens_per_s > 0' "$tmp/out" >/dev/null; then ok
	else bad "$f does not simulate: $(head -c 300 "$tmp/err")"; fi
done

# the harness: a line per row and the summary
if bench/published.sh "$bin" >"$tmp/table" 2>"$tmp/err"; then
	n=$(grep -cE '(tok/s/GPU|tok/s|samples/s|s/step|TFLOP/s/GPU) \(sim (fast|slow)\)$' "$tmp/table")
	if [ "$n" -eq "$rows" ]; then ok; else bad "harness printed $n rows, the table has $rows"; fi
	if grep -q '^median absolute error [0-9.]* %; worst row ' "$tmp/table"; then ok; else bad "no summary line: $(tail -2 "$tmp/table")"; fi
	srcs=$(sed -n 's/^\([0-9]*\) rows from \([0-9]*\) independent sources.*/\2/p' "$tmp/table")
	if [ "$rows" -ge 20 ] && [ "${srcs:-0}" -ge 5 ]; then ok; else bad "$rows rows from ${srcs:-0} sources (want >= 20 and >= 5)"; fi
else bad "bench/published.sh exited $? ($(head -c 300 "$tmp/err"))"; fi
if bench/published.sh "$bin" --markdown >"$tmp/md" 2>"$tmp/err" &&
   [ "$(grep -c '^| `' "$tmp/md")" -eq "$rows" ]; then ok; else bad "--markdown: $(head -c 300 "$tmp/err")"; fi

# malformed tables: exit 2, the message names file:line
expect_bad_table() {
	local name=$1 want=$2
	bench/published.sh "$bin" --table "$tmp/bad.csv" >/dev/null 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne 2 ]; then bad "$name: exit $rc, expected 2"; return; fi
	if grep -qF -- "$want" "$tmp/err"; then ok; else bad "$name: '$(cat "$tmp/err")' lacks '$want'"; fi
}
{ head -n 2 "$table"; echo "x,src,scenarios/published/llmfs-gpt124m-fp32.ini,tokens_per_s,1,tok/s,,eager"; } >"$tmp/bad.csv"
expect_bad_table columns "$tmp/bad.csv:3: expected 9 comma-separated columns, got 8"
{ head -n 1 "$table"; echo "x,src,scenarios/published/llmfs-gpt124m-fp32.ini,mfu,0.5,1,,eager,n"; } >"$tmp/bad.csv"
expect_bad_table metric "$tmp/bad.csv:2: unknown metric 'mfu'"
{ head -n 1 "$table"; echo "x,src,scenarios/published/llmfs-gpt124m-fp32.ini,tflops_per_gpu,100,TFLOP/s,,eager,n"; } >"$tmp/bad.csv"
expect_bad_table flops "$tmp/bad.csv:2: metric tflops_per_gpu needs flops_per_token"
{ head -n 1 "$table"; echo "x,src,scenarios/published/llmfs-gpt124m-fp32.ini,tokens_per_s,-3,tok/s,,eager,n"; } >"$tmp/bad.csv"
expect_bad_table measured "$tmp/bad.csv:2: measured = '-3': expected a positive number"

{ head -n 1 "$table"; echo "x,src,scenarios/published/nope.ini,tokens_per_s,1,tok/s,,eager,n"; } >"$tmp/bad.csv"
expect_bad_table scenario "$tmp/bad.csv:2: x: simulate scenarios/published/nope.ini"

echo "published: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

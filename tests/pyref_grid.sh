#!/usr/bin/env bash
# The PyTorch reference grid (make pyref-test): every case of tests/pyref/grid.txt
# (or of the grid file given second: tests/pyref/fsdp2.txt) through
# `validate --backend pytorch --json`; a table of measured vs predicted,
# then "N passed, N failed" and the time taken. A case passes when the pytorch
# profile's tensor bytes at the peak and its per-sample slope are within 2 % of
# the tracer's and the peak is in the same phase. Cases listed in
# tests/pyref/known_gaps.txt are reported but expected to fail (each with its
# reason there); one of them passing, or any other case failing, fails the grid.
#
# The cases not traced yet (validate --prepare: not in build/pyref/cache) are
# traced first by one tracer process per stack, both stacks at once: most of a
# tracer run is Python importing torch and transformers, paid once that way.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin}
grid=${2:-tests/pyref/grid.txt}
gaps=tests/pyref/known_gaps.txt
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0 bad=0

: >"$tmp/prep"
while read -r name scen rest; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  # shellcheck disable=SC2086
  "$BIN/validate" "$scen" --backend pytorch --prepare $rest >>"$tmp/prep" 2>/dev/null
done <"$grid"
for stack in current 1.13; do
  grep "^$stack " "$tmp/prep" | cut -d' ' -f2- >"$tmp/$stack.batch"
  [ -s "$tmp/$stack.batch" ] || continue
  echo "pyref: tracing $(wc -l <"$tmp/$stack.batch") case(s) on the $stack stack"
  (cd runtime/pytorch && "../../build/pyref/$stack/bin/python" pyref.py --batch "$tmp/$stack.batch" \
     >"$tmp/$stack.log" 2>&1 || { echo "pyref: the $stack stack's tracer failed:"; tail -5 "$tmp/$stack.log"; }) &
done
wait
traced=$(date +%s)

pct() { awk -v x="$1" 'BEGIN { printf "%.6f", x * 100 }'; }
printf '%-26s %14s %14s %8s %12s %12s %8s %-19s %s\n' case measured predicted err slope_m slope_p err \
  "phase (meas/pred)" status
while read -r name scen rest; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  known=0
  grep -v "^#" "$gaps" | awk '{print $1}' | grep -qx "$name" && known=1
  # shellcheck disable=SC2086
  if ! out=$("$BIN/validate" "$scen" --backend pytorch --json $rest 2>"$tmp/err"); then
    fail=$((fail + 1))
    if [ $known = 1 ]; then echo "$name: did not run (known gap)"
    else echo "$name: validate failed: $(tail -1 "$tmp/err")"; bad=$((bad + 1)); fi
    continue
  fi
  read -r m p e sm sp es phm php ok <<<"$(jq -r '[.measured.peak_bytes, .predicted_tensors.peak_bytes,
      .error.peak_bytes_rel, .measured.per_sample_bytes, .predicted_tensors.per_sample_bytes,
      .error.per_sample_rel, .measured.peak_phase, .predicted_tensors.peak_phase,
      (if ((.error.peak_bytes_rel|fabs) <= 0.02 and (.error.per_sample_rel|fabs) <= 0.02
           and .error.same_phase) then 1 else 0 end)] | @tsv' <<<"$out")"
  if [ "$ok" = 1 ]; then
    pass=$((pass + 1)); st=pass
    [ $known = 1 ] && { st="pass (listed as a gap: remove it)"; bad=$((bad + 1)); }
  else
    fail=$((fail + 1)); st=FAIL
    if [ $known = 1 ]; then st="fail (known gap)"; else bad=$((bad + 1)); fi
  fi
  printf '%-26s %14.0f %14.0f %+7.2f%% %12.0f %12.0f %+7.2f%% %-19s %s\n' "$name" "$m" "$p" "$(pct "$e")" \
    "$sm" "$sp" "$(pct "$es")" "$phm/$php" "$st"
done <"$grid"
end=$(date +%s)
echo "pyref grid: $pass passed, $fail failed ($((traced - start)) s tracing, $((end - traced)) s comparing)"
[ "$bad" = 0 ]

#!/usr/bin/env bash
# The PyTorch reference grid (make pyref-test): every case of tests/pyref/grid.txt
# (or of the grid file given second: tests/pyref/fsdp2.txt) through
# `validate --backend pytorch --json`; a table of measured vs predicted,
# then "N passed, N failed". A case passes when the pytorch profile's tensor
# bytes at the peak and its per-sample slope are within 2 % of the tracer's and
# the peak is in the same phase. Cases listed in tests/pyref/known_gaps.txt are
# reported but expected to fail (the gaps the README names); one of them
# passing, or any other case failing, fails the grid.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin}
grid=${2:-tests/pyref/grid.txt}
gaps=tests/pyref/known_gaps.txt
pass=0 fail=0 bad=0
printf '%-22s %14s %14s %8s %14s %14s %8s %-20s %s\n' case measured predicted err slope_m slope_p err phase status
while read -r name scen rest; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  # shellcheck disable=SC2086
  known=0; grep -v "^#" "$gaps" | grep -qx "$name" 2>/dev/null && known=1
  # shellcheck disable=SC2086
  if ! out=$("$BIN/validate" "$scen" --backend pytorch --json $rest 2>/dev/null); then
    fail=$((fail+1)); [ $known = 1 ] && echo "$name: did not run (known gap)" || { echo "$name: validate failed"; bad=$((bad+1)); }
    continue
  fi
  read -r m p e sm sp es ph <<<"$(jq -r '[.measured.peak_bytes, .predicted.memory.peak_bytes - .predicted.memory.overhead_bytes,
      .error.peak_bytes_rel, .measured.per_sample_bytes, 0, .error.per_sample_rel,
      (.measured.peak_phase + (if .error.same_phase then "=" else "!=" end))] | @tsv' <<<"$out")"
  ok=$(jq -r 'if ((.error.peak_bytes_rel|fabs) <= 0.02 and (.error.per_sample_rel|fabs) <= 0.02 and .error.same_phase) then 1 else 0 end' <<<"$out")
  if [ "$ok" = 1 ]; then pass=$((pass+1)); st=pass; [ $known = 1 ] && { st="pass (listed as a gap: remove it)"; bad=$((bad+1)); }
  else fail=$((fail+1)); st=FAIL; [ $known = 1 ] && st="fail (known gap)" || bad=$((bad+1)); fi
  printf '%-22s %14.0f %14.0f %+7.2f%% %14.0f %14s %+7.2f%% %-20s %s\n' "$name" "$m" "$p" "$(echo "$e*100" | bc -l)" "$sm" "-" "$(echo "$es*100" | bc -l)" "$ph" "$st"
done < "$grid"
echo "pyref grid: $pass passed, $fail failed"
[ "$bad" = 0 ]

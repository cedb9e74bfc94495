#!/usr/bin/env bash
# recommend.sh BIN — command-line tests of recommend and of the results store
# under several processes:
#  - bad sweep files (tests/sweeps/bad/*.ini, first line "; expect: <text>")
#    exit 2 with that text on stderr and print nothing;
#  - the same sweep on 1 and on 4 MPI ranks (mpirun --oversubscribe) writes the
#    same bytes: stdout, --md, --csv, --json;
#  - the outputs agree with each other and with simulate for the same
#    configuration; --plot writes a PNG and an SVG; the progress bar shows on a
#    terminal only;
#  - --db records the run, every candidate and the Markdown in one run;
#  - a writer killed (SIGKILL) inside its transaction leaves a database whose
#    PRAGMA integrity_check is ok and that holds nothing of that run;
#  - 8 writers at once (and recommend beside them) lose no row.
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rec="$root/$bin/recommend"
cd "$root" || exit 1

# ---- bad input ---------------------------------------------------------------
for f in tests/sweeps/bad/*.ini; do
	want=$(head -n 1 "$f" | sed -n 's/^; expect: //p')
	"$rec" "$f" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 2 ]; then bad "$f: exit $rc, expected 2 ($(head -c 300 "$tmp/err"))"
	elif ! grep -qF -- "$want" "$tmp/err"; then bad "$f: '$(head -c 300 "$tmp/err")' lacks '$want'"
	elif [ -s "$tmp/out" ]; then bad "$f: printed output despite the error"
	else ok; fi
done
"$rec" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "expected one sweep file" "$tmp/err" && ok || bad "no arguments"
"$rec" tests/sweeps/small.ini --plot "$tmp/x.jpg" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "ending in .png" "$tmp/err" && ok || bad "--plot without .png"
"$rec" "$tmp/missing.ini" >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "cannot open" "$tmp/err" && ok || bad "missing file"
"$rec" tests/sweeps/small.ini --quiet --csv /nonexistent/dir/x.csv >/dev/null 2>"$tmp/err"; [ $? -eq 2 ] && grep -q "cannot write" "$tmp/err" && ok || bad "unwritable --csv"
"$rec" --help | grep -q "usage: recommend" && ok || bad "--help"
# --stats: what the allocator's emulation did; a search answered from another of
# the same tape is one of the searches, and every other search that can fit at
# all replays at least once (memory.c tape_max_known, mem_emu_counts); each
# cell's best has its breakdown, so peaks are asked, some perhaps remembered
if "$rec" tests/sweeps/small.ini --stats >/dev/null 2>"$tmp/err" &&
   read -r n m r <<<"$(sed -n 's/.*emulation: \([0-9]*\) max-batch searches (\([0-9]*\) remembered.*), \([0-9]*\) replays.*/\1 \2 \3/p' "$tmp/err")" &&
   read -r pk pm <<<"$(sed -n 's/.*, \([0-9]*\) peaks for breakdowns (\([0-9]*\) remembered)$/\1 \2/p' "$tmp/err")" &&
   [ "${n:-0}" -gt 0 ] && [ "$m" -le "$n" ] && [ "$r" -gt 0 ] && [ "${pk:-0}" -gt 0 ] && [ "$pm" -le "$pk" ]; then ok
else bad "--stats: $(cat "$tmp/err")"; fi

# a cluster file without [sweep] (docs/CONTRACT.md: recommend CLUSTER_OR_SWEEP.ini): the default sweep
printf '[cluster]\ngpu = v100-sxm2-32gb\ngpus_per_node = 8\nintra_node = nvlink2\n' >"$tmp/cluster.ini"
if "$rec" "$tmp/cluster.ini" --json "$tmp/cl.json" >"$tmp/cl.md" 2>"$tmp/err" && grep -q "The default sweep" "$tmp/cl.md" &&
   jq -e '(.models | length) == 7 and all(.candidates[]; .precision == "fp16")' "$tmp/cl.json" >/dev/null; then ok
else bad "cluster file: $(cat "$tmp/err")"; fi  # V100 has no bf16: fp16

# ---- 1 rank and 4 ranks: the same bytes ---------------------------------------
if "$rec" tests/sweeps/small.ini --md "$tmp/1.md" --csv "$tmp/1.csv" --json "$tmp/1.json" >"$tmp/1.out" 2>"$tmp/1.err"; then ok
else bad "1 rank: exit $? ($(cat "$tmp/1.err"))"; fi
if mpirun --oversubscribe -np 4 "$rec" tests/sweeps/small.ini --md "$tmp/4.md" --csv "$tmp/4.csv" \
	--json "$tmp/4.json" >"$tmp/4.out" 2>"$tmp/4.err"; then ok
else bad "4 ranks: exit $? ($(tail -c 500 "$tmp/4.err"))"; fi
for x in out md csv json; do
	if [ -s "$tmp/1.$x" ] && cmp -s "$tmp/1.$x" "$tmp/4.$x"; then ok
	else bad "1 vs 4 ranks: $x differs ($(cmp "$tmp/1.$x" "$tmp/4.$x" 2>&1 | head -1))"; fi
done
cmp -s "$tmp/1.out" "$tmp/1.md" && ok || bad "stdout and --md differ"
# more ranks than some blocks have cells: 5 ranks on a 6-cell sweep, one with 1 cell
if mpirun --oversubscribe -np 5 "$rec" tests/sweeps/small.ini --quiet --csv "$tmp/5.csv" 2>"$tmp/5.err" &&
   cmp -s "$tmp/1.csv" "$tmp/5.csv"; then ok; else bad "5 ranks: $(tail -c 300 "$tmp/5.err")"; fi

# ---- the outputs --------------------------------------------------------------
# CSV: one row per cell and candidate (6 cells x 12 candidates), JSON the same
rows=$(($(wc -l <"$tmp/1.csv") - 1))
[ "$rows" -eq 72 ] && ok || bad "csv rows: $rows, expected 72"
jq -e '(.cells | length) == 6 and (.candidates | length) == 12 and
       all(.cells[]; (.results | length) == 12)' "$tmp/1.json" >/dev/null && ok || bad "json shape"
# every ranked candidate fits, its batch multiplies out, rank 1 has the best score
jq -e 'all(.cells[].results[] | select(.status == "ok");
           .peak_bytes <= .capacity_bytes and .micro_batch * .grad_accum * 8 == .global_batch) and
       all(.cells[]; ([.results[] | select(.status == "ok") | .score] | max) as $m |
           ([.results[] | select(.rank == 1)] | length) == 1 and
           (.results[] | select(.rank == 1) | .score) == $m)' "$tmp/1.json" >/dev/null && ok || bad "json: ranks and batches"
# the global batch of a cell is what every fitting candidate runs
jq -e 'all(.cells[]; .global_batch as $g | all(.results[] | select(.status == "ok"); .global_batch == $g))' \
	"$tmp/1.json" >/dev/null && ok || bad "json: global batch per cell"
# a sweep result equals simulate's for the same configuration (gpt2-xl, global
# batch 512, zero2 + full checkpointing: micro-batch and accumulation from the sweep)
read -r mb ga tps peak <<<"$(jq -r '.cells[] | select(.model == "gpt2-xl" and .global_batch == 512) |
	.results[] | select(.candidate == 7) | "\(.micro_batch) \(.grad_accum) \(.tokens_per_s) \(.peak_bytes)"' "$tmp/1.json")"
printf '[model]\nname = gpt2-xl\n[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\nintra_node = nvlink3\n[training]\nstrategy = zero2\nframework = deepspeed\nprecision = bf16\nactivation_checkpointing = full\nmicro_batch = %s\ngrad_accum = %s\n' \
	"$mb" "$ga" >"$tmp/same.ini"
if out=$("$root/$bin/simulate" "$tmp/same.ini" --json 2>"$tmp/err") &&
   echo "$out" | jq -e --argjson t "$tps" --argjson p "$peak" \
	'((.step.tokens_per_s - $t) | fabs) <= 1e-6 * $t and .memory.peak_bytes == $p' >/dev/null; then ok
else bad "sweep vs simulate: mb $mb ga $ga tok/s $tps peak $peak vs $(echo "$out" | jq -c '[.step.tokens_per_s, .memory.peak_bytes]') $(cat "$tmp/err")"; fi
# the Markdown names the winner of each cell and says "none fits" where nothing does
grep -q '^| gpt2-xl | 1.6B |' "$tmp/1.md" && ok || bad "markdown: gpt2-xl row"
# readable lines: prose wrapped at 100 characters, table rows (which cannot wrap)
# under 160 with three batch columns, the long notes in a list below the table
long=$(awk '{ n = length($0) } /^\|/ && n > 160 || !/^[|#]/ && n > 100 { print NR ": " n }' "$tmp/1.md")
[ -z "$long" ] && ok || bad "markdown: long lines (line: characters) $long"
grep -q '^- gpt2-xl, seq_len 1024, global batch 512 — peak: ' "$tmp/1.md" && ok || bad "markdown: notes below the table"
printf '[cluster]\ngpu = a100-sxm4-80gb\ngpus_per_node = 8\n[sweep]\nmodels = llama-2-70b\nglobal_batch = 8\nstrategies = ddp, dp\nprecision = bf16\n' >"$tmp/none.ini"
"$rec" "$tmp/none.ini" --json "$tmp/none.json" --csv "$tmp/none.csv" >"$tmp/none.md" 2>"$tmp/err" && grep -q "| none fits |" "$tmp/none.md" &&
	jq -e '.cells[0].best == null and all(.cells[0].results[]; .status == "no_fit")' "$tmp/none.json" >/dev/null && ok ||
	bad "none fits: $(cat "$tmp/err")"
# "not computed" is an empty CSV field and null in JSON, never 0: a candidate that
# does not fit has its memory at micro-batch 1 but no rank, batch or step; a
# sweep without [job] has no train_days or ettr
csv_col() {  # csv_col FILE COLUMN: that column of every row (the note, last, may hold commas)
	awk -F, -v c="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$1"
}
[ "$(csv_col "$tmp/none.csv" status | sort -u)" = no_fit ] &&
[ -z "$(csv_col "$tmp/none.csv" tokens_per_s | sort -u)" ] && [ -z "$(csv_col "$tmp/none.csv" rank | sort -u)" ] &&
[ -z "$(csv_col "$tmp/none.csv" micro_batch | sort -u)" ] && [ -z "$(csv_col "$tmp/none.csv" step_time_s | sort -u)" ] &&
! csv_col "$tmp/none.csv" peak_bytes | grep -qv '^[1-9][0-9]*$' && ok || bad "csv: not computed is not empty: $(head -2 "$tmp/none.csv")"
[ -z "$(csv_col "$tmp/1.csv" train_days | sort -u)" ] && [ -z "$(csv_col "$tmp/1.csv" ettr | sort -u)" ] &&
! csv_col "$tmp/1.csv" tokens_per_s | grep -qx '0' && ok || bad "csv: train_days/ettr without [job]"
jq -e 'all(.cells[0].results[]; .tokens_per_s == null and .rank == null and .micro_batch == null and .peak_bytes > 0)' \
	"$tmp/none.json" >/dev/null && jq -e 'all(.cells[].results[]; .train_days == null and .ettr == null)' "$tmp/1.json" >/dev/null &&
	ok || bad "json: not computed is not null"
# --plot: a PNG and an SVG
if "$rec" tests/sweeps/small.ini --quiet --plot "$tmp/heat.png" 2>"$tmp/err" &&
   [ "$(head -c 8 "$tmp/heat.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
   grep -q "<svg" "$tmp/heat.svg" && grep -q "fsdp:full_shard\|zero" "$tmp/heat.svg"; then ok
else bad "--plot: $(cat "$tmp/err")"; fi
ls "$tmp"/heat* "$tmp"/*.tmp 2>/dev/null | grep -q '\.tmp$' && bad "left a .tmp file" || ok
# the heatmap has a colour legend: a key entry per winning strategy, from the data
# (the cells' winners of small.ini), and one for "none fits" when a cell has none
wins=$(jq -r '[.cells[].best | select(. != null) | split(" ")[0]] | unique | .[]' "$tmp/1.json")
miss=""; for s in $wins; do grep -q "<title>$s</title>" "$tmp/heat.svg" || miss="$miss $s"; done
[ -n "$wins" ] && [ -z "$miss" ] && grep -q '>best strategy<' "$tmp/heat.svg" && ok || bad "heatmap legend: missing$miss"
"$rec" "$tmp/none.ini" --quiet --plot "$tmp/none.png" 2>"$tmp/err" && grep -q '<title>none fits</title>' "$tmp/none.svg" &&
	ok || bad "heatmap legend: none fits $(cat "$tmp/err")"
# the scaling plot (make plots): y ticks at 1-2-5 x 10^d ("50k", "100k", "200k",
# not log2's 33k/66k/131k), linear scaling in the key, and a panel of % of linear
printf 'zero3\tGPUs\ttokens/s\tMFU\nzero3\t8\t30000\t0.5\nzero3\t16\t58000\t0.5\nzero3\t32\t112000\t0.5\n\n\n' >"$tmp/scale.dat"
printf 'ddp\tGPUs\ttokens/s\tMFU\nddp\t8\t32000\t0.5\nddp\t16\t60000\t0.5\nddp\t32\t100000\t0.5\n\n\n' >>"$tmp/scale.dat"
printf 'linear scaling\tGPUs\ttokens/s\tMFU\nlinear\t8\t32000\t\nlinear\t16\t64000\t\nlinear\t32\t128000\t\n' >>"$tmp/scale.dat"
if gnuplot -e "datafile='$tmp/scale.dat'; outbase='$tmp/scaling'; plottitle='t'" results/plots/scaling.gp 2>"$tmp/err"; then
	ticks=$(grep -o '>[0-9]*k<' "$tmp/scaling.svg" | tr -d '<>' | sort -u | tr '\n' ' ')
	[ "$ticks" = "100k 50k " ] && grep -q '<title>linear scaling' "$tmp/scaling.svg" &&
		grep -q '>% of linear scaling<' "$tmp/scaling.svg" && grep -q '>90%<' "$tmp/scaling.svg" && ok ||
		bad "scaling plot: y ticks '$ticks', linear scaling or efficiency panel missing"
else bad "scaling.gp: $(cat "$tmp/err")"; fi
# progress bar: on a terminal (script gives one) but not into a pipe
if script -qec "'$rec' tests/sweeps/small.ini --quiet" /dev/null 2>&1 | grep -q "cells/s"; then ok
else bad "no progress bar on a terminal"; fi
[ ! -s "$tmp/1.err" ] && ok || bad "progress or noise on a non-terminal stderr: $(head -c 200 "$tmp/1.err")"

# ---- the results store ----------------------------------------------------------
db="$tmp/runs.db"
if "$rec" tests/sweeps/small.ini --quiet --db "$db" 2>"$tmp/err"; then ok; else bad "--db: $(cat "$tmp/err")"; fi
[ "$(sqlite3 "$db" "SELECT count(*) FROM runs WHERE command = 'recommend'")" = 1 ] && ok || bad "--db: no run row"
[ "$(sqlite3 "$db" "SELECT count(*) FROM candidates")" = 72 ] && ok || bad "--db: candidates"
[ "$(sqlite3 "$db" "SELECT count(*) FROM outputs WHERE format IN ('json', 'markdown', 'heatmap')")" = 3 ] && ok || bad "--db: outputs"
[ "$(sqlite3 "$db" "SELECT count(*) FROM candidates WHERE rank = 1")" = \
  "$(jq '[.cells[] | select(.best != null)] | length' "$tmp/1.json")" ] && ok || bad "--db: winners"
[ "$(sqlite3 "$db" 'PRAGMA user_version')" = 3 ] && ok || bad "--db: schema version"
"$root/$bin/results" list --db "$db" | grep -q recommend && ok || bad "results list: no recommend run"
# merge carries the candidates with the renumbered runs
"$rec" tests/sweeps/small.ini --quiet --db "$tmp/second.db" 2>/dev/null
if "$root/$bin/results" merge "$tmp/merged.db" "$db" "$tmp/second.db" >/dev/null 2>"$tmp/err" &&
   [ "$(sqlite3 "$tmp/merged.db" 'SELECT count(*) FROM candidates')" = 144 ] &&
   [ "$(sqlite3 "$tmp/merged.db" 'SELECT count(DISTINCT run_id) FROM candidates')" = 2 ]; then ok
else bad "merge: candidates $(cat "$tmp/err")"; fi

# make plots' renderer on that database: heatmap and memory breakdown, PNG and SVG
if results/plots/render.sh "$root/$bin" "$db" "$tmp/plots" >/dev/null 2>"$tmp/err" &&
   [ "$(head -c 8 "$tmp/plots/heatmap-small.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
   [ -s "$tmp/plots/memory-small.png" ] && grep -q "<svg" "$tmp/plots/memory-small.svg"; then ok
else bad "render.sh: $(cat "$tmp/err") $(ls "$tmp/plots" 2>&1)"; fi

# a stored calibration of the device (validate --calibrate) is used as simulate uses it:
# half the GEMM efficiency of the catalogue slows every candidate, and the sweep still
# equals simulate --db for the same configuration
caldb="$tmp/calib.db"
"$root/$bin/store_writer" "$caldb" 0 0
sqlite3 "$caldb" "INSERT INTO calibrations(device, created_at, params_json, n_points) VALUES ('a100-sxm4-80gb',
  '2024-01-01T00:00:00.000Z', '{\"gemm_efficiency\": 0.35, \"gemm_half_dim\": 128, \"memory_efficiency\": 0.8,
  \"kernel_gap\": 4e-6, \"dispatch_native\": 5e-6, \"dispatch_collective\": 2e-5, \"intra_latency\": 2e-6,
  \"intra_bandwidth\": 2.4e11}', 3)"
if "$rec" tests/sweeps/small.ini --db "$caldb" --json "$tmp/cal.json" >"$tmp/cal.md" 2>"$tmp/err" &&
   tr '\n' ' ' <"$tmp/cal.md" | grep -q "the latest calibration of the device" &&  # (prose is wrapped)
   ! tr '\n' ' ' <"$tmp/1.md" | grep -q "latest calibration"; then ok
else bad "calibration: not applied or not said ($(cat "$tmp/err"))"; fi
read -r ctps ubtps <<<"$(jq -r --slurpfile u "$tmp/1.json" '[(.cells[5].results[7].tokens_per_s), ($u[0].cells[5].results[7].tokens_per_s)] | @tsv' "$tmp/cal.json")"
if out=$("$root/$bin/simulate" "$tmp/same.ini" --json --db "$caldb" 2>"$tmp/err") &&
   echo "$out" | jq -e --argjson t "$ctps" --argjson u "$ubtps" \
	'((.step.tokens_per_s - $t) | fabs) <= 1e-6 * $t and $t < 0.9 * $u' >/dev/null; then ok
else bad "calibration: sweep $ctps vs simulate $(echo "$out" | jq .step.tokens_per_s), uncalibrated $ubtps"; fi

# a writer killed inside its transaction leaves nothing of its run
kdb="$tmp/killed.db"
"$root/$bin/store_writer" "$kdb" 2 0 || bad "store_writer: first runs"
"$root/$bin/store_writer" "$kdb" 1 20000 "$tmp/holding" &
wp=$!
pids+=("$wp")
for _ in $(seq 100); do [ -e "$tmp/holding" ] && break; sleep 0.1; done
if [ -e "$tmp/holding" ]; then
	kill -9 "$wp"
	wait "$wp" 2>/dev/null
	[ "$(sqlite3 "$kdb" 'PRAGMA integrity_check')" = ok ] && ok || bad "killed writer: integrity_check"
	[ "$(sqlite3 "$kdb" 'SELECT count(*) FROM runs')" = 2 ] && ok || bad "killed writer: a partial run remains"
	[ "$(sqlite3 "$kdb" 'SELECT count(*) FROM candidates WHERE run_id NOT IN (SELECT id FROM runs)')" = 0 ] && ok ||
		bad "killed writer: orphan candidates"
	"$root/$bin/store_writer" "$kdb" 1 10 && [ "$(sqlite3 "$kdb" 'SELECT count(*) FROM runs')" = 3 ] && ok ||
		bad "killed writer: the database does not take a new run"
else bad "killed writer: it never reached its transaction"; fi

# 8 writers at once, each 20 runs of 50 candidate rows, and recommend beside them
cdb="$tmp/concurrent.db"
"$root/$bin/store_writer" "$cdb" 0 0
wps=()
for w in 1 2 3 4 5 6 7 8; do
	"$root/$bin/store_writer" "$cdb" 20 50 2>"$tmp/w$w.err" &
	wps+=($!)
done
"$rec" tests/sweeps/small.ini --quiet --db "$cdb" 2>"$tmp/rw.err" &
wps+=($!)
failed=0
for p in "${wps[@]}"; do wait "$p" || failed=$((failed + 1)); done
[ $failed -eq 0 ] && ok || bad "concurrent writers: $failed failed ($(cat "$tmp"/w*.err "$tmp/rw.err" | head -c 300))"
[ "$(sqlite3 "$cdb" "SELECT count(*) FROM runs WHERE command = 'test-writer'")" = 160 ] && ok || bad "concurrent: runs"
[ "$(sqlite3 "$cdb" "SELECT count(*) FROM candidates c JOIN runs r ON r.id = c.run_id WHERE r.command = 'test-writer'")" = 8000 ] &&
	ok || bad "concurrent: candidate rows"
[ "$(sqlite3 "$cdb" "SELECT count(*) FROM candidates c JOIN runs r ON r.id = c.run_id WHERE r.command = 'recommend'")" = 72 ] &&
	ok || bad "concurrent: recommend's rows"
[ "$(sqlite3 "$cdb" 'PRAGMA integrity_check')" = ok ] && ok || bad "concurrent: integrity_check"

echo "recommend: $pass passed, $fail failed"
[ $fail -eq 0 ]

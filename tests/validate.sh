#!/usr/bin/env bash
# validate.sh BIN — command-line tests of validate on the CPU backend: bad input
# exits 2 with a located message; --json holds docs/CONTRACT.md's contract and the
# measured peak and max micro-batch equal the predicted ones; an emulated world
# and a real 2-rank mpirun run; --calibrate on stored runs lowers the median
# step-time error (measured on runs held out of the fit, with fewer parameters
# than runs), and simulate --db then uses the calibration and names it; bf16
# runs measure exactly the predicted peak, and their calibration lowers the
# error of bf16 runs held out of the fit.
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
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
V="$root/$bin/validate"

expect_error() {  # NAME TEXT ARGS...: exit 2, stderr has TEXT
	local name=$1 want=$2; shift 2
	"$V" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne 2 ]; then bad "$name: exit $rc, expected 2 ($(head -c 300 "$tmp/err"))"; return; fi
	grep -qF -- "$want" "$tmp/err" && ok || bad "$name: '$(head -c 300 "$tmp/err")' lacks '$want'"
}
expect_error not-cpu "the cpu backend runs scenarios with gpu = cpu" scenarios/default.ini
# --backend cuda where it cannot run: no GPU (exit 1) or a build without nvcc (exit 2)
if ! nvidia-smi -L >/dev/null 2>&1; then
	"$V" scenarios/cpu-single.ini --backend cuda >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if { [ $rc -eq 1 ] && grep -qF "no CUDA device" "$tmp/err"; } ||
	   { [ $rc -eq 2 ] && grep -qF "no CUDA backend" "$tmp/err"; }; then ok
	else bad "cuda: exit $rc ($(head -c 300 "$tmp/err"))"; fi
fi
expect_error ranks "use mpirun -np 4, or --emulate-world 4" scenarios/cpu-ddp.ini
expect_error limit "--memory-limit 12parsecs" scenarios/cpu-single.ini --memory-limit 12parsecs
expect_error missing "cannot open" "$tmp/nope.ini"
expect_error typo "did you mean 'strategy'" scenarios/cpu-single.ini --set training.strategey=ddp
expect_error tf32 "tf32 is a matmul mode" scenarios/cpu-single.ini --set training.precision=tf32
"$V" --help | grep -q "usage: validate" && ok || bad "--help"
# --backend pytorch: what the reference cannot run is refused before any tracing
# (no stack needed), and a failed run leaves the results database as it was
pdb="$tmp/pyref.db"
"$V" scenarios/cpu-single.ini --memory-limit 3MiB --steps 2 --warmup 1 --db "$pdb" >/dev/null 2>&1 ||
	bad "pyref: the cpu run that fills $pdb failed"
sum0=$(cksum <"$pdb")
expect_error pyref-zero "DeepSpeed is not in its stacks" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.strategy=zero2 --set cluster.gpus_per_node=2 --db "$pdb"
expect_error pyref-framework "measures framework = pytorch" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.framework=deepspeed --db "$pdb"
expect_error pyref-batches "--batches 2,1" scenarios/pyref/gpt2-bf16.ini --backend pytorch --batches 2,1
expect_error pyref-prepare "--prepare and --batches go with --backend pytorch" scenarios/cpu-single.ini --prepare
expect_error pyref-flash "flash-attn and cuDNN run on CUDA only" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.attention=flash --db "$pdb"
# what only the tracer knows it cannot run (it exits 2; validate says so): a
# model with no Hugging Face equivalent among the four it builds (GPT-2 with
# rotary positions, as GPT-NeoX), FSDP on torch 1.13
if [ -x build/pyref/current/bin/python ]; then
	sed -e 's/^positions = learned/positions = rotary/' -e 's/^param_count = .*/param_count = 0/' \
		models/nn/gpt2.ini >"$tmp/gpt2-rotary.ini"
	SHARDCAST_PYREF_CACHE="$tmp/cache" expect_error pyref-no-hf "no Hugging Face model for family decoder" \
		scenarios/pyref/gpt2-bf16.ini --backend pytorch --set model.name="$tmp/gpt2-rotary.ini" --db "$pdb"
fi
if [ -x build/pyref/1.13/bin/python ]; then
	SHARDCAST_PYREF_CACHE="$tmp/cache" expect_error pyref-old-fsdp "FSDP" scenarios/pyref/gpt2-bf16.ini \
		--backend pytorch --set training.framework_version=1.13 --set training.strategy=fsdp \
		--set cluster.gpus_per_node=2 --db "$pdb"
fi
# a stack that is not installed (an empty stacks folder): exit 2, naming make pyref-deps
mkdir -p "$tmp/nostacks"
SHARDCAST_PYREF_STACKS="$tmp/nostacks" SHARDCAST_PYREF_CACHE="$tmp/cache" expect_error pyref-stack \
	"that PyTorch stack is not installed" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.framework_version=1.13 --db "$pdb"
grep -qF "make pyref-deps" "$tmp/err" && ok || bad "pyref-stack: $(head -c 300 "$tmp/err") lacks make pyref-deps"
[ "$(cksum <"$pdb")" = "$sum0" ] && ok || bad "pyref: a refused run changed $pdb"

# the JSON contract, and the exact memory prediction
contract='.scenario and .backend == "cpu" and .device and .world_size and .emulated_world_size
  and .predicted.memory.peak_bytes > 0 and (.measured | has("max_micro_batch") and has("peak_bytes")
  and has("fixed_overhead_bytes") and has("step_time_s") and has("tokens_per_s") and has("mfu"))
  and (.error | has("max_micro_batch") and has("peak_bytes_rel") and has("step_time_rel"))
  and .measured.peak_bytes == .predicted.memory.peak_bytes and .error.max_micro_batch == 0
  and .measured.max_micro_batch == .predicted.max_micro_batch and .measured.step_time_s > 0'
check_json() {  # NAME COMMAND...
	local name=$1; shift
	if "$@" >"$tmp/out" 2>"$tmp/err" && jq -e "$contract" "$tmp/out" >/dev/null; then ok
	else bad "$name: $(head -c 400 "$tmp/err") $(jq -c '{measured, error}' "$tmp/out" 2>/dev/null)"; fi
}
db="$tmp/runs.db"
check_json single "$V" scenarios/cpu-single.ini --json --memory-limit 3MiB --steps 3 --warmup 1 --db "$db"
check_json single-mini "$V" scenarios/cpu-single.ini --json --set model.name=gpt-mini --memory-limit 8MiB --steps 3 --warmup 1 --db "$db"
check_json single-recompute "$V" scenarios/cpu-single.ini --json --set training.activation_checkpointing=full --memory-limit 3MiB --steps 3 --warmup 1 --db "$db"
check_json emulated "$V" scenarios/cpu-fsdp.ini --json --emulate-world 4 --set model.name=gpt-tiny --memory-limit 3MiB --steps 2 --warmup 1
check_json dp "$V" scenarios/cpu-single.ini --json --set training.strategy=dp --set cluster.gpus_per_node=2 --memory-limit 3MiB --steps 2 --warmup 1
check_json mpirun-ddp timeout 120 mpirun -np 2 --oversubscribe "$V" scenarios/cpu-ddp.ini --json --set cluster.gpus_per_node=2 --memory-limit 3MiB --steps 3 --warmup 1 --db "$db"
check_json mpirun-zero3 timeout 120 mpirun -np 2 --oversubscribe "$V" scenarios/cpu-fsdp.ini --json --set cluster.gpus_per_node=2 --set training.strategy=zero3 --set model.seq_len=32 --memory-limit 6MiB --steps 3 --warmup 1 --db "$db"

# nothing fits: nothing measured or predicted as a run, null rather than 0
if out=$("$V" scenarios/cpu-single.ini --json --memory-limit 1MiB --set model.name=gpt-mini --set model.seq_len=64 2>"$tmp/err") &&
   echo "$out" | jq -e '(.measured.max_micro_batch == 0) and (.measured.step_time_s == null) and (.measured.peak_bytes == null)
     and (.error.step_time_rel == null) and (.predicted.step.tokens_per_s == null)' >/dev/null; then ok
else bad "nothing fits: $(echo "$out" | jq -c '.measured, .error') $(cat "$tmp/err")"; fi

# A new database per job is a cluster campaign's normal case: with 4 ranks,
# only rank 0 may touch it (a rank that read it while rank 0 created it exited
# 2 without a word: 3 of 12 runs of this loop before the fix); 20 runs, each
# must record its run (at 1 in 4, all 20 pass by chance 0.3 % of the time).
fails=0
for i in $(seq 20); do
	rm -f "$tmp"/new.db*
	if ! timeout 120 mpirun -np 4 --oversubscribe "$V" scenarios/gpt-tiny-cpu-ddp.ini --db "$tmp/new.db" \
		--memory-limit 8MiB --max-batch 2 --steps 1 --warmup 0 >"$tmp/out" 2>"$tmp/err" ||
	   [ "$(sqlite3 "$tmp/new.db" 'SELECT count(*) FROM runs')" != 1 ]; then
		fails=$((fails + 1))
		cp "$tmp/err" "$tmp/err.failed"
	fi
done
[ $fails -eq 0 ] && ok || bad "4 ranks, a new database: $fails of 20 runs failed ($(head -c 300 "$tmp/err.failed"))"
# every rank says why it failed, not rank 0 alone
timeout 120 mpirun -np 4 --oversubscribe "$V" scenarios/gpt-tiny-cpu-ddp.ini --set training.precision=tf32 \
	>"$tmp/out" 2>"$tmp/err"
n=$(grep -c "^validate: rank [123] of 4: error: .*precision = tf32: the cpu backend runs" "$tmp/err")
[ "$n" = 3 ] && grep -q "^validate: error: .*precision = tf32: the cpu backend runs" "$tmp/err" && ok ||
	bad "4 failing ranks: $n of 3 other ranks' errors printed ($(head -c 300 "$tmp/err"))"

# calibration lowers the error of the stored runs; simulate then uses it
if "$V" --calibrate --db "$db" >"$tmp/out" 2>"$tmp/err"; then
	r=$(sqlite3 "$db" 'select n_points, error_before, error_after from calibrations order by id desc limit 1')
	sed -n 's/^  median/median/p' "$tmp/out"
	echo "$r" | awk -F'|' '{ exit !($1 == 5 && $3 < $2) }' && ok || bad "calibration: n, before, after = $r"
	# at most one parameter fewer than the runs, the error measured on held-out runs
	pj=$(sqlite3 "$db" 'select params_json from calibrations order by id desc limit 1')
	echo "$pj" | jq -e '(.fitted | length) >= 1 and (.fitted | length) <= 4 and .heldout == "leave-one-out"' >/dev/null &&
		grep -q "on runs held out of it (leave-one-out" "$tmp/out" && ok || bad "calibration: $pj $(cat "$tmp/out")"
else bad "--calibrate: $(cat "$tmp/err")"; fi
a=$("$root/$bin/simulate" scenarios/cpu-single.ini --json | jq .step.time_s)
b=$("$root/$bin/simulate" scenarios/cpu-single.ini --json --db "$db" | jq .step.time_s)
[ "$a" != "$b" ] && ok || bad "simulate --db ignores the calibration ($a = $b)"
"$root/$bin/simulate" scenarios/cpu-single.ini --db "$db" | grep -q "^Calibration cpu, fitted .* to 5 runs, held-out error" &&
	ok || bad "simulate --db does not name the calibration"
expect_error calibrate-empty "no validate runs of device h100" --calibrate --db "$db" --device h100

# bf16 through the same runtime: a calibration fitted to six bf16 runs lowers
# the step-time error of four other bf16 runs held out of the fit (median
# |error| of their measured step time against simulate's, before and after).
# The check is statistical: runs of a few steps on a shared machine, where a
# neighbour slowing one of the six fit runs moves the fit. Measured: a busy
# loop on the core of one fit run raised the held-out error after calibration
# from the usual 5-28 % to 14-43 % (against 60 % before) in six tries, and 2 of
# about 10 `make test` runs on another machine failed with 76-81 % after. So
# a second round, on fresh runs, is taken when the first does not lower the
# error; a calibration that does not lower it fails both.
bf16() {  # DB NAME ARGS...: a bf16 run of cpu-single, its JSON in $tmp/NAME.json
	local d=$1 n=$2; shift 2
	check_json "bf16-$n" "$V" scenarios/cpu-single.ini --json --set training.precision=bf16 "$@" \
		--steps 3 --warmup 1 --db "$d"
	cp "$tmp/out" "$tmp/$n.json"
}
held_out() {  # FIT NAME LIMIT SETS...: measured, predicted before and after the calibration in FIT
	local fit=$1 n=$2 limit=$3; shift 3
	bf16 "$held" "$n" "$@" --memory-limit "$limit"
	local mb t p0 p1
	mb=$(jq .measured.micro_batch "$tmp/$n.json"); t=$(jq .measured.step_time_s "$tmp/$n.json")
	p0=$(jq .predicted.step.time_s "$tmp/$n.json")
	p1=$("$root/$bin/simulate" scenarios/cpu-single.ini --json --db "$fit" --set training.precision=bf16 "$@" \
		--set training.micro_batch="$mb" | jq .step.time_s)
	echo "$t $p0 $p1" >>"$tmp/held.txt"
}
bf16_round() {  # ROUND: fits, calibrates, holds out; r = "before after" medians (empty: --calibrate failed)
	local fit="$tmp/bf16-fit-$1.db"
	held="$tmp/bf16-held-$1.db"
	r=
	bf16 "$fit" f1 --memory-limit 3MiB
	bf16 "$fit" f2 --set model.name=gpt-mini --memory-limit 8MiB
	bf16 "$fit" f3 --set model.name=llama-tiny --memory-limit 4MiB
	bf16 "$fit" f4 --set training.activation_checkpointing=full --memory-limit 3MiB
	bf16 "$fit" f5 --set model.name=gpt-mini --set training.activation_checkpointing=selective --memory-limit 8MiB
	bf16 "$fit" f6 --set model.name=llama-tiny --set training.grad_accum=2 --memory-limit 4MiB
	"$V" --calibrate --db "$fit" >"$tmp/out" 2>"$tmp/err" || return 0
	: >"$tmp/held.txt"
	held_out "$fit" h1 4MiB --set training.activation_checkpointing=selective
	held_out "$fit" h2 12MiB --set model.name=gpt-mini --set training.activation_checkpointing=full
	held_out "$fit" h3 3MiB --set model.name=llama-tiny --set training.activation_checkpointing=full
	held_out "$fit" h4 4MiB --set training.grad_accum=2
	[ "$(wc -l <"$tmp/held.txt")" -eq 4 ] || return 0
	r=$(awk '{ b[NR] = ($2 > $1 ? $2 - $1 : $1 - $2) / $1; a[NR] = ($3 > $1 ? $3 - $1 : $1 - $3) / $1 }
		function med(x, n,  i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
			return (x[int((n + 1) / 2)] + x[int(n / 2) + 1]) / 2 }
		END { printf "%.3f %.3f", med(b, NR), med(a, NR) }' "$tmp/held.txt")
	echo "bf16 held-out runs (round $1): median |error| of the step time $(echo "$r" | awk '{ printf "%.1f%% before, %.1f%% after", 100 * $1, 100 * $2 }') the calibration of six other bf16 runs"
}
lowered() { [ -n "$r" ] && echo "$r" | awk '{ exit !($2 < $1) }'; }
bf16_round 1
lowered || bf16_round 2
if lowered; then ok
elif [ -z "$r" ]; then bad "bf16 --calibrate or a held-out run: $(cat "$tmp/err")"
else bad "bf16 held-out, two rounds: $r"; fi

echo "validate: $pass passed, $fail failed"
[ $fail -eq 0 ]

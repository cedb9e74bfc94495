#!/usr/bin/env bash
# validate.sh BIN — command-line tests of validate on the CPU backend: bad input
# exits 2 with a located message; --json holds DESIGN.md's contract and the
# measured peak and max micro-batch equal the predicted ones; an emulated world
# and a real 2-rank mpirun run; --calibrate on stored runs lowers the median
# step-time error, and simulate then uses the calibration.
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
expect_error bf16 "runs fp32 only" scenarios/cpu-single.ini --set training.precision=bf16
"$V" --help | grep -q "usage: validate" && ok || bad "--help"
# --backend pytorch: what the reference cannot run is refused before any tracing
# (no stack needed), and a failed run leaves the results database as it was
pdb="$tmp/pyref.db"
expect_error pyref-zero "DeepSpeed is not in its stacks" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.strategy=zero2 --set cluster.gpus_per_node=2 --db "$pdb"
expect_error pyref-framework "measures framework = pytorch" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.framework=deepspeed --db "$pdb"
expect_error pyref-batches "--batches 2,1" scenarios/pyref/gpt2-bf16.ini --backend pytorch --batches 2,1
expect_error pyref-prepare "--prepare and --batches go with --backend pytorch" scenarios/cpu-single.ini --prepare
[ ! -s "$pdb" ] && ok || bad "pyref: a refused run wrote $pdb"
# a stack that is not installed: exit 2, naming make pyref-deps
SHARDCAST_PYREF_CACHE="$tmp/cache" "$V" scenarios/pyref/gpt2-bf16.ini --backend pytorch \
	--set training.framework_version=1.13 --db "$pdb" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ -x build/pyref/1.13/bin/python ]; then ok  # installed here: nothing to check
elif [ $rc -eq 2 ] && grep -qF "make pyref-deps" "$tmp/err" && [ ! -s "$pdb" ]; then ok
else bad "pyref-stack: exit $rc ($(head -c 300 "$tmp/err"))"; fi

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

# calibration lowers the error of the stored runs; simulate then uses it
if "$V" --calibrate --db "$db" >"$tmp/out" 2>"$tmp/err"; then
	r=$(sqlite3 "$db" 'select n_points, error_before, error_after from calibrations order by id desc limit 1')
	sed -n 's/^  median/median/p' "$tmp/out"
	echo "$r" | awk -F'|' '{ exit !($1 == 5 && $3 < $2) }' && ok || bad "calibration: n, before, after = $r"
else bad "--calibrate: $(cat "$tmp/err")"; fi
a=$("$root/$bin/simulate" scenarios/cpu-single.ini --json | jq .step.time_s)
b=$("$root/$bin/simulate" scenarios/cpu-single.ini --json --db "$db" | jq .step.time_s)
[ "$a" != "$b" ] && ok || bad "simulate --db ignores the calibration ($a = $b)"
expect_error calibrate-empty "no validate runs of device h100" --calibrate --db "$db" --device h100

echo "validate: $pass passed, $fail failed"
[ $fail -eq 0 ]

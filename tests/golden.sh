#!/usr/bin/env bash
# golden.sh BIN — command-line tests of simulate: every bad scenario under
# tests/bad/ (its first line says "; expect: <text>") must exit 2 with that text
# on stderr; generated junk (missing, empty, binary, a 10 MB line, a directory)
# likewise; and the JSON output must parse and hold the contract's keys.
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# expect_error NAME EXPECTED-TEXT ARGS... : exit 2, message contains the text
expect_error() {
	local name=$1 want=$2; shift 2
	"$root/$bin/simulate" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne 2 ]; then bad "$name: exit $rc, expected 2 ($(head -c 300 "$tmp/err"))"; return; fi
	if ! grep -qF -- "$want" "$tmp/err"; then bad "$name: message '$(head -c 300 "$tmp/err")' lacks '$want'"; return; fi
	if [ -s "$tmp/out" ]; then bad "$name: printed a report despite the error"; return; fi
	ok
}

cd "$root" || exit 1
for f in tests/bad/*.ini; do
	want=$(head -n 1 "$f" | sed -n 's/^; expect: //p')
	expect_error "$f" "$want" "$f"
done

# generated junk
good=tests/good/minimal.ini
expect_error missing-file "cannot open: No such file or directory" "$tmp/nope.ini"
: >"$tmp/empty.ini"
expect_error empty-file "no settings found (empty file?)" "$tmp/empty.ini"
printf '; only a comment\n\n' >"$tmp/comment.ini"
expect_error comment-only "no settings found" "$tmp/comment.ini"
head -c 4096 /dev/urandom >"$tmp/junk.ini"
printf '\x00' >>"$tmp/junk.ini"
expect_error binary-junk "expected a text INI file" "$tmp/junk.ini"
# a first line of text before the junk (cfg.c checks the whole file first)
printf 'stray = 1\n[model]\n\x00' >"$tmp/junk2.ini"
expect_error binary-after-text "junk2.ini:3: binary data (byte 0x00 at column 1); expected a text INI file" "$tmp/junk2.ini"
{ printf '[model]\nname = '; head -c 10000000 /dev/zero | tr '\0' 'a'; printf '\n'; } >"$tmp/long.ini"
expect_error ten-mb-line "a setting may be at most" "$tmp/long.ini"
expect_error directory "cannot read" "$here"
expect_error set-typo "unknown key 'strategey' in [training]; did you mean 'strategy'?" "$good" --set training.strategey=ddp
expect_error set-form "expected section.key=value" "$good" --set strategy
expect_error set-range "nodes = 0: out of range" "$good" --set cluster.nodes=0
expect_error no-args "expected one scenario file" 
expect_error two-args "got several" "$good" "$good"
expect_error bad-option "unrecognized option" "$good" --frobnicate
printf '[model]\nname = ../nope/model.ini\n[cluster]\ngpu = a100-sxm4-80gb\n' >"$tmp/path.ini"
expect_error model-path "no such file" "$tmp/path.ini"

# junk in imported files
head -c 4096 /dev/urandom >"$tmp/junk.bin"
printf '[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\ndeepspeed_config = junk.bin\n' >"$tmp/ds-junk.ini"
expect_error ds-binary "junk.bin:" "$tmp/ds-junk.ini"
printf '[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\naccelerate_config = junk.bin\n' >"$tmp/acc-junk.ini"
expect_error accelerate-binary "not valid YAML" "$tmp/acc-junk.ini"
printf '[model]\nhf_config = junk.bin\n[cluster]\ngpu = a100-sxm4-80gb\n' >"$tmp/hf-junk.ini"
expect_error hf-binary "not valid JSON" "$tmp/hf-junk.ini"
: >"$tmp/empty.yaml"
printf '[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\n[training]\naccelerate_config = empty.yaml\n' >"$tmp/acc-empty.ini"
expect_error accelerate-empty "empty YAML file" "$tmp/acc-empty.ini"
expect_error hf-directory "cannot open" --set model.hf_config="$here" "$tmp/hf-junk.ini"

# the JSON contract (docs/CONTRACT.md): parses, and has the keys
if out=$("$root/$bin/simulate" scenarios/default.ini --json 2>"$tmp/err"); then
	if echo "$out" | jq -e '.scenario and .model.name and (.model.params > 0) and .cluster.gpu
	    and (.cluster.gpus == 8) and (.cluster.gpu_memory_bytes > 0) and .training.strategy
	    and .training.precision and (.training | has("micro_batch"))' >/dev/null; then ok
	else bad "json: contract keys missing: $out"; fi
else bad "json: exit $? ($(cat "$tmp/err"))"; fi

# the step object (docs/CONTRACT.md) and a Chrome/Perfetto trace of the step
if out=$("$root/$bin/simulate" scenarios/default.ini --json --trace "$tmp/trace.json" 2>"$tmp/err"); then
	if echo "$out" | jq -e '.step.time_s > 0 and .step.compute_s > 0 and (.step.comm_s >= 0)
	    and (.step.exposed_comm_s <= .step.comm_s) and .step.tokens_per_s > 0
	    and .step.samples_per_s > 0 and .step.mfu > 0 and .step.mfu < 1' >/dev/null; then ok
	else bad "json: step object: $(echo "$out" | jq -c .step)"; fi
	if jq -e '(.traceEvents | length) > 100 and all(.traceEvents[]; .ph == "M" or
	    (.ph == "X" and (.ts >= 0) and (.dur > 0) and (.pid | type) == "number" and (.tid | type) == "number"
	     and (.name | type) == "string"))' "$tmp/trace.json" >/dev/null; then ok
	else bad "--trace: not a Chrome trace: $(head -c 300 "$tmp/trace.json")"; fi
else bad "--trace: exit $? ($(cat "$tmp/err"))"; fi
expect_error trace-unwritable "cannot write the trace" scenarios/default.ini --trace /nonexistent/dir/t.json

# memory: the contract's memory object and max batch are filled
if out=$("$root/$bin/simulate" scenarios/default.ini --json 2>"$tmp/err"); then
	if echo "$out" | jq -e '(.memory.peak_bytes > 0) and (.memory.peak_bytes <= .memory.capacity_bytes)
	    and .memory.fits and (.max_micro_batch > 0) and (.max_global_batch == .max_micro_batch * 8)
	    and (.training.micro_batch == .max_micro_batch) and (.memory.binding | startswith("GPU 0: "))
	    and ((.memory.params_bytes + .memory.grads_bytes + .memory.optimizer_bytes + .memory.activations_bytes
	          + .memory.buffers_bytes + .memory.overhead_bytes - .memory.peak_bytes) | fabs < 1)' >/dev/null; then ok
	else bad "json: memory object: $out"; fi
else bad "json memory: exit $? ($(cat "$tmp/err"))"; fi
# a model that cannot fit one sample: max_micro_batch 0, memory at one sample
if out=$("$root/$bin/simulate" scenarios/default.ini --json --set model.name=llama-2-70b --set training.strategy=ddp 2>"$tmp/err") &&
   echo "$out" | jq -e '(.max_micro_batch == 0) and (.memory.fits == false) and (.training.micro_batch == 1)' >/dev/null; then ok
else bad "max batch 0: $out $(cat "$tmp/err")"; fi
# ... and it is no run: no step time, throughput or MFU (null, not 0), and the
# report says why instead of printing a throughput (issue 12, item 3)
if out=$("$root/$bin/simulate" scenarios/default.ini --json --set cluster.gpu_memory=1MiB 2>"$tmp/err") &&
   echo "$out" | jq -e '(.max_micro_batch == 0) and (.step.time_s == null)
     and (.step.tokens_per_s == null) and (.step.samples_per_s == null) and (.step.mfu == null)
     and .step.micro_batch_assumed' >/dev/null; then ok
else bad "nothing fits: step $(echo "$out" | jq -c .step) $(cat "$tmp/err")"; fi
"$root/$bin/simulate" scenarios/default.ini --set cluster.gpu_memory=1MiB >"$tmp/out" 2>&1
if grep -q "not simulated as a run" "$tmp/out" && ! grep -qE "tokens/s|TFLOP/s|MFU  " "$tmp/out"; then ok
else bad "nothing fits: the report prints a throughput: $(cat "$tmp/out")"; fi
# with [failures] and no [job] step_time, no step time means no job: null, said
printf '[model]\nname = gpt2\n[cluster]\ngpu = a100-sxm4-80gb\ngpu_memory = 1MiB\n[failures]\ncatalog = llama3-h100\n[job]\nsteps = 100\n' >"$tmp/nofit-job.ini"
if out=$("$root/$bin/simulate" "$tmp/nofit-job.ini" --json 2>"$tmp/err") && echo "$out" | jq -e '.job == null' >/dev/null &&
   "$root/$bin/simulate" "$tmp/nofit-job.ini" | grep -q "Job with failures: not simulated"; then ok
else bad "nothing fits, job: $(echo "$out" | jq -c .job) $(cat "$tmp/err")"; fi
# units that fit: counts in words (B is bytes), whole bytes, FLOP/s with their prefix
"$root/$bin/simulate" scenarios/cpu-single.ini >"$tmp/out" 2>&1
if grep -q "120576 parameters (120.6 thousand)" "$tmp/out" && grep -qE "\), [0-9.]+ GFLOP/s per GPU" "$tmp/out" &&
   ! grep -qE "0\.000 B|0\.0 TFLOP/s|0\.00 B" "$tmp/out"; then ok
else bad "units on the cpu device: $(cat "$tmp/out")"; fi
"$root/$bin/simulate" scenarios/default.ini | grep -q "1557611200 parameters (1.558 billion)" && ok || bad "units: parameters in billions"

# a step of 10^6 micro-steps is a few simulated and the rest at their period
# (issue 12, item 2; the timing is in make bench)
if out=$("$root/$bin/simulate" scenarios/default.ini --json --set training.grad_accum=1000000 2>"$tmp/err") &&
   echo "$out" | jq -e '(.step.grad_accum == 1000000) and (.step.micro_steps_simulated == 3) and .step.period_settled
     and (.step.global_batch == .step.micro_batch * 8 * 1000000) and (.step.time_s > 1e5)' >/dev/null; then ok
else bad "grad_accum 1e6: $(echo "$out" | jq -c .step) $(cat "$tmp/err")"; fi

# dp: GPU 0 binds and the other GPUs are reported
if out=$("$root/$bin/simulate" scenarios/t5-large-dp.ini --json 2>"$tmp/err") &&
   echo "$out" | jq -e '(.memory.binding_gpu == 0) and (.memory.other_gpus_peak_bytes < .memory.peak_bytes)' >/dev/null; then ok
else bad "dp binding: $out $(cat "$tmp/err")"; fi
# --memory-timeline writes a CSV whose last reserved column never exceeds the peak
if "$root/$bin/simulate" scenarios/gpt-tiny-cpu-ddp.ini --memory-timeline "$tmp/tl.csv" >"$tmp/out" 2>"$tmp/err" &&
   head -1 "$tmp/tl.csv" | grep -q '^event,phase,micro,op,what,action,bytes,params,grads,optimizer,activations,activation_grads,buffers,overhead,allocated,reserved$' &&
   [ "$(awk -F, 'NR > 1 && $16 > m { m = $16 } END { print m }' "$tmp/tl.csv")" = \
     "$("$root/$bin/simulate" scenarios/gpt-tiny-cpu-ddp.ini --json | jq '.memory.peak_bytes')" ]; then ok
else bad "--memory-timeline: $(cat "$tmp/err")"; fi
# FSDP backward_post: after the root's backward nothing is left gathered (the
# runtime frees every unit; sim/models/memory.h S5), so the timeline ends with no
# gathered-parameter buffer, as with backward_pre
for pf in backward_pre backward_post; do
	if "$root/$bin/simulate" scenarios/gpt-tiny-cpu-ddp.ini --set training.strategy=fsdp \
	     --set training.fsdp_backward_prefetch=$pf --set training.grad_accum=2 \
	     --memory-timeline "$tmp/pf.csv" >/dev/null 2>"$tmp/err" &&
	   [ "$(awk -F, '$2 == "backward" { b = $13 } END { print b }' "$tmp/pf.csv")" = 0 ]; then ok
	else bad "$pf leaves buffers live at the end of backward: $(tail -1 "$tmp/pf.csv") $(cat "$tmp/err")"; fi
done
expect_error timeline-unwritable "cannot write the memory timeline" "$good" --memory-timeline /nonexistent/dir/t.csv

# every shipped scenario runs
for f in scenarios/*.ini; do
	if "$root/$bin/simulate" "$f" >"$tmp/out" 2>"$tmp/err"; then ok
	else bad "$f: $(cat "$tmp/err")"; fi
done

# an imported config and the same run written as shardcast keys predict the
# same: every key of --json but the scenario's path (and the model's name when
# one names a config.json and the other the catalog entry)
same_json() {
	local a b filter=$3
	a=$("$root/$bin/simulate" "$1" --json 2>"$tmp/err") || { bad "$1: $(cat "$tmp/err")"; return; }
	b=$("$root/$bin/simulate" "$2" --json 2>"$tmp/err") || { bad "$2: $(cat "$tmp/err")"; return; }
	a=$(jq -S "$filter" <<<"$a"); b=$(jq -S "$filter" <<<"$b")
	if [ -n "$a" ] && [ "$a" = "$b" ]; then ok
	else bad "$1 and $2 predict differently: $(diff <(echo "$a") <(echo "$b") | head -6)"; fi
}
same_json scenarios/llama-3-8b-accelerate.ini tests/equiv/llama-3-8b-fsdp.ini 'del(.scenario)'
same_json scenarios/t5-3b-deepspeed-offload.ini tests/equiv/t5-3b-zero3-offload.ini 'del(.scenario)'
same_json tests/equiv/gpt2-ds-explicit.ini tests/equiv/gpt2-zero2.ini 'del(.scenario)'
printf '[model]\nhf_config = %s/tests/data/hf/llama-3-8b\nseq_len = 2048\n[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\n[training]\nstrategy = fsdp\nprecision = bf16\n' "$root" >"$tmp/hf.ini"
printf '[model]\nname = llama-3-8b\nseq_len = 2048\n[cluster]\ngpu = h100-sxm5-80gb\ngpus_per_node = 8\n[training]\nstrategy = fsdp\nprecision = bf16\n' >"$tmp/cat.ini"
same_json "$tmp/hf.ini" "$tmp/cat.ini" 'del(.scenario, .model.name)'

# every path in a scenario is relative to the scenario's folder (a model, a
# device, two links, a failure catalog and an Accelerate config given as files
# beside it), so the run predicts the same from any working directory; the
# same run with catalog names has the same memory (the device file, a copy of
# the catalog's section, has no efficiency entry of its own, so times differ)
own=$tmp/own
mkdir -p "$own/nn" "$own/hw" "$own/failures" "$own/imports" "$own/scn"
cp models/nn/gpt2.ini "$own/nn/my-model.ini"
awk '/^\[a100-sxm4-80gb\]/ { p = 1 } /^\[/ && !/a100-sxm4-80gb/ { p = 0 } p' models/hw/gpus.ini >"$own/hw/my-gpu.ini"
awk '/^\[nvlink3\]/ { p = 1 } /^\[/ && !/nvlink3/ { p = 0 } p' models/hw/links.ini >"$own/hw/intra.ini"
awk '/^\[ib-hdr\]/ { p = 1 } /^\[/ && !/ib-hdr/ { p = 0 } p' models/hw/links.ini >"$own/hw/inter.ini"
cp models/failures/llama3-h100.ini "$own/failures/mine.ini"
cp scenarios/imports/llama-fsdp.yaml "$own/imports/acc.yaml"
scn='[model]\nname = ../nn/my-model.ini\n[cluster]\ngpu = ../hw/my-gpu.ini\nintra_node = ../hw/intra.ini\ninter_node = ../hw/inter.ini\n[training]\naccelerate_config = ../imports/acc.yaml\nprecision = bf16\n[failures]\ncatalog = ../failures/mine.ini\ntrials = 20\n[job]\nsteps = 1000\n'
printf "$scn" >"$own/scn/x.ini"
printf "$(sed -e 's#\.\./nn/my-model\.ini#gpt2#' -e 's#\.\./hw/my-gpu\.ini#a100-sxm4-80gb#' -e 's#\.\./hw/intra\.ini#nvlink3#' \
	-e 's#\.\./hw/inter\.ini#ib-hdr#' -e 's#\.\./failures/mine\.ini#llama3-h100#' -e "s#\.\./imports/acc\.yaml#$root/scenarios/imports/llama-fsdp.yaml#" <<<"$scn")" >"$own/scn/cat.ini"
for d in "$root" / "$own/scn" "$own"; do
	(cd "$d" && "$root/$bin/simulate" "$own/scn/x.ini" --json) >"$tmp/cwd.json" 2>"$tmp/err" || { bad "paths from $d: $(cat "$tmp/err")"; continue; }
	(cd "$d" && "$root/$bin/simulate" "$own/scn/x.ini") | tail -n +2 >"$tmp/cwd.txt"
	if [ "$d" = "$root" ]; then cp "$tmp/cwd.json" "$tmp/cwd0.json"; cp "$tmp/cwd.txt" "$tmp/cwd0.txt"; ok; continue; fi
	cmp -s "$tmp/cwd.json" "$tmp/cwd0.json" && cmp -s "$tmp/cwd.txt" "$tmp/cwd0.txt" && ok ||
		bad "paths: run from $d differs from the run from the repository root: $(diff "$tmp/cwd0.txt" "$tmp/cwd.txt" | head -4)"
done
(cd "$own/scn" && "$root/$bin/simulate" x.ini --json) >"$tmp/rel.json" 2>"$tmp/err" &&
	[ "$(jq -S 'del(.scenario)' "$tmp/rel.json")" = "$(jq -S 'del(.scenario)' "$tmp/cwd0.json")" ] && ok ||
	bad "paths: scenario named relative to its own folder: $(cat "$tmp/err")"
if a=$("$root/$bin/simulate" "$own/scn/cat.ini" --json 2>"$tmp/err") &&
   [ "$(jq -S '.memory, .max_micro_batch, .model.params, .job != null' <<<"$a")" = \
     "$(jq -S '.memory, .max_micro_batch, .model.params, .job != null' "$tmp/cwd0.json")" ] &&
   jq -e '.model.name == "../nn/my-model.ini" and .cluster.gpu == "../hw/my-gpu.ini"' "$tmp/cwd0.json" >/dev/null; then ok
else bad "paths: the files beside the scenario are not the catalog's entries: $(cat "$tmp/err")"; fi
# a --set path is relative to the working directory
(cd "$own" && "$root/$bin/simulate" scn/x.ini --set model.name=nn/my-model.ini --json) >"$tmp/set.json" 2>"$tmp/err" &&
	jq -e '.model.name == "nn/my-model.ini"' "$tmp/set.json" >/dev/null && ok || bad "paths: --set relative to the cwd: $(cat "$tmp/err")"

# the report says where each imported value came from
"$root/$bin/simulate" scenarios/llama-3-8b-accelerate.ini --set training.fsdp_backward_prefetch=none >"$tmp/out" 2>&1
if grep -q '^Settings from imports' "$tmp/out" &&
   grep -qE '^  training.strategy = fsdp +<- scenarios/imports/llama-fsdp.yaml:7 distributed_type$' "$tmp/out" &&
   grep -qE '^    training.fsdp_backward_prefetch = backward_pre +<- scenarios/imports/llama-fsdp.yaml:12 ' "$tmp/out"; then ok
else bad "imports report: $(cat "$tmp/out")"; fi

# the job model: its JSON keys, --plot, and an error without [failures]
job=tests/good/job.ini
if out=$("$root/$bin/simulate" "$job" --json 2>"$tmp/err"); then
	if echo "$out" | jq -e '(.job.ettr > 0.5) and (.job.ettr <= 1) and (.job.wall_days > 0)
	    and (.job.interruptions > 0) and (.job.checkpoint_interval_s > 0)' >/dev/null; then ok
	else bad "json: job keys missing: $out"; fi
else bad "job json: exit $? ($(cat "$tmp/err"))"; fi
if "$root/$bin/simulate" "$job" --plot "$tmp/ettr.png" >"$tmp/out" 2>"$tmp/err" &&
   [ "$(head -c 4 "$tmp/ettr.png" | od -An -c | tr -d ' ')" = "211PNG" ] && grep -q "plot: wrote $tmp/ettr.png" "$tmp/out"; then ok
else bad "--plot: $(cat "$tmp/err")"; fi
expect_error plot-no-failures "--plot needs a [failures] section" "$good" --plot "$tmp/x.png"
# not computed is null, not 0: a job of given work has no window, a window no work
if out=$("$root/$bin/simulate" "$job" --json 2>"$tmp/err") &&
   echo "$out" | jq -e '(.job.window_s == null) and (.job.work_s > 0) and (.job.mtbf_s > 0)' >/dev/null; then ok
else bad "job nulls: $(echo "$out" | jq -c .job) $(cat "$tmp/err")"; fi
sed 's/^train_tokens = .*/wall_days = 2/' "$job" >"$tmp/window.ini"
if out=$("$root/$bin/simulate" "$tmp/window.ini" --json 2>"$tmp/err") &&
   echo "$out" | jq -e '(.job.work_s == null) and (.job.window_s == 172800)' >/dev/null; then ok
else bad "job nulls (window): $(echo "$out" | jq -c .job) $(cat "$tmp/err")"; fi
# a job model run longer than a second shows its progress on a terminal (script
# gives one), and nothing into a pipe
if script -qec "'$root/$bin/simulate' $job --set failures.trials=40000 >/dev/null" /dev/null 2>&1 | grep -q "trials (job model)" &&
   ! "$root/$bin/simulate" "$job" --set failures.trials=40000 2>&1 >/dev/null | grep -q "job model"; then ok
else bad "job model: no progress on a terminal, or progress into a pipe"; fi
a=$("$root/$bin/simulate" "$job"); b=$("$root/$bin/simulate" "$job")
[ "$a" = "$b" ] && ok || bad "repeat job runs differ"

# --help and --keys
"$root/$bin/simulate" --help | grep -q "usage: simulate" && ok || bad "--help"
"$root/$bin/simulate" --keys | grep -q '`strategy`' && ok || bad "--keys"

# the README's key reference is the loader's table
if diff <(sed -n '/<!-- keys:begin -->/,/<!-- keys:end -->/p' README.md | sed '1d;$d') \
        <("$root/$bin/simulate" --keys) >"$tmp/keys.diff"; then ok
else bad "README key reference differs from 'simulate --keys' (run: make readme-keys): $(head -c 400 "$tmp/keys.diff")"; fi

# --db records a run, and identical runs repeat byte for byte
db="$tmp/r.db"
if "$root/$bin/simulate" scenarios/default.ini --db "$db" >/dev/null 2>"$tmp/err" &&
   [ "$(sqlite3 "$db" 'select count(*) from runs; select count(*) > 5 from predictions;' | tr '\n' ' ')" = "1 1 " ]; then ok
else bad "--db: $(cat "$tmp/err")"; fi
a=$("$root/$bin/simulate" scenarios/default.ini --json); b=$("$root/$bin/simulate" scenarios/default.ini --json)
[ "$a" = "$b" ] && ok || bad "repeat runs differ"

# no hidden inputs (issue 12, item 4): a calibration in ./results/results.db is
# not read unless named by --db; named, every report and JSON says which it is;
# --no-calibration keeps the catalog's values
mkdir -p "$tmp/cwd/results"
cdb="$tmp/cwd/results/results.db"
"$root/$bin/simulate" scenarios/default.ini --db "$cdb" >/dev/null 2>&1
sqlite3 "$cdb" "INSERT INTO calibrations(device, created_at, params_json, n_points, error_before, error_after)
  VALUES ('a100-sxm4-80gb', '2024-01-01T00:00:00Z', '{\"gemm_efficiency\": 0.35, \"gemm_half_dim\": 128,
  \"memory_efficiency\": 0.8, \"kernel_gap\": 4e-6, \"dispatch_native\": 5e-6, \"dispatch_collective\": 2e-5,
  \"intra_latency\": 2e-6, \"intra_bandwidth\": 2.4e11, \"fitted\": [\"gemm_efficiency\"], \"heldout\": \"leave-one-out\"}',
  3, 0.5, 0.08)"
here_t=$("$root/$bin/simulate" scenarios/default.ini --json | jq .step.time_s)
there=$(cd "$tmp/cwd" && "$root/$bin/simulate" "$root/scenarios/default.ini" --json 2>"$tmp/err")
if [ "$(echo "$there" | jq .step.time_s)" = "$here_t" ] && echo "$there" | jq -e '.calibration == null' >/dev/null &&
   (cd "$tmp/cwd" && "$root/$bin/simulate" "$root/scenarios/default.ini") | grep -q "^Calibration none"; then ok
else bad "a calibration in ./results was read without --db: $(echo "$there" | jq -c '.calibration, .step.time_s') vs $here_t"; fi
if out=$("$root/$bin/simulate" scenarios/default.ini --json --db "$cdb" 2>"$tmp/err") &&
   echo "$out" | jq -e --argjson t "$here_t" '(.calibration.device == "a100-sxm4-80gb") and (.calibration.runs == 3)
     and (.calibration.heldout_error == 0.08) and (.calibration.heldout_method == "leave-one-out")
     and (.calibration.created_at == "2024-01-01T00:00:00Z") and (.step.time_s > $t)' >/dev/null &&
   "$root/$bin/simulate" scenarios/default.ini --db "$cdb" | grep -q "^Calibration a100-sxm4-80gb, fitted 2024-01-01T00:00:00Z to 3 runs, held-out error 8.0% (leave-one-out)"; then ok
else bad "--db: calibration not applied or not named: $(echo "$out" | jq -c .calibration) $(cat "$tmp/err")"; fi
if out=$("$root/$bin/simulate" scenarios/default.ini --json --db "$cdb" --no-calibration 2>"$tmp/err") &&
   [ "$(echo "$out" | jq .step.time_s)" = "$here_t" ] && echo "$out" | jq -e '.calibration == null' >/dev/null; then ok
else bad "--no-calibration: $(echo "$out" | jq -c '.calibration, .step.time_s')"; fi

# bin/results: --help, clear errors (exit 2), merge, export
res="$root/$bin/results"
# expect_res NAME EXPECTED-TEXT ARGS... : results exits 2 with that text
expect_res() {
	local name=$1 want=$2; shift 2
	"$res" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc -ne 2 ]; then bad "results $name: exit $rc, expected 2 ($(head -c 300 "$tmp/err"))"; return; fi
	grep -qF -- "$want" "$tmp/err" && ok || bad "results $name: message '$(head -c 300 "$tmp/err")' lacks '$want'"
}
"$res" --help | grep -q "^usage: results COMMAND" && ok || bad "results --help"
for c in list show export merge; do
	"$res" $c --help | grep -q "^usage: results $c" && ok || bad "results $c --help"
done
rdb="$tmp/r1.db"; rdb2="$tmp/r2.db"
"$root/$bin/simulate" scenarios/default.ini --db "$rdb" >/dev/null &&
"$root/$bin/simulate" scenarios/llama-3-8b-accelerate.ini --db "$rdb" >/dev/null &&
"$root/$bin/simulate" scenarios/t5-3b-deepspeed-offload.ini --db "$rdb2" >/dev/null || bad "results: simulate --db"
printf 'not a database, only text that is long enough to be read as a header by sqlite\n' >"$tmp/text.db"
expect_res no-command "usage: results COMMAND"
expect_res unknown-command "unknown command 'frobnicate'" frobnicate
expect_res list-missing "cannot open the results database" list --db "$tmp/none.db"
expect_res list-text "not a results database" list --db "$tmp/text.db"
expect_res list-dir "not a regular file" list --db "$tmp"
expect_res show-unknown "no run with id 99" show 99 --db "$rdb"
expect_res show-bad-id "run id 'abc': expected a whole number" show abc --db "$rdb"
expect_res export-no-csv "--csv FILE is required" export --db "$rdb"
expect_res merge-one-arg "expected OUT.db and at least one IN.db" merge "$tmp/m.db"
expect_res merge-missing "cannot open the results database" merge "$tmp/m.db" "$rdb" "$tmp/none.db"
[ -e "$tmp/m.db" ] && bad "merge: a failed merge left $tmp/m.db" || ok
expect_res merge-text "not a results database" merge "$tmp/m.db" "$tmp/text.db"
expect_res merge-self "is the output database itself" merge "$rdb" "$rdb2" "$rdb"
"$res" list --db "$rdb" >"$tmp/out" 2>&1 && [ "$(grep -c ' simulate ' "$tmp/out")" = 2 ] &&
	[ "$(sed -n 2p "$tmp/out" | awk '{print $1}')" = 2 ] && ok || bad "results list: $(cat "$tmp/out")"
"$res" show 2 --db "$rdb" | grep -q "accelerate_config = imports/llama-fsdp.yaml" && ok || bad "results show"
# merge two databases: 2 + 1 runs, every prediction row; again: all duplicates
if "$res" merge "$tmp/m.db" "$rdb" "$rdb2" >"$tmp/out" 2>&1 &&
   [ "$(sqlite3 "$tmp/m.db" 'select count(*) from runs')" = 3 ] &&
   [ "$(sqlite3 "$tmp/m.db" 'select count(*) from predictions')" = \
     "$(( $(sqlite3 "$rdb" 'select count(*) from predictions') + $(sqlite3 "$rdb2" 'select count(*) from predictions') ))" ] &&
   "$res" merge "$tmp/m.db" "$rdb" "$rdb2" | grep -q "0 runs copied, 3 duplicates skipped" &&
   [ "$(sqlite3 "$tmp/m.db" 'select count(*) from runs')" = 3 ]; then ok
else bad "results merge: $(cat "$tmp/out")"; fi
# export: a CSV that SQLite's own CSV reader parses, one row per prediction
if "$res" export --csv "$tmp/x.csv" --db "$tmp/m.db" 2>"$tmp/err" &&
   [ "$(sqlite3 :memory: ".import --csv $tmp/x.csv x" 'select count(*) from x where run_id > 0')" = \
     "$(sqlite3 "$tmp/m.db" 'select count(*) from predictions')" ] &&
   [ "$(head -1 "$tmp/x.csv")" = "run_id,created_at,command,scenario,device,key,predicted,measured,rel_error" ]; then ok
else bad "results export: $(cat "$tmp/err")"; fi

# scenarios/launch/validate.sbatch: syntax, the exact srun line of a dry run,
# campaign (--list) mode, errors outside an allocation, and a run through a
# stand-in srun (no Slurm here) with simulate in validate's place, whose
# database the wrapper copies out and results merges
sb=scenarios/launch/validate.sbatch
bash -n "$sb" && sh -n scenarios/launch/validate-rank.sh && ok || bad "launch scripts: syntax"
out=$(SHARDCAST_DRY_RUN=1 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=8 SLURM_JOB_ID=4242 "$sb" scenarios/llama-3-8b-accelerate.ini 2>&1)
want='srun --mpi=pmix --nodes=2 --ntasks-per-node=8 --kill-on-bad-exit=1 scenarios/launch/validate-rank.sh results/campaign/validate-4242.db bin/validate scenarios/llama-3-8b-accelerate.ini --backend cuda --set cluster.nodes=2 --set cluster.gpus_per_node=8 '
[ "$out" = "$want" ] && ok || bad "sbatch dry run: got '$out'"
printf '# a campaign\nscenarios/default.ini\n\nscenarios/llama-3-8b-accelerate.ini\n' >"$tmp/campaign.txt"
out=$(SHARDCAST_DRY_RUN=1 SLURM_JOB_NUM_NODES=1 SLURM_NTASKS_PER_NODE=4 SLURM_JOB_ID=9 SLURM_ARRAY_JOB_ID=8 SLURM_ARRAY_TASK_ID=2 \
      SHARDCAST_ARGS="--json" "$sb" --list "$tmp/campaign.txt" 2>&1)
case "$out" in
*"validate-8_2.db bin/validate scenarios/llama-3-8b-accelerate.ini --backend cuda --set cluster.nodes=1 --set cluster.gpus_per_node=4 --json "*) ok ;;
*) bad "sbatch --list: got '$out'" ;;
esac
expect_sb() {
	local name=$1 want=$2; shift 2
	env "$@" "$sb" scenarios/default.ini >"$tmp/out" 2>&1
	local rc=$?
	[ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/out" && ok || bad "sbatch $name: exit $rc: $(cat "$tmp/out")"
}
expect_sb no-allocation "not inside a Slurm allocation" -u SLURM_JOB_NUM_NODES SHARDCAST_DRY_RUN=1
expect_sb no-tasks "SLURM_NTASKS_PER_NODE is unset" -u SLURM_NTASKS_PER_NODE SLURM_JOB_NUM_NODES=2 SHARDCAST_DRY_RUN=1
SHARDCAST_DRY_RUN=1 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=8 "$sb" nope.ini >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "nope.ini: no such scenario" "$tmp/out" && ok || bad "sbatch missing scenario: $(cat "$tmp/out")"
mkdir -p "$tmp/fakebin"
cat >"$tmp/fakebin/srun" <<'FAKE'
#!/bin/sh
# stands in for srun: skips srun's options and runs the command as rank 0
echo "$*" >"$FAKE_SRUN_LOG"
while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_STEP_NUM_TASKS=1 exec "$@"
FAKE
chmod +x "$tmp/fakebin/srun"
for j in 77 78; do
	PATH="$tmp/fakebin:$PATH" FAKE_SRUN_LOG="$tmp/srun.log" SLURM_JOB_NUM_NODES=2 SLURM_NTASKS_PER_NODE=8 SLURM_JOB_ID=$j \
	SHARDCAST_VALIDATE="$bin/simulate" SHARDCAST_BACKEND= SHARDCAST_DB_DIR="$tmp/campaign" \
		"$sb" scenarios/llama-3-8b-accelerate.ini >"$tmp/out" 2>&1 || bad "sbatch via srun: $(cat "$tmp/out")"
done
if grep -q "^Settings from imports" "$tmp/out" && grep -q "^--mpi=pmix --nodes=2 " "$tmp/srun.log" &&
   [ "$(sqlite3 "$tmp/campaign/validate-77.db" "select count(*) from runs where overrides like '%cluster.nodes=2%'")" = 1 ] &&
   "$res" merge "$tmp/campaign.db" "$tmp/campaign"/validate-*.db >/dev/null &&
   [ "$(sqlite3 "$tmp/campaign.db" 'select count(*) from runs')" = 2 ] &&
   [ -z "$(ls "$tmp/campaign" | grep -v '^validate-7[78].db$')" ]; then ok
else bad "sbatch via srun: $(cat "$tmp/out" "$tmp/srun.log")"; fi

echo "golden: $pass passed, $fail failed"
[ $fail -eq 0 ]

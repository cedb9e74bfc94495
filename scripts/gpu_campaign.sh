#!/usr/bin/env bash
# gpu_campaign.sh [PHASE...] — the CUDA backend's measurements on this GPU, in
# one command. Phases (default: all, in this order; each fits the device
# tool's 10-minute limit on an H100):
#
#   versions  GPU, driver, CUDA, cuBLAS, NCCL, PyTorch versions
#   tests     bin/gpu_tests: every kernel against the cpu reference, the step on
#             the cuda backend against the cpu backend, bf16 against fp32
#   bench     GPT-2 124M and 350M (gpt2-medium) training throughput, bf16,
#             sequence 1024, same batch: shardcast (bin/gpu_bench) side by side
#             with PyTorch eager (bench/pytorch_gpt2.py); prints the ratio
#   validate  bin/validate --backend cuda over models x strategies x
#             --emulate-world 1,2,4,8 x fp32/bf16 x checkpointing, as far as
#             CAMPAIGN_BUDGET seconds (default 480) allow, the most different
#             cases first; rows measured already are skipped, so running it
#             again continues the campaign (CAMPAIGN_MODELS, CAMPAIGN_PAIRS and
#             VALIDATE_ARGS narrow or change it)
#
# Output (at most 6 files) goes to $OUT when set (the device tool brings it
# back), else results/reference/<device>/:
#   versions.txt  gpu_tests.log  bench.txt  validate.csv  validate.db  campaign.log
# Commit them under results/reference/<device>/.
#
# Build: with nvcc here the script runs make; otherwise it uses dist/ made by
# scripts/gpu_bundle.sh on a machine with the toolchain (carried along).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
phases=${*:-versions tests bench validate}
budget=${CAMPAIGN_BUDGET:-480}
batch=${BENCH_BATCH:-8}

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "SKIP: no GPU (nvidia-smi cannot list one)"
	exit 0
fi
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
device=$(echo "$gpu_name" | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')
out=${OUT:-results/reference/$device}
mkdir -p "$out"
log=$out/campaign.log
say() { echo "$*" | tee -a "$log"; }
say "== gpu_campaign $(date -u +%FT%TZ) on $gpu_name: $phases"

# ---- binaries ----------------------------------------------------------------
bin=bin
NVCC=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if [ -n "$NVCC" ] && make -j"$(nproc)" NVCC="$NVCC" bin/gpu_tests bin/gpu_bench >>"$log" 2>&1; then
	make -j"$(nproc)" NVCC="$NVCC" bin/validate >>"$log" 2>&1 || say "note: bin/validate does not build"
	say "built with $NVCC"
elif [ -x dist/bin/gpu_tests ]; then
	bin=dist/bin
	export LD_LIBRARY_PATH="$root/dist/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	say "using the carried dist/ (no build here)"
else
	say "FAIL: cannot build (nvcc: ${NVCC:-none}; see $log) and no dist/ (scripts/gpu_bundle.sh makes it)"
	exit 1
fi
missing=$(ldd "$bin/gpu_tests" | grep "not found")
if [ -n "$missing" ]; then
	say "FAIL: $bin/gpu_tests cannot load: $missing (this machine's CUDA must provide .so.13 of cudart, cuBLAS, cuBLASLt and NCCL .so.2; or build here)"
	exit 1
fi

# ---- phases -------------------------------------------------------------------
versions() {
	{
		echo "device: $gpu_name"
		nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
		nvidia-smi | head -n 4 | tail -n 2
		echo "nvcc: $("$NVCC" --version 2>/dev/null | tail -n 2 | tr '\n' ' ')"
		for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h; do
			[ -f "$h" ] && echo "NCCL (header $h): $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$h" | tr '\n' '.' | sed 's/\.$//')" && break
		done
		echo "libraries used by $bin/gpu_tests:"
		ldd "$bin/gpu_tests" | grep -E "cudart|cublas|nccl" | sed 's/^/  /'
		python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
		echo "host: $(nproc) cores, $(uname -r)"
		echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
	} >"$out/versions.txt" 2>&1
	say "versions -> $out/versions.txt"
}

tests() {
	"$bin/gpu_tests" >"$out/gpu_tests.log" 2>&1
	local rc=$?
	grep -E "^FAIL|^gpu:|^SKIP" "$out/gpu_tests.log" | tee -a "$log"
	say "gpu_tests exit $rc -> $out/gpu_tests.log"
}

# field KEY LINE: the value of key=value in a RESULT line
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

bench() {
	local m sc pt sd r
	: >"$out/bench.txt"
	for m in gpt2 gpt2-medium; do
		sc=$("$bin/gpu_bench" "$m" "$batch" 1024 bf16 20 2>&1 | tee -a "$out/bench.txt" | grep '^RESULT')
		"$bin/gpu_bench" "$m" "$batch" 1024 bf16w 20 2>&1 | tee -a "$out/bench.txt" >/dev/null
		"$bin/gpu_bench" "$m" "$batch" 1024 bf16 20 --flash 2>&1 | tee -a "$out/bench.txt" >/dev/null
		pt=$(python3 bench/pytorch_gpt2.py --model "$m" --batch "$batch" --seq 1024 --steps 20 2>&1 |
			tee -a "$out/bench.txt" | grep '^RESULT')
		sd=$(python3 bench/pytorch_gpt2.py --model "$m" --batch "$batch" --seq 1024 --steps 20 --attention sdpa 2>&1 |
			tee -a "$out/bench.txt" | grep '^RESULT')
		if [ -n "$sc" ] && [ -n "$pt" ]; then
			r=$(awk -v a="$(field tokens_per_s "$sc")" -v b="$(field tokens_per_s "$pt")" 'BEGIN {printf "%.3f", a / b}')
			say "bench: $m bf16 B=$batch T=1024 on $gpu_name: shardcast $(field tokens_per_s "$sc") tokens/s," \
			    "pytorch eager $(field tokens_per_s "$pt") tokens/s, ratio $r (target >= 1.00)" \
			    "${sd:+; pytorch sdpa $(field tokens_per_s "$sd") tokens/s}" | tee -a "$out/bench.txt"
		else
			say "bench: $m: a side produced no result (see $out/bench.txt)"
		fi
	done
}

gpu_key() {
	case "$gpu_name" in
	*H200*) echo h200-sxm-141gb ;;
	*H100*PCIe*) echo h100-pcie-80gb ;;
	*H100*) echo h100-sxm5-80gb ;;
	*A100*80GB*) echo a100-sxm4-80gb ;;
	*A100*) echo a100-sxm4-40gb ;;
	*) echo h100-sxm5-80gb ;;
	esac
}

validate() {
	local csv=$out/validate.csv t0 key model prec ckpt strat n ini json row
	if ! [ -x "$bin/validate" ] || ! "$bin/validate" --help 2>&1 | grep -q -- "--emulate-world"; then
		say "validate: $bin/validate missing or without --emulate-world; phase skipped"
		return
	fi
	[ -s "$csv" ] || echo "model,precision,checkpointing,strategy,emulated_world,status,pred_max_micro_batch,meas_max_micro_batch,pred_peak_bytes,meas_peak_bytes,fixed_overhead_bytes,pred_step_s,meas_step_s,tokens_per_s,message" >"$csv"
	t0=$(date +%s)
	key=$(gpu_key)
	# the most different cases first, so a short budget still spans the space
	for pass in 1 2; do
	for prec in fp32 bf16; do
	for ckpt in none full; do
	for sn in ${CAMPAIGN_PAIRS:-single:1 zero3:8 ddp:2 fsdp:4 zero1:4 zero2:8 zero3:2 fsdp:8 ddp:8 zero2:2 zero1:8 fsdp:2 ddp:4 zero3:4 zero1:2 zero2:4}; do
	for model in ${CAMPAIGN_MODELS:-gpt2 gpt2-medium gpt2-large gpt2-xl llama-2-7b}; do
		strat=${sn%:*} n=${sn#*:}
		# pass 1: gpt2 and gpt2-xl without checkpointing; pass 2: the rest
		if [ $pass = 1 ]; then
			{ [ "$ckpt" = none ] && { [ "$model" = gpt2 ] || [ "$model" = gpt2-xl ]; }; } || continue
		fi
		grep -q "^$model,$prec,$ckpt,$strat,$n,ok," "$csv" && continue  # errors are retried
		if [ $(( $(date +%s) - t0 )) -ge "$budget" ]; then
			say "validate: budget of ${budget}s spent; run the phase again to continue"
			return
		fi
		ini=$(mktemp --suffix=.ini)
		printf '[model]\nname = %s\nseq_len = 1024\ndropout = 0\n[cluster]\ngpu = %s\nnodes = 1\ngpus_per_node = %s\nintra_node = nvlink4\n[training]\nstrategy = %s\nprecision = %s\nmicro_batch = auto\nactivation_checkpointing = %s\nframework = shardcast\n' \
			"$model" "$key" "$n" "$strat" "$prec" "$ckpt" >"$ini"
		# shellcheck disable=SC2086
		json=$(timeout 300 "$bin/validate" "$ini" --backend cuda --emulate-world "$n" --json --db "$out/validate.db" \
			${VALIDATE_ARGS:---steps 3 --warmup 1} 2>"$ini.err")
		row=$(python3 - "$json" "$ini.err" <<'PY'
import json, sys
try:
    d = json.loads(sys.argv[1]); p = d.get("predicted", {}); m = d.get("measured", {})
    v = [ "ok", p.get("max_micro_batch"), m.get("max_micro_batch"), p.get("memory", {}).get("peak_bytes"),
          m.get("peak_bytes"), m.get("fixed_overhead_bytes"), p.get("step", {}).get("time_s"),
          m.get("step_time_s"), m.get("tokens_per_s"), "" ]
except Exception:
    msg = open(sys.argv[2]).read().strip().replace("\n", " ").replace(",", ";")[:300]
    v = ["error", "", "", "", "", "", "", "", "", msg]
print(",".join("" if x is None else str(x) for x in v))
PY
)
		echo "$model,$prec,$ckpt,$strat,$n,$row" | tee -a "$csv" >>"$log"
		rm -f "$ini" "$ini.err"
	done; done; done; done; done
	say "validate: campaign complete -> $csv"
}

for p in $phases; do
	case "$p" in
	versions|tests|bench|validate) "$p" ;;
	*) say "unknown phase $p (versions tests bench validate)"; exit 2 ;;
	esac
done
say "== done; files in $out: $(ls "$out" | tr '\n' ' ')"

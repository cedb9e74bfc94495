#!/usr/bin/env bash
# published.sh — the step model against published training throughputs.
#
#   bench/published.sh [BIN] [--markdown] [--table FILE]
#
# Reads scenarios/published/table.csv (one published measurement a row: id,
# source, scenario, metric, measured, unit, flops_per_token, attention, notes;
# a source is named by its repository or paper first, then the file or table),
# runs BIN/simulate --json on each row's scenario, converts the prediction to the
# metric the source printed, and prints measured, predicted and the error
# (predicted / measured - 1, in the source's metric), then the median absolute
# error and the worst row. --markdown prints the README's table instead.
#
# Metrics (how a prediction is converted; the JSON keys are docs/CONTRACT.md's contract):
#   tokens_per_s_per_gpu  step.tokens_per_s / cluster.gpus
#   tokens_per_s          step.tokens_per_s (the whole job)
#   samples_per_s         step.samples_per_s (the whole job)
#   step_time_s           step.time_s (one optimizer step)
#   tflops_per_gpu        step.tokens_per_s / cluster.gpus x flops_per_token / 1e12,
#                         flops_per_token being the source's own FLOP count per token
#
# Nothing here is tuned to the rows: the harness only converts units.
# Exit status: 0 on success, 2 on a malformed table or a row whose scenario
# simulate refuses (file:line and the column), 1 when simulate fails otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin=bin
format=text
table=scenarios/published/table.csv
while [ $# -gt 0 ]; do
	case $1 in
	--markdown) format=markdown ;;
	--table) shift; table=${1:?--table needs a file} ;;
	--help|-h) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "published: unknown option '$1' (try --help)" >&2; exit 2 ;;
	*) bin=$1 ;;
	esac
	shift
done
cd "$root" || exit 1
[ -r "$table" ] || { echo "published: $table: cannot read" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one line per row: the table's fields and the prediction's, tab-separated
lineno=1
tail -n +2 "$table" | while IFS= read -r line; do
	lineno=$((lineno + 1))
	[ -z "$line" ] && continue
	nf=$(printf '%s\n' "$line" | awk -F, '{print NF}')
	if [ "$nf" -ne 9 ]; then
		echo "published: error: $table:$lineno: expected 9 comma-separated columns, got $nf (notes may not contain commas)" >&2
		exit 2
	fi
	IFS=, read -r id source scen metric measured unit fpt attention notes <<<"$line"
	case $metric in
	tokens_per_s_per_gpu|tokens_per_s|samples_per_s|step_time_s) ;;
	tflops_per_gpu) if [ -z "$fpt" ]; then
			echo "published: error: $table:$lineno: metric tflops_per_gpu needs flops_per_token" >&2; exit 2; fi ;;
	*) echo "published: error: $table:$lineno: unknown metric '$metric' (expected tokens_per_s_per_gpu, tokens_per_s, samples_per_s, step_time_s or tflops_per_gpu)" >&2
	   exit 2 ;;
	esac
	if ! awk -v v="$measured" 'BEGIN { exit !(v + 0 > 0) }'; then
		echo "published: error: $table:$lineno: measured = '$measured': expected a positive number" >&2
		exit 2
	fi
	"$bin/simulate" "$scen" --json >"$tmp/out.json" 2>"$tmp/err"
	src=$?
	if [ "$src" -ne 0 ]; then   # simulate's own status: 2 = a bad scenario, 1 = a failure
		echo "published: error: $table:$lineno: $id: simulate $scen: $(head -c 400 "$tmp/err")" >&2
		[ "$src" -eq 2 ] && exit 2
		exit 1
	fi
	pred=$(jq -r '[.model.name, .cluster.gpus, .cluster.gpu, .step.micro_batch, .step.grad_accum,
	               .step.global_batch, .model.seq_len, .training.precision, .training.strategy,
	               .memory.fits, .step.time_s, .step.tokens_per_s, .step.samples_per_s] | @tsv' "$tmp/out.json") || exit 1
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$id" "$metric" "$measured" "${fpt:-0}" "$attention" "$source" "$pred"
done >"$tmp/rows.tsv"
rc=${PIPESTATUS[1]}
[ "$rc" -eq 0 ] || exit "$rc"
[ -s "$tmp/rows.tsv" ] || { echo "published: $table: no rows" >&2; exit 2; }

awk -F'\t' -v format="$format" -v table="$table" '
function predicted(metric, fpt, gpus, time, tps, sps) {
	if (metric == "tokens_per_s_per_gpu") return tps / gpus
	if (metric == "tokens_per_s") return tps
	if (metric == "samples_per_s") return sps
	if (metric == "step_time_s") return time
	return tps / gpus * fpt / 1e12           # tflops_per_gpu
}
function num(x) {                                # readable figure: 3 significant digits, no exponent
	if (x >= 1000) return sprintf("%.0f", x)
	if (x >= 100) return sprintf("%.1f", x)
	if (x >= 10) return sprintf("%.2f", x)
	return sprintf("%.3f", x)
}
{
	id[NR] = $1; metric = $2; meas[NR] = $3
	gpus = $8; time = $17; tps = $18; sps = $19
	pred[NR] = predicted(metric, $4, gpus, time, tps, sps)
	err[NR] = pred[NR] / meas[NR] - 1
	# the simulator is "fast" when it predicts more speed than was measured
	speed = (metric == "step_time_s") ? meas[NR] / pred[NR] : pred[NR] / meas[NR]
	dir[NR] = speed >= 1 ? "fast" : "slow"
	unit[NR] = metric == "tokens_per_s_per_gpu" ? "tok/s/GPU" : metric == "tokens_per_s" ? "tok/s" : \
	           metric == "samples_per_s" ? "samples/s" : \
	           metric == "step_time_s" ? "s/step" : "TFLOP/s/GPU"
	model[NR] = $7; ngpu[NR] = gpus; gpu[NR] = $9
	batch[NR] = $10 "x" $11 "x" ($12 / ($10 * $11))     # micro x accumulation x data-parallel ranks
	seq[NR] = $13; prec[NR] = $14; strat[NR] = $15; fits[NR] = $16 == "true" ? "yes" : "no"
	attn[NR] = $5
	split($6, word, " "); src[word[1]] = 1   # a source is its repository or paper, the first word
	a = err[NR] < 0 ? -err[NR] : err[NR]; abserr[NR] = a
}
END {
	n = NR
	for (i = 1; i <= n; i++) s[i] = abserr[i]
	for (i = 2; i <= n; i++) { v = s[i]; for (j = i - 1; j >= 1 && s[j] > v; j--) s[j + 1] = s[j]; s[j + 1] = v }
	median = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
	worst = 1
	for (i = 2; i <= n; i++) if (abserr[i] > abserr[worst]) worst = i
	nsrc = 0; for (k in src) nsrc++
	if (format == "markdown") {
		print "| row (`scenarios/published/`) | model | GPUs | batch (micro x accum x DP) | seq | precision | attention (source) | fits | measured | predicted | error |"
		print "|---|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= n; i++)
			printf "| `%s` | %s | %d x %s | %s | %d | %s | %s | %s | %s %s | %s | %+.0f %% |\n", id[i], model[i], ngpu[i], gpu[i], \
			       batch[i], seq[i], prec[i], attn[i], fits[i], num(meas[i]), unit[i], num(pred[i]), 100 * err[i]
		printf "\n%d rows from %d independent sources; median absolute error %.0f %%, worst `%s` (%+.0f %%).\n", \
		       n, nsrc, 100 * median, id[worst], 100 * err[worst]
		exit 0
	}
	printf "%-30s %-18s %5s %-13s %5s %-5s %-22s %-4s %11s %11s %8s %s\n", "row", "model", "GPUs", "batch", "seq", "prec",
	       "attention (source)", "fits", "measured", "predicted", "error", "unit"
	for (i = 1; i <= n; i++)
		printf "%-30s %-18s %5d %-13s %5d %-5s %-22s %-4s %11s %11s %+7.1f%% %s (sim %s)\n", id[i], model[i], ngpu[i], batch[i],
		       seq[i], prec[i], attn[i], fits[i], num(meas[i]), num(pred[i]), 100 * err[i], unit[i], dir[i]
	printf "\n%d rows from %d independent sources (%s)\n", n, nsrc, table
	printf "median absolute error %.1f %%; worst row %s: %+.1f %% (sim %s)\n", 100 * median, id[worst], 100 * err[worst], dir[worst]
}' "$tmp/rows.tsv"

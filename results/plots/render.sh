#!/usr/bin/env bash
# render.sh BIN DB OUTDIR — the plots of results/plots from a results database
# (`make plots`): for the latest recommend run of each sweep file in DB,
#   heatmap-NAME.png/.svg  the winner per cell (heatmap.gp, from the run's
#                          stored heatmap data),
#   memory-NAME.png/.svg   memory breakdown per candidate, stacked (memory.gp):
#                          the largest model of the sweep where at least half
#                          of the candidates fit, at its smallest batch, on the
#                          smallest node count,
#   scaling-NAME.png/.svg  tokens/s against GPU count per strategy (scaling.gp),
#                          when the sweep has several node counts: its first
#                          model at its largest batch.
# When DB holds no recommend run, the shipped sweeps are run into it first.
set -eu
bin=${1:-bin}; db=${2:-results/results.db}; out=${3:-results/out/plots}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
q() { sqlite3 -batch -noheader -separator "$(printf '\t')" "$db" "$@"; }

mkdir -p "$out" "$(dirname "$db")"
if [ ! -s "$db" ] || [ "$(q "SELECT count(*) FROM runs WHERE command = 'recommend'")" = 0 ]; then
	echo "plots: no recommend run in $db; running the shipped sweeps into it"
	for s in scenarios/sweeps/a100x8.ini scenarios/sweeps/a100-ib.ini; do
		"$bin/recommend" "$s" --quiet --no-progress --db "$db"
	done
fi
if [ "$(q "SELECT count(*) FROM sqlite_master WHERE name = 'candidates'")" = 0 ]; then
	echo "plots: $db has no candidates table (schema version 1); run recommend --db on it first" >&2
	exit 2
fi

n=0
for id in $(q "SELECT max(id) FROM runs WHERE command = 'recommend' GROUP BY scenario_path ORDER BY 1"); do
	path=$(q "SELECT scenario_path FROM runs WHERE id = $id")
	device=$(q "SELECT device FROM runs WHERE id = $id")
	name=$(basename "$path" .ini)

	# the heatmap: the data recommend stored with the run
	q "SELECT body FROM outputs WHERE run_id = $id AND format = 'heatmap'" >"$tmp/heat.dat"
	if [ -s "$tmp/heat.dat" ]; then
		read -r nrows ncols <<<"$(sed -n '1s/.*: \([0-9]*\) rows x \([0-9]*\) columns.*/\1 \2/p' "$tmp/heat.dat")"
		gnuplot -e "datafile='$tmp/heat.dat'; outbase='$out/heatmap-$name'; ncols=$ncols; nrows=$nrows; \
			plottitle='Best strategy per cell: $name (run $id, $device)'" "$here/heatmap.gp"
		n=$((n + 1))
	fi

	# memory breakdown of one cell
	cell=$(q "WITH c AS (SELECT cell, max(model_params) AS p, min(batch) AS b, sum(status = 'ok') AS fit, count(*) AS k
	                     FROM candidates WHERE run_id = $id AND status IN ('ok', 'no_fit') GROUP BY cell)
	          SELECT cell FROM c WHERE 2 * fit >= k ORDER BY p DESC, b ASC, cell LIMIT 1")
	if [ -n "$cell" ]; then
		g=$(q "SELECT min(gpus) FROM candidates WHERE run_id = $id AND cell = $cell AND status IN ('ok', 'no_fit')")
		{ printf 'candidate\tparameters\tgradients\toptimizer\tactivations\tbuffers\toverhead\tstatus\n'
		  q "SELECT replace(label, ' nodes=' || nodes, '') || CASE status WHEN 'no_fit' THEN ' (does not fit)' ELSE '' END,
		            params_bytes / 1073741824.0, grads_bytes / 1073741824.0, optimizer_bytes / 1073741824.0,
		            activations_bytes / 1073741824.0, buffers_bytes / 1073741824.0, overhead_bytes / 1073741824.0, status
		     FROM candidates WHERE run_id = $id AND cell = $cell AND gpus = $g AND status IN ('ok', 'no_fit')
		     ORDER BY candidate"; } >"$tmp/mem.dat"
		read -r model batch cap <<<"$(q "SELECT model, batch, max(capacity_bytes) / 1073741824.0 FROM candidates
		                                 WHERE run_id = $id AND cell = $cell" | tr '\t' ' ')"
		gnuplot -e "datafile='$tmp/mem.dat'; outbase='$out/memory-$name'; capacity=$cap; \
			plottitle='Memory per GPU: $model, batch $batch, $g x $device ($name, run $id)'" "$here/memory.gp"
		n=$((n + 1))
	fi

	# scaling: several GPU counts in the run
	if [ "$(q "SELECT count(DISTINCT gpus) FROM candidates WHERE run_id = $id AND status = 'ok'")" -gt 1 ]; then
		read -r model batch <<<"$(q "SELECT model, max(batch) FROM candidates WHERE run_id = $id AND
		                             model = (SELECT model FROM candidates WHERE run_id = $id ORDER BY cell LIMIT 1)" | tr '\t' ' ')"
		: >"$tmp/scale.dat"
		for s in $(q "SELECT strategy FROM candidates WHERE run_id = $id AND status = 'ok' AND model = '$model'
		              AND batch = $batch GROUP BY strategy ORDER BY min(candidate)"); do
			printf '%s\tGPUs\ttokens/s\tMFU\n' "$s" >>"$tmp/scale.dat"
			q "SELECT strategy, gpus, max(tokens_per_s), mfu FROM candidates WHERE run_id = $id AND status = 'ok'
			   AND model = '$model' AND batch = $batch AND strategy = '$s' GROUP BY gpus ORDER BY gpus" >>"$tmp/scale.dat"
			printf '\n\n' >>"$tmp/scale.dat"
		done
		# linear scaling from the best throughput at the smallest GPU count
		printf 'linear scaling\tGPUs\ttokens/s\tMFU\n' >>"$tmp/scale.dat"
		q "WITH b AS (SELECT gpus AS g0, max(tokens_per_s) AS t0 FROM candidates WHERE run_id = $id AND status = 'ok'
		              AND model = '$model' AND batch = $batch GROUP BY gpus ORDER BY gpus LIMIT 1)
		   SELECT DISTINCT 'linear', c.gpus, b.t0 * c.gpus / b.g0, '' FROM candidates c, b
		   WHERE c.run_id = $id AND c.status = 'ok' AND c.model = '$model' AND c.batch = $batch ORDER BY c.gpus" >>"$tmp/scale.dat"
		gnuplot -e "datafile='$tmp/scale.dat'; outbase='$out/scaling-$name'; \
			plottitle='Throughput against GPUs: $model, global batch $batch, best options per strategy ($name, run $id)'" \
			"$here/scaling.gp"
		n=$((n + 1))
	fi
done
echo "plots: $n plots in $out (PNG and SVG) from $db"

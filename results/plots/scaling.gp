# scaling.gp — throughput against GPU count: one line per strategy, the best
# of its options (checkpointing, precision, ...) at each GPU count, from a
# recommend run whose sweep has several node counts; linear scaling from the
# best throughput at the smallest count (the last block) drawn in black.
#
# Two panels: above, tokens/s against GPUs, log-log (linear scaling is a
# straight line; y ticks at 1, 2 and 5 times a power of ten: 20k, 50k, 100k);
# below, scaling efficiency, each strategy's tokens/s as a percentage of linear
# scaling at the same GPU count, where lines that overlap above separate and
# linear scaling is the 100 % line.
#
# Variables (set before this script): datafile, outbase (outbase.png and
# outbase.svg), plottitle. The data file is tab-separated with a header:
# strategy, GPUs, tokens/s, MFU; blocks (one per strategy, then the linear
# line) separated by two blank lines, each with its own header line, so that
# `index` picks one. Rendered by `make plots`.

set datafile separator "\t"
stats datafile using 2 nooutput
nblocks = STATS_blocks
# linear scaling is tokens/s = k x GPUs; k from the last block
stats datafile index (nblocks - 1) using ($3 / $2) nooutput
k = STATS_mean

set logscale x 2
set autoscale xfix
set grid lc rgb "#dddddd"
set key noenhanced

W = 900; H = 760
set style line 100 lc rgb "#000000" lw 2 dt (6, 4)

# tick marks at 1, 2, 5 x 10^d tokens/s, labelled 1k, 2k, 5k, 10k, ... 1M
set_y_ticks = "unset ytics; set ytics nomirror format '%.0s%c'; \
  do for [d = 0:12] { do for [m in '1 2 5'] { set ytics add (m * 10.0**d) } }"

plotit = "set multiplot title plottitle font ',11'; \
  set origin 0, 0.36; set size 1, 0.60; set lmargin 12; set rmargin 3; \
  set logscale y 10; eval set_y_ticks; set autoscale yfix; set offsets 0, 0, graph 0.06, graph 0.06; \
  set ylabel 'tokens/s'; unset xlabel; set format x ''; \
  set key left top; \
  plot for [i=0:nblocks-2] datafile index i using 2:3 with linespoints lw 2 pt 7 title columnheader(1), \
    datafile index nblocks-1 using 2:3 with lines ls 100 title 'linear scaling (from the fewest GPUs)'; \
  set origin 0, 0; set size 1, 0.38; unset logscale y; set ytics auto format '%.0f%%'; \
  set autoscale y; set offsets 0, 0, graph 0.1, graph 0.1; \
  set ylabel '% of linear scaling'; set xlabel 'GPUs'; set format x '%g'; set key off; \
  plot for [i=0:nblocks-2] datafile index i using 2:(100 * $3 / ($2 * k)) with linespoints lw 2 pt 7 \
    title columnheader(1), 100 with lines ls 100 notitle; \
  unset multiplot"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size W, H font "Sans,10" noenhanced
} else {
  set terminal png size W, H noenhanced
}
set output outbase.".png"
eval plotit
set terminal svg size W, H font "Sans,10" background rgb "white" noenhanced
set output outbase.".svg"
eval plotit
set output

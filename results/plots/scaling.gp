# scaling.gp — throughput against GPU count: one line per strategy, the best
# of its options (checkpointing, precision, ...) at each GPU count, from a
# recommend run whose sweep has several node counts; linear scaling from the
# best throughput at the smallest count dashed (the last block). Log-log, so
# linear scaling is a straight line.
#
# Variables (set before this script): datafile, outbase (outbase.png and
# outbase.svg), plottitle. The data file is tab-separated with a header:
# strategy, GPUs, tokens/s, MFU; blocks (one per strategy, then the linear
# line) separated by two blank lines, each with its own header line, so that
# `index` picks one. Rendered by `make plots`.

set datafile separator "\t"
set key left top noenhanced
set logscale xy 2
set xlabel "GPUs"
set ylabel "tokens/s"
set format y "%.0s%c"
set grid lc rgb "#dddddd"
set title plottitle noenhanced
stats datafile using 2 nooutput
nblocks = STATS_blocks

plotit = "plot for [i=0:nblocks-2] datafile index i using 2:3 with linespoints lw 2 pt 7 title columnheader(1), \
  datafile index nblocks-1 using 2:3 with lines dt 2 lw 1 lc rgb '#555555' title columnheader(1)"

W = 900; H = 560
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

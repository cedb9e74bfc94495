# memory.gp — the memory breakdown per candidate: one stacked bar per strategy
# (parameters, gradients, optimizer states, activations, buffers, fixed
# overhead) on the most loaded GPU, against the device's capacity.
#
# Variables (set before this script): datafile, outbase (written as
# outbase.png and outbase.svg), plottitle, capacity (GiB). The data file is
# tab-separated, one line per candidate: label, then the six parts in GiB,
# then status (ok | no_fit); a header line first. A candidate that does not fit
# shows its need at micro-batch 1, above the capacity line.
# Rendered by `make plots` (results/plots/render.sh) from the results database.

set datafile separator "\t"
set datafile columnheaders
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb "white"
set boxwidth 0.75
set key outside right top vertical noenhanced
set ylabel "GiB on the most loaded GPU"
set xtics rotate by -35 left noenhanced font ",9"
set grid ytics lc rgb "#dddddd"
set title plottitle noenhanced
set arrow 1 from graph 0, first capacity to graph 1, first capacity nohead lw 2 dt 2 lc rgb "#c00000" front
set label 1 sprintf("capacity %.0f GiB", capacity) at graph 0.01, first capacity offset 0,0.6 tc rgb "#c00000" front
set yrange [0:*]
set bmargin 10

plotit = "plot datafile using 2:xtic(1) title 'parameters' lc rgb '#3182bd', \
  '' using 3 title 'gradients' lc rgb '#9ecae1', \
  '' using 4 title 'optimizer states' lc rgb '#31a354', \
  '' using 5 title 'activations' lc rgb '#fd8d3c', \
  '' using 6 title 'buffers' lc rgb '#9e9ac8', \
  '' using 7 title 'fixed overhead' lc rgb '#969696'"

W = 1100; H = 560
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

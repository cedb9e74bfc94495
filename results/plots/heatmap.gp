# heatmap.gp — the recommendation heatmap: the winning strategy of each cell
# (model down, batch across), coloured by strategy (the legend on the right
# names the colours), with its figure.
#
# Variables (set before this script): datafile, outbase (written as
# outbase.png and outbase.svg), plottitle, ncols, nrows. The data file has one
# line per cell: x y rgb "batch label" "model label" "strategy" "options"
# "figure and lead"
# (sweep_write_heatmap_data in sim/drivers/sweep_out.c; results/plots/render.sh makes
# the same from the results database).
# Rendered by `recommend --plot F.png` and by `make plots`.

cw = 200; ch = 70                      # pixels per cell
W = 260 + cw * ncols + 210; H = 150 + ch * nrows   # + the colour legend on the right
H = H < 300 ? 300 : H
set border 0

# The colour legend: one entry per strategy that wins a cell, in the order the
# data first names it, in its colour (columns 6 and 3 of the data), so the
# legend is read from the data and needs no variable of its own; and "none
# fits" when a cell has no fitting candidate. (An empty `for` is still parsed
# once, hence the guard on word().)
legnames = ""; legrgb = ""; nonefits = 0
stats datafile using (s = strcol(6), nonefits = nonefits || s eq "none fits", \
  (s ne "none fits" && strstrt(" ".legnames." ", " ".s." ") == 0) ? \
  (legnames = legnames." ".s, legrgb = legrgb." ".strcol(3), 0) : 0) nooutput
set key outside right top vertical Left reverse noenhanced samplen 1.5 spacing 1.3 title "best strategy" font ",10"
set xrange [-0.5:ncols - 0.5]
set yrange [-0.5:nrows - 0.5]
set xtics scale 0 nomirror offset 0,0.4 font ",10"
set ytics scale 0 nomirror font ",10"
unset x2tics
unset y2tics
set tmargin 5
set title plottitle font ",12"
set lmargin 24

plotit = "plot datafile using 1:2:(0.49):(0.49):3:xtic(4):ytic(5) with boxxyerror fillstyle solid 1.0 noborder lc rgb variable notitle, \
  '' using 1:($2 + 0.22):6 with labels font ',10' notitle, \
  '' using 1:($2):7 with labels font ',9' notitle, \
  '' using 1:($2 - 0.22):8 with labels font ',9' notitle, \
  for [i=1:words(legnames)] keyentry with boxes fillstyle solid 1.0 noborder \
    fc rgb sprintf('#%06x', i <= words(legrgb) ? word(legrgb, i) + 0 : 0) title word(legnames, i), \
  for [i=1:nonefits] keyentry with boxes fillstyle solid 1.0 border lc rgb '#bbbbbb' fc rgb '#eeeeee' \
    title 'none fits'"

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

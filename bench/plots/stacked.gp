# stacked.gp: one stacked bar per row labelled by the first column, one segment per column
# (e.g. ms per round by phase: draft, verify, walk, accept).
load dir."common.gp"
set style data histogram
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
plot for [i=2:ncols] datafile using i:xticlabels(1)

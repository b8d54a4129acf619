# bars.gp: clustered bars, one cluster per row labelled by the first column, one bar per column
# (e.g. acceptance by draft depth, one bar per configuration).
load dir."common.gp"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
plot for [i=2:ncols] datafile using i:xticlabels(1)

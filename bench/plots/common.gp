# common.gp: settings every plot kind shares (loaded by the kind scripts). Inputs, set by
# scripts/plot_record.sh: dir (this folder), datafile, outfile, ptitle, xlabel, ylabel,
# ncols (the number of columns). The data's first line names
# the columns; "?" marks a cell not measured.
set terminal svg size 720,420 dynamic enhanced font "sans,12" background rgb "white"
set output outfile
set title ptitle noenhanced
set xlabel xlabel noenhanced
set ylabel ylabel noenhanced
set datafile missing "?"
set key outside right top noenhanced autotitle columnheader
set grid ytics lc rgb "#dddddd"
set border 3
set tics nomirror

# lines.gp: every column against the first (e.g. tok/s against the block size K).
load dir."common.gp"
set yrange [0:*]
plot for [i=2:ncols] datafile using 1:i with linespoints lw 2 pt 7

# lines.gp: every column against the first (e.g. tok/s against the block size K).
load dir."common.gp"
set yrange [0:*]
# x tics at the data points (block sizes, positions) rather than at round numbers
plot for [i=2:ncols] datafile using 1:i:xtic(1) with linespoints lw 2 pt 7 ps 0.8

#!/usr/bin/env bash
# plot_record.sh: draw the plots of a benchmark record from the record's own data.
#   bash scripts/plot_record.sh docs/benchmarks/RECORD.md [more records...]
# A record carries its plot data as fenced blocks opened by a line "```plot NAME KIND":
#   # title: what the plot shows          (optional "# key: value" lines: title, x, y)
#   # x: block size K
#   # y: tok/s
#   K  classic  mtp                       (the column names, one word each)
#   2  40.1     52.3                      (rows of whitespace-separated values)
#   ```
# KIND names a gnuplot script bench/plots/KIND.gp (lines: every column against the first;
# bars: clustered bars, one cluster per row; stacked: one stacked bar per row). Each block
# becomes RECORD-NAME.svg next to the record. Exit status 1, with the record, line and reason,
# on a block that cannot be plotted; nothing is written for that record then.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
command -v gnuplot >/dev/null || { echo "plot_record: gnuplot not found (Debian package gnuplot-nox)" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: plot_record.sh RECORD.md..." >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Split one record's plot blocks into $work/N.dat (rows), $work/N.meta (name kind title x y).
split_blocks() {
  awk -v out="$work" -v rec="$1" '
    function fail(msg) { printf "plot_record: %s:%d: %s\n", rec, NR, msg > "/dev/stderr"; bad = 1; exit 1 }
    !inb && /^```plot([ \t]|$)/ {
      if (NF != 3) fail("a plot block opens with \"```plot NAME KIND\"")
      if ($2 !~ /^[A-Za-z0-9_-]+$/) fail("plot name \"" $2 "\" is not [A-Za-z0-9_-]+")
      if ($3 !~ /^[a-z]+$/) fail("plot kind \"" $3 "\" is not a word")
      if ($2 in seen) fail("plot name \"" $2 "\" used twice")
      seen[$2] = 1; inb = 1; n++; name = $2; kind = $3; title = name; xl = ""; yl = ""; cols = 0; rows = 0; start = NR
      dat = out "/" n ".dat"; printf "" > dat; next
    }
    inb && /^```/ {
      if (rows == 0) fail("plot \"" name "\" (line " start ") has no data rows")
      printf "%s\037%s\037%s\037%s\037%s\037%d\037%d\n", name, kind, title, xl, yl, start, cols > (out "/" n ".meta")
      close(dat); close(out "/" n ".meta"); inb = 0; next
    }
    inb && /^#/ {
      line = $0; sub(/^#[ \t]*/, "", line); k = line; sub(/:.*/, "", k); v = line; sub(/^[^:]*:[ \t]*/, "", v)
      gsub(/["\\]/, "", v)
      if (k == "title") title = v; else if (k == "x") xl = v; else if (k == "y") yl = v
      else fail("unknown key \"" k "\" (title, x, y)")
      next
    }
    inb && NF == 0 { next }
    inb {
      if (cols == 0) { cols = NF; if (cols < 2) fail("plot \"" name "\" needs at least two columns") }
      else {
        if (NF != cols) fail("row has " NF " values, the header names " cols " columns")
        for (i = 2; i <= NF; i++) if ($i !~ /^-?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ && $i != "?")
          fail("value \"" $i "\" in column " i " is not a number (\"?\" marks a cell not measured)")
        rows++
      }
      print > dat; next
    }
    END { if (bad) exit 1; if (inb) { NR = start; fail("plot block \"" name "\" is not closed") } }
  ' "$1"
}

status=0
for rec in "$@"; do
  [ -f "$rec" ] || { echo "plot_record: $rec: no such file" >&2; status=1; continue; }
  rm -f "$work"/*
  split_blocks "$rec" || { status=1; continue; }
  metas=$(ls "$work"/*.meta 2>/dev/null || true)
  [ -n "$metas" ] || { echo "plot_record: $rec: no \"\`\`\`plot NAME KIND\" block" >&2; status=1; continue; }
  base=${rec%.md}
  # Check every kind first, then draw into $work and move into place: a failing record writes nothing.
  ok=1
  for m in $metas; do
    IFS=$'\037' read -r name kind title xl yl start cols < "$m"
    [ -f "$here/bench/plots/$kind.gp" ] || {
      echo "plot_record: $rec:$start: plot kind \"$kind\" unknown (bench/plots/: $(cd "$here/bench/plots" && ls *.gp | sed 's/\.gp$//' | tr '\n' ' '))" >&2
      ok=0; }
  done
  [ $ok = 1 ] || { status=1; continue; }
  for m in $metas; do
    IFS=$'\037' read -r name kind title xl yl start cols < "$m"
    dat=${m%.meta}.dat
    if ! gnuplot -e "dir='$here/bench/plots/'; ncols=$cols; datafile='$dat'; outfile='$dat.svg'; ptitle=\"$title\"; xlabel=\"$xl\"; ylabel=\"$yl\"" \
         "$here/bench/plots/$kind.gp" 2> "$work/err"; then
      echo "plot_record: $rec:$start: gnuplot failed on plot \"$name\":" >&2; cat "$work/err" >&2; ok=0; break
    fi
  done
  [ $ok = 1 ] || { status=1; continue; }
  for m in $metas; do
    IFS=$'\037' read -r name kind title xl yl start cols < "$m"
    mv "${m%.meta}.dat.svg" "$base-$name.svg"
    echo "$base-$name.svg"
  done
done
exit $status

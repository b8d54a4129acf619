#!/usr/bin/env bash
# test_plot_record.sh: scripts/plot_record.sh draws every plot block of a record as a valid SVG
# next to it (each plot kind of bench/plots/), and refuses a malformed block with the record and
# line at fault, writing nothing over an SVG already there. Skipped (77) without gnuplot, which
# scripts/test.sh installs.
set -u
SRC=${SPECDEC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v gnuplot >/dev/null || { echo "skip: gnuplot not installed (gnuplot-nox)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# valid_svg FILE WORD...: an SVG document, closed, that names each WORD (legend, labels)
valid_svg() {
  local f=$1; shift
  [ -s "$f" ] || { bad "$f missing or empty"; return; }
  head -c 200 "$f" | grep -q '<svg' || bad "$f does not open an <svg> element"
  tail -c 50 "$f" | grep -q '</svg>' || bad "$f is not closed by </svg>"
  local w; for w in "$@"; do grep -q ">$w<" "$f" || bad "$f does not show \"$w\""; done
}

cat > "$T/rec.md" <<'R'
# a record
text
```plot speed lines
# title: Decode speed by block size
# x: block size K
# y: tok/s
K classic mtp
1 40 40
2 40.5 52.3
4 39.9 ?
```
```plot accept bars
# title: Acceptance by depth
depth K=2 K=4
1 0.8 0.79
2 0.6 0.61
```
```plot phases stacked
arm draft verify walk
K=2 1.0 5.0 0.1
K=4 2.0 7.0 0.2
```
R
out=$(bash "$SRC/scripts/plot_record.sh" "$T/rec.md") || bad "plot_record failed on a good record"
[ "$(echo "$out" | wc -l)" = 3 ] || bad "expected 3 SVG paths, got: $out"
valid_svg "$T/rec-speed.svg" classic mtp "Decode speed by block size" "block size K" "tok/s"
valid_svg "$T/rec-accept.svg" "K=2" "K=4" "Acceptance by depth"
valid_svg "$T/rec-phases.svg" draft verify walk "K=2"

# A committed record with plot blocks plots too (a copy, so the tree is left alone).
for r in "$SRC"/docs/benchmarks/*.md; do
  grep -q '^```plot ' "$r" || continue
  cp "$r" "$T/committed.md"
  bash "$SRC/scripts/plot_record.sh" "$T/committed.md" > "$T/committed.out" || bad "plot_record failed on $r"
  [ -s "$T/committed.out" ] || bad "no SVG from $r"
  while read -r f; do valid_svg "$f"; done < "$T/committed.out"
  break
done

# Malformed blocks: a non-zero status, the line at fault, and the good SVG left as it was.
cp "$T/rec-speed.svg" "$T/keep.svg"
expect_error() {  # expect_error WHAT PATTERN: rec.md (rewritten by the caller) must be refused
  if bash "$SRC/scripts/plot_record.sh" "$T/rec.md" > /dev/null 2> "$T/err"; then bad "$1: accepted"; fi
  grep -q "$2" "$T/err" || { bad "$1: message lacks \"$2\""; cat "$T/err"; }
  cmp -s "$T/rec-speed.svg" "$T/keep.svg" || bad "$1: an existing SVG was overwritten"
}
printf '```plot speed lines\nK a b\n1 2\n```\n' > "$T/rec.md"
expect_error "short row" "rec.md:3: row has 2 values"
printf '```plot speed lines\nK a\n1 x\n```\n' > "$T/rec.md"
expect_error "non-number" 'value "x" in column 2 is not a number'
printf '```plot speed pie\nK a\n1 2\n```\n' > "$T/rec.md"
expect_error "unknown kind" 'rec.md:1: plot kind "pie" unknown'
printf '```plot speed lines\nK a\n1 2\n' > "$T/rec.md"
expect_error "unclosed block" 'rec.md:1: plot block "speed" is not closed'
printf '```plot speed lines\nK a\n```\n' > "$T/rec.md"
expect_error "no rows" 'has no data rows'
printf '# nothing to plot\n' > "$T/rec.md"
expect_error "no block" 'no "```plot NAME KIND" block'
[ $fail = 0 ] && echo "test_plot_record: ok"
exit $fail

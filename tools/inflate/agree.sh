#!/usr/bin/env bash
# agree.sh: greedy token agreement between an inflated model and its source, prompt by prompt.
#
#   tools/inflate/agree.sh INFLATED_DIR SOURCE_DIR PROMPTS.jsonl N [specdec run options...]
#
# Both models generate N tokens greedily (--ignore-eos) from each prompt of PROMPTS.jsonl (objects
# with "prompt" and "id") through `specdec run`; the options after N go to every run unchanged
# (--threads, --draft mtp, a backend flag, ...). Per prompt it prints how many tokens agree before
# the first divergence, and at a divergence the top-2 logits of both models at that position
# (`specdec score` over the common prefix): a divergence where both gaps are within rounding of
# zero is a near-tie, not a difference of function. Options for `specdec score` come from
# AGREE_SCORE_ARGS. Environment: SPECDEC_BIN (default build/specdec), AGREE_MAX_PROMPTS (default
# all), AGREE_KEEP=DIR keeps the per-prompt files there. Needs Node.js (a setup.sh dependency) to
# read JSON. Exit status 0 when every run completed, whatever the agreement; the last line is
# the summary.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
INF=$1 SRC=$2 PROMPTS=$3 N=$4
shift 4
EXTRA=("$@")
BIN=${SPECDEC_BIN:-build/specdec}
read -r -a SCORE_ARGS <<< "${AGREE_SCORE_ARGS:-}"
MAXP=${AGREE_MAX_PROMPTS:-1000000}
if [ -n "${AGREE_KEEP:-}" ]; then T=$AGREE_KEEP; mkdir -p "$T"; else T=$(mktemp -d); trap 'rm -rf "$T"' EXIT; fi
[ -x "$BIN" ] || { echo "agree: $BIN is not an executable (set SPECDEC_BIN)" >&2; exit 1; }
[ -f "$PROMPTS" ] || { echo "agree: $PROMPTS: no such file" >&2; exit 1; }

# one prompt per file, p<k>.txt, and its id in p<k>.id
NP=$(node -e '
const fs = require("fs");
const lines = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(l => l.trim());
const max = +process.argv[3];
let n = 0;
for (const [k, l] of lines.entries()) {
  if (n >= max) break;
  const o = JSON.parse(l);
  if (typeof o.prompt !== "string") { console.error(`agree: line ${k + 1} has no "prompt" string`); process.exit(1); }
  fs.writeFileSync(`${process.argv[2]}/p${n}.txt`, o.prompt);
  fs.writeFileSync(`${process.argv[2]}/p${n}.id`, String(o.id ?? `line-${k + 1}`));
  n++;
}
console.log(n);' "$PROMPTS" "$T" "$MAXP")

full=0 sum=0 total=0
for ((k = 0; k < NP; k++)); do
  P=$(cat "$T/p$k.txt")
  id=$(cat "$T/p$k.id")
  for m in src inf; do
    dir=$SRC; [ $m = inf ] && dir=$INF
    if ! "$BIN" run -m "$dir" -p "$P" -n "$N" --ignore-eos --ids-out "$T/$m$k.json" "${EXTRA[@]}" > "$T/$m$k.txt" 2> "$T/$m$k.err"; then
      echo "agree: $id: specdec run -m $dir failed:" >&2; cat "$T/$m$k.err" >&2; exit 1
    fi
  done
  # d = first differing position (or the common length), prefix = the source's ids before it, plus its token at d
  read -r d len pre < <(node -e '
const fs = require("fs");
const a = JSON.parse(fs.readFileSync(process.argv[1])), b = JSON.parse(fs.readFileSync(process.argv[2]));
let d = 0;
while (d < a.length && d < b.length && a[d] === b[d]) d++;
console.log(d, a.length, JSON.stringify(a.slice(0, d + 1)));' "$T/src$k.json" "$T/inf$k.json")
  total=$((total + len)); sum=$((sum + d))
  if [ "$d" -ge "$len" ]; then
    full=$((full + 1))
    echo "$id: $d/$len agree"
    continue
  fi
  # top-2 of both models at position d, given the common prefix
  for m in src inf; do
    dir=$SRC; [ $m = inf ] && dir=$INF
    if ! "$BIN" score -m "$dir" -p "$P" --ids "$pre" --top 2 "${SCORE_ARGS[@]}" > "$T/$m$k.score" 2> "$T/$m$k.serr"; then
      echo "agree: $id: specdec score -m $dir failed:" >&2; cat "$T/$m$k.serr" >&2; exit 1
    fi
  done
  node -e '
const fs = require("fs");
const last = f => JSON.parse(fs.readFileSync(f, "utf8").trim().split("\n").pop());
const [id, d, len] = process.argv.slice(3);
const s = last(process.argv[1]), i = last(process.argv[2]);
const g = r => (r.top[0][1] - r.top[1][1]).toPrecision(3);
console.log(`${id}: ${d}/${len} agree; first divergence at token ${d}: source top-2 ${s.top[0][0]} / ${s.top[1][0]} ` +
            `(gap ${g(s)}), inflated top-2 ${i.top[0][0]} / ${i.top[1][0]} (gap ${g(i)})`);' \
    "$T/src$k.score" "$T/inf$k.score" "$id" "$d" "$len"
done
echo "summary: $full of $NP prompts agree on all $N tokens; $sum of $total tokens before the first divergence"

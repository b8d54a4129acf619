#!/usr/bin/env bash
# The training recipe's driver on the GPU machine (run from the repo root there; needs .dev/corpus and
# .dev/bin carried). One device command may last at most 10 minutes and the machine is kept only while
# calls follow each other closely, so the stages run detached and each call returns quickly:
#
#   tools/train/device_pipeline.sh start [--smoke]   launch stages 1-5 in the background, return
#   tools/train/device_pipeline.sh wait SECONDS      print progress every 30 s until done / failed
#                                                    (exit 0 done, 1 failed, 3 still running)
#   tools/train/device_pipeline.sh status            one progress line
#   tools/train/device_pipeline.sh fetch ship        copy MANIFEST, results and the 4-bit model into $OUT
#   tools/train/device_pipeline.sh fetch bf16 N      copy part N of the bf16 export into $OUT (optional)
#
# Stages (logs in $WORK/logs/<stage>.log, state in $WORK/status):
#   selftest  train_mtp.py --selftest (CPU: batched drafter == literal inference loop; HF == ours)
#   tokenize  tokenize_corpus.py      -> $WORK/data/{train,heldout}.bin
#   target    train_target.py         -> $WORK/target.pt
#   mtp       train_mtp.py            -> $WORK/mtp.pt
#   export    export.py               -> $WORK/export/ (HF directory + reference.json)
#   quantize  .dev/bin/specdec quantize (static build, carried) -> $WORK/ship/ (4-bit target + bf16 drafter)
#   eval      eval_mtp.py             -> $WORK/export/mtp_eval.json
#   agree     bench/mtp_agreement.py  -> $WORK/export/agree_{bf16,q4}.json (specdec on the 16 CPUs)
#   package   ship.tar and export.tar.xz in 15 MiB parts + results.tar.gz + MANIFEST
# The shipped model and every result come back in ONE fetch (`fetch ship`, ~45 MiB), so the last
# `wait` call can also fetch: the machine is given back 30 s after a call ends, and a lost machine
# loses the run. The bf16 export (~100 MiB, 2 more fetches) is only needed to re-check here.
# WORK is /tmp/sdtrain/real or /tmp/sdtrain/smoke; /tmp/sdtrain/current names the latest.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
BASE=/tmp/sdtrain
PARTS_PER_FETCH=4
SPECDEC=$REPO/.dev/bin/specdec   # tools/train/README.md: cmake -DSPECDEC_STATIC=ON, then copy here

cur_work() { cat "$BASE/current" 2>/dev/null || { echo "no run started" >&2; exit 1; }; }

status_line() {
  local W=$1 st stage
  st=$(cat "$W/status" 2>/dev/null || echo "unknown")
  stage=${st%% *}
  echo "[$(date +%H:%M:%S)] $W: $st"
  if [ -f "$W/logs/$stage.log" ]; then tail -n 3 "$W/logs/$stage.log" | cut -c1-300 | sed 's/^/    /'; fi
}

summary() {
  local W=$1
  python3 - "$W" <<'PY'
import json, os, sys
W = sys.argv[1]
def j(p):
    try:
        return json.load(open(os.path.join(W, p)))
    except Exception:
        return None
t, m, r, e = j("logs/target_summary.json"), j("logs/mtp_summary.json"), j("export/reference.json"), j("export/mtp_eval.json")
if t: print("target: steps %d, %.0f s, held-out loss %.4f nats/token, %.2f epochs" % (t["steps"], t["train_seconds"], t["final_heldout_loss"], t["epochs"]))
if m: print("mtp: steps %d, %.0f s, held-out top1/depth %s" % (m["steps"], m["train_seconds"], ["%.3f" % v for v in m["final_heldout"]["top1"]]))
if r: print("export: HF max |logit diff| %.3g (rel %.3g)" % (r["check_b"]["max_abs_logit_diff"], r["check_b"]["rel"]))
if e:
    for K, s in e["summary"].items():
        print("eval %s: " % K + "; ".join("%s tau %.3f acc/depth %s" % (k, v["tau"], ["%.2f" % x for x in v["acceptance_per_depth_conditional"]]) for k, v in s.items()))
PY
  if [ -f "$W/package/MANIFEST" ]; then
    local n
    n=$(ls "$W"/package/export.tar.xz.part-* | wc -l)
    echo "package: $(ls "$W"/package/ship.tar.part-* | wc -l) ship parts (fetch ship); $n bf16 parts -> fetch bf16 1..$(( (n + PARTS_PER_FETCH - 1) / PARTS_PER_FETCH ))"
  fi
}

run_stage() {  # name, command...
  local W=$1 name=$2; shift 2
  echo "$name running since $(date +%H:%M:%S)" > "$W/status"
  local t0=$SECONDS
  if "$@" > "$W/logs/$name.log" 2>&1; then
    echo "$name $(( SECONDS - t0 ))" >> "$W/logs/durations.txt"
  else
    local rc=$?
    tail -n 30 "$W/logs/$name.log"
    # SOFT=1: the pipeline goes on; the status must not read FAILED, or `wait` would stop on it
    if [ -n "${SOFT:-}" ]; then echo "$name failed, going on (rc $rc)" > "$W/status"; return 1; fi
    echo "$name FAILED (rc $rc) after $(( SECONDS - t0 )) s; see $W/logs/$name.log" > "$W/status"
    exit 1
  fi
}

pipeline() {  # WORK SMOKE
  local W=$1 S=$2 T=tools/train
  export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
  local CORPUS=$REPO/.dev/corpus PROMPTS=$REPO/tests/data/prompts/heldout.jsonl
  local TOKARGS="" SM="" EVARGS=""
  if [ "$S" = 1 ]; then TOKARGS="--max-bytes 2000000"; SM="--smoke"; EVARGS="--limit 4 --new 24"; fi
  for f in train.txt.xz heldout.txt.xz tokenizer.json tokenizer_config.json; do
    [ -f "$CORPUS/$f" ] || { echo "corpus FAILED: $CORPUS/$f missing (carry .dev/corpus)" > "$W/status"; exit 1; }
  done
  (cd "$CORPUS" && sha256sum -c --quiet SHA256SUMS) || { echo "corpus FAILED: sha256 mismatch" > "$W/status"; exit 1; }
  # the carried static specdec must work here before any GPU time is spent: quantize a fixture
  { "$SPECDEC" quantize "$REPO/tests/fixtures/tiny-bf16" "$W/bincheck" --bits 4 --group-size 64 &&
    "$SPECDEC" info -m "$W/bincheck"; } > "$W/logs/bincheck.log" 2>&1 ||
    { echo "bin FAILED: $SPECDEC does not run here (carry .dev/bin; see $W/logs/bincheck.log)" > "$W/status"; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv > "$W/logs/gpu.txt" 2>&1
  python3 -c 'import torch, transformers, tokenizers, safetensors, numpy; print(torch.__version__, transformers.__version__, tokenizers.__version__, safetensors.__version__, numpy.__version__)' > "$W/logs/versions.txt" 2>&1
  run_stage "$W" selftest python3 $T/train_mtp.py --selftest
  run_stage "$W" tokenize python3 $T/tokenize_corpus.py --corpus "$CORPUS" --out "$W/data" $TOKARGS
  run_stage "$W" target python3 $T/train_target.py --data "$W/data" --work "$W" $SM ${TARGET_ARGS:-}
  run_stage "$W" mtp python3 $T/train_mtp.py --data "$W/data" --work "$W" $SM ${MTP_ARGS:-}
  run_stage "$W" export python3 $T/export.py --work "$W" --corpus "$CORPUS" --prompts "$PROMPTS"
  run_stage "$W" quantize ship "$W"
  # eval is the last stage that uses the GPU: if it fails, still package what was trained (the
  # session may have no GPU time left for a re-run; eval_mtp.py can run again on the fetched export)
  # time limits: a hung stage must not hold the packaging (and the trained model) hostage
  if ! SOFT=1 run_stage "$W" eval timeout 480 python3 $T/eval_mtp.py --model "$W/export" --prompts "$PROMPTS" --out "$W/export/mtp_eval.json" \
          --workers 4 $EVARGS ${EVAL_ARGS:-}; then
    echo "eval FAILED (packaging anyway)" >> "$W/logs/durations.txt"
  fi
  if [ -f "$W/export/mtp_eval.json" ] && ! SOFT=1 run_stage "$W" agree timeout 420 bash "$REPO/tools/train/device_pipeline.sh" _agree "$W"; then
    echo "agree FAILED (packaging anyway)" >> "$W/logs/durations.txt"
  fi
  run_stage "$W" package package "$W"
  echo "done $(date +%H:%M:%S)" > "$W/status"
}

ship() {  # the shipped form: specdec's own 4-bit group-64 quantization of the bf16 export
  local W=$1 f
  rm -rf "$W/q_in" "$W/ship"
  mkdir -p "$W/q_in"
  # only the model files: quantize copies every other file of its input (reference.json etc.)
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
    ln -s "$W/export/$f" "$W/q_in/$f"
  done
  "$SPECDEC" quantize "$W/q_in" "$W/ship" --bits 4 --group-size 64 || return 1
  "$SPECDEC" info -m "$W/ship" || return 1
  "$SPECDEC" run -m "$W/ship" -n 32 --draft mtp --threads 8 -p $'// FILE: fs/x.c\n#include <linux/fs.h>\n' || return 1
  (cd "$W/ship" && sha256sum * > ../ship.sha256) && mv "$W/ship.sha256" "$W/ship/SHA256SUMS"
  ls -la "$W/ship"
}

agree() {  # specdec vs the PyTorch reference, prompt by prompt (bf16: must agree; 4-bit: tau as shipped)
  local W=$1 m
  for m in bf16:export q4:ship; do
    python3 bench/mtp_agreement.py --specdec "$SPECDEC" --model "$W/${m#*:}" --ref "$W/export/mtp_eval.json" \
      --out "$W/export/agree_${m%%:*}.json" --jobs 15 --threads 1 || return 1
  done
}

package() {
  local W=$1
  rm -rf "$W/package" "$W/export/train_logs"
  mkdir -p "$W/package" "$W/export/train_logs"
  cp "$W"/logs/* "$W/export/train_logs/"
  # sha256 of every file of the final directory (model files, reference/eval json, logs)
  (cd "$W/export" && find . -type f ! -name SHA256SUMS.all | sort | xargs sha256sum > SHA256SUMS.all)
  if command -v xz > /dev/null; then
    tar -C "$W" -cf - export | xz -T16 -3 > "$W/package/export.tar.xz"
  else
    tar -C "$W" -cf "$W/package/export.tar.xz" export   # uncompressed; reassemble.sh detects it
  fi
  (cd "$W/package" && split -b 15M -d -a 2 export.tar.xz export.tar.xz.part-)
  tar -C "$W" -cf "$W/package/ship.tar" ship      # 4-bit weights do not compress
  (cd "$W/package" && split -b 15M -d -a 2 ship.tar ship.tar.part-)
  local R=(reference.json config.json train_logs SHA256SUMS.all) f
  for f in mtp_eval.json agree_bf16.json agree_q4.json; do [ -f "$W/export/$f" ] && R+=("$f"); done
  tar -C "$W/export" -czf "$W/package/results.tar.gz" "${R[@]}"
  (cd "$W/package" && sha256sum export.tar.xz export.tar.xz.part-* ship.tar ship.tar.part-* results.tar.gz > MANIFEST &&
    rm export.tar.xz ship.tar)
  ls -la "$W/package"
}

cmd=${1:-}
shift || true
case "$cmd" in
  start)
    S=0
    [ "${1:-}" = "--smoke" ] && S=1
    W=$BASE/real
    [ "$S" = 1 ] && W=$BASE/smoke
    mkdir -p "$BASE"
    if [ -f "$W/pid" ] && kill -0 "$(cat "$W/pid")" 2>/dev/null; then echo "already running: $W"; exit 1; fi
    rm -rf "$W"
    mkdir -p "$W/logs"
    echo "$W" > "$BASE/current"
    echo "queued" > "$W/status"
    setsid nohup bash "$REPO/tools/train/device_pipeline.sh" _pipeline "$W" "$S" > "$W/logs/pipeline.log" 2>&1 < /dev/null &
    echo $! > "$W/pid"
    sleep 5
    status_line "$W"
    ;;
  _pipeline) pipeline "$1" "$2" ;;
  _package) package "$1" ;;
  _ship) ship "$1" ;;
  _agree) agree "$1" ;;
  status) W=$(cur_work); status_line "$W"; summary "$W" ;;
  wait)
    W=$(cur_work)
    LIMIT=${1:-570}
    t0=$SECONDS
    while :; do
      status_line "$W"
      st=$(cat "$W/status" 2>/dev/null)
      case "$st" in done*|*FAILED*) break;; esac
      [ $(( SECONDS - t0 + 30 )) -gt "$LIMIT" ] && { echo "(still running; call wait again)"; break; }
      sleep 30
    done
    cat "$W/logs/durations.txt" 2>/dev/null | sed 's/^/  stage seconds: /'
    summary "$W"
    # exit status: 0 done, 1 failed, 3 still running (so "wait N && fetch 1" fetches only when done)
    case "$(cat "$W/status" 2>/dev/null)" in done*) exit 0;; *FAILED*) exit 1;; *) exit 3;; esac
    ;;
  fetch)
    W=$(cur_work)
    WHAT=${1:?ship or bf16 N}
    [ -n "${OUT:-}" ] || { echo "OUT is not set"; exit 1; }
    if [ "$WHAT" = ship ]; then
      cp "$W/package/MANIFEST" "$W/package/results.tar.gz" "$W"/package/ship.tar.part-* "$OUT/"
      ls -la "$OUT"
      echo "fetched the 4-bit model and the results"
    else
      N=${2:?part number}
      mapfile -t P < <(ls "$W"/package/export.tar.xz.part-* | sort)
      TOTAL=$(( (${#P[@]} + PARTS_PER_FETCH - 1) / PARTS_PER_FETCH ))
      [ "$N" -ge 1 ] && [ "$N" -le "$TOTAL" ] || { echo "bf16 part $N of $TOTAL does not exist"; exit 1; }
      cp "$W/package/MANIFEST" "$OUT/"
      for ((i = (N - 1) * PARTS_PER_FETCH; i < N * PARTS_PER_FETCH && i < ${#P[@]}; i++)); do cp "${P[$i]}" "$OUT/"; done
      ls -la "$OUT"
      echo "fetched bf16 part $N of $TOTAL"
    fi
    ;;
  *) sed -n '2,26p' "$0"; exit 2 ;;
esac

#!/usr/bin/env bash
# gpu.sh: what the GPU machine runs, in one call: build, tests, benchmarks. Everything it
# measures or prints goes under $OUT (default out/gpu), one log per phase plus summary.txt (more
# than 7 files are packed into one archive at the end: see pack below).
#
#   bash scripts/gpu.sh [phase ...]        default: env build test bench exact
#
# phases
#   env       the GPU, driver, clocks, CPU and load (env.txt)
#   build     specdec with the CUDA backend (Release, sm_90) into build-gpu, against .dev/deps
#             (scripts/gpu_deps.sh: the machine cannot install packages) when there is no pkg-config
#   test      test_backend_ops (every op of every backend, CUDA included), test_cuda,
#             test_cuda_kernels (every op against the scalar reference, bitwise invariance T = 1..64)
#   exact     tests/gpu/exact.sh: speculative == classic on the CUDA backend for every drafter,
#             K = 2..16, greedy and seeded, at precision f32 and int8 (EXACT_PRECISIONS)
#   tp        tests/gpu/tp.sh: --tp 1 through NCCL == the plain CUDA backend (greedy, spec == classic);
#             with >= 2 GPUs spec == classic at --tp 2/4 and decode ms/token at --tp 1/2/4(/8) on the
#             inflated 32B shape with the all-reduce's share (tp.log, tp_decode_32b.tsv)
#   sanitize  compute-sanitizer memcheck and racecheck on test_cuda and on test_cuda_kernels' quick
#             subset (SPECDEC_TEST_QUICK=1: one case of each kernel family); SANITIZE_TO seconds
#             each (default 300), SANITIZE_EXCLUDE a kernel-name substring left out, SANITIZE_ONLY the
#             one checked (the others run unchecked, at full speed); SANITIZE_TESTS / SANITIZE_TOOLS the
#             tests and tools run (default both of each; e.g. SANITIZE_TESTS=test_cuda_kernels
#             SANITIZE_TOOLS=racecheck SANITIZE_ONLY=attn_: the attention kernels' racecheck alone)
#   bench     bench_cuda (kernels against the copy bandwidth of the same run; BENCH_ARGS, e.g. --quick)
#   spec      specdec bench on the CUDA backend (classic vs MTP, interleaved; one process, so the
#             auto width's measurements and the recorded graphs carry over from the warm-up):
#             SPEC_MODELS (default the embedded pair), SPEC_KS (default 3 4 6; auto), SPEC_PROMPTS
#   peer      llama.cpp CUDA built from .peers (the pinned tarball of ../shared/peers, carried),
#             llama-bench on the embedded target as Q4_0, side by side with specdec
#   scale     the embedded pair inflated to the Qwen3 1.7B / 8B / 32B shapes (specdec inflate),
#             classic and speculative decode there, greedy agreement with the embedded target, and
#             llama.cpp on random-weight Q4_0 models of the same shapes (SCALE_PROMPTS prompts,
#             default 4, SCALE_N tokens, default 64; SCALE_SHAPES, default all three; SCALE_ARGS, more
#             options of specdec bench, e.g. --precision int8)
#   int8      precision int8 against f32 on the CUDA backend: bench/i8_quality (top-1 agreement and KL
#             on 64 held-out prompts), then bench/ab_binaries.sh with the two precisions as its arms,
#             classic and MTP interleaved, on the embedded target and the inflated 8B shape
#   ab        end to end against an earlier commit (its source as .old/src-*.tar.xz, built beside)
#             and with programmatic launches (SPECDEC_CUDA_PDL=1) against without
#             (bench/ab_binaries.sh; AB_MODELS, default the inflated 8B shape then the embedded pair;
#             AB_KINDS, default "old pdl": "kernels" adds, in one binary, the weight-streaming matmul
#             and the staged attention (SPECDEC_CUDA_STREAM=1 SPECDEC_CUDA_ATTN=staged) against the
#             gemv matmul and the split attention (the staged attention is the default since
#             docs/benchmarks/cuda-h100-2026-12-05.md; the streaming matmul is not); "attn" the
#             staged attention alone against the split one; "kv" the KV cache at bf16 against f32,
#             512 tokens; "gi" gemv_i4.cu's matmul kernel against the generic picks, SPECDEC_CUDA_GI=0; "nb" the int8
#             norm preparation over several blocks a token against one, SPECDEC_CUDA_NORM_BLOCKS=0;
#             "pre" gemv_i4.cu's single-token kernels loading their first batch before their wait
#             (SPECDEC_CUDA_GI_PRE=1, the default) against prefetching it towards L2 (0);
#             "fuse" the q/k head norms, RoPE and KV store inside the staged attention launch
#             (SPECDEC_CUDA_ATTN_FUSE=1, the default) against their own launch before it (0);
#             "mlp" the MLP block's fused launch (gate/up with SwiGLU and down's int8 preparation in
#             their epilogue) against norm_matmul_n then swiglu_matmul_add, SPECDEC_CUDA_MLP=0;
#             "early" the int8 preparation letting gemv_i4.cu's launch start before its own wait
#             (SPECDEC_CUDA_GI_EARLY=1) against after it (0); "width" MTP at the auto block width
#             against fixed width AB_WIDTH (default 4), MTP rows only, every run's stats lines kept
#             in width_MODEL/; "envpair" any two settings, AB_OLD_ENV / AB_NEW_ENV and AB_OLD_ARGS /
#             AB_NEW_ARGS, with AB_ARGS and AB_MODES; "dq4" MTP with the drafter's dense matrices quantized to 4 bits at
#             load against as stored, --drafter-weights q4 / stored, MTP rows only). Those two variables, exported before gpu.sh, put every other phase (test
#             aside: it runs both kernels itself) on the kernels they name.
#             The archive, made where git is, in a folder .git/info/exclude ignores, carried:
#               git archive C CMakeLists.txt src include tools bench tests ':(exclude)tests/fixtures' \
#                 ':(exclude)tests/data' ':(exclude)tools/train/results' | xz -1 > .old/src-C.tar.xz
#   attnab    bench_cuda --matmul 0:3 (the embedded shape's int8 matmuls, then the fused LM head's
#             and the attention's tables) of this build and of ab's earlier commit, alternated
#             twice (with ab among the phases); ATTNAB_ARGS other bench_cuda options (e.g. --matmul 2:3,
#             the 8B shape's)
#   mma       the tensor-core kernels (SPECDEC_CUDA_MMA=1 mma_i4.cu's, 2 mma_tile.cu's, 3 by shape, the default,
#             4 mma_tile.cu's with its weights staged): bench_cuda --arm-b MMA_ARM (default mma; mma_tile:
#             the two kernels; mma_tile_w: mma_tile.cu's two forms) on the 8B shape's
#             int8 matrices (MMA_WIDE=1: at T = 1, 16, 32, 64 only), exact.sh with each of MMA_MODES (default 1 2) on (the 1.7B shape, K = 16)
#   prefill   a 512-token prompt's prefill on the 8B shape (specdec bench's classic prefill line) under
#             each set of PREFILL_SETS (VAR=value[,VAR=value] words, BATCH=N for --batch N, KV=D for --kv-dtype D; default SPECDEC_CUDA_MMA=a for
#             each a of PREFILL_MODES, default 0 1 2 3; a word OLD in a set runs ab's earlier build
#             instead), alternated; the ids of 32 greedy tokens
#             identical under all; llama.cpp's pp512 on the same shape (with peer)
#   pfstep    Nsight Compute's duration of every kernel of a 512-token prefill on the 8B shape, summed by
#             kernel (pfstep_8b.md; PFSTEP_MMA, default 3: the SPECDEC_CUDA_MMA it runs under)
#   pfprof    Nsight Compute counters (speed of light, stalls, memory, occupancy) of the first PFPROF_COUNT
#             (default 6) launches of a 512-token prefill's kernels matching PFPROF_RE (default
#             mt_kernel|attn_teams) on the 8B shape (pfprof_8b.txt)
#   profile   Nsight Compute counters of bench_cuda --profile's representative kernels (ncu.txt; PROFILE_RE,
#             PROFILE_EXTRA)
#   e2e       end to end on the embedded pair and the inflated 8B shape: ms per token, the round's
#             phases, kernel launches per generated token
#   kprof     Nsight Compute counters (speed of light, warp stalls, memory) of one decode layer's kernels on
#             the inflated 8B shape (KPROF_RE, KPROF_SKIP, KPROF_COUNT; kprof_8b.txt)
#   envab     classic decode tok/s of the inflated 8B shape (ENVAB_MODEL) under each of ENVAB_SETS (words
#             of VAR=value[,VAR=value]; "-" for none), one binary, ENVAB_ROUNDS rounds (default 3) of every set
#             in turn after a discarded warm-up, 128 tokens (envab.txt: set round tok/s; medians in summary)
#   step      Nsight Compute's duration of every kernel of a short run (prefill and a few decode
#             steps; the embedded pair and the inflated 8B shape): one CSV row a launch, in order
#             (STEP_TOKENS, default 5; STEP_LAUNCHES, default 2000; STEP_MODELS, default both); of
#             ab's earlier build too when ab is among the phases (STEP_OLD=0: not); bench/ncu_step.awk
#             sums the last decode step by kernel
#             (step_*.md); STEP_ARGS more options of specdec run (e.g. --draft mtp --block-size 4),
#             STEP_TAG a suffix of the files' names
#   decide    the decisions only scale can make, on the inflated 8B shape, each arm interleaved in
#             one specdec bench: the reduced draft vocabulary at 8k / 16k / 32k against the full
#             head, the verify's projected rows capped at 2 and 3 against K + 1, and the 4-bit MTP
#             drafter against the shipped bf16 one (a second model, quantize --quantize-mtp)
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out/gpu}
mkdir -p "$OUT"
J=$(nproc)
BIN=$ROOT/build-gpu/specdec
SUM=$OUT/summary.txt
M=$ROOT/models/qwen3-kernel
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(env build test bench exact)
log() { echo "[gpu.sh $(date +%T)] $*" | tee -a "$SUM"; }
has() { for p in "${phases[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
KNOWN=" env build test exact tp sanitize bench spec peer scale int8 ab attnab mma prefill pfstep pfprof kprof envab e2e profile step decide "
for p in "${phases[@]}"; do   # a misspelt phase would run nothing and say nothing
  case "$KNOWN" in *" $p "*) ;; *) echo "gpu.sh: unknown phase '$p' (phases:$KNOWN)" >&2; exit 2 ;; esac
done
T0=$(date +%s)
# The device machine returns at most 8 files from $OUT: when there are more, everything but
# summary.txt and earlier archives goes into one archive (out-HHMMSS.tar.gz), also when a timeout
# stops the script.
pack() {
  local n; n=$(find "$OUT" -mindepth 1 -maxdepth 1 | wc -l)
  [ "$n" -le 7 ] && return
  ( cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name 'out-*.tar.gz' -printf '%P\n' > /tmp/gpu_pack.lst &&
    tar czf "out-$(date +%H%M%S).tar.gz" -T /tmp/gpu_pack.lst && xargs -d '\n' rm -rf < /tmp/gpu_pack.lst )
}
trap pack EXIT
trap 'exit 143' TERM INT
# held-out prompts for the benchmarks (c-fs-04 ends at EOS at once under greedy decoding)
head -40 tests/data/prompts/heldout.jsonl | grep -v '"c-fs-04"' | head -16 > /tmp/prompts16.jsonl
head -8 /tmp/prompts16.jsonl > /tmp/prompts8.jsonl

if has env; then
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    nvcc --version | tail -2
    grep -m1 "model name" /proc/cpuinfo; grep -m1 "^flags" /proc/cpuinfo; nproc; uname -r
    echo "loadavg: $(cat /proc/loadavg)"
    command -v compute-sanitizer >/dev/null && compute-sanitizer --version | head -2
    python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' 2>&1
  } > "$OUT/env.txt" 2>&1
  log "env: $(head -2 "$OUT/env.txt" | tail -1)"
fi

if has peer; then   # the peer's build takes minutes: start it first, in the background
  ( bash .peers/build.sh cuda /tmp/peer-cuda > "$OUT/peer_build.log" 2>&1; echo "exit $?" >> "$OUT/peer_build.log" ) &
  PEER_PID=$!
fi

if has build; then
  args=(-DCMAKE_BUILD_TYPE=Release)
  command -v pkg-config >/dev/null && pkg-config --exists jansson 2>/dev/null || args+=(-DSPECDEC_DEPS_PREFIX=$ROOT/.dev/deps)
  command -v ninja >/dev/null && args+=(-G Ninja)
  if cmake -S . -B build-gpu "${args[@]}" > "$OUT/build.log" 2>&1 && cmake --build build-gpu -j"$J" >> "$OUT/build.log" 2>&1; then
    log "build: ok ($(grep -m1 'CUDA backend' "$OUT/build.log" | sed 's/^-- //'))"
  else
    log "build: FAILED"; grep -m20 -iE "error|undefined" "$OUT/build.log" | tee -a "$SUM"; exit 1
  fi
fi

run_to() {   # run_to SECONDS LOG cmd...: a bounded step, its exit status logged
  local s=$1 f=$2; shift 2
  timeout "$s" "$@" > "$f" 2>&1; local rc=$?
  echo "exit $rc" >> "$f"
  return $rc
}

inflated() {   # inflated /tmp/inflated-SHAPE: the embedded pair inflated to SHAPE there unless it is
               # already; status 1, logged, when that fails
  local s=${1#/tmp/inflated-}
  [ -d "$1" ] || run_to 400 "$OUT/inflate_$s.log" "$BIN" inflate "$M" "$1" --shape "$s" || { log "inflate $s FAILED"; return 1; }
}

if has ab || { has prefill && [[ " ${PREFILL_SETS:-} " == *OLD* ]]; }; then   # the earlier commit's source
                  # (.old/src-*.tar.xz, a git archive) built beside, in the background
  OLD_TAR=$(ls .old/src-*.tar.xz 2>/dev/null | head -1)
  OLD_BIN=/tmp/old-src/b/specdec
  if [ -n "$OLD_TAR" ] && [ ! -x "$OLD_BIN" ]; then
    oargs=(-DCMAKE_BUILD_TYPE=Release)
    command -v pkg-config >/dev/null && pkg-config --exists jansson 2>/dev/null || oargs+=(-DSPECDEC_DEPS_PREFIX=$ROOT/.dev/deps)
    ( rm -rf /tmp/old-src && mkdir -p /tmp/old-src && tar xJf "$OLD_TAR" -C /tmp/old-src &&
      cmake -S /tmp/old-src -B /tmp/old-src/b "${oargs[@]}" && cmake --build /tmp/old-src/b -j"$J" --target specdec_cli bench_cuda
    ) > "$OUT/old_build.log" 2>&1 &
    OLD_PID=$!
  fi
fi

if has test; then
  export SPECDEC_SOURCE_DIR=$ROOT SPECDEC_BIN=$BIN
  for t in test_backend_ops test_cuda test_cuda_kernels; do
    [ -x build-gpu/$t ] || continue
    if run_to 300 "$OUT/$t.log" build-gpu/$t; then log "$t: ok ($(tail -2 "$OUT/$t.log" | head -1))"
    else log "$t: FAILED"; grep -m12 "FAIL" "$OUT/$t.log" | tee -a "$SUM"; fi
  done
fi

if has exact; then
  for prec in ${EXACT_PRECISIONS:-f32 int8}; do
    if EXACT_ARGS="--precision $prec" run_to 420 "$OUT/exact_$prec.log" bash tests/gpu/exact.sh "$BIN" cuda; then
      log "exact $prec: ok ($(tail -2 "$OUT/exact_$prec.log" | head -1))"
    else log "exact $prec: FAILED"; grep -m12 "FAIL" "$OUT/exact_$prec.log" | tee -a "$SUM"; fi
  done
fi

if has int8; then   # precision int8 against f32 on the GPU: quality, then speed interleaved in one run
  run_to 300 "$OUT/i8_quality_embedded.txt" build-gpu/i8_quality "$M" tests/data/prompts/heldout.jsonl 32 64 1 cuda
  log "int8 quality embedded: $(grep -m2 'top-1\|KL' "$OUT/i8_quality_embedded.txt" | tr '\n' ' ')"
  D=/tmp/inflated-qwen3-8b
  inflated "$D"
  for m in "$M" "$D"; do
    tag=$(basename "$m"); np=4; r=5; [ "$m" = "$D" ] && { np=2; r=3; }
    OLD_ARGS="--backend cuda --precision f32" NEW_ARGS="--backend cuda --precision int8" TEXT_MAY_DIFFER=1 \
      run_to 500 "$OUT/ab_int8_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
    log "int8 / f32 $tag: $(grep '^| p' "$OUT/ab_int8_$tag.md" | cut -d'|' -f2,3,6 | tr -s ' ' | tr '\n' ';')"
  done
fi

if has tp; then
  if run_to 1500 "$OUT/tp.log" bash tests/gpu/tp.sh "$BIN" "$OUT" cuda; then log "tp: ok"; else log "tp: FAILED"; fi
  grep -E "^GPUs|^tp[0-9]|^tp:|^decode|^FAIL" "$OUT/tp.log" | head -20 | tee -a "$SUM"
fi

if has sanitize; then   # the object's test, and one case of each kernel family (SPECDEC_TEST_QUICK=1)
  for t in ${SANITIZE_TESTS:-test_cuda test_cuda_kernels}; do
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
      # API errors are not reported: test_cuda asks for more memory than the device has on purpose
      # SANITIZE_EXCLUDE: a kernel-name substring left unchecked (e.g. st_kernel, whose mbarrier-ordered
      # stages racecheck reports as hazards: docs/benchmarks/cuda-h100-2026-12-05.md)
      if SPECDEC_TEST_QUICK=1 run_to "${SANITIZE_TO:-300}" "$OUT/sanitize_${t}_$tool.log" compute-sanitizer --tool $tool --report-api-errors no \
          ${SANITIZE_EXCLUDE:+--kernel-name-exclude kns=$SANITIZE_EXCLUDE} ${SANITIZE_ONLY:+--kernel-name kns=$SANITIZE_ONLY} \
          --error-exitcode 99 build-gpu/$t; then
        log "compute-sanitizer $tool $t: clean ($(grep -m1 'ERROR SUMMARY' "$OUT/sanitize_${t}_$tool.log"))"
      else log "compute-sanitizer $tool $t: see sanitize_${t}_$tool.log ($(grep -m1 -E 'ERROR SUMMARY|error|not supported' "$OUT/sanitize_${t}_$tool.log"))"; fi
    done
  done
fi

if has profile; then   # hardware counters of representative kernels (Nsight Compute; clocks left alone)
  # PROFILE_RE: the kernels profiled (default every matmul form and the attention); PROFILE_EXTRA: more
  # ncu options (e.g. --print-details all for the stall reasons)
  run_to 400 "$OUT/ncu.txt" ncu --clock-control none -k regex:"${PROFILE_RE:-mm_kernel|gv_kernel|gi_kernel|attn_split|best_finish}" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis ${PROFILE_EXTRA-} \
    build-gpu/bench_cuda --profile
  log "ncu: $(grep -c 'Section: GPU Speed Of Light Throughput' "$OUT/ncu.txt") kernel reports"
fi

if has step; then   # every kernel of a few decode steps, each one's own duration (ncu serializes them; clocks
                   # left alone): where a step's time goes besides the matmuls (step_*.csv, one row a launch)
  for m in ${STEP_MODELS:-$M /tmp/inflated-qwen3-8b}; do
    if [ "$m" != "$M" ] && [ ! -d "$m" ]; then
      run_to 400 "$OUT/inflate_qwen3-8b.log" "$BIN" inflate "$M" "$m" --shape qwen3-8b || { log "inflate 8b FAILED"; continue; }
    fi
    tag=$(basename "$m")
    [ -n "${OLD_PID:-}" ] && wait "$OLD_PID" 2>/dev/null
    for b in "$BIN" $([ "${STEP_OLD:-1}" = 1 ] && echo "${OLD_BIN:-}"); do   # ab's earlier build too, when there is one
      [ -x "$b" ] || continue
      bt=new; [ "$b" = "$BIN" ] || bt=old
      f=$OUT/step_${tag}${STEP_TAG:-}_$bt
      run_to 400 "$f.csv" ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        --launch-count ${STEP_LAUNCHES:-2000} "$b" run -m "$m" --backend cuda -p "Hello there" -n ${STEP_TOKENS:-5} --ignore-eos ${STEP_ARGS:-}
      awk -F'","' -f bench/ncu_step.awk "$f.csv" > "$f.md" 2>&1
      log "step $tag${STEP_TAG:-} $bt: $(grep -c gpu__time_duration "$f.csv") kernels profiled; $(tail -1 "$f.md")"
    done
  done
fi

if has pfstep; then   # every kernel of a 512-token prefill on the 8B shape, each one's own duration (ncu
                     # serializes them; clocks left alone), summed by kernel (pfstep_8b.md), under
                     # SPECDEC_CUDA_MMA=PFSTEP_MMA (default 3)
  D=/tmp/inflated-qwen3-8b
  if inflated "$D"; then
    [ -s /tmp/pp512.txt ] || bash bench/prompt_of_tokens.sh "$BIN" "$D" 512 /tmp/pp512
    SPECDEC_CUDA_MMA=${PFSTEP_MMA:-3} run_to 500 "$OUT/pfstep_8b.csv" ncu --clock-control none --metrics gpu__time_duration.sum \
      --csv --print-units base "$BIN" run -m "$D" --backend cuda -f /tmp/pp512.txt -n 1 --ignore-eos
    awk -F'","' -f bench/ncu_prefill.awk "$OUT/pfstep_8b.csv" > "$OUT/pfstep_8b.md" 2>&1
    log "pfstep 8B (mma ${PFSTEP_MMA:-3}): $(tail -1 "$OUT/pfstep_8b.md"); $(sed -n 3,7p "$OUT/pfstep_8b.md" | tr '\n' ' ')"
    gzip -f "$OUT/pfstep_8b.csv"
  fi
fi

if has kprof; then   # hardware counters of one decode layer's kernels on the inflated 8B shape (ncu; clocks
                    # left alone): speed of light, warp stalls, memory; KPROF_SKIP launches of the
                    # regex's kernels are skipped (prefill and the first step), KPROF_COUNT profiled
  D=/tmp/inflated-qwen3-8b
  inflated "$D"
  run_to 500 "$OUT/kprof_8b.txt" ncu --clock-control none -k regex:"${KPROF_RE:-gi_kernel|gi_swq|attn_staged|qkv_kernel|i8_prep}" \
    --launch-skip ${KPROF_SKIP:-600} --launch-count ${KPROF_COUNT:-9} \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    --section SchedulerStats "$BIN" run -m "$D" --backend cuda -p "Hello there" -n 4 --ignore-eos
  log "kprof: $(grep -c 'Duration' "$OUT/kprof_8b.txt") kernel reports"
fi

if has pfprof; then   # hardware counters of a 512-token prefill's kernels on the 8B shape (ncu; clocks left
                     # alone): PFPROF_RE (default the matmul and the attention), PFPROF_COUNT launches
                     # (default 4: the first chunk's q/k/v, o, gate/up and down matmuls, or as the regex picks);
                     # PFPROF_EXTRA: more ncu options (default the instruction mix and every section's
                     # details, the stall reasons among them)
  D=/tmp/inflated-qwen3-8b
  if inflated "$D"; then
    [ -s /tmp/pp512.txt ] || bash bench/prompt_of_tokens.sh "$BIN" "$D" 512 /tmp/pp512
    run_to 500 "$OUT/pfprof_8b.txt" ncu --clock-control none -k regex:"${PFPROF_RE:-mt_kernel|attn_teams}" \
      --launch-count ${PFPROF_COUNT:-6} --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy --section SchedulerStats --section ComputeWorkloadAnalysis \
      ${PFPROF_EXTRA---section InstructionStats --print-details all} \
      "$BIN" run -m "$D" --backend cuda -f /tmp/pp512.txt -n 1 --ignore-eos
    log "pfprof: $(grep -c 'Duration' "$OUT/pfprof_8b.txt") kernel reports"
  fi
fi

if has envab; then   # one binary under several environments, classic decode, sets interleaved round by round
  D=${ENVAB_MODEL:-/tmp/inflated-qwen3-8b}
  case "$D" in /tmp/inflated-*) inflated "$D" ;; esac
  envab_one() {   # envab_one SET: decode tok/s
    local e=(); [ "$1" != - ] && IFS=, read -r -a e <<< "$1"
    env "${e[@]}" "$BIN" run -m "$D" --backend cuda -p "The history of the printing press" -n 128 --ignore-eos 2>&1 >/dev/null |
      sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' | tail -1
  }
  read -r -a sets <<< "${ENVAB_SETS:--}"
  envab_one "${sets[0]}" > /dev/null   # warm-up: page cache, clocks
  for r in $(seq "${ENVAB_ROUNDS:-3}"); do
    for st in "${sets[@]}"; do echo "$st $r $(envab_one "$st")" >> "$OUT/envab.txt"; done
  done
  for st in "${sets[@]}"; do
    log "envab $(basename "$D") $st: $(awk -v s="$st" '$1 == s {print $3}' "$OUT/envab.txt" | sort -g |
      awk '{v[NR]=$1} END {if (NR) printf "median %.1f [%.1f, %.1f] n=%d", NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2, v[1], v[NR], NR}')"
  done
fi

if has e2e; then   # end to end on the embedded pair and the inflated 8B shape: ms/token, phases, launches
  python3 - "$ROOT" <<'PY'
import json, sys, os
root = sys.argv[1]
os.makedirs('/tmp/pr', exist_ok=True)
for i, l in enumerate(open('/tmp/prompts8.jsonl')):
    open(f'/tmp/pr/{i}.txt', 'w').write(json.loads(l)['prompt'])
PY
  for m in ${STEP_MODELS:-$M /tmp/inflated-qwen3-8b}; do
    if [ "$m" != "$M" ] && [ ! -d "$m" ]; then
      run_to 300 "$OUT/inflate_qwen3-8b.log" "$BIN" inflate "$M" "$m" --shape qwen3-8b || { log "inflate 8b FAILED"; continue; }
    fi
    tag=$(basename "$m")
    for dr in none mtp; do
      a=(); [ $dr = mtp ] && a=(--draft mtp --block-size 4)
      for i in 0 1 2 3; do
        "$BIN" run -m "$m" --backend cuda -p "$(cat /tmp/pr/$i.txt)" -n 128 --ignore-eos "${a[@]}" --ids-out "$OUT/ids_${tag}_${dr}_$i.txt" \
          > /dev/null 2>> "$OUT/e2e_${tag}_$dr.log"
      done
      log "e2e $tag $dr: $(grep -h '\[stats\]' "$OUT/e2e_${tag}_$dr.log" | sed 's/.*decode \([0-9.]*\) tok.s.*/\1/' | tr '\n' ' ')tok/s"
      log "e2e $tag $dr kernels: $(grep -h 'kernels in recordings' "$OUT/e2e_${tag}_$dr.log" | sed 's/.*(\([0-9.]*\) per generated token.*/\1/' | tr '\n' ' ')per generated token (prefill included)"
    done
  done
  for i in 0 1 2 3; do   # the inflated 8B's greedy tokens against the embedded target's
    cmp -s "$OUT/ids_qwen3-kernel_none_$i.txt" "$OUT/ids_inflated-qwen3-8b_none_$i.txt" && r=same || r=differ
    log "agreement prompt $i: 8B vs embedded greedy ids $r"
  done
fi

if has ab; then   # end to end, one run, interleaved: this build against the earlier commit's, and with
                 # programmatic launches (SPECDEC_CUDA_PDL=1) against without; classic and MTP
  [ -n "${OLD_PID:-}" ] && wait "$OLD_PID"
  D=/tmp/inflated-qwen3-8b
  for m in ${AB_MODELS:-$D $M}; do
    case "$m" in /tmp/inflated-*) inflated "$m" ;; esac   # AB_MODELS may name /tmp/inflated-qwen3-1.7b too
    tag=$(basename "$m"); np=4; r=5; [ "$m" != "$M" ] && { np=${AB_NP:-2}; r=${AB_R:-3}; }
    kinds=" ${AB_KINDS:-old pdl} "
    if [[ $kinds == *" old "* ]]; then
      if [ -x "$OLD_BIN" ]; then
        OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" run_to 500 "$OUT/ab_old_$tag.md" bash bench/ab_binaries.sh "$OLD_BIN" "$BIN" "$m" $np $r 128
        log "new / old $tag: $(grep '^| p' "$OUT/ab_old_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
      else log "old build FAILED: $(tail -3 "$OUT/old_build.log" 2>/dev/null)"; fi
    fi
    if [[ $kinds == *" kernels "* ]]; then
      OLD_ENV="SPECDEC_CUDA_STREAM=0 SPECDEC_CUDA_ATTN=split" NEW_ENV="SPECDEC_CUDA_STREAM=1 SPECDEC_CUDA_ATTN=staged" \
        OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_kernels_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "streaming matmul + staged attention / defaults $tag: $(grep '^| p' "$OUT/ab_kernels_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" gi "* ]]; then   # gemv_i4.cu's kernel against the generic picks
      OLD_ENV="SPECDEC_CUDA_GI=0" NEW_ENV="SPECDEC_CUDA_GI=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_gi_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "gemv_i4 / generic matmuls $tag: $(grep '^| p' "$OUT/ab_gi_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" nb "* ]]; then   # the int8 norm preparation spread over blocks against one block a token
      OLD_ENV="SPECDEC_CUDA_NORM_BLOCKS=0" NEW_ENV="SPECDEC_CUDA_NORM_BLOCKS=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_nb_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "norm preparation spread / one block $tag: $(grep '^| p' "$OUT/ab_nb_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" pre "* ]]; then   # gemv_i4.cu's blocks fetching their first rows before their wait, or not
      OLD_ENV="SPECDEC_CUDA_GI_PRE=0" NEW_ENV="SPECDEC_CUDA_GI_PRE=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_pre_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "preload / L2 prefetch $tag: $(grep '^| p' "$OUT/ab_pre_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" mlp "* ]]; then   # the MLP block's fused launch against norm_matmul_n + swiglu_matmul_add
      OLD_ENV="SPECDEC_CUDA_MLP=0" NEW_ENV="SPECDEC_CUDA_MLP=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_mlp_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "fused MLP / two ops $tag: $(grep '^| p' "$OUT/ab_mlp_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" fuse "* ]]; then   # q/k norm, RoPE and KV store inside the attention launch, or before it
      OLD_ENV="SPECDEC_CUDA_ATTN_FUSE=0" NEW_ENV="SPECDEC_CUDA_ATTN_FUSE=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_fuse_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "fused / separate q/k norm before attention $tag: $(grep '^| p' "$OUT/ab_fuse_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" early "* ]]; then   # the int8 preparation releasing gemv_i4.cu's launch before its own wait, or after
      OLD_ENV="SPECDEC_CUDA_GI_EARLY=0" NEW_ENV="SPECDEC_CUDA_GI_EARLY=1" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_early_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "early release / after the wait $tag: $(grep '^| p' "$OUT/ab_early_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" envpair "* ]]; then   # any two settings of one binary: AB_OLD_ENV / AB_NEW_ENV (VAR=value words),
                                           # AB_OLD_ARGS / AB_NEW_ARGS (run options of one arm), AB_ARGS (of both),
                                           # AB_MODES (default classic mtp)
      mkdir -p "$OUT/envpair_$tag"
      ERR_DIR="$OUT/envpair_$tag" MODES="${AB_MODES:-classic mtp}" OLD_ENV="${AB_OLD_ENV:-}" NEW_ENV="${AB_NEW_ENV:-}" \
        OLD_ARGS="--backend cuda ${AB_ARGS:-} ${AB_OLD_ARGS:-}" NEW_ARGS="--backend cuda ${AB_ARGS:-} ${AB_NEW_ARGS:-}" \
        run_to 500 "$OUT/ab_envpair_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "[${AB_NEW_ENV:-} ${AB_NEW_ARGS:-}] / [${AB_OLD_ENV:-} ${AB_OLD_ARGS:-}] ${AB_ARGS:-} $tag: $(grep '^| p' "$OUT/ab_envpair_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" dq4 "* ]]; then   # the MTP drafter's dense matrices at 4 bits (quantized at load) against as stored
      mkdir -p "$OUT/dq4_$tag"
      ERR_DIR="$OUT/dq4_$tag" MODES=mtp OLD_ARGS="--backend cuda --drafter-weights stored" NEW_ARGS="--backend cuda --drafter-weights q4" \
        run_to 500 "$OUT/ab_dq4_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "4-bit / stored drafter $tag: $(grep '^| p' "$OUT/ab_dq4_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" width "* ]]; then   # MTP at the auto block width against a fixed one (AB_WIDTH, default 4), fresh processes
      mkdir -p "$OUT/width_$tag"
      ERR_DIR="$OUT/width_$tag" MODES=mtp OLD_ARGS="--backend cuda --block-size ${AB_WIDTH:-4}" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_width_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "auto / fixed width ${AB_WIDTH:-4} $tag: $(grep '^| p' "$OUT/ab_width_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" attn "* ]]; then
      OLD_ENV="SPECDEC_CUDA_ATTN=split" NEW_ENV="SPECDEC_CUDA_ATTN=staged" OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
        run_to 500 "$OUT/ab_attn_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
      log "staged / split attention $tag: $(grep '^| p' "$OUT/ab_attn_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
    fi
    if [[ $kinds == *" kv "* ]]; then   # the KV cache dtype on the GPU (the CPU's int8 path defaults to bf16)
      OLD_ARGS="--backend cuda --kv-dtype f32" NEW_ARGS="--backend cuda --kv-dtype bf16" TEXT_MAY_DIFFER=1 \
        run_to 500 "$OUT/ab_kv_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 512
      log "bf16 / f32 KV cache $tag (512 tokens): $(grep '^| p' "$OUT/ab_kv_$tag.md" | cut -d'|' -f2,3,6 | tr -s ' ' | tr '\n' ';')"
    fi
    [[ $kinds == *" pdl "* ]] || continue
    OLD_ENV=SPECDEC_CUDA_PDL=0 NEW_ENV=SPECDEC_CUDA_PDL=1 OLD_ARGS="--backend cuda" NEW_ARGS="--backend cuda" \
      run_to 500 "$OUT/ab_pdl_$tag.md" bash bench/ab_binaries.sh "$BIN" "$BIN" "$m" $np $r 128
    log "pdl / no pdl $tag: $(grep '^| p' "$OUT/ab_pdl_$tag.md" | cut -d'|' -f2,3,4,5,6,7 | tr -s ' ' | tr '\n' ';')"
  done
fi

if has mma; then   # the tensor-core kernels (SPECDEC_CUDA_MMA, 3 by default): the 8B shape's int8 matmul
                  # tables with it as arm b, and exact.sh with it on, on the 1.7B shape at K = 16
  # (MMA_BENCH=0: not the tables, e.g. when an earlier call of the same lease ran them)
  [ "${MMA_BENCH:-1}" = 1 ] && [ -x build-gpu/bench_cuda ] && run_to 400 "$OUT/mma_bench.md" build-gpu/bench_cuda --arm-b "${MMA_ARM:-mma}" --matmul 2:3 ${MMA_WIDE:+--wide}
  # the 1.7B shape's rows (2048 columns) reach the kernel, the embedded pair's (384) do not; K = 16
  # verifies 16 rows, and the prompts' prefill takes it where they have 16 tokens or more
  for mm in ${MMA_MODES:-1 2}; do
    if inflated /tmp/inflated-qwen3-1.7b && SPECDEC_CUDA_MMA=$mm EXACT_MODEL=/tmp/inflated-qwen3-1.7b EXACT_KS=16 \
       EXACT_ARGS="--precision int8" run_to 500 "$OUT/exact_mma$mm.log" bash tests/gpu/exact.sh "$BIN" cuda; then
      log "exact int8 with SPECDEC_CUDA_MMA=$mm: ok ($(tail -2 "$OUT/exact_mma$mm.log" | head -1))"
    else log "exact int8 with SPECDEC_CUDA_MMA=$mm: FAILED"; grep -m12 "FAIL" "$OUT/exact_mma$mm.log" | tee -a "$SUM"; fi
  done
fi

if has bench; then
  [ -x build-gpu/bench_cuda ] && { run_to 500 "$OUT/bench_cuda.md" build-gpu/bench_cuda ${BENCH_ARGS:-}; log "bench_cuda: $(tail -1 "$OUT/bench_cuda.md")"; }
fi

if has attnab && [ -n "${OLD_PID:-}" ]; then   # the attention table of bench_cuda, this build against the earlier
                 # commit's (ab's archive; needs ab among the phases), twice each, alternated
  wait "$OLD_PID" 2>/dev/null   # ab's own wait may have reaped it
  if [ -x /tmp/old-src/b/bench_cuda ]; then
    for r in 1 2; do
      run_to 300 "$OUT/attnab_new_$r.md" build-gpu/bench_cuda ${ATTNAB_ARGS:---matmul 0:3}
      run_to 300 "$OUT/attnab_old_$r.md" /tmp/old-src/b/bench_cuda ${ATTNAB_ARGS:---matmul 0:3}
    done
    log "attnab: $(grep -c '^| |' "$OUT/attnab_new_1.md") rows new, $(grep -c '^| |' "$OUT/attnab_old_1.md") old"
  else log "attnab: the earlier build has no bench_cuda (old_build.log)"; fi
fi

if has peer; then
  wait "$PEER_PID"
  if grep -q "exit 0" "$OUT/peer_build.log"; then
    python3 .peers/mlx_to_gguf.py "$M" /tmp/qk-q4_0.gguf q4_0 > "$OUT/peer_convert.log" 2>&1
    run_to 300 "$OUT/peer_embedded.md" /tmp/peer-cuda/bin/llama-bench -m /tmp/qk-q4_0.gguf -p 0 -n 128 -ngl 99 -fa 1 -r 5 -o md
    log "llama.cpp embedded: $(grep -m1 'tg128' "$OUT/peer_embedded.md")"
  else log "peer build FAILED: $(tail -3 "$OUT/peer_build.log")"; fi
fi

if has prefill; then   # prefill of a 512-token prompt on the 8B shape: specdec bench's classic prefill
                      # (5 timed runs after a warm-up) under each set of PREFILL_SETS (words of
                      # VAR=value[,VAR=value], "-" for none; default SPECDEC_CUDA_MMA=a for each a of
                      # PREFILL_MODES, default 0 1 2 3), PREFILL_ROUNDS processes each (default 3),
                      # alternated; llama.cpp's pp512 on the same shape when peer built it
  D=/tmp/inflated-qwen3-8b
  if inflated "$D"; then
    bash bench/prompt_of_tokens.sh "$BIN" "$D" 512 /tmp/pp512   # /tmp/pp512.txt, /tmp/pp512.jsonl (id p512)
    : > "$OUT/prefill.txt"
    if [ -n "${PREFILL_SETS:-}" ]; then read -r -a psets <<< "$PREFILL_SETS"
    else psets=(); for a in ${PREFILL_MODES:-0 1 2 3}; do psets+=("SPECDEC_CUDA_MMA=$a"); done; fi
    penv() {   # PE: the set's variables; PB: --batch N for its word BATCH=N (the prefill's chunk) and
               # --kv-dtype D for KV=D; PX: the binary (ab's earlier build for the word OLD)
      local w=(); PE=(); PB=(); PX=$BIN; [ "$1" != - ] && IFS=, read -r -a w <<< "$1"
      for v in "${w[@]}"; do
        case "$v" in BATCH=*) PB+=(--batch "${v#BATCH=}") ;; KV=*) PB+=(--kv-dtype "${v#KV=}") ;;
          OLD) PX=${OLD_BIN:-/nonexistent} ;; *) PE+=("$v") ;; esac
      done
    }
    [ -n "${OLD_PID:-}" ] && wait "$OLD_PID" 2>/dev/null
    for r in $(seq 1 ${PREFILL_ROUNDS:-3}); do
      for st in "${psets[@]}"; do
        penv "$st"
        run_to 200 /tmp/pf.md env "${PE[@]}" "$PX" bench -m "$D" --backend cuda --draft mtp --prompts /tmp/pp512.jsonl \
          -n 16 --block-size 4 --repeats 5 --ignore-eos "${PB[@]}"
        echo "round $r $st: $(grep -m1 '^classic prefill' /tmp/pf.md)" >> "$OUT/prefill.txt"
      done
    done
    # the guard: the same 32 tokens after the 512-token prompt under every set (a set with a KV= word
    # stores other values in the cache, so its ids are compared with the first set's and reported, not
    # required equal)
    ok=1; i=0
    for st in "${psets[@]}"; do
      penv "$st"
      env "${PE[@]}" timeout 120 "$PX" run -m "$D" --backend cuda -f /tmp/pp512.txt -n 32 --ignore-eos "${PB[@]}" \
        --ids-out /tmp/pp_ids_$i.json > /dev/null 2>> "$OUT/prefill.txt"
      if [[ ",$st," == *,KV=* ]]; then
        cmp -s /tmp/pp_ids_$i.json /tmp/pp_ids_0.json && log "prefill 8B: ids under $st the same as the first set's" \
          || log "prefill 8B: ids under $st differ from the first set's (another KV cache dtype)"
      else
        [ -s /tmp/pp_ids_$i.json ] && cmp -s /tmp/pp_ids_$i.json /tmp/pp_ids_0.json || ok=0
      fi
      i=$((i + 1))
    done
    if [ $ok = 1 ]; then log "prefill 8B guard: ids identical under ${psets[*]}"
    else log "prefill 8B guard: FAILED (ids differ or missing)"; fi
    log "prefill 8B: $(grep '^round' "$OUT/prefill.txt" | sed 's/classic prefill, tok\/s median \[min, max\] (prompt tokens)://' | tr '\n' ';')"
    if [ -x /tmp/peer-cuda/bin/llama-bench ]; then
      python3 .peers/gguf_random_shape.py qwen3-8b "$M" /tmp/qwen3-8b-q4_0.gguf > "$OUT/peer_pp_8b.log" 2>&1
      run_to 300 "$OUT/peer_pp512_8b.md" /tmp/peer-cuda/bin/llama-bench -m /tmp/qwen3-8b-q4_0.gguf -p 512 -n 0 -ngl 99 -fa 1 -r 5 -o md
      log "llama.cpp 8B: $(grep -m1 'pp512' "$OUT/peer_pp512_8b.md")"
      rm -f /tmp/qwen3-8b-q4_0.gguf
    fi
  fi
fi

SCALE_PROMPTS=${SCALE_PROMPTS:-4}; SCALE_N=${SCALE_N:-64}
head -"$SCALE_PROMPTS" /tmp/prompts8.jsonl > /tmp/prompts_scale.jsonl
if has spec; then   # SPEC_MODELS (default the embedded pair; /tmp/inflated-SHAPE made when missing), SPEC_KS
                   # (after peer, whose compile would share the host's CPUs with these runs)
                   # (default 3 4 6; auto for the auto width), SPEC_PROMPTS (default 16), SPEC_REPEATS (default 5)
  for m in ${SPEC_MODELS:-$M}; do
    case "$m" in /tmp/inflated-*) inflated "$m" || continue ;; esac
    tag=$(basename "$m")
    head -"${SPEC_PROMPTS:-16}" /tmp/prompts16.jsonl > /tmp/prompts_spec.jsonl
    for K in ${SPEC_KS:-3 4 6}; do
      run_to 400 "$OUT/bench_${tag}_k$K.md" "$BIN" bench -m "$m" --backend cuda --draft mtp --prompts /tmp/prompts_spec.jsonl \
        -n 128 --block-size $K --repeats ${SPEC_REPEATS:-5} --ignore-eos && log "specdec bench $tag K=$K: $(grep -m1 'median speedup' "$OUT/bench_${tag}_k$K.md")"
    done
  done
fi

if has scale; then
  for shape in ${SCALE_SHAPES:-qwen3-1.7b qwen3-8b qwen3-32b}; do
    D=/tmp/inflated-$shape
    inflated "$D" || continue
    "$BIN" info -m "$D" --backend cuda > "$OUT/info_$shape.txt" 2>&1
    run_to 400 "$OUT/bench_$shape.md" "$BIN" bench -m "$D" --backend cuda --draft mtp --prompts /tmp/prompts_scale.jsonl \
      -n "$SCALE_N" --block-size 4 --repeats 5 --ignore-eos ${SCALE_ARGS:-} && log "specdec bench $shape K=4: $(grep -m1 'median speedup' "$OUT/bench_$shape.md")"
    if [ -x /tmp/peer-cuda/bin/llama-bench ]; then
      python3 .peers/gguf_random_shape.py $shape "$M" /tmp/$shape-q4_0.gguf > "$OUT/peer_$shape.log" 2>&1
      run_to 300 "$OUT/peer_$shape.md" /tmp/peer-cuda/bin/llama-bench -m /tmp/$shape-q4_0.gguf -p 0 -n 128 -ngl 99 -fa 1 -r 5 -o md
      log "llama.cpp $shape: $(grep -m1 'tg128' "$OUT/peer_$shape.md")"
      rm -f /tmp/$shape-q4_0.gguf
    fi
    [ "$shape" = qwen3-32b ] && rm -rf "$D"   # 18 GB: made again when needed
  done
fi

if has decide; then
  D=/tmp/inflated-qwen3-8b
  inflated "$D"
  DV=$M/draft_vocab.json
  run_to 500 "$OUT/decide_8b_bf16.md" "$BIN" bench -m "$D" --backend cuda --draft mtp --prompts /tmp/prompts_scale.jsonl \
    -n "$SCALE_N" --block-size 4 --repeats 5 --ignore-eos --draft-vocab "$DV:8192" --draft-vocab none \
    --draft-vocab "$DV:32768" --verify-rows-arms 2,3
  log "decide 8B bf16 drafter: $(grep '^arm .*median speedup\|REFUSED: it' "$OUT/decide_8b_bf16.md" | cut -c1-150 | tr '\n' '|')"
  Q=/tmp/qk-mtp4; D4=/tmp/inflated-qwen3-8b-mtp4
  [ -d "$Q" ] || run_to 200 "$OUT/quantize_mtp4.log" "$BIN" quantize "$M" "$Q" --bits 4 --group-size 64 --quantize-mtp --quiet
  [ -d "$D4" ] || run_to 400 "$OUT/inflate_qwen3-8b-mtp4.log" "$BIN" inflate "$Q" "$D4" --shape qwen3-8b
  run_to 400 "$OUT/decide_8b_mtp4.md" "$BIN" bench -m "$D4" --backend cuda --draft mtp --prompts /tmp/prompts_scale.jsonl \
    -n "$SCALE_N" --block-size 4 --repeats 5 --ignore-eos --draft-vocab none
  log "decide 8B 4-bit drafter: $(grep '^arm .*median speedup' "$OUT/decide_8b_mtp4.md" | cut -c1-150 | tr '\n' '|')"
fi
log "done in $(( $(date +%s) - T0 )) s"

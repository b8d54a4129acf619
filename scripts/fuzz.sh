#!/usr/bin/env bash
# fuzz.sh: build the libFuzzer targets (tests/fuzz/fuzz_<parser>.c) with clang into build-fuzz and
# run each for a bounded time over a copy of its seed corpus.
#   bash scripts/fuzz.sh            # CI: 10 s per target (about 1.5 minutes for all seven)
#   bash scripts/fuzz.sh 600        # a local campaign: 10 minutes per target
#   FUZZ_TARGETS="safetensors config" bash scripts/fuzz.sh 60
# A crash, a leak, a sanitizer report or a failed property makes the run end with a non-zero status;
# the input is left in build-fuzz/findings/<parser>/ (commit it under tests/fuzz/regressions/<parser>/,
# where ctest's fuzz_replay_<parser> replays it in every build, and fix the library). New coverage
# found is kept in build-fuzz/corpus/<parser>/ (the committed seeds stay small).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${FUZZ_JOBS:-2}
if ! command -v clang >/dev/null; then
  echo "fuzz.sh: clang is not installed (apt-get install clang)" >&2
  exit 1
fi
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DSPECDEC_CUDA=OFF \
  -DSPECDEC_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target fuzz_all >/dev/null
targets=${FUZZ_TARGETS:-}
if [ -z "$targets" ]; then
  for f in "$BUILD"/fuzz_*; do [ -x "$f" ] && targets+=" ${f##*/fuzz_}"; done
fi
export SPECDEC_SOURCE_DIR=$PWD
fail=0
for t in $targets; do
  exe=$BUILD/fuzz_$t
  [ -x "$exe" ] || { echo "fuzz.sh: no target $exe" >&2; exit 1; }
  corpus=$BUILD/corpus/$t findings=$BUILD/findings/$t
  mkdir -p "$corpus" "$findings"
  dict=()
  [ -f tests/fuzz/$t.dict ] && dict=(-dict=tests/fuzz/$t.dict)
  log=$BUILD/fuzz_$t.log
  # -rss_limit_mb: an input that makes a parser allocate gigabytes is a finding too
  if "$exe" "${dict[@]}" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
       -artifact_prefix="$findings/" -print_final_stats=1 "$corpus" tests/fuzz/corpus/"$t" >"$log" 2>&1; then
    echo "fuzz $t: $(grep -aE 'stat::number_of_executed_units' "$log" | awk '{print $2}') runs in ${SECS} s, no finding"
  else
    echo "fuzz $t: FINDING (log $log, inputs in $findings):" >&2
    grep -aE 'ERROR|SUMMARY|property failed|Test unit written' "$log" | head -20 >&2
    fail=1
  fi
done
exit $fail

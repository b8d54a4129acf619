#!/usr/bin/env bash
# test_cuda_launch_rule.sh: the rule programmatic dependent launches rest on (src/cuda/common.cuh),
# checked in the source, so it holds in builds that cannot run a GPU too:
#   - every kernel is queued through sdc_launch (no `<<<` launch anywhere in src/cuda), so each
#     launch carries the attribute that the waits below pair with;
#   - every __global__ function calls sdc_grid_enter(), or both sdc_grid_wait() and
#     sdc_grid_release(), with the wait before the release: a kernel without the wait could run
#     while the kernel before it still writes its inputs. The int8 preparation kernels (i8_prep*)
#     may also call sdc_grid_release_early() (release, then wait: common.cuh says when).
# Comments are left out of both checks. Exit status 1 names each offending file and kernel.
set -uo pipefail
SRC=${SPECDEC_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
shopt -s nullglob
files=("$SRC"/src/cuda/*.cu "$SRC"/src/cuda/*.cuh)
[ ${#files[@]} -gt 0 ] || { echo "test_cuda_launch_rule: no CUDA sources under $SRC/src/cuda"; exit 1; }
fail=0 kernels=0
for f in "${files[@]}"; do
  # the file without comments (// to the end of a line, /* ... */ across lines)
  code=$(sed -e 's://.*$::' "$f" | awk '
    { line = $0; out = "";
      while (length(line)) {
        if (inc) { e = index(line, "*/"); if (!e) { line = ""; break } line = substr(line, e + 2); inc = 0 }
        else { s = index(line, "/*"); if (!s) { out = out line; line = "" } else { out = out substr(line, 1, s - 1); line = substr(line, s + 2); inc = 1 } }
      }
      print out }')
  if grep -n '<<<' <<< "$code" > /dev/null; then
    echo "FAIL $(basename "$f"): a <<< launch (every kernel goes through sdc_launch):"
    grep -n '<<<' <<< "$code" | head -3
    fail=1
  fi
  # each __global__ function's body: from the first { after the keyword to its matching }
  report=$(awk '
    function flush() {
      if (!inside) return
      w = index(body, "sdc_grid_wait()"); r = index(body, "sdc_grid_release()"); en = index(body, "sdc_grid_enter()")
      ok = en > 0 || (w > 0 && r > w) || (index(body, "sdc_grid_release_early()") > 0 && name ~ /^i8_prep/)
      print (ok ? "ok " : "bad ") name
      inside = 0; body = ""
    }
    {
      line = $0
      if (!inside && !pending && line ~ /__global__/) { pending = 1; sig = "" }
      if (pending) {
        sig = sig " " line
        b = index(line, "{")
        if (!b) next
        n = sig; sub(/\(.*/, "", n); k = split(n, parts, /[ \t]+/); name = parts[k]
        pending = 0; inside = 1; depth = 0; body = ""
        line = substr(line, b)
      }
      if (inside) {
        body = body "\n" line
        for (i = 1; i <= length(line); i++) {
          c = substr(line, i, 1)
          if (c == "{") depth++
          else if (c == "}") { depth--; if (depth == 0) { flush(); break } }
        }
      }
    }' <<< "$code")
  while read -r verdict name; do
    [ -n "$verdict" ] || continue
    kernels=$((kernels + 1))
    if [ "$verdict" != ok ]; then
      echo "FAIL $(basename "$f"): kernel $name does not wait for the kernel before it (sdc_grid_enter, or sdc_grid_wait then sdc_grid_release)"
      fail=1
    fi
  done <<< "$report"
done
[ $kernels -gt 0 ] || { echo "FAIL: no __global__ function found (the parse is broken)"; exit 1; }
echo "test_cuda_launch_rule: $kernels kernels in ${#files[@]} files, $([ $fail = 0 ] && echo "every one keeps the rule" || echo FAILED)"
exit $fail

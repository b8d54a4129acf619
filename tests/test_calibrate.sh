#!/bin/bash
# test_calibrate.sh: the CPU kernel level chosen by measurement (src/cpu/calibrate.c). With a fresh
# cache directory the first `info` calibrates and writes the cache; the second reads it; a corrupt
# cache file (garbage, a foreign key, an unknown level) is ignored and rewritten, never trusted;
# SPECDEC_SIMD overrides; SPECDEC_CALIBRATE=0 takes the static order; the AVX2 int8 form (VNNI or
# maddubs) and the AVX-512 one (AMX or VNNI) are cached with the levels. On a machine with a single
# SIMD level there is nothing to choose (info says so) and the cache checks are skipped.
. "$(dirname "$0")/cli_lib.sh"
MODEL=$M
fail=0
export XDG_CACHE_HOME=$T/cache
F=$XDG_CACHE_HOME/specdec/cpu-levels
why() { "$BIN" info -m "$MODEL" 2>/dev/null | sed -n 's/^kernels chosen: *//p'; }
w=$(why)
case $w in
"the only SIMD level"*) echo "ok   one level here: $w"; exit 0 ;;
"calibrated now"*) echo "ok   first use calibrates: $w" ;;
*) echo "FAIL first use: '$w'"; fail=1 ;;
esac
[ -s "$F" ] && grep -q "^key " "$F" || { echo "FAIL: no cache file $F"; fail=1; }
w=$(why); case $w in "calibrated earlier"*) echo "ok   second use reads the cache" ;; *) echo "FAIL second use: '$w'"; fail=1 ;; esac
for bad in 'garbage' $'key someone else\nf32 avx2\nint8 avx2\ntimes x' "$(sed 's/^f32 .*/f32 mmx/' "$F")"; do
  printf '%s\n' "$bad" > "$F"
  w=$(why)
  case $w in "calibrated now"*) ;; *) echo "FAIL corrupt cache trusted: '$w'"; fail=1 ;; esac
  grep -q "^key .*|" "$F" && ! grep -q "mmx\|someone" "$F" || { echo "FAIL: corrupt cache not rewritten"; fail=1; }
done
echo "ok   corrupt caches ignored and rewritten"
# the AVX2 int8 form is part of the cache: a valid other form is honoured, an unknown one rewritten
if grep -q '^avx2i8 ' "$F"; then
  sed -i 's/^avx2i8 .*/avx2i8 maddubs/' "$F"
  w=$(why); case $w in "calibrated earlier"*"avx2 int8 form maddubs"*) echo "ok   cached avx2 int8 form honoured" ;;
    *) echo "FAIL cached form: '$w'"; fail=1 ;; esac
  sed -i 's/^avx2i8 .*/avx2i8 sse9/' "$F"
  w=$(why); case $w in "calibrated now"*) ;; *) echo "FAIL unknown form trusted: '$w'"; fail=1 ;; esac
  grep -q '^avx2i8 \(vnni\|maddubs\|-\)$' "$F" || { echo "FAIL: unknown form not rewritten"; fail=1; }
else
  echo "FAIL: no avx2i8 line in the cache"; fail=1
fi
# the AVX-512 level's int8 form (AMX or VNNI) too: an unknown one is rewritten; where the CPU gives
# AMX both forms are honoured from the cache, the run's [backend] line names AMX only where it is in
# force, and SPECDEC_AMX=0 turns it off
if grep -q '^avx512i8 ' "$F"; then
  sed -i 's/^avx512i8 .*/avx512i8 avx9/' "$F"
  w=$(why); case $w in "calibrated now"*) ;; *) echo "FAIL unknown avx512 form trusted: '$w'"; fail=1 ;; esac
  grep -q '^avx512i8 \(vnni\|amx\|-\)$' "$F" || { echo "FAIL: unknown avx512 form not rewritten"; fail=1; }
  if grep -q '^avx512i8 \(vnni\|amx\)$' "$F" && grep -q '^int8 avx512$' "$F"; then
    be() { env "$@" "$BIN" run -m "$MODEL" -p "int x" -n 2 --precision int8 2>&1 >/dev/null | grep '^\[backend\]'; }
    for form in vnni amx; do
      sed -i "s/^avx512i8 .*/avx512i8 $form/" "$F"
      w=$(why); case $w in "calibrated earlier"*"avx512 int8 form $form"*) ;; *) echo "FAIL cached avx512 form $form: '$w'"; fail=1 ;; esac
      b=$(be)
      case "$form:$b" in "amx:"*"(avx512 int8 amx)"*|"vnni:"*"(avx512 int8)"*) ;; *) echo "FAIL backend line for $form: '$b'"; fail=1 ;; esac
    done
    b=$(be SPECDEC_AMX=0); case $b in *"(avx512 int8)"*) ;; *) echo "FAIL SPECDEC_AMX=0: '$b'"; fail=1 ;; esac
    echo "ok   cached avx512 int8 forms honoured, named, and SPECDEC_AMX=0 obeyed"
  else
    echo "ok   no AMX here (or int8 not on avx512): the avx512 int8 form is '$(sed -n 's/^avx512i8 //p' "$F")'"
  fi
else
  echo "FAIL: no avx512i8 line in the cache"; fail=1
fi
w=$(SPECDEC_SIMD=avx2 why); case $w in "forced by SPECDEC_SIMD=avx2"*) echo "ok   SPECDEC_SIMD overrides" ;; *) echo "FAIL forced: '$w'"; fail=1 ;; esac
w=$(SPECDEC_CALIBRATE=0 why); case $w in "SPECDEC_CALIBRATE=0"*) echo "ok   SPECDEC_CALIBRATE=0: static order" ;; *) echo "FAIL static: '$w'"; fail=1 ;; esac
chmod 000 "$XDG_CACHE_HOME/specdec" 2>/dev/null
"$BIN" info -m "$MODEL" >/dev/null 2>&1 || { echo "FAIL: an unwritable cache stops info"; fail=1; }
chmod 755 "$XDG_CACHE_HOME/specdec" 2>/dev/null
exit $fail

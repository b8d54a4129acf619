#!/usr/bin/env bash
# Rebuild the exported model directory on this machine from the parts fetched with
# `device_pipeline.sh fetch N` (each call's files land in its own read-only folder).
#
#   tools/train/reassemble.sh DEST FETCHED_DIR [FETCHED_DIR ...]
#
# Checks every part and the joined archive against MANIFEST (written on the GPU machine), unpacks
# into DEST (must not exist), then checks every file against DEST/SHA256SUMS.all.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,9p' "$0"; exit 2; }
DEST=$1
shift
[ -e "$DEST" ] && { echo "$DEST exists; remove it or choose another DEST" >&2; exit 1; }
MAN=""
for d in "$@"; do [ -f "$d/MANIFEST" ] && MAN="$d/MANIFEST"; done
[ -n "$MAN" ] || { echo "no MANIFEST in the fetched folders (it comes with fetch 1)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# every part named in MANIFEST must be present once, with the right sha256
mapfile -t NAMES < <(awk '{print $2}' "$MAN" | grep '^export.tar.xz.part-' | sort)
for n in "${NAMES[@]}"; do
  f=""
  for d in "$@"; do [ -f "$d/$n" ] && f="$d/$n"; done
  [ -n "$f" ] || { echo "missing part $n (fetch all parts)" >&2; exit 1; }
  want=$(awk -v n="$n" '$2 == n {print $1}' "$MAN")
  got=$(sha256sum "$f" | awk '{print $1}')
  [ "$want" = "$got" ] || { echo "sha256 mismatch: $f" >&2; exit 1; }
  cat "$f" >> "$TMP/export.tar.xz"
done
want=$(awk '$2 == "export.tar.xz" {print $1}' "$MAN")
got=$(sha256sum "$TMP/export.tar.xz" | awk '{print $1}')
[ "$want" = "$got" ] || { echo "sha256 mismatch of the joined archive" >&2; exit 1; }
echo "[reassemble] ${#NAMES[@]} parts ok, archive sha256 ok"
mkdir -p "$TMP/x"
if [ "$(head -c 6 "$TMP/export.tar.xz" | od -An -tx1 | tr -d ' \n')" = "fd377a585a00" ]; then
  xz -dc "$TMP/export.tar.xz" | tar -x -C "$TMP/x"
else
  tar -x -C "$TMP/x" -f "$TMP/export.tar.xz"
fi
mkdir -p "$(dirname "$DEST")"
mv "$TMP/x/export" "$DEST"
(cd "$DEST" && sha256sum -c --quiet SHA256SUMS.all)
echo "[reassemble] $DEST: all files match SHA256SUMS.all"
ls -la "$DEST"

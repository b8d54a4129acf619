#!/usr/bin/env bash
# Rebuild a model directory on this machine from the parts fetched with `device_pipeline.sh
# fetch ship` (the 4-bit shipped form) or `fetch bf16 N` (the bf16 export); each call's files land
# in its own read-only folder.
#
#   tools/train/reassemble.sh --ship DEST FETCHED_DIR [...]   4-bit model (ship.tar parts)
#   tools/train/reassemble.sh DEST FETCHED_DIR [...]          bf16 export (export.tar.xz parts)
#
# Checks every part and the joined archive against MANIFEST (written on the GPU machine), unpacks
# into DEST (must not exist), then checks every file against the directory's sha256 list.
set -euo pipefail
ARCH=export.tar.xz TOP=export SUMS=SHA256SUMS.all
if [ "${1:-}" = "--ship" ]; then ARCH=ship.tar TOP=ship SUMS=SHA256SUMS; shift; fi
[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
DEST=$1
shift
[ -e "$DEST" ] && { echo "$DEST exists; remove it or choose another DEST" >&2; exit 1; }
MAN=""
for d in "$@"; do [ -f "$d/MANIFEST" ] && MAN="$d/MANIFEST"; done
[ -n "$MAN" ] || { echo "no MANIFEST in the fetched folders (it comes with fetch 1)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# every part named in MANIFEST must be present once, with the right sha256
mapfile -t NAMES < <(awk '{print $2}' "$MAN" | grep -F "$ARCH.part-" | sort)
for n in "${NAMES[@]}"; do
  f=""
  for d in "$@"; do [ -f "$d/$n" ] && f="$d/$n"; done
  [ -n "$f" ] || { echo "missing part $n (fetch all parts)" >&2; exit 1; }
  want=$(awk -v n="$n" '$2 == n {print $1}' "$MAN")
  got=$(sha256sum "$f" | awk '{print $1}')
  [ "$want" = "$got" ] || { echo "sha256 mismatch: $f" >&2; exit 1; }
  cat "$f" >> "$TMP/$ARCH"
done
want=$(awk -v a="$ARCH" '$2 == a {print $1}' "$MAN")
got=$(sha256sum "$TMP/$ARCH" | awk '{print $1}')
[ "$want" = "$got" ] || { echo "sha256 mismatch of the joined archive" >&2; exit 1; }
echo "[reassemble] ${#NAMES[@]} parts ok, archive sha256 ok"
mkdir -p "$TMP/x"
if [ "$(head -c 6 "$TMP/$ARCH" | od -An -tx1 | tr -d ' \n')" = "fd377a585a00" ]; then
  xz -dc "$TMP/$ARCH" | tar -x -C "$TMP/x"
else
  tar -x -C "$TMP/x" -f "$TMP/$ARCH"
fi
mkdir -p "$(dirname "$DEST")"
mv "$TMP/x/$TOP" "$DEST"
(cd "$DEST" && sha256sum -c --quiet "$SUMS")
echo "[reassemble] $DEST: all files match $SUMS"
ls -la "$DEST"

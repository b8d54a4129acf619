# apt_need.sh: sourced by setup.sh and test.sh (not run). Collects what a machine lacks and
# installs it with apt-get in one call, so that a second run on a set-up machine installs nothing.
#   need_pkg PKG...         a Debian package, checked with dpkg
#   need_cmd CMD PKG        a tool, checked by command (a machine may carry its own, e.g. Node.js,
#                           whose Debian package would then conflict with it)
#   apt_install_needed      installs what was collected (as root, or through sudo)
APT_NEED=()
need_pkg() {
  local p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || APT_NEED+=("$p"); done
}
need_cmd() {
  command -v "$1" >/dev/null || APT_NEED+=("$2")
}
apt_install_needed() {
  [ ${#APT_NEED[@]} -gt 0 ] || return 0
  echo "installing ${APT_NEED[*]}" >&2
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${APT_NEED[@]}" >/dev/null
  APT_NEED=()
}

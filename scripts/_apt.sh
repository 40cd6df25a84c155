# Sourced by the install scripts of Debian packages the tests use (chromium, nginx).
# apt_ensure TAG BINARY PACKAGE...: installs PACKAGE... with apt-get (as root, or sudo -n) unless
# BINARY is already there; says what it does under [TAG]; a failure names its log and what to do.
apt_ensure() {
  local tag=$1 binary=$2
  shift 2
  local log=/tmp/ttftscope-apt.log sudo=()
  if [ -x "$binary" ]; then
    return 0
  fi
  _apt_fail() {
    echo "[$tag] cannot install $*" >&2
    echo "[$tag] install Debian's package yourself (apt-get update && apt-get install -y" \
      "$PKGS), or run the tests without CI set to skip the tests that need it" >&2
    exit 1
  }
  PKGS="$*"
  command -v apt-get >/dev/null 2>&1 || _apt_fail "$PKGS: apt-get not found (not Debian/Ubuntu)"
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || _apt_fail "$PKGS: not root and no sudo"
    sudo=(sudo -n)
  fi
  echo "[$tag] installing Debian's $PKGS (apt-get, once)"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    _apt_fail "$PKGS: apt-get update failed (log: $log)"
  }
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    _apt_fail "$PKGS: apt-get install failed (log: $log)"
  }
  [ -x "$binary" ] || _apt_fail "$PKGS: the package installed no $binary"
}

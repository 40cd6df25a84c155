#!/usr/bin/env bash
# Debian's headless Chromium for the report's browser test (tests/report/test_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is there. Never downloads a browser build of
# its own (playwright drives this system browser): only apt-get, as root, from Debian.
set -euo pipefail
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  echo "[browser] $("$CHROMIUM" --version 2>/dev/null || echo chromium) at $CHROMIUM"
  exit 0
fi
fail() {
  echo "[browser] cannot install Chromium: $*" >&2
  echo "[browser] install Debian's package yourself (apt-get update && apt-get install -y" \
    "chromium), or run the tests without CI set to skip the browser test" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || fail "apt-get not found (not a Debian/Ubuntu machine)"
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || fail "not root and no sudo"
  SUDO=(sudo -n)
else
  SUDO=()
fi
echo "[browser] installing Debian's chromium (apt-get; ~100 MB, once)"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/tmp/ttftscope-apt.log 2>&1 || {
  tail -n 20 /tmp/ttftscope-apt.log >&2
  fail "apt-get update failed (log: /tmp/ttftscope-apt.log)"
}
"${SUDO[@]}" apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core \
  >>/tmp/ttftscope-apt.log 2>&1 || {
  tail -n 20 /tmp/ttftscope-apt.log >&2
  fail "apt-get install chromium failed (log: /tmp/ttftscope-apt.log)"
}
[ -x "$CHROMIUM" ] || fail "the chromium package installed no $CHROMIUM"
echo "[browser] $("$CHROMIUM" --version 2>/dev/null) at $CHROMIUM"

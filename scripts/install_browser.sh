#!/usr/bin/env bash
# Debian's headless Chromium for the report's browser test (tests/report/test_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is there. Never downloads a browser build of
# its own (playwright drives this system browser): only apt-get, as root, from Debian.
set -euo pipefail
source "$(dirname "$0")/_apt.sh"
CHROMIUM=/usr/bin/chromium
apt_ensure browser "$CHROMIUM" chromium fonts-dejavu-core
echo "[browser] $("$CHROMIUM" --version 2>/dev/null || echo chromium) at $CHROMIUM"

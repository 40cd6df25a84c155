# Sourced by the set-up scripts: a project venv with ttftscope and its dev tools, made once.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip is quiet on success; its log goes to .venv/pip.log for when it is not
.venv/bin/pip install --disable-pip-version-check -q -e '.[dev]' >.venv/pip.log 2>&1 || {
  tail -n 30 .venv/pip.log; echo "pip install of ttftscope failed; full log: .venv/pip.log" >&2
  exit 1; }

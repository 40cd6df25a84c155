# Sourced by the set-up scripts: a project venv with ttftscope and its dev tools, made once.
# Says what it installs on stderr, with elapsed time while pip runs: on a terminal a counter
# updated in place, otherwise a line every 15 s.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"

_setup_say() { printf '[setup] %s\n' "$*" >&2; }
# shellcheck source=scripts/_ticker.sh
source "$ROOT/scripts/_ticker.sh"

_setup_t0=$SECONDS
if [ ! -x .venv/bin/python ]; then
  _setup_say "creating .venv ($PY -m venv)"
  "$PY" -m venv .venv
fi
if [ -x .venv/bin/ttftscope ] && [ -x .venv/bin/pytest ]; then
  _setup_label="updating the editable install in .venv (quick when nothing changed)"
else
  _setup_label="installing ttftscope and its dev tools into .venv (first run 1-4 min)"
fi
_setup_say "$_setup_label"
_setup_say "pip install -e '.[all,dev]'; log: .venv/pip.log"
_setup_rc=0
# pip is quiet on success; its log goes to .venv/pip.log for when it is not
ticking setup "${_setup_label%% (*}" sh -c \
  ".venv/bin/pip install --disable-pip-version-check -q -e '.[all,dev]' >.venv/pip.log 2>&1" ||
  _setup_rc=$?
if [ "$_setup_rc" -ne 0 ]; then
  tail -n 30 .venv/pip.log >&2
  echo "pip install of ttftscope failed (exit $_setup_rc after $((SECONDS - _setup_t0)) s);" \
    "full log: .venv/pip.log" >&2
  exit 1
fi
_setup_say "done in $((SECONDS - _setup_t0)) s"
unset -f _setup_say
unset _setup_t0 _setup_label _setup_rc

# Sourced by the set-up scripts: a project venv with ttftscope and its dev tools, made once.
# Says what it installs on stderr, with elapsed time while pip runs: on a terminal a counter
# updated in place, otherwise a line every 15 s.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"

_setup_say() { printf '[setup] %s\n' "$*" >&2; }

# _setup_ticker LABEL: elapsed time of the running step until killed (run it in the background);
# it also ends when this shell is gone (e.g. after Ctrl-C, which background jobs ignore)
_setup_ticker() {
  local t0=$SECONDS n=0 next=15
  while kill -0 "$$" 2>/dev/null; do
    sleep 1 </dev/null >/dev/null 2>&1  # no pipe held open if it outlives a kill
    n=$((SECONDS - t0))
    if [ -t 2 ]; then
      printf '\r[setup] %s: %d s\033[K' "$1" "$n" >&2
    elif [ "$n" -ge "$next" ]; then
      printf '[setup] ... still %s, %d s\n' "$1" "$n" >&2
      next=$((next + 15))
    fi
  done
}

_setup_t0=$SECONDS
if [ ! -x .venv/bin/python ]; then
  _setup_say "creating .venv ($PY -m venv)"
  "$PY" -m venv .venv
fi
if [ -x .venv/bin/ttftscope ] && [ -x .venv/bin/pytest ]; then
  _setup_label="updating ttftscope's editable install in .venv (pip install -e '.[all,dev]'; quick when nothing changed)"
else
  _setup_label="installing ttftscope and its dev tools into .venv (first run 1-4 min)"
fi
_setup_say "$_setup_label; log: .venv/pip.log"
_setup_ticker "${_setup_label%% (*}" &
_setup_ticker_pid=$!
_setup_rc=0
# pip is quiet on success; its log goes to .venv/pip.log for when it is not
.venv/bin/pip install --disable-pip-version-check -q -e '.[all,dev]' >.venv/pip.log 2>&1 || _setup_rc=$?
kill "$_setup_ticker_pid" 2>/dev/null || true
wait "$_setup_ticker_pid" 2>/dev/null || true
if [ -t 2 ]; then printf '\r\033[K' >&2; fi
if [ "$_setup_rc" -ne 0 ]; then
  tail -n 30 .venv/pip.log >&2
  echo "pip install of ttftscope failed (exit $_setup_rc after $((SECONDS - _setup_t0)) s);" \
    "full log: .venv/pip.log" >&2
  exit 1
fi
_setup_say "done in $((SECONDS - _setup_t0)) s"
unset -f _setup_say _setup_ticker
unset _setup_t0 _setup_label _setup_ticker_pid _setup_rc

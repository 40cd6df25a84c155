#!/usr/bin/env bash
# The whole test suite: lint, format, types, layers, unit tests, tokenizer matrix, real vLLM,
# and coverage. The fast loop is a bare `.venv/bin/pytest` (the unit tier; README, Develop).
source "$(dirname "$0")/_venv.sh"
# vLLM 0.33 and 0.34's render servers for the oracle tier: 6-13 min each the first time
# (cached in ~/.cache/ttftscope after), so installed in the background while the steps below
# run; waited for before pytest. Its progress goes to a log, its last line shown at the end.
oracle_log=.venv/oracle-install.log
echo "== oracle render servers: vLLM 0.33.0 and 0.34.0 (background; log: $oracle_log)"
.venv/bin/python -c '
from ttftscope.localserver.oracle import ORACLES, ensure_oracle_venv
for version in sorted(ORACLES):
    print("[oracle]", version, "ready:", ensure_oracle_venv(version), flush=True)
' >"$oracle_log" 2>&1 &
oracle_pid=$!
echo "== ruff";  .venv/bin/ruff check src tests benchmarks conftest.py scripts
echo "== ruff format"; .venv/bin/ruff format --check -q src tests benchmarks conftest.py scripts
echo "== mypy (src and tests; 1-3 min without a cache)"
ticking test "mypy --strict over src and tests" .venv/bin/mypy
echo "== import layers"
layers=$(.venv/bin/lint-imports --no-cache 2>&1) || { echo "$layers"; exit 1; }
echo "$layers" | tail -n 1
echo "== local vLLM (install + tiny model; cached after the first run)"
.venv/bin/ttftscope local-server install
echo "== browser for the report test (Debian's chromium; playwright downloads nothing)"
bash scripts/install_browser.sh
echo "== nginx for the gateway-replica test (Debian's package)"
bash scripts/install_nginx.sh
echo "== coding agents for the agent tests (Claude Code, Codex from npm; cached after the first run)"
bash scripts/install_agents.sh
echo "== oracle render servers (waiting for the background install)"
oracle_rc=0
ticking oracle "installing vLLM 0.33/0.34 render servers (see $oracle_log)" wait "$oracle_pid" ||
  oracle_rc=$?
if [ "$oracle_rc" -ne 0 ]; then
  tail -n 30 "$oracle_log" >&2
  echo "the oracle venvs failed to install (exit $oracle_rc); full log: $oracle_log" >&2
  exit 1
fi
grep '^\[oracle\]' "$oracle_log" || true
echo "== pytest (every tier, e2e included; coverage of ttftscope, subprocesses too)"
# -m "" lifts the fast loop's default `-m 'not e2e and not oracle'`; the coverage floor (fail_under in
# pyproject.toml) holds for the whole suite only, so a run narrowed by arguments has none
floor=()
if [ "$#" -gt 0 ]; then floor=(--cov-fail-under=0); fi
.venv/bin/pytest -p no:cacheprovider -m "" --cov --cov-report= "${floor[@]}" "$@"
# a run narrowed by arguments stops here; the whole run also seeds breaks the tests must catch
if [ "$#" -gt 0 ]; then exit 0; fi
echo "== seeded breaks (scripts/mutations.py: each must turn its tests red; 30 s to 2 min)"
.venv/bin/python scripts/mutations.py

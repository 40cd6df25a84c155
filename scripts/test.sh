#!/usr/bin/env bash
# The whole test suite: lint, types, unit tests, tokenizer matrix, and the real-vLLM tier.
source "$(dirname "$0")/_venv.sh"
echo "== ruff";  .venv/bin/ruff check src tests benchmarks
echo "== mypy";  .venv/bin/mypy
echo "== local vLLM (install + tiny model; cached after the first run)"
.venv/bin/ttftscope local-server install
echo "== pytest"
exec .venv/bin/pytest -p no:cacheprovider "$@"

#!/usr/bin/env bash
# The main job, end to end: install, start the local vLLM, probe sweep with the text-vs-ids
# and direct-vs-gateway A/B (breakdown table), two short agent-session benches direct and
# through the gateway (chat completions, then Claude Code-shaped sessions on /v1/messages),
# stop the server, one HTML report of all runs, the doctor's findings.
# Extra arguments go to `ttftscope demo`.
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/ttftscope demo --context-tokens 0,8000,16000 --repeat 5 --num-warmups 1 \
  --ab ids --result-dir ttftscope-results "$@"

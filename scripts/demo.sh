#!/usr/bin/env bash
# The main job, end to end: install, start the local vLLM, probe sweep with the text-vs-ids
# and direct-vs-gateway A/B (breakdown table), a short agent-session bench direct and through
# the gateway, stop the server, one HTML report of both runs, the doctor's findings.
# Extra arguments go to `ttftscope demo`.
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/ttftscope demo --context-tokens 0,8000,16000 --repeat 5 --num-warmups 1 \
  --ab ids --result-dir ttftscope-results "$@"

#!/usr/bin/env bash
# The real coding agents for the e2e agent tests (tests/e2e/test_agents_*.py): Claude Code and
# OpenAI Codex CLI, pinned, from the npm registry, each into its own folder of the toolkit's
# cache (${TTFTSCOPE_CACHE_DIR:-~/.cache/ttftscope}/agents/<name>-<version>). Idempotent: an
# agent whose binary already answers --version with its pinned version is skipped. Both ship
# native binaries as optional per-platform npm packages, so each install is checked for one.
set -euo pipefail

CLAUDE_VERSION=2.1.328
CODEX_VERSION=0.169.0
AGENTS="${TTFTSCOPE_CACHE_DIR:-$HOME/.cache/ttftscope}/agents"

say() { printf '[agents] %s\n' "$*" >&2; }
fail() {
  say "cannot install the coding agents: $*"
  exit 1
}

case "$(uname -m)" in
  x86_64 | amd64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) fail "no native build of the agents for $(uname -m)" ;;
esac
[ "$(uname -s)" = Linux ] || fail "only Linux is set up here (found $(uname -s))"

# shellcheck source=scripts/_ticker.sh
source "$(dirname "${BASH_SOURCE[0]}")/_ticker.sh"

# answers BIN VERSION: the binary runs and reports the pinned version
answers() {
  local out
  [ -x "$1" ] && out=$("$1" --version 2>/dev/null) && [[ "$out" == *"$2"* ]]
}

# install NAME SPEC DEST: npm install SPEC into a scratch folder, then move it to DEST, so an
# interrupted install never leaves a half-filled DEST behind
install() {
  local name=$1 spec=$2 dest=$3 log="$AGENTS/$1.log" rc=0
  command -v npm >/dev/null 2>&1 ||
    fail "npm not found (Node.js 18+ with npm is needed; Debian: apt-get install npm)"
  mkdir -p "$AGENTS"
  rm -rf "$dest.partial"
  say "installing $spec from the npm registry (~170 MB download, ~400 MB on disk, once); log: $log"
  # optional dependencies carry the native binaries: include them even where npm omits them
  ticking agents "installing $spec" sh -c \
    'npm install --prefix "$1" --no-audit --no-fund --include=optional "$2" >"$3" 2>&1' \
    _ "$dest.partial" "$spec" "$log" || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$log" >&2
    rm -rf "$dest.partial"
    fail "npm install $spec failed (exit $rc; log: $log; registry: $(npm config get registry))"
  fi
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
}

claude_code() {
  local dest="$AGENTS/claude-code-$CLAUDE_VERSION"
  local bin="$dest/node_modules/.bin/claude"
  local pkg="$dest/node_modules/@anthropic-ai/claude-code"
  if ! answers "$bin" "$CLAUDE_VERSION"; then
    install claude-code "@anthropic-ai/claude-code@$CLAUDE_VERSION" "$dest"
    [ -d "$dest/node_modules/@anthropic-ai/claude-code-linux-$ARCH" ] ||
      fail "npm did not install @anthropic-ai/claude-code-linux-$ARCH (Claude Code's binary)"
    # its postinstall copies the native binary over a stub; npm versions that hold back
    # install scripts leave the stub, so run it here then
    if ! answers "$bin" "$CLAUDE_VERSION"; then
      (cd "$pkg" && node install.cjs) >>"$AGENTS/claude-code.log" 2>&1 || true
    fi
    answers "$bin" "$CLAUDE_VERSION" ||
      fail "$bin does not run (log: $AGENTS/claude-code.log)"
  fi
  say "$("$bin" --version) at $bin"
}

codex() {
  local dest="$AGENTS/codex-$CODEX_VERSION"
  local bin="$dest/node_modules/.bin/codex"
  local native="$dest/node_modules/@openai/codex-linux-$ARCH"
  if ! answers "$bin" "$CODEX_VERSION"; then
    install codex "@openai/codex@$CODEX_VERSION" "$dest"
    [ -d "$native" ] ||
      fail "npm did not install @openai/codex-linux-$ARCH (Codex's binary; log: $AGENTS/codex.log)"
    answers "$bin" "$CODEX_VERSION" || fail "$bin does not run (log: $AGENTS/codex.log)"
  fi
  say "$("$bin" --version) at $bin (native binary in $native)"
}

claude_code
codex

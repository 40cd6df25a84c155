"""The real coding agents for the e2e tests: where they are installed and one run of each.

Claude Code and the Codex CLI are installed, pinned, by ``scripts/install_agents.sh`` into
the toolkit's cache (``<cache>/agents/<name>-<version>``). A run is non-interactive and
offline: a scratch ``HOME`` (and ``CODEX_HOME``, ``TMPDIR``) under the test's tmp dir, a
git-less workspace holding one small Python file with a bug, the base URL and key given and
nothing else configured. Each agent's own background traffic (telemetry, update checks,
Codex's plugin sync and analytics) is switched off, so the base URL is all it talks to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.agentstandin import AgentStandin, RecordedRequest, Task
from ttftscope.assets import cache_dir
from ttftscope.localserver.process import SERVED_MODEL

CLAUDE_CODE_VERSION = "2.1.328"
CODEX_VERSION = "0.169.0"
INSTALL_COMMAND = "bash scripts/install_agents.sh"
PROMPT = "Fix the bug in calc.py, then run `python3 calc.py` to check it."
BUGGY_CALC = (
    "def add(a, b):\n"
    "    return a - b\n"
    "\n"
    "\n"
    'if __name__ == "__main__":\n'
    "    assert add(2, 3) == 5, add(2, 3)\n"
    '    print("ok")\n'
)
# the tools Claude Code may use unasked: as root it refuses --dangerously-skip-permissions
CLAUDE_TOOLS = "Read,Bash,Edit,Grep"
CODEX_KEY_ENV = "TTFTSCOPE_AGENT_API_KEY"
Agent = Literal["claude-code", "codex"]
AGENTS: tuple[Agent, ...] = ("claude-code", "codex")
API_PATH: dict[Agent, str] = {"claude-code": "/v1/messages", "codex": "/v1/responses"}
TEST_KEY = "sk-ttftscope-test-key"


@dataclass(frozen=True)
class Scratch:
    """One run's folders: the workspace and the agent's own home, all under ``root``."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def codex_home(self) -> Path:
        return self.root / "codex-home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def calc(self) -> Path:
        return self.workspace / "calc.py"


def make_scratch(root: Path) -> Scratch:
    """Fresh folders under ``root`` and the workspace's buggy ``calc.py``."""
    s = Scratch(root)
    for folder in (s.workspace, s.home, s.codex_home, s.tmp):
        folder.mkdir(parents=True, exist_ok=True)
    s.calc.write_text(BUGGY_CALC, encoding="utf-8")
    return s


@dataclass(frozen=True)
class AgentRun:
    agent: Agent
    returncode: int
    stdout: str
    stderr: str
    scratch: Scratch

    def describe(self) -> str:
        """For assertion messages: the exit code and the ends of both streams."""
        return (
            f"{self.agent} exited {self.returncode}\n--- stdout (end)\n{self.stdout[-3000:]}"
            f"\n--- stderr (end)\n{self.stderr[-3000:]}"
        )


def agents_dir() -> Path:
    return cache_dir() / "agents"


def _installed(folder: str, binary: str, label: str) -> Path:
    path = agents_dir() / folder / "node_modules" / ".bin" / binary
    if not os.access(path, os.X_OK):
        pytest.fail(f"{label} is not installed at {path}: run `{INSTALL_COMMAND}`", pytrace=False)
    return path


def claude_binary() -> Path:
    return _installed(
        f"claude-code-{CLAUDE_CODE_VERSION}", "claude", f"Claude Code {CLAUDE_CODE_VERSION}"
    )


def codex_binary() -> Path:
    return _installed(f"codex-{CODEX_VERSION}", "codex", f"Codex CLI {CODEX_VERSION}")


def _base_env(s: Scratch, extra: dict[str, str] | None) -> dict[str, str]:
    """A clean environment: no user config, keys or proxies leak in from the test process."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(s.home),
        "TMPDIR": str(s.tmp),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
    }
    return env | (extra or {})


def run_claude(
    s: Scratch,
    *,
    base_url: str,
    api_key: str,
    model: str,
    prompt: str = PROMPT,
    max_output_tokens: int | None = None,
    timeout_s: float = 120,
    extra_env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> AgentRun:
    """``claude -p PROMPT`` in the workspace against ``base_url`` (the root, no ``/v1``)."""
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        "ANTHROPIC_MODEL": model,
        # side requests (titles, summaries) would name a Haiku model the server does not serve
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
    }
    return run_claude_as_configured(
        s,
        prompt=prompt,
        max_output_tokens=max_output_tokens,
        timeout_s=timeout_s,
        extra_env=env | (extra_env or {}),
        extra_args=("--model", model, *extra_args),
    )


def run_claude_as_configured(
    s: Scratch,
    *,
    prompt: str = PROMPT,
    max_output_tokens: int | None = None,
    timeout_s: float = 120,
    extra_env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> AgentRun:
    """``claude -p PROMPT`` with only its background traffic switched off: where it sends
    requests, with which key and model, comes from ``extra_env`` or its settings file."""
    env = {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        # a failing server fails the run in seconds, not after ten backed-off retries
        "CLAUDE_CODE_MAX_RETRIES": "1",
    }
    if max_output_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_output_tokens)
    argv = [str(claude_binary()), "-p", prompt, "--allowedTools", CLAUDE_TOOLS, *extra_args]
    return _run("claude-code", argv, _base_env(s, env | (extra_env or {})), s, timeout_s)


# Codex's background traffic, switched off: a top-level key (before any table) and tables
CODEX_OFFLINE_KEYS = "check_for_update_on_startup = false\n"
CODEX_OFFLINE_TABLES = """
[analytics]
enabled = false

[feedback]
enabled = false

# the plugin marketplace is synced from github.com and chatgpt.com at start
[features]
plugins = false
remote_plugin = false
plugin_sharing = false
"""


def offline_codex_config(config: str) -> str:
    """A ``config.toml`` (its top-level keys, then its tables) with Codex's background
    traffic switched off.

    >>> print(offline_codex_config('model = "m"').splitlines()[:2])
    ['check_for_update_on_startup = false', 'model = "m"']
    """
    return CODEX_OFFLINE_KEYS + config.rstrip("\n") + "\n" + CODEX_OFFLINE_TABLES


def codex_config(base_url: str, model: str) -> str:
    """``config.toml`` for Codex: one provider at ``base_url`` (with ``/v1``), no extras."""
    return offline_codex_config(f"""model = "{model}"
model_provider = "local"

[model_providers.local]
name = "local"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{CODEX_KEY_ENV}"
request_max_retries = 1
stream_max_retries = 1
""")


def run_codex(
    s: Scratch,
    *,
    base_url: str,
    api_key: str,
    model: str,
    prompt: str = PROMPT,
    timeout_s: float = 120,
    extra_env: dict[str, str] | None = None,
) -> AgentRun:
    """``codex exec PROMPT`` in the workspace against ``base_url`` (with ``/v1``)."""
    env = {CODEX_KEY_ENV: api_key} | (extra_env or {})
    return run_codex_as_configured(
        s, codex_config(base_url, model), prompt=prompt, timeout_s=timeout_s, extra_env=env
    )


def run_codex_as_configured(
    s: Scratch,
    config_toml: str,
    *,
    prompt: str = PROMPT,
    timeout_s: float = 120,
    extra_env: dict[str, str] | None = None,
) -> AgentRun:
    """``codex exec PROMPT`` in the workspace with ``config_toml`` as its whole configuration
    (``$CODEX_HOME/config.toml``)."""
    (s.codex_home / "config.toml").write_text(config_toml, encoding="utf-8")
    env = {"CODEX_HOME": str(s.codex_home)} | (extra_env or {})
    argv = [str(codex_binary()), "exec", "--skip-git-repo-check", "--sandbox", "workspace-write"]
    return _run("codex", [*argv, prompt], _base_env(s, env), s, timeout_s)


def _run(
    agent: Agent, argv: list[str], env: dict[str, str], s: Scratch, timeout_s: float
) -> AgentRun:
    # output goes to files, not pipes: a shell the agent left behind may hold a pipe open
    out_path, err_path = s.root / f"{agent}.stdout", s.root / f"{agent}.stderr"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            cwd=s.workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = -1
        finally:
            # the agent and everything it started (its shells, Codex's sandbox helpers)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    run = AgentRun(
        agent,
        returncode,
        out_path.read_text(encoding="utf-8", errors="replace"),
        err_path.read_text(encoding="utf-8", errors="replace"),
        s,
    )
    if returncode == -1:
        pytest.fail(f"{agent} did not finish in {timeout_s:.0f} s\n{run.describe()}", pytrace=False)
    return run


# --- one scripted conversation per agent, against the stand-in --------------------------------


@dataclass(frozen=True)
class StandinSession:
    """An agent's run against the stand-in and every request the stand-in saw."""

    run: AgentRun
    requests: list[RecordedRequest]
    host: str  # 127.0.0.1:PORT: the one place every request should have gone

    def api_requests(self) -> list[RecordedRequest]:
        path = API_PATH[self.run.agent]
        return [r for r in self.requests if r.method == "POST" and r.path == path]

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.api_requests() if isinstance(r.body, dict)]


_sessions: dict[tuple[Agent, Path], StandinSession] = {}


def standin_session(agent: Agent, factory: pytest.TempPathFactory) -> StandinSession:
    """The agent's one run against the stand-in in this test session, made on first use.

    Kept per session, not per module: the stand-in tests check the run and the vLLM tests
    replay its bodies.
    """
    key = (agent, factory.getbasetemp())
    if key not in _sessions:
        _sessions[key] = _record_session(agent, make_scratch(factory.mktemp(agent)))
    return _sessions[key]


def _proxy_trap(url: str) -> dict[str, str]:
    """Proxy variables that send anything not for 127.0.0.1 to ``url``, where it is recorded.

    A call elsewhere (telemetry, updates, plugins) then shows up in the record and fails at
    once, instead of waiting on DNS or a firewall.
    """
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    env = {name: url for name in names} | {name.lower(): url for name in names}
    return env | {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def _record_session(agent: Agent, s: Scratch) -> StandinSession:
    with AgentStandin(Task(s.workspace), record_path=s.root / "requests.jsonl") as srv:
        trap = _proxy_trap(srv.root_url)
        if agent == "claude-code":
            run = run_claude(
                s, base_url=srv.root_url, api_key=TEST_KEY, model=SERVED_MODEL, extra_env=trap
            )
        else:
            run = run_codex(
                s, base_url=srv.root_url + "/v1", api_key=TEST_KEY, model=SERVED_MODEL,
                extra_env=trap,
            )  # fmt: skip
        return StandinSession(run, list(srv.requests), f"127.0.0.1:{srv.port}")

"""The README's "Use with Claude Code, Codex, opencode" section, as printed, against the
server ``ttftscope local-server start`` starts (the session's shared one: same flags).

The gateway is started with the README's own command (``## Token-id gateway``: fronting the
running local server), ``gateway client-config claude-code`` / ``codex`` are run as the
README prints them, and their output is applied as it says: Claude Code's ``"env"`` block as
``~/.claude/settings.json``, Codex's ``config.toml`` as ``$CODEX_HOME/config.toml``. Then one
real turn of each agent. Only what the harness needs is added: the agents' background
traffic switched off, Claude Code's output cap (the random-weight model never stops by
itself), and a free port for the gateway, set as ``TTFTSCOPE_GATEWAY__PORT`` so that the
gateway and ``client-config`` both read it, as they would read ``gateway.port``.

Sorts before ``test_zz_readme.py``, whose block stops the shared server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.agents import (
    Scratch,
    make_scratch,
    offline_codex_config,
    run_claude_as_configured,
    run_codex_as_configured,
)
from tests.e2e.procs import stop_group
from ttftscope.localserver.state import pick_free_port
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[2] / "README.md"
AGENT_SECTION = "### Use with Claude Code, Codex, opencode"
GATEWAY_SECTION = "## Token-id gateway"
PROMPT = "Say hello."
# Claude Code asks for 32K tokens; the random-weight model would use them all
CLAUDE_MAX_OUTPUT_TOKENS = 16


def bash_block(heading: str) -> list[str]:
    """The command lines of the first bash block under ``heading``, comments dropped."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading + "\n") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, f"the README's {heading!r} section has no bash block"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def gateway_command() -> str:
    """The README's line that starts the gateway in front of the running local server."""
    first = bash_block(GATEWAY_SECTION)[0]
    assert first == "ttftscope gateway", f"the gateway block starts with {first!r}"
    return first


def client_config_command(kind: str) -> str:
    """The README's ``client-config`` line for ``kind``."""
    found = [c for c in bash_block(AGENT_SECTION) if shlex.split(c)[-1] == kind]
    assert len(found) == 1, f"the agent section prints {len(found)} commands for {kind}"
    return found[0]


@dataclass(frozen=True)
class Gateway:
    port: int
    env: dict[str, str]  # what the README's commands run with
    log: Path

    def counts(self, route: str) -> Counter[tuple[str, str]]:
        """``requests_total`` for ``route`` by (mode, status)."""
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=10).text
        found: Counter[tuple[str, str]] = Counter()
        for m in re.finditer(r"^ttftscope_gateway_requests_total\{(.*)\} (\S+)$", text, re.M):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels["route"] == route:
                found[labels["mode"], labels["status"]] += int(float(m.group(2)))
        return found

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _cli_env(tmp: Path, port: int) -> dict[str, str]:
    """The environment after ``source .venv/bin/activate``, with no user configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TTFTSCOPE_", "OPENAI_"))}
    if "TTFTSCOPE_CACHE_DIR" in os.environ:  # where the local server's state is
        env["TTFTSCOPE_CACHE_DIR"] = os.environ["TTFTSCOPE_CACHE_DIR"]
    (tmp / "xdg").mkdir()
    return env | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "XDG_CONFIG_HOME": str(tmp / "xdg"),
        "TTFTSCOPE_GATEWAY__PORT": str(port),
    }


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 180  # start-up checks every API against vLLM first
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the gateway exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)  # polling a starting server, not waiting for a result
    pytest.fail(f"the gateway did not answer at {url}:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def readme_gateway(
    vllm: LocalServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """``ttftscope gateway`` as the README prints it, in front of the shared local server."""
    tmp = tmp_path_factory.mktemp("readme-gateway")
    port = pick_free_port()
    env = _cli_env(tmp, port)
    log = tmp / "gateway.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            shlex.split(gateway_command()),
            cwd=tmp,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its encode worker processes are stopped with it
        )
    try:
        _wait_healthy(proc, f"http://127.0.0.1:{port}/health", log)
        assert vllm.base_url in log.read_text(), log.read_text()  # it fronts the local server
        yield Gateway(port, env, log)
    finally:
        stop_group(proc)


def client_config(gw: Gateway, kind: str, cwd: Path) -> str:
    """What the README's ``client-config`` line prints on stdout (the notes go to stderr)."""
    proc = subprocess.run(
        shlex.split(client_config_command(kind)),
        cwd=cwd,
        env=gw.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def _apply_claude_settings(snippet: str, s: Scratch) -> dict[str, str]:
    """The snippet as ``~/.claude/settings.json``, as its note says; its ``env`` block."""
    settings = json.loads(snippet)  # stdout alone is the file's JSON
    (s.home / ".claude").mkdir()
    (s.home / ".claude" / "settings.json").write_text(snippet, encoding="utf-8")
    env: dict[str, str] = settings["env"]
    return env


def _answer_texts(stream_json: str) -> list[str]:
    """The text blocks of the assistant messages in Claude Code's ``stream-json`` output."""
    events = [json.loads(line) for line in stream_json.splitlines() if line.startswith("{")]
    return [
        block["text"]
        for e in events
        if e.get("type") == "assistant"
        for block in e["message"]["content"]
        if block.get("type") == "text" and block["text"].strip()
    ]


def _result(stream_json: str) -> dict[str, object]:
    last = [line for line in stream_json.splitlines() if line.startswith("{")][-1]
    result: dict[str, object] = json.loads(last)
    assert result.get("type") == "result", last
    return result


def test_claude_code_turn_with_the_readme_settings(
    readme_gateway: Gateway, vllm: LocalServer, tmp_path: Path, tell: Callable[[str], None]
) -> None:
    s = make_scratch(tmp_path)
    env = _apply_claude_settings(client_config(readme_gateway, "claude-code", tmp_path), s)
    assert env["ANTHROPIC_MODEL"] == vllm.model
    before = readme_gateway.counts("messages")
    run = run_claude_as_configured(
        s,
        prompt=PROMPT,
        max_output_tokens=CLAUDE_MAX_OUTPUT_TOKENS,
        extra_args=("--output-format", "stream-json", "--verbose"),
    )
    # The random-weight model never ends an answer, so every answer stops at the cap, and
    # Claude Code reports a capped answer (after its continuation attempts) as an error:
    # exit 1 with api_error "max_output_tokens". Anything else is a failure.
    result = _result(run.stdout)
    ended = (run.returncode, result.get("api_error"))
    assert ended in {(0, None), (1, "max_output_tokens")}, run.describe()
    assert _answer_texts(run.stdout), run.describe()  # the model's text reached the agent
    rose = readme_gateway.counts("messages") - before
    tell(f"claude-code (exit {run.returncode}): /v1/messages by (mode, status): {dict(rose)}")
    assert rose.get(("ids", "200"), 0) >= 1, (rose, readme_gateway.log_tail())
    assert set(rose) == {("ids", "200")}, (rose, readme_gateway.log_tail())


def test_codex_turn_with_the_readme_config(
    readme_gateway: Gateway, vllm: LocalServer, tmp_path: Path, tell: Callable[[str], None]
) -> None:
    s = make_scratch(tmp_path)
    snippet = client_config(readme_gateway, "codex", tmp_path)
    assert tomllib.loads(snippet)["model"] == vllm.model
    before = readme_gateway.counts("responses")
    run = run_codex_as_configured(s, offline_codex_config(snippet), prompt=PROMPT)
    assert run.returncode == 0 and run.stdout.strip(), run.describe()
    rose = readme_gateway.counts("responses") - before
    tell(f"codex (exit {run.returncode}): /v1/responses by (mode, status): {dict(rose)}")
    assert rose.get(("ids", "200"), 0) >= 1, (rose, readme_gateway.log_tail())
    assert set(rose) == {("ids", "200")}, (rose, readme_gateway.log_tail())

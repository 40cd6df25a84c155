"""Claude Code and the Codex CLI against the scripted stand-in: a whole task, offline.

Each agent runs once per test session (``agents.standin_session``): the stand-in answers
each turn with the next tool call (read ``calc.py``, run it, edit it, run it again) and then
a text answer. No vLLM is needed here; the real agents are (``scripts/install_agents.sh``).

The bodies each agent sent are test data in ``tests/data/agents/`` (replay tests and
benchmarks). They are written when missing; ``TTFTSCOPE_RECORD_AGENTS=1`` writes them again
from this run, with the run's scratch folder replaced by one fixed path.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agentstandin import API_PATHS, SCRIPT, AgentStandin, Task
from tests.e2e.agents import (
    AGENTS,
    BUGGY_CALC,
    TEST_KEY,
    Agent,
    StandinSession,
    standin_session,
)
from ttftscope.localserver.process import SERVED_MODEL

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parents[1] / "data" / "agents"
DATA_FILE: dict[Agent, str] = {
    "claude-code": "claude_code_bodies.jsonl",
    "codex": "codex_bodies.jsonl",
}
SCRATCH_ROOT = "/tmp/ttftscope-agent"  # stands for the run's scratch folder in the test data
MAX_DATA_BYTES = 1_000_000


@pytest.fixture(params=AGENTS)
def session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> StandinSession:
    agent: Agent = request.param
    return standin_session(agent, tmp_path_factory)


def tool_outputs(agent: str, body: dict[str, Any]) -> list[str]:
    """The tool results a request carries, as text, in conversation order."""
    if agent == "codex":
        kinds = {"function_call_output", "custom_tool_call_output"}
        return [str(i.get("output")) for i in body.get("input", []) if i.get("type") in kinds]
    blocks = [
        b
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    return [json.dumps(b.get("content")) if not isinstance(b.get("content"), str) else b["content"]
            for b in blocks]  # fmt: skip


def test_the_agent_fixes_the_file_over_several_turns(session: StandinSession) -> None:
    run = session.run
    assert run.returncode == 0, run.describe()
    assert Task(run.scratch.workspace).answer in run.stdout, run.describe()
    assert run.scratch.calc.read_text(encoding="utf-8") == BUGGY_CALC.replace("a - b", "a + b")
    assert len(session.api_requests()) >= 4


def test_each_turn_carries_every_tool_result_so_far(session: StandinSession) -> None:
    outputs = [tool_outputs(session.run.agent, body) for body in session.bodies()]
    assert [len(o) for o in outputs] == list(range(len(SCRIPT)))
    for earlier, later in itertools.pairwise(outputs):
        assert later[: len(earlier)] == earlier  # appended, never rewritten
    last = outputs[-1]
    # the tools really ran: the check failed before the edit and passed after it
    assert "AssertionError" in last[1] and "ok" in last[3], last


def test_every_request_went_to_the_standin_with_the_key(session: StandinSession) -> None:
    strays = [
        f"{r.method} {r.path} (host {r.headers.get('host')})"
        for r in session.requests
        if r.headers.get("host") != session.host or r.path not in API_PATHS
    ]
    assert not strays, strays
    for r in session.api_requests():
        auth = r.headers.get("x-api-key") or r.headers.get("authorization")
        assert auth == "<redacted>", r.headers
        assert TEST_KEY not in json.dumps(r.to_json())


def _path_slug(path: str) -> str:
    """A path as Claude Code names its project folder: every non-alphanumeric a dash."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _data_lines(session: StandinSession) -> list[str]:
    """One line per body, the agent's own bytes, the scratch folder replaced."""
    scratch = str(session.run.scratch.root)
    lines = []
    for r in session.api_requests():
        text = r.raw.decode("utf-8")
        if "\n" in text:  # a pretty-printed body: one line of the same JSON instead
            text = json.dumps(r.body, ensure_ascii=False, separators=(",", ":"))
        text = text.replace(scratch, SCRATCH_ROOT)
        lines.append(text.replace(_path_slug(scratch), _path_slug(SCRATCH_ROOT)))
    return lines


def test_the_recorded_bodies_are_kept_as_test_data(session: StandinSession) -> None:
    path = DATA / DATA_FILE[session.run.agent]
    if os.environ.get("TTFTSCOPE_RECORD_AGENTS") == "1" or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(_data_lines(session)) + "\n", encoding="utf-8")
    assert path.stat().st_size < MAX_DATA_BYTES
    bodies = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(bodies) >= 4 and all(b["model"] == SERVED_MODEL for b in bodies)
    counts = [len(tool_outputs(session.run.agent, b)) for b in bodies]
    assert counts == sorted(counts) and counts[-1] >= 3


# --- the stand-in's own formats, for the calls these agent versions do not make ---------------


def _sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_the_standin_answers_without_streaming_and_records_everything(tmp_path: Path) -> None:
    task, log = Task(tmp_path), tmp_path / "requests.jsonl"
    read = {
        "model": "m",
        "messages": [{"role": "user", "content": "fix"}],
        "tools": [{"name": "Read"}],
    }
    shell = {"model": "m", "input": [], "tools": [{"type": "function", "name": "shell"}]}
    with AgentStandin(task, record_path=log) as srv, httpx.Client(base_url=srv.root_url) as client:
        claude = client.post("/v1/messages", json=read, headers={"x-api-key": "secret"}).json()
        codex = client.post("/v1/responses", json=shell, headers={"authorization": "secret"}).json()
        tokens = client.post("/v1/messages/count_tokens", json=read).json()
        models = client.get("/v1/models").json()
        elsewhere = client.get("/elsewhere")
    assert claude["stop_reason"] == "tool_use"
    assert claude["content"][-1]["input"] == {"file_path": str(task.file_path)}
    assert codex["output"][0]["name"] == "shell" and codex["usage"]["input_tokens"] > 0
    assert json.loads(codex["output"][0]["arguments"]) == {
        "command": ["bash", "-lc", "cat calc.py"]
    }
    assert tokens["input_tokens"] > 0 and models["data"] and elsewhere.status_code == 404
    recorded = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [r["path"] for r in recorded] == [
        "/v1/messages", "/v1/responses", "/v1/messages/count_tokens", "/v1/models", "/elsewhere"
    ]  # fmt: skip
    assert "secret" not in log.read_text(encoding="utf-8")


def test_streamed_tool_calls_reassemble_to_the_scripted_call(tmp_path: Path) -> None:
    task = Task(tmp_path)
    done = [{"type": "function_call_output", "call_id": "c", "output": ""}] * 2
    edit = {
        "model": "m",
        "stream": True,
        "input": done,
        "tools": [{"type": "custom", "name": "apply_patch"}],
    }
    read = {"model": "m", "stream": True, "messages": [], "tools": [{"name": "Read"}]}
    with AgentStandin(task) as srv, httpx.Client(base_url=srv.root_url) as client:
        codex = _sse_events(client.post("/v1/responses", json=edit).text)
        claude = _sse_events(client.post("/v1/messages", json=read).text)
    patch = "".join(
        e["delta"] for e in codex if e["type"] == "response.custom_tool_call_input.delta"
    )
    assert patch == task.patch() and codex[-1]["type"] == "response.completed"
    assert codex[-1]["response"]["output"][0]["type"] == "custom_tool_call"
    partial = [
        e["delta"].get("partial_json", "") for e in claude if e["type"] == "content_block_delta"
    ]
    assert json.loads("".join(partial)) == {"file_path": str(task.file_path)}
    assert [e["type"] for e in claude][-2:] == ["message_delta", "message_stop"]

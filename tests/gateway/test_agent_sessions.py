"""The agent sessions the session benchmark replays go as ids on every vLLM profile.

``benchmarks/agent_sessions.py`` replays recorded Claude Code and Codex sessions continued
with ToolSearch results (``tool_reference``), freeform ``apply_patch`` calls and a
compaction; here each turn is converted and rendered the way the gateway would for each
release, with no server: a turn that would go as text fails the test with its reason.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import offline_upstream
from ttftscope.gateway.proving.converts import local_prompt

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "agent_sessions", ROOT / "benchmarks" / "agent_sessions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agent_sessions"] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0", "0.34.0"])
def test_every_turn_of_the_replayed_sessions_goes_as_ids(qwen2_dir: Path, version: str) -> None:
    bench = _bench()
    up = offline_upstream(qwen2_dir, version)
    sessions = [*bench.claude_sessions(), *bench.codex_sessions()]
    kinds: set[str] = set()
    for session in sessions:
        api: NativeApi = "messages" if session.path == "/messages" else "responses"
        for n, body in enumerate(session.turns):
            try:
                local_prompt(up, api, body)
            except PassThrough as exc:
                pytest.fail(f"{session.agent} turn {n + 1} goes as text on {version}: {exc}")
            kinds |= {str(i.get("type")) for i in body.get("input", [])}
            for m in body.get("messages", []):
                if isinstance(m["content"], list):
                    for block in m["content"]:
                        kinds.add(block["type"])
                        if block["type"] == "tool_result" and isinstance(block["content"], list):
                            kinds |= {c["type"] for c in block["content"]}
    # what the sessions must hold for this to mean anything
    assert {"tool_reference", "custom_tool_call", "custom_tool_call_output"} <= kinds
    assert len({s.headers.get("x-claude-code-session-id") for s in sessions}) >= 2

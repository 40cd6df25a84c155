"""The agents' own APIs through the gateway to the real vLLM, against vLLM directly.

Claude Code-shaped Anthropic conversations (system blocks with the billing header, 14-ish
tools, thinking, tool_use / tool_result turns, system reminders) and Codex-shaped Responses
conversations (instructions, function calls and outputs), each turn sent straight to vLLM
and through the gateway at temperature 0: the same ``input_tokens``, the same answer, every
gateway request on the id path, and the gateway's verification (the first requests of each
API, compared with vLLM's own rendering) finds no difference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.gateway.gatewayserver import GatewayServer
from tests.gatewaymetrics import gateway_metric
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e

TOOLS = [
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "limit": {"type": "number"}},
            "required": ["file_path"],
            "additionalProperties": False,
            "$schema": "http://json-schema.org/draft-07/schema#",
        },
    },
    {
        "name": "Bash",
        "description": "Executes a bash command.",
        "input_schema": {"properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
    {
        "name": "Edit",
        "description": "Performs exact string replacements in files.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
        },
        "strict": False,
    },
]
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328; cch=5b1e;"},
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
    {
        "type": "text",
        "text": "You are an interactive agent that helps users with software engineering tasks. "
        * 12,
        "cache_control": {"type": "ephemeral"},
    },
]


def _claude_turns() -> list[list[dict[str, Any]]]:
    """A growing conversation: the messages of each of four turns."""
    first = {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "<system-reminder>\nToday's date is 2026-12-02.\n</system-reminder>",
            },
            {
                "type": "text",
                "text": "Fix the bug in calc.py",
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }
    turns: list[list[dict[str, Any]]] = [[first]]
    steps = [
        ("Read", {"file_path": "/w/calc.py"}, "     1\tdef div(a, b):\n     2\t    return a / 0\n"),
        ("Edit", {"file_path": "/w/calc.py", "old_string": "a / 0", "new_string": "a / b"}, "ok"),
        ("Bash", {"command": "python -c 'import calc; print(calc.div(4, 2))'"}, "2.0"),
    ]
    for i, (name, args, result) in enumerate(steps):
        call = {"type": "tool_use", "id": f"toolu_0{i}", "name": name, "input": args}
        assistant = {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"step {i}", "signature": "c2ln"},
                {"type": "text", "text": f"Step {i}: {name}."},
                call,
            ],
        }
        user = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"toolu_0{i}", "content": result}],
        }
        turns.append([*turns[-1], assistant, user])
    return turns


@pytest.fixture(scope="module")
def gateway(vllm: LocalServer) -> Iterator[GatewayServer]:
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    with GatewayServer(GatewaySettings(upstreams={"local": up}, verify_first=3)) as gw:
        yield gw


def _metric(gw: GatewayServer, name: str, **labels: str) -> float:
    return gateway_metric(gw.port, name, **labels)


def _both(vllm: LocalServer, gw: GatewayServer, path: str, body: dict[str, Any]) -> list[Any]:
    headers = {"x-claude-code-session-id": "e2e-1", "anthropic-beta": "claude-code-20250219"}
    out = []
    for base in (vllm.base_url, gw.base_url):
        resp = httpx.post(base + path, json=body, headers=headers, timeout=120)
        assert resp.status_code == 200, resp.text
        out.append(resp.json() if not body.get("stream") else resp.text)
    return out


def test_claude_code_conversation_matches_vllm(vllm: LocalServer, gateway: GatewayServer) -> None:
    model = vllm.model
    base = {
        "model": model,
        "max_tokens": 8,
        "temperature": 0,
        "system": SYSTEM,
        "tools": TOOLS,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": "user_e2e"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    }
    for messages in _claude_turns():
        body = {**base, "messages": messages}
        direct, via = _both(vllm, gateway, "/messages?beta=true", body)
        assert via["usage"]["input_tokens"] == direct["usage"]["input_tokens"]
        assert via["content"] == direct["content"]
        assert via["stop_reason"] == direct["stop_reason"]
        streamed = _both(vllm, gateway, "/messages?beta=true", {**body, "stream": True})
        tokens = [re.search(r'"input_tokens":(\d+)', s) for s in streamed]
        assert tokens[0] and tokens[1] and tokens[0].group(1) == tokens[1].group(1)
        counted = _both(
            vllm,
            gateway,
            "/messages/count_tokens",
            {"model": model, "messages": messages, "system": SYSTEM, "tools": TOOLS},
        )
        assert counted[0] == counted[1]
    assert _metric(gateway, "ttftscope_gateway_requests_total", route="messages", mode="ids") == 8
    assert (
        _metric(gateway, "ttftscope_gateway_requests_total", route="count_tokens", mode="ids") == 4
    )
    assert _metric(gateway, "ttftscope_gateway_passthrough_total") == 0
    assert _metric(gateway, "ttftscope_gateway_verify_checks_total") >= 3
    assert _metric(gateway, "ttftscope_gateway_verify_mismatches_total") == 0
    # each turn extended the pinned conversation's encoder
    assert _metric(gateway, "ttftscope_gateway_tokens_reused_total") > 0


def test_a_client_error_is_vllms_own(vllm: LocalServer, gateway: GatewayServer) -> None:
    body = {"model": vllm.model, "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}
    direct = httpx.post(vllm.base_url + "/messages", json=body, timeout=60)
    via = httpx.post(gateway.base_url + "/messages", json=body, timeout=60)
    # vLLM's request validation answers in its OpenAI shape even here: passed on as it is
    assert direct.status_code == via.status_code == 400
    assert via.json() == direct.json()


CODEX_TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command and returns its output.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}},
                "workdir": {"type": "string"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    }
]


def _codex_inputs() -> list[list[dict[str, Any]]]:
    """A growing Codex conversation: the input of each of three turns."""
    first: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "developer",
            "content": [
                {
                    "type": "input_text",
                    "text": "<permissions instructions>sandbox: workspace-write"
                    "</permissions instructions>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
                }
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Fix the bug in calc.py"}],
        },
    ]
    turns = [first]
    for i, cmd in enumerate((["cat", "calc.py"], ["python", "-c", "import calc"])):
        step: list[dict[str, Any]] = [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"step {i}"}]},
            {
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "shell",
                "arguments": json.dumps({"command": cmd}),
            },
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"output {i}\n"},
        ]
        turns.append([*turns[-1], *step])
    return turns


def test_codex_conversation_matches_vllm(vllm: LocalServer, gateway: GatewayServer) -> None:
    base = {
        "model": vllm.model,
        "instructions": "You are a coding agent running in the Codex CLI. " * 10,
        "tools": CODEX_TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "e2e-codex-1",
        "max_output_tokens": 8,
        "temperature": 0,
    }
    before = _metric(gateway, "ttftscope_gateway_requests_total", route="responses", mode="ids")
    for inputs in _codex_inputs():
        body = {**base, "input": inputs}
        direct, via = _both(vllm, gateway, "/responses", body)
        assert via["usage"]["input_tokens"] == direct["usage"]["input_tokens"]
        assert [o.get("content") for o in via["output"]] == [
            o.get("content") for o in direct["output"]
        ]
        streamed = _both(vllm, gateway, "/responses", {**body, "stream": True})
        tokens = [re.search(r'"input_tokens":(\d+)', s) for s in streamed]
        assert tokens[0] and tokens[1] and tokens[0].group(1) == tokens[1].group(1)
    after = _metric(gateway, "ttftscope_gateway_requests_total", route="responses", mode="ids")
    assert after - before == 6
    assert _metric(gateway, "ttftscope_gateway_passthrough_total") == 0
    assert _metric(gateway, "ttftscope_gateway_verify_mismatches_total") == 0


def test_a_stateful_responses_request_goes_as_text_and_works(
    vllm: LocalServer, gateway: GatewayServer
) -> None:
    body = {"model": vllm.model, "input": "hi", "store": True, "max_output_tokens": 4}
    resp = httpx.post(gateway.base_url + "/responses", json=body, timeout=60)
    assert resp.status_code == 200, resp.text
    assert _metric(gateway, "ttftscope_gateway_passthrough_total", reason="stateful") == 1


def test_no_effort_is_verified_without_a_false_alarm(vllm: LocalServer) -> None:
    """``reasoning_effort: "none"`` (chat) and ``thinking: disabled`` (messages) are checked
    with the template variables the gateway rendered with (``enable_thinking`` false): no
    mismatch, both go as ids, the same prompt tokens as vLLM counts directly."""
    user = [{"role": "user", "content": "Say hi."}]
    bodies: dict[str, dict[str, Any]] = {
        "/chat/completions": {"messages": user, "reasoning_effort": "none"},
        "/messages": {"messages": user, "thinking": {"type": "disabled"}},
    }
    up = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    with GatewayServer(GatewaySettings(upstreams={"local": up}, verify_first=1)) as gw:
        for path, extra in bodies.items():
            body = {"model": vllm.model, "max_tokens": 4, "temperature": 0, **extra}
            usage = [
                httpx.post(base + path, json=body, timeout=120).json()["usage"]
                for base in (vllm.base_url, gw.base_url)
            ]
            key = "prompt_tokens" if path == "/chat/completions" else "input_tokens"
            assert usage[0][key] == usage[1][key], usage
        assert _metric(gw, "ttftscope_gateway_verify_checks_total") == 2
        assert _metric(gw, "ttftscope_gateway_verify_mismatches_total") == 0
        assert _metric(gw, "ttftscope_gateway_passthrough_total") == 0

"""The server `ttftscope local-server start` runs serves what coding agents send.

The README's agent section sends chats with tools and no ``tool_choice`` ("auto"), which vLLM
refuses with 400 unless it was started with a tool parser. The e2e fixture starts the server
with the CLI's defaults (one definition), and refuses to adopt one started otherwise; here the
CLI reports that very server and its recorded flags, and a tool-using chat gets an answer.
"""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from ttftscope.cli import cli
from ttftscope.localstate import LocalServer

pytestmark = pytest.mark.e2e

TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the repository",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def test_local_server_start_serves_tool_calling_as_agents_use_it(vllm: LocalServer) -> None:
    result = CliRunner().invoke(cli, ["local-server", "start", "--json"], env={})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output.splitlines()[-1])
    assert shown["pid"] == vllm.pid  # the fixture's server, reused, not another one
    flags = shown["args"]
    assert flags[:3] == ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    body = {
        "model": vllm.model,
        "messages": [{"role": "user", "content": "Read README.md"}],
        "tools": [TOOL],  # no tool_choice: "auto", as Claude Code and Codex send
        "max_tokens": 8,
    }
    answer = httpx.post(f"{vllm.base_url}/chat/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["choices"][0]["message"]["role"] == "assistant"

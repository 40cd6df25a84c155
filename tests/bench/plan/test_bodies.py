"""Each API's request body says the same conversation, in the shape its own clients send."""

from __future__ import annotations

from typing import Any

import pytest

from ttftscope.bench.plan.bodies import BodyDefaults, Message, Prompt, Tool, build_body
from ttftscope.client.apis import APIS, Api

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
PROMPT = Prompt(
    "You are a coding agent.",
    (Tool("Read", "Read a file.", SCHEMA),),
    (Message("user", "files"), Message("assistant", "Read them."), Message("user", "turn 1")),
)


def _body(api: Api, **changes: Any) -> dict[str, Any]:
    defaults = BodyDefaults("tiny", 216, 0.0, api=api, **changes)
    return build_body(PROMPT, defaults)


def _said(api: Api, body: dict[str, Any]) -> tuple[str, list[tuple[str, str]], list[str]]:
    """The system prompt, the conversation and the tools' names a body carries."""
    if api == "chat":
        system, *rest = body["messages"]
        turns = [(m["role"], m["content"]) for m in rest]
        return system["content"], turns, [t["function"]["name"] for t in body["tools"]]
    if api == "messages":
        turns = [(m["role"], m["content"][0]["text"]) for m in body["messages"]]
        return body["system"][0]["text"], turns, [t["name"] for t in body["tools"]]
    turns = [(i["role"], i["content"][0]["text"]) for i in body["input"]]
    return body["instructions"], turns, [t["name"] for t in body["tools"]]


@pytest.mark.parametrize("api", APIS)
def test_every_api_carries_the_same_conversation(api: Api) -> None:
    system, turns, tools = _said(api, _body(api))
    assert system == PROMPT.system and tools == ["Read"]
    # tools rendered, but no tool-call parser needed on the server; --extra-body overrides
    assert _body(api)["tool_choice"] in ("none", {"type": "none"})
    assert _body(api, extra={"tool_choice": "auto"})["tool_choice"] == "auto"
    assert turns == [(m.role, m.text) for m in PROMPT.messages]


def test_the_anthropic_body_is_claude_codes_shape() -> None:
    body = _body("messages")
    assert body["system"] == [{"type": "text", "text": "You are a coding agent."}]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Read them."}],
    }
    tool = {"name": "Read", "description": "Read a file.", "input_schema": SCHEMA}
    assert body["tools"] == [tool] and body["tool_choice"] == {"type": "none"}
    assert body["max_tokens"] == 216 and "max_output_tokens" not in body


def test_the_responses_body_is_codexs_shape() -> None:
    body = _body("responses")
    assert body["store"] is False and body["max_output_tokens"] == 216 and "max_tokens" not in body
    assert [i["content"][0]["type"] for i in body["input"]] == [
        "input_text",
        "output_text",
        "input_text",
    ]
    assert all(i["type"] == "message" for i in body["input"])
    assert body["tools"] == [
        {"type": "function", "name": "Read", "description": "Read a file.", "parameters": SCHEMA}
    ]
    assert body["tool_choice"] == "none"


@pytest.mark.parametrize("api", APIS)
def test_extra_body_goes_on_top_and_no_system_sends_none(api: Api) -> None:
    body = _body(api, extra={"temperature": 0.7, "top_k": 5})
    assert (body["model"], body["temperature"], body["top_k"]) == ("tiny", 0.7, 5)
    bare = build_body(Prompt("", (), (Message("user", "hi"),)), BodyDefaults("m", 4, 0.0, api=api))
    assert not {"system", "instructions", "tools"} & bare.keys()
    if api == "chat":
        assert bare["messages"] == [{"role": "user", "content": "hi"}]

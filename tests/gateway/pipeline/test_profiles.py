"""Version profiles: each rule changes exactly the rendering vLLM's own source changed.

Expected values are written out from vLLM's source of each release
(``entrypoints/anthropic/serving.py::_convert_user_tool_result``,
``chat_completion/protocol.py`` on ``tools: []``, the Anthropic thinking configs,
transformers' ``_alias_reasoning_fields``), not computed by the code under test; the oracle
tier (``tests/oracle``) proves the same against each release's render server.
"""

from __future__ import annotations

from typing import Any

import pytest

from ttftscope.gateway.apis.messages.vllm_messages import messages_to_chat
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.profiles import RULES, Profile, profile_for, release_of
from ttftscope.gateway.pipeline.vllm_chat import prepare_chat

V32, V33, V34 = (profile_for(v) for v in ("0.32.0", "0.33.0", "0.34.0"))
STRING_TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% if m.tool_call_id %}"
    "#{{ m.tool_call_id }}{% endif %}{% endfor %}"
)


def _p(v: Profile | None) -> Profile:
    assert v is not None
    return v


def test_profiles_by_release() -> None:
    assert [_p(p).name for p in (V32, V33, V34)] == ["0.32", "0.33", "0.34"]
    assert profile_for("0.31.9") is None and profile_for("not-vllm") is None
    assert profile_for(None) is None
    newer = _p(profile_for("0.35.1"))
    assert newer.name == "0.35 (as 0.34)" and newer.release == (0, 34)
    assert release_of("0.34.0+cu129") == (0, 34)
    assert [r.name for r in _p(V32).rules()] == []
    assert {r.name for r in _p(V33).rules()} == {r.name for r in RULES if r.since == (0, 33)}
    assert {r.name for r in _p(V34).rules()} == {r.name for r in RULES}


def test_an_unknown_rule_name_is_an_error_not_false() -> None:
    with pytest.raises(KeyError):
        _p(V34).has("no_such_rule")


def _search_result(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {"role": "user", "content": "find a tool"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "tool_reference", "tool_name": "Read"},
                            {"type": "text", "text": text},
                            {"type": "tool_reference", "name": "Grep"},
                        ],
                    }
                ],
            },
        ],
    }


def test_tool_reference_before_034_is_a_text_tool_message_then_one_of_references() -> None:
    for profile in (V32, V33):
        tools = [
            m
            for m in messages_to_chat(_search_result("found 2"), profile=_p(profile))["messages"]
            if m["role"] == "tool"
        ]
        assert tools == [
            {"role": "tool", "tool_call_id": "t1", "content": "found 2"},
            {
                "role": "tool",
                "tool_call_id": "t1",
                "content": [
                    {"type": "tool_reference", "name": "Read"},
                    {"type": "tool_reference", "name": "Grep"},
                ],
            },
        ]


def test_tool_reference_from_034_is_one_message_references_first() -> None:
    chat = messages_to_chat(_search_result("found 2"), profile=_p(V34))
    tools = [m for m in chat["messages"] if m["role"] == "tool"]
    assert tools == [
        {
            "role": "tool",
            "tool_call_id": "t1",
            "content": [
                {"type": "tool_reference", "name": "Read"},
                {"type": "tool_reference", "name": "Grep"},
                {"type": "text", "text": "found 2"},
            ],
        }
    ]
    no_text = messages_to_chat(_search_result(""), profile=_p(V34))
    assert [m["content"] for m in no_text["messages"] if m["role"] == "tool"] == [
        [{"type": "tool_reference", "name": "Read"}, {"type": "tool_reference", "name": "Grep"}]
    ]


def test_tool_reference_parts_render_as_names_in_string_format() -> None:
    """vLLM's string content format joins a reference's name like a text part."""
    for profile in (V32, V34):
        chat = messages_to_chat(_search_result("found 2"), profile=_p(profile))
        inputs = prepare_chat(chat, STRING_TEMPLATE, _p(profile))
        contents = [m["content"] for m in inputs.messages if m["role"] == "tool"]
        want = ["found 2", "Read\nGrep"] if profile is V32 else ["Read\nGrep\nfound 2"]
        assert contents == want


def test_tool_reference_parts_stay_parts_in_openai_format() -> None:
    template = "{% for m in messages %}{% for p in m.content %}{{ p.type }}{% endfor %}{% endfor %}"
    chat = messages_to_chat(_search_result("x"), profile=_p(V34))
    inputs = prepare_chat(chat, template, _p(V34))
    tool = next(m for m in inputs.messages if m["role"] == "tool")
    assert tool["content"] == [
        {"type": "tool_reference", "name": "Read"},
        {"type": "tool_reference", "name": "Grep"},
        {"type": "text", "text": "x"},
    ]


def test_a_tool_reference_with_other_keys_passes_through() -> None:
    chat = {
        "messages": [
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "tool_reference"}]},
        ]
    }
    with pytest.raises(PassThrough):
        prepare_chat(chat, STRING_TEMPLATE, _p(V34))


def _thinking(kind: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 9,
        "thinking": {"type": kind},
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_between_tools_is_disabled_thinking_from_034_and_vllms_400_before() -> None:
    chat = messages_to_chat(_thinking("between_tools"), disabled_effort="low", profile=_p(V34))
    assert chat["reasoning_effort"] == "low"
    for profile in (V32, V33):
        with pytest.raises(PassThrough) as caught:
            messages_to_chat(_thinking("between_tools"), profile=_p(profile))
        assert caught.value.reason == "invalid_request"
    assert "reasoning_effort" not in messages_to_chat(_thinking("adaptive"), profile=_p(V32))


def test_empty_tools_mean_no_tools_from_034_and_vllms_400_before() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "tool_choice": "auto"}
    inputs = prepare_chat(body, "{{ messages }}", _p(V34))
    assert inputs.tools is None
    for profile in (V32, V33):
        with pytest.raises(PassThrough) as caught:
            prepare_chat(body, "{{ messages }}", _p(profile))
        assert caught.value.reason == "invalid_request"
    named = {**body, "tool_choice": {"type": "function", "function": {"name": "f"}}}
    with pytest.raises(PassThrough):  # a named tool keeps the empty list: vLLM's 400
        prepare_chat(named, "{{ messages }}", _p(V34))


def test_a_template_reading_thinking_goes_as_ids_only_where_vllm_aliases_it() -> None:
    template = "{% for m in messages %}{{ m.thinking }}|{{ m.content }}{% endfor %}"
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo", "reasoning": "hmm"},
        ]
    }
    for profile in (V32, V33, _p(V34).without("assistant_thinking_key")):
        with pytest.raises(PassThrough):
            prepare_chat(body, template, _p(profile))
    assert prepare_chat(body, template, _p(V34)).messages[1]["reasoning"] == "hmm"
    assert _p(V34).optional == ("assistant_thinking_key",)

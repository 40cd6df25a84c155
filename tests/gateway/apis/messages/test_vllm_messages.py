"""vLLM 0.32's Anthropic → chat conversion: each rule, written out by hand from vLLM's code
(``entrypoints/anthropic/serving.py``), and what passes through."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.gateway.apis.messages.vllm_messages import (
    disabled_thinking_effort,
    merges_inline_system,
    messages_to_chat,
)
from ttftscope.gateway.pipeline.passthrough import PassThrough

READ_TOOL = {
    "name": "Read",
    "description": "Reads a file",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


def _chat(**body: Any) -> dict[str, Any]:
    return messages_to_chat({"model": "m", "max_tokens": 64, **body})


def test_system_blocks_join_without_separator_and_lose_the_billing_header() -> None:
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1; cch=1f2e;"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": ""},
        {"type": "text", "text": "Be brief."},
    ]
    chat = _chat(system=system, messages=[{"role": "user", "content": "hi"}])
    assert chat["messages"] == [
        {"role": "system", "content": "You are Claude Code.Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_an_empty_system_string_adds_no_message() -> None:
    assert _chat(system="", messages=[{"role": "user", "content": "hi"}])["messages"] == [
        {"role": "user", "content": "hi"}
    ]


def test_inline_system_messages_stay_in_place_or_merge_into_the_first() -> None:
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "system", "content": [{"type": "text", "text": "reminder"}]},
        {"role": "user", "content": "b"},
    ]
    kept = _chat(system="S", messages=msgs)["messages"]
    assert kept == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "a"},
        {"role": "system", "content": "reminder"},
        {"role": "user", "content": "b"},
    ]
    merged = messages_to_chat(
        {"model": "m", "system": "S", "messages": msgs}, merge_inline_system=True
    )["messages"]
    assert merged == [
        {"role": "system", "content": "Sreminder"},
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]


def test_tool_use_and_results_become_calls_and_tool_messages_in_vllms_order() -> None:
    msgs = [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "look first", "signature": "sig"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\tx = 1"},
                {"type": "text", "text": "<system-reminder>r</system-reminder>"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    assert _chat(messages=msgs)["messages"] == [
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "reasoning": "look first",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"file_path": "a"}'},
                }
            ],
            "content": "Reading.",
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "1\tx = 1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>r</system-reminder>"},
                {"type": "text", "text": "go on"},
            ],
        },
    ]


def test_a_user_message_of_tool_results_only_is_dropped_after_its_tool_messages() -> None:
    msgs = [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    "is_error": True,
                },
                {"type": "redacted_thinking", "data": "xx"},
            ],
        }
    ]
    assert _chat(messages=msgs)["messages"] == [
        {"role": "tool", "tool_call_id": "t", "content": "a\nb"}
    ]


def test_an_assistant_tool_result_is_text_and_an_empty_assistant_stays() -> None:
    msgs = [
        {"role": "assistant", "content": [{"type": "tool_result", "content": "ok"}]},
        {"role": "assistant", "content": []},
    ]
    assert _chat(messages=msgs)["messages"] == [
        {"role": "assistant", "content": "Tool result: ok"},
        {"role": "assistant"},
    ]


def test_tools_get_an_object_type_at_the_end_and_auto_choice() -> None:
    tools = [
        READ_TOOL,
        {"name": "Bash", "input_schema": {"properties": {}}, "strict": True},
    ]
    chat = _chat(messages=[{"role": "user", "content": "x"}], tools=tools)
    assert chat["tool_choice"] == "auto"
    assert chat["tools"][1] == {
        "type": "function",
        "function": {
            "name": "Bash",
            "description": None,
            "parameters": {"properties": {}, "type": "object"},
            "strict": True,
            "defer_loading": None,
        },
    }
    assert list(chat["tools"][1]["function"]["parameters"]) == ["properties", "type"]


@pytest.mark.parametrize(
    ("choice", "want"),
    [
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto"),
        ({"type": "tool", "name": "Read"}, {"type": "function", "function": {"name": "Read"}}),
    ],
)
def test_tool_choice_maps_to_chat(choice: dict[str, Any], want: Any) -> None:
    chat = _chat(messages=[{"role": "user", "content": "x"}], tools=[READ_TOOL], tool_choice=choice)
    assert chat["tool_choice"] == want


def test_effort_comes_from_output_config_and_disabled_thinking_overrides_it() -> None:
    msgs = [{"role": "user", "content": "x"}]
    assert _chat(messages=msgs, output_config={"effort": "high"})["reasoning_effort"] == "high"
    adaptive = _chat(messages=msgs, thinking={"type": "adaptive"}, output_config={"effort": "low"})
    assert adaptive["reasoning_effort"] == "low"
    body = {"model": "m", "messages": msgs, "thinking": {"type": "disabled"}}
    body["output_config"] = {"effort": "max"}
    assert messages_to_chat(body, disabled_effort="low")["reasoning_effort"] == "low"
    assert "reasoning_effort" not in _chat(messages=msgs, thinking={"type": "enabled"})


def test_fields_vllm_does_not_know_change_nothing() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {}}]}]
    plain = _chat(messages=msgs)
    noisy = _chat(
        messages=msgs,
        metadata={"user_id": "u"},
        context_management={"edits": []},
        stream=True,
        temperature=1,
    )
    assert plain == noisy == {"model": "m", "messages": [{"role": "user", "content": "x"}]}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"messages": "x"}, "invalid_request"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "invalid_request"),
        ({"messages": [{"role": "user", "content": [{"type": "video"}]}]}, "invalid_request"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
            "invalid_request",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image", "source": {"data": "x"}}]}
                ]
            },
            "non_text_content",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "name": "R", "input": {}}],
                    }
                ]
            },
            "unsupported_block",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "image", "source": {}}],
                            }
                        ],
                    }
                ]
            },
            "non_text_content",
        ),
        (
            {
                "messages": [
                    {
                        "role": "system",
                        "content": [{"type": "tool_addition", "tool": {"type": "tool_reference"}}],
                    }
                ]
            },
            "unsupported_block",
        ),
        ({"messages": [], "kv_transfer_params": {"x": 1}}, "kv_transfer_params"),
        (
            {"messages": [], "tools": [{"name": "R", "input_schema": {}, "strict": "yes"}]},
            "unsupported_block",
        ),
        ({"messages": [], "tools": [{"name": "R"}]}, "invalid_request"),
        ({"messages": [], "tool_choice": {"type": "tool"}}, "invalid_request"),
        ({"messages": [], "output_config": {"effort": "huge"}}, "invalid_request"),
    ],
)
def test_what_is_not_reproduced_passes_through(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(PassThrough) as caught:
        messages_to_chat({"model": "m", **body})
    assert caught.value.reason == reason


def test_merge_detection_follows_whether_the_template_accepts_inline_system() -> None:
    qwen_like = (
        "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
        "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
        "{{ m.content }}{% endfor %}"
    )
    assert merges_inline_system(qwen_like)
    assert not merges_inline_system("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert merges_inline_system(None)


def test_disabled_thinking_maps_to_low_where_none_renders_like_an_effort() -> None:
    assert disabled_thinking_effort(lambda e: None) == "low"
    assert disabled_thinking_effort(lambda e: "x" if e in ("none", "max") else e) == "low"
    assert disabled_thinking_effort(lambda e: f"<{e}>") == "none"


TEXT = st.text(max_size=8)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
    st.fixed_dictionaries(
        {"type": st.just("tool_use"), "id": st.just("t1"), "name": TEXT, "input": st.just({})}
    ),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": TEXT, "content": TEXT}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": TEXT}),
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.one_of(TEXT, st.lists(BLOCK, max_size=4)),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(MESSAGE, max_size=6))
def test_any_conversation_converts_or_passes_through_and_keeps_every_text(
    msgs: list[dict[str, Any]],
) -> None:
    try:
        chat = messages_to_chat({"model": "m", "messages": msgs})
    except PassThrough as exc:
        assert exc.reason == "unsupported_block"  # a tool_use outside an assistant message
        return
    dumped = json.dumps(chat["messages"])
    for m in msgs:
        blocks = [m["content"]] if isinstance(m["content"], str) else m["content"]
        for b in blocks:
            text = b if isinstance(b, str) else b.get("text") or b.get("thinking")
            # a user's thinking is dropped with the message when nothing else remains
            dropped = m["role"] == "user" and not isinstance(b, str) and b["type"] == "thinking"
            if text and not dropped:
                assert json.dumps(text)[1:-1] in dumped

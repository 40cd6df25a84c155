"""vLLM 0.32's Responses → chat conversion: each rule, each pass-through reason, fuzzed.

Expected values are written by hand from vLLM 0.32's ``entrypoints/openai/responses``
(``utils.py::construct_input_messages``, ``protocol.py::ResponsesRequest``) and
``renderers/online_renderer.py::render_responses``; the e2e tier
(``tests/e2e/test_responses_rendering.py``) compares against the live server's own prompt ids.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ttftscope.gateway.apis.responses.vllm_responses import (
    ADD_SPECIAL_TOKENS,
    prepare_responses,
    responses_to_chat,
)
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.tokenization.chat import ChatRenderer

TINY = (
    resources.files("ttftscope")
    .joinpath("localserver/data/chat_template.jinja")
    .read_text(encoding="utf-8")
    .removesuffix("\n")
)


def text(t: str) -> dict[str, Any]:
    return {"type": "input_text", "text": t}


def user(*parts: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [text(p) for p in parts]}


def said(*texts: str, **extra: Any) -> dict[str, Any]:
    parts = [{"type": "output_text", "text": t, "annotations": []} for t in texts]
    return {"type": "message", "role": "assistant", "content": parts, **extra}


def fcall(call_id: str = "call_1", arguments: str = "{}", name: str = "shell") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def fout(output: Any = "ok", call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def thought(summary: str | None = None, content: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "summary": []}
    if summary is not None:
        item["summary"] = [{"type": "summary_text", "text": summary}]
    if content is not None:
        item["content"] = [{"type": "reasoning_text", "text": content}]
    return item


SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "array", "items": {"type": "string"}}},
        "required": ["cmd"],
        "additionalProperties": False,
    },
}


def messages(*items: Any, **body: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = responses_to_chat({"input": list(items), **body})["messages"]
    return out


def reason_of(**body: Any) -> str:
    body.setdefault("input", "hi")
    with pytest.raises(PassThrough) as exc:
        responses_to_chat(body)
    return exc.value.reason


def render(body: dict[str, Any], template: str = TINY) -> str:
    i = prepare_responses(body, template)
    return ChatRenderer(None, template).render(i.messages, tools=i.tools, **i.template_kwargs)


# -- a whole Codex turn ---------------------------------------------------------------------

DEVELOPER = {"type": "message", "role": "developer", "content": [text("Sandbox: read-only.")]}
CODEX = {
    "model": "m",
    "instructions": "You are Codex.",
    "input": [
        DEVELOPER,
        user("Fix a.py"),
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Read it first."}],
            "content": None,
            "encrypted_content": None,
        },
        {**fcall(arguments='{"cmd": ["cat", "a.py"]}'), "id": "fc_1", "status": "completed"},
        fout("print(1)"),
        said("Done.", id="msg_1", status="completed", phase="final_answer"),
        user("Thanks"),
    ],
    "tools": [SHELL],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "session-1",
    "text": {"verbosity": "low"},
}


def test_a_codex_turn_becomes_the_chat_body_vllm_renders() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "shell", "arguments": '{"cmd": ["cat", "a.py"]}'},
    }
    assert responses_to_chat(CODEX) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are Codex."},
            {"role": "developer", "content": [{"type": "text", "text": "Sandbox: read-only."}]},
            {"role": "user", "content": [{"type": "text", "text": "Fix a.py"}]},
            {"role": "assistant", "reasoning": "Read it first.", "tool_calls": [call]},
            {"role": "tool", "content": "print(1)", "tool_call_id": "call_1"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "shell",
                    "description": "Run a command.",
                    "parameters": SHELL["parameters"],
                    "strict": False,
                },
            }
        ],
        "tool_choice": "auto",
        "reasoning_effort": "medium",
    }


def test_a_codex_turn_renders_as_vllm_renders_it_with_the_tiny_template() -> None:
    tool_json = (
        '{"type": "function", "function": {"name": "shell", "description": "Run a command.", '
        '"parameters": {"type": "object", "properties": {"cmd": {"type": "array", "items": '
        '{"type": "string"}}}, "required": ["cmd"], "additionalProperties": false}, '
        '"strict": false}}'
    )
    assert render(CODEX) == (
        "<|im_start|>system\nYou are Codex.\n\nSandbox: read-only.\n\n# Tools\n\n"
        "You can call the functions whose JSON signatures are listed in <tools></tools>:\n"
        f"<tools>\n{tool_json}\n</tools>\n\n"
        "To call one, answer with a JSON object per call inside <tool_call></tool_call> tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-object>}\n</tool_call>'
        "<|im_end|>\n"
        "<|im_start|>user\nFix a.py<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nRead it first.\n</think>\n\n"
        '<tool_call>\n{"name": "shell", "arguments": {"cmd": ["cat", "a.py"]}}\n</tool_call>'
        "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nprint(1)\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nDone.<|im_end|>\n"
        "<|im_start|>user\nThanks<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_the_body_is_not_changed() -> None:
    body = copy.deepcopy(CODEX)
    responses_to_chat(body)
    prepare_responses(body, TINY)
    assert body == CODEX


def test_responses_prompts_are_encoded_with_special_tokens() -> None:
    # ResponsesRequest.build_tok_params keeps TokenizeParams' default; chat sends False.
    assert ADD_SPECIAL_TOKENS is True


# -- instructions and input ---------------------------------------------------------------


def test_instructions_become_a_leading_system_message_unless_empty() -> None:
    assert responses_to_chat({"input": "hi", "instructions": "I"})["messages"] == [
        {"role": "system", "content": "I"},
        {"role": "user", "content": "hi"},
    ]
    assert responses_to_chat({"input": "hi", "instructions": ""})["messages"] == [
        {"role": "user", "content": "hi"}
    ]


def test_instructions_alone_are_a_conversation() -> None:
    assert messages(instructions="I") == [{"role": "system", "content": "I"}]


def test_role_items_keep_their_role_and_input_text_becomes_text_parts() -> None:
    items = [
        {"role": "user", "content": "plain"},
        {"type": "message", "role": "system", "content": [text("s")]},
        {"type": "message", "role": "developer", "content": [text("a"), text(""), text("b")]},
    ]
    assert messages(*items) == [
        {"role": "user", "content": "plain"},
        {"role": "system", "content": [{"type": "text", "text": "s"}]},
        {
            "role": "developer",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": ""},
                {"type": "text", "text": "b"},
            ],
        },
    ]


def test_text_parts_join_with_newlines_skipping_empty_ones_in_string_format() -> None:
    body = {"input": [user("a", "", "b")]}
    assert render(body) == "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n"


def test_instructions_and_developer_items_merge_into_one_system_message() -> None:
    body = {"instructions": "I", "input": [user("u"), DEVELOPER]}
    assert render(body).startswith(
        "<|im_start|>system\nI\n\nSandbox: read-only.<|im_end|>\n<|im_start|>user\nu<|im_end|>"
    )


# -- assistant items, tool calls and reasoning ------------------------------------------------


def test_only_the_first_output_text_part_of_an_assistant_message_is_kept() -> None:
    assert messages(user("u"), said("first", "second")) == [
        {"role": "user", "content": [{"type": "text", "text": "u"}]},
        {"role": "assistant", "content": "first"},
    ]


def test_an_assistant_message_with_text_content_is_kept() -> None:
    assert messages({"role": "assistant", "content": "plain"}) == [
        {"role": "assistant", "content": "plain"}
    ]


def test_function_calls_join_the_previous_assistant_message() -> None:
    c1, c2 = fcall("c1", '{"a": 1}'), fcall("c2", "")
    assert messages(said("Let me look."), c1, c2) == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"a": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": ""}},
            ],
        }
    ]


def test_a_function_call_after_a_tool_result_starts_a_new_assistant_message() -> None:
    out = messages(fcall("c1"), fout("r1", "c1"), fcall("c2"))
    assert [m["role"] for m in out] == ["assistant", "tool", "assistant"]
    assert "content" not in out[0]
    assert out[2]["tool_calls"][0]["id"] == "c2"


def test_function_call_output_becomes_a_tool_message() -> None:
    parts = [text("a"), text("b")]
    no_id = {"type": "function_call_output", "output": "x"}
    assert messages(fout("done", "c9"), fout(parts, "c9"), no_id) == [
        {"role": "tool", "content": "done", "tool_call_id": "c9"},
        {
            "role": "tool",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "tool_call_id": "c9",
        },
        {"role": "tool", "content": "x", "tool_call_id": None},
    ]


def test_a_tool_output_of_parts_renders_as_one_newline_joined_string() -> None:
    body = {"input": [fcall(), fout([text("a"), text("b")])], "tools": [SHELL]}
    assert "<tool_response>\na\nb\n</tool_response>" in render(body)


def test_reasoning_text_is_the_first_content_text_else_the_first_summary_text() -> None:
    two = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "s1"}, {"type": "summary_text", "text": "s2"}],
        "content": [
            {"type": "reasoning_text", "text": "c1"},
            {"type": "reasoning_text", "text": "c2"},
        ],
    }
    assert messages(two) == [{"role": "assistant", "reasoning": "c1"}]
    assert messages(thought(summary="s")) == [{"role": "assistant", "reasoning": "s"}]
    assert messages(thought()) == [{"role": "assistant", "reasoning": ""}]


def test_reasoning_joins_the_previous_assistant_message_until_it_has_reasoning() -> None:
    # Even a reasoning item that comes after the text it belongs to (as vLLM merges it).
    assert messages(said("A"), thought("R1"), thought("R2")) == [
        {"role": "assistant", "content": "A", "reasoning": "R1"},
        {"role": "assistant", "reasoning": "R2"},
    ]


def test_text_joins_the_previous_assistant_message_until_it_has_content() -> None:
    assert messages(thought("R"), said("A"), said("B")) == [
        {"role": "assistant", "reasoning": "R", "content": "A"},
        {"role": "assistant", "content": "B"},
    ]
    # An empty text is content already.
    assert messages(said(""), said("B")) == [
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "B"},
    ]


def test_nothing_joins_a_message_across_a_user_turn() -> None:
    out = messages(said("A"), user("u"), thought("R"))
    assert out[2] == {"role": "assistant", "reasoning": "R"}


def test_tool_call_functions_keep_vllms_key_order_name_then_arguments() -> None:
    template = "{{ messages[0].tool_calls[0] | tojson }}"
    body = {"input": [fcall("c", '{"path": "a"}', "read")]}
    assert render(body, template) == (
        '{"id": "c", "function": {"name": "read", "arguments": {"path": "a"}}, "type": "function"}'
    )


def test_odd_arguments_become_an_empty_object() -> None:
    body = {"input": [fcall("c1", "{bad"), fcall("c2", "[1]"), fcall("c3", "")]}
    calls = prepare_responses(body, TINY).messages[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [{}, {}, {}]


# -- tools, tool_choice and reasoning effort ------------------------------------------------


def test_function_tools_become_chat_tools_with_vllms_null_fields() -> None:
    tools = [
        {"type": "function", "name": "a", "strict": True, "parameters": {"type": "object"}},
        {"type": "function", "name": "b", "defer_loading": False},
    ]
    i = prepare_responses({"input": "hi", "tools": tools}, TINY)
    assert i.tools == [
        {
            "type": "function",
            "function": {
                "name": "a",
                "description": None,
                "parameters": {"type": "object"},
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "b",
                "description": None,
                "parameters": None,
                "defer_loading": False,
            },
        },
    ]
    assert list(i.tools[0]["function"]) == ["name", "description", "parameters", "strict"]


def test_an_empty_tool_list_is_no_tools() -> None:
    assert "tools" not in responses_to_chat({"input": "hi", "tools": []})


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),  # the tools are still rendered
        ("required", "required"),
        (
            {"type": "function", "name": "shell"},
            {"type": "function", "function": {"name": "shell"}},
        ),
    ],
)
def test_tool_choice_forms(choice: Any, expected: Any) -> None:
    chat = responses_to_chat({"input": "hi", "tools": [SHELL], "tool_choice": choice})
    assert chat["tool_choice"] == expected
    assert prepare_responses({"input": "hi", "tools": [SHELL], "tool_choice": choice}, TINY).tools


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_tool_choice_without_tools_is_dropped(choice: str) -> None:
    assert "tool_choice" not in responses_to_chat({"input": "hi", "tool_choice": choice})


@pytest.mark.parametrize("parallel", [True, False, None])
def test_parallel_tool_calls_does_not_reach_the_template(parallel: bool | None) -> None:
    body = {"input": "hi", "tools": [SHELL], "parallel_tool_calls": parallel}
    assert render(body) == render({"input": "hi", "tools": [SHELL]})


def test_reasoning_effort_turns_thinking_on_or_off() -> None:
    assert (
        responses_to_chat({"input": "hi", "reasoning": {"effort": "low"}})["reasoning_effort"]
        == "low"
    )
    assert render({"input": "hi", "reasoning": {"effort": "none"}}).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert render({"input": "hi", "reasoning": {"effort": "high"}}).endswith(
        "<|im_start|>assistant\n"
    )
    assert "reasoning_effort" not in responses_to_chat({"input": "hi", "reasoning": {}})


def test_template_kwargs_win_over_reasoning_effort() -> None:
    body = {
        "input": "hi",
        "reasoning": {"effort": "none"},
        "chat_template_kwargs": {"enable_thinking": True},
    }
    assert responses_to_chat(body)["chat_template_kwargs"] == {"enable_thinking": True}
    assert prepare_responses(body, TINY).template_kwargs == {
        "add_generation_prompt": True,
        "enable_thinking": True,
    }


def test_fields_that_do_not_reach_the_template_are_left_out() -> None:
    body = {
        "input": "hi",
        "store": False,
        "background": False,
        "stream": True,
        "include": ["reasoning.encrypted_content", "message.output_text.logprobs"],
        "top_logprobs": 2,
        "prompt_cache_key": "k",
        "max_output_tokens": 5,
        "temperature": 0,
        "metadata": {"a": "b"},
        "user": "u",
        "service_tier": "auto",
        "truncation": "disabled",
        "text": {"format": {"type": "text"}},
    }
    assert responses_to_chat(body) == {"messages": [{"role": "user", "content": "hi"}]}


# -- pass-through reasons ------------------------------------------------------------------

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,AA==", "detail": "auto"}
PASS_CASES: list[tuple[str, dict[str, Any]]] = [
    ("stateful", {"previous_response_id": "resp_1"}),
    ("stateful", {"store": True}),
    ("stateful", {"conversation": "conv_1"}),
    ("stateful", {"background": True, "store": True}),
    ("stateful", {"previous_input_messages": []}),
    ("kv_transfer_params", {"kv_transfer_params": {"prompt_token_ids": [1]}}),
    ("echo", {"echo": True}),
    ("return_prompt_text", {"enable_response_messages": True}),
    ("truncate_prompt_tokens", {"truncation": "auto"}),
    ("truncate_prompt_tokens", {"truncation": None}),  # null is not "disabled"
    ("continue_final_message", {"input": [user("u"), said("Sure", status="in_progress")]}),
    ("continue_final_message", {"input": [user("u"), {**thought("r"), "status": "incomplete"}]}),
    ("continue_final_message", {"input": [{**user("u"), "status": "in_progress"}]}),
    ("template_kwargs", {"chat_template_kwargs": {"enable_thinking": None}}),
    ("template_kwargs", {"chat_template_kwargs": {"mode": "auto"}}),
    ("non_text_content", {"input": [{"type": "message", "role": "user", "content": [IMAGE]}]}),
    ("non_text_content", {"input": [fcall(), fout([{"type": "input_file", "file_id": "f"}])]}),
    (
        "invalid_request",
        {"tools": [{"type": "custom", "name": "p", "format": {"type": "grammar", "syntax": "x"}}]},
    ),
    ("unsupported_item", {"tools": [{"type": "custom", "name": "p", "defer_loading": True}]}),
    ("unsupported_item", {"tools": [{"type": "web_search"}]}),
    ("unsupported_item", {"tools": [{"type": "mcp", "server_label": "x"}]}),
    ("unsupported_item", {"tools": [{"type": "namespace", "name": "ns", "tools": []}]}),
    ("unsupported_item", {"tools": [{**SHELL, "strict": "true"}]}),
    ("unsupported_item", {"tools": [{**SHELL, "output_schema": {}}]}),
    ("invalid_request", {"input": [{"type": "custom_tool_call", "call_id": "c", "name": "p"}]}),
    (
        "unsupported_item",
        {"input": [{"type": "custom_tool_call_output", "call_id": "c", "output": [IMAGE]}]},
    ),
    ("unsupported_item", {"input": [{"type": "item_reference", "id": "msg_1"}]}),
    ("unsupported_item", {"input": [{**fcall(), "namespace": "ns"}]}),
    ("unsupported_item", {"input": [{**user("u"), "name": "bob"}]}),
    (
        "unsupported_item",
        {
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "u", "prompt_cache_breakpoint": {}}],
                }
            ]
        },
    ),
    (
        "unsupported_item",
        {
            "input": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "refusal", "refusal": "no"}],
                }
            ]
        },
    ),
    ("unsupported_item", {"input": [{"type": "message", "role": "assistant", "content": []}]}),
    ("unsupported_item", {"input": [{"type": "message", "role": "tool", "content": "x"}]}),
    ("unsupported_item", {"input": [{"type": "reasoning", "content": []}]}),  # no summary
    ("invalid_request", {"input": []}),  # vLLM: "Cannot apply chat template to an empty …"
    ("unsupported_item", {"tools": [SHELL], "tool_choice": {"type": "allowed_tools"}}),
    ("invalid_request", {"input": [{**thought(), "encrypted_content": "gAAAAB"}]}),
    ("invalid_request", {"prompt": {"id": "pmpt_1"}}),
    ("invalid_request", {"tool_choice": "required"}),
    ("invalid_request", {"tool_choice": {"type": "function", "name": "shell"}}),
    ("invalid_request", {"tools": [SHELL], "tool_choice": {"type": "function", "name": "nope"}}),
    ("invalid_request", {"reasoning": {"effort": "extreme"}}),
    ("invalid_request", {"instructions": ["not", "text"]}),
    ("invalid_request", {"input": None}),
    ("invalid_request", {"input": [fcall(arguments={"a": 1})]}),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("reason", "body"), PASS_CASES, ids=[r for r, _ in PASS_CASES])
def test_pass_through_reasons(reason: str, body: dict[str, Any]) -> None:
    assert reason_of(**copy.deepcopy(body)) == reason


def test_a_message_in_progress_before_the_last_item_is_converted() -> None:
    out = messages(said("A", status="incomplete"), user("u"))
    assert out[0] == {"role": "assistant", "content": "A"}


def test_a_function_call_in_progress_last_does_not_continue_the_message() -> None:
    assert messages({**fcall(), "status": "in_progress"})[0]["tool_calls"]


def test_an_empty_encrypted_content_is_no_encrypted_content() -> None:
    assert messages({**thought("s"), "encrypted_content": ""}) == [
        {"role": "assistant", "reasoning": "s"}
    ]


def test_chat_level_pass_throughs_still_apply_after_conversion() -> None:
    body = {"input": "hi", "chat_template_kwargs": {"chat_template": "{{ x }}"}}
    with pytest.raises(PassThrough) as exc:
        prepare_responses(body, TINY)
    assert exc.value.reason == "request_chat_template"


def test_a_non_object_body_is_invalid() -> None:
    with pytest.raises(PassThrough) as exc:
        responses_to_chat([])  # type: ignore[arg-type]
    assert exc.value.reason == "invalid_request"


# -- fuzzing --------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_keys = st.sampled_from(
    [
        "type",
        "role",
        "content",
        "call_id",
        "name",
        "arguments",
        "output",
        "summary",
        "status",
        "text",
        "encrypted_content",
        "id",
        "phase",
    ]
)
_values = (
    st.sampled_from(
        [
            "message",
            "user",
            "assistant",
            "developer",
            "function_call",
            "function_call_output",
            "reasoning",
            "input_text",
            "output_text",
            "summary_text",
            "in_progress",
            "c1",
        ]
    )
    | _json
)
_item = st.dictionaries(_keys, _values, max_size=6)
_any_body = st.fixed_dictionaries(
    {"input": st.text(max_size=3) | st.lists(_item | _json, max_size=5)},
    optional={
        "tools": st.lists(st.dictionaries(st.sampled_from(["type", "name", "strict"]), _values)),
        "tool_choice": _values,
        "reasoning": _json,
        "instructions": _json,
        "chat_template_kwargs": _json,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_any_body)
def test_any_body_converts_or_passes_through_and_is_left_unchanged(body: dict[str, Any]) -> None:
    before = json.dumps(body, sort_keys=True)
    try:
        chat = responses_to_chat(body)
    except PassThrough:
        pass
    else:
        assert chat["messages"]
        assert all(
            m["role"] in ("system", "developer", "user", "assistant", "tool")
            for m in chat["messages"]
        )
    assert json.dumps(body, sort_keys=True) == before


_codex_item = st.one_of(
    st.builds(user, st.text(max_size=4)),
    st.builds(said, st.text(max_size=4)),
    st.builds(thought, st.none() | st.text(max_size=4), st.none() | st.text(max_size=4)),
    st.builds(fcall, st.sampled_from(["c1", "c2", "c3"]), st.sampled_from(["{}", '{"a": 1}', ""])),
    st.builds(fout, st.text(max_size=4), st.sampled_from(["c1", "c2", "c3"])),
)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(_codex_item, min_size=1, max_size=10))
def test_codex_items_keep_their_order_and_count(items: list[dict[str, Any]]) -> None:
    out = messages(*items)
    calls = [c["id"] for m in out for c in m.get("tool_calls", [])]
    assert calls == [i["call_id"] for i in items if i["type"] == "function_call"]
    tools = [m["content"] for m in out if m["role"] == "tool"]
    assert tools == [i["output"] for i in items if i["type"] == "function_call_output"]
    users = [m for m in out if m["role"] == "user"]
    assert len(users) == sum(i.get("role") == "user" for i in items)
    # Each assistant item lands in exactly one assistant message: never more messages.
    assistant_items = [
        i for i in items if i["type"] != "function_call_output" and i.get("role") != "user"
    ]
    assert sum(m["role"] == "assistant" for m in out) <= len(assistant_items)


def test_freeform_custom_tools_and_calls_are_vllms_one_string_function() -> None:
    """Written out from vLLM's ``custom_tool_as_function_dict`` / ``custom_tool_parameters``
    and ``encode_custom_tool_input`` (``json.dumps({"input": …}, ensure_ascii=False)``)."""
    body = {
        "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files."}],
        "input": [
            {"type": "message", "role": "user", "content": "fix it"},
            {
                "type": "custom_tool_call",
                "call_id": "call_1",
                "name": "apply_patch",
                "input": "*** Begin Patch\n+ü\n*** End Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "Done!"},
        ],
    }
    chat = responses_to_chat(body)
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "apply_patch",
                "description": "Edit files.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "input": {
                            "type": "string",
                            "description": "The freeform text payload for this tool.",
                        }
                    },
                    "required": ["input"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    assert chat["messages"][1:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "apply_patch",
                        "arguments": '{"input": "*** Begin Patch\\n+ü\\n*** End Patch"}',
                    },
                }
            ],
        },
        {"role": "tool", "content": "Done!", "tool_call_id": "call_1"},
    ]

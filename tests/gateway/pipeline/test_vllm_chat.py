"""vLLM 0.32's chat preprocessing stage: each rewrite rule, each pass-through reason, fuzzed.

Expected values were checked against vLLM 0.32's own request model and renderer; the e2e
tier (``tests/e2e/test_vllm_rendering.py``) compares against the live server.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ttftscope.gateway.pipeline.passthrough import ChatPassReason, PassReason, PassThrough
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs, prepare_chat
from ttftscope.tokenization.chat import ChatRenderer

TINY = (
    resources.files("ttftscope")
    .joinpath("localserver/data/chat_template.jinja")
    .read_text(encoding="utf-8")
    .removesuffix("\n")
)
# Loops over message content: vLLM passes content as parts ("openai" format) to such templates.
OPENAI = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
)
DEVELOPER = "{# 'developer' is a role of its own here #}" + OPENAI
USER = {"role": "user", "content": "hi"}


def prep(template: str = TINY, **body: Any) -> ChatInputs:
    body.setdefault("messages", [USER])
    return prepare_chat(body, template)


def reason_of(template: str = TINY, **body: Any) -> str:
    with pytest.raises(PassThrough) as exc:
        prep(template, **body)
    return exc.value.reason


def call(arguments: str = "{}", **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": arguments},
        **extra,
    }


# -- tools -------------------------------------------------------------------------------


def test_tools_are_dumped_in_fixed_order_with_nulls_and_without_unknown_keys() -> None:
    tools = [{"function": {"junk": 1, "parameters": {"type": "object"}, "name": "g"}, "x": 2}]
    assert prep(tools=tools).tools == [
        {
            "type": "function",
            "function": {"name": "g", "description": None, "parameters": {"type": "object"}},
        }
    ]


def test_strict_appears_only_when_set_and_defer_loading_is_copied_into_the_function() -> None:
    tools = [
        {"type": "function", "function": {"name": "a", "strict": False}, "defer_loading": True},
        {"type": "function", "function": {"name": "b", "defer_loading": False, "strict": None}},
    ]
    a, b = prep(tools=tools).tools or []
    assert a == {
        "type": "function",
        "function": {
            "name": "a",
            "description": None,
            "parameters": None,
            "strict": False,
            "defer_loading": True,
        },
        "defer_loading": True,
    }
    assert b["function"] == {
        "name": "b",
        "description": None,
        "parameters": None,
        "defer_loading": False,
    }


@pytest.mark.parametrize("choice", [None, "none", "auto", "required"])
def test_tool_choice_never_changes_the_inputs(choice: str | None) -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert prep(tools=tools, tool_choice=choice) == prep(tools=tools)


def test_a_named_tool_choice_must_name_a_given_tool() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    named = {"type": "function", "function": {"name": "f"}}
    assert prep(tools=tools, tool_choice=named).tools == prep(tools=tools).tools
    wrong = {"type": "function", "function": {"name": "g"}}
    assert reason_of(tools=tools, tool_choice=wrong) == "invalid_request"
    assert reason_of(tool_choice="auto") == "invalid_request"


# -- assistant tool calls ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "parsed"),
    [
        ('{"b": 2, "a": [1, 2.50]}', {"b": 2, "a": [1, 2.5]}),
        (' {"y": "ü"} ', {"y": "ü"}),
        ("", {}),
        ("null", {}),
        ("[1]", {}),
        ("5", {}),
        ('"s"', {}),
        ("{bad", {}),
        ('{"a": 1, "a": 2}', {"a": 2}),
    ],
)
def test_arguments_become_an_object_or_empty(arguments: str, parsed: dict[str, Any]) -> None:
    msg = {"role": "assistant", "content": None, "tool_calls": [call(arguments)]}
    (out,) = prep(messages=[msg]).messages
    assert out["tool_calls"][0]["function"]["arguments"] == parsed


def test_tool_calls_keep_extras_in_vllm_key_order() -> None:
    raw = {
        "extra0": 1,
        "function": {"zz": 2, "name": "f", "arguments": "{}"},
        "type": "function",
        "id": "c1",
        "index": 0,
    }
    msg = {"role": "assistant", "content": "x", "tool_calls": [raw]}
    (got,) = prep(messages=[msg]).messages[0]["tool_calls"]
    assert json.dumps(got) == json.dumps(
        {
            "id": "c1",
            "function": {"arguments": {}, "name": "f", "zz": 2},
            "type": "function",
            "extra0": 1,
            "index": 0,
        }
    )


@pytest.mark.parametrize("calls", [[], None])
def test_empty_or_null_tool_calls_are_dropped(calls: list[Any] | None) -> None:
    msg = {"role": "assistant", "content": "x", "tool_calls": calls}
    assert prep(messages=[msg]).messages == [{"role": "assistant", "content": "x"}]


def test_tool_calls_on_other_roles_are_ignored() -> None:
    msg = {**USER, "tool_calls": [call()]}
    assert prep(messages=[msg]).messages == [USER]


# -- message fields ----------------------------------------------------------------------


def test_reasoning_content_is_renamed_and_reasoning_wins() -> None:
    msgs = [
        {"role": "assistant", "content": "a", "reasoning_content": "old"},
        {"role": "assistant", "content": "b", "reasoning_content": "old", "reasoning": "new"},
        {"role": "assistant", "content": "c", "reasoning_content": "old", "reasoning": None},
        {"role": "user", "content": "d", "reasoning_content": "dropped", "reasoning": "too"},
    ]
    got = prep(messages=msgs).messages
    assert [(m.get("reasoning"), m.get("reasoning_content")) for m in got] == [
        ("old", "old"),
        ("new", "new"),
        ("old", "old"),
        (None, None),
    ]


def test_messages_keep_only_known_fields_in_a_fixed_order() -> None:
    msgs = [
        {"name": "n", "content": "r", "role": "tool", "tool_call_id": "c1", "junk": 1},
        {"role": "user", "content": "u", "task": "t", "tool_call_id": "x", "name": "bob"},
        {"role": "user", "content": "v", "task": 3},
        {"role": "tool", "content": "w", "tool_call_id": None, "name": 5},
    ]
    got = prep(messages=msgs).messages
    assert [list(m) for m in got] == [
        ["role", "content", "tool_call_id", "name"],
        ["role", "content", "name", "task"],
        ["role", "content"],
        ["role", "content", "tool_call_id"],
    ]


def test_null_or_missing_content_is_empty() -> None:
    msgs = [{"role": "assistant", "content": None}, {"role": "user"}, {"role": "tool"}]
    assert [m["content"] for m in prep(messages=msgs).messages] == ["", "", ""]
    assert [m["content"] for m in prep(OPENAI, messages=msgs).messages] == [[], [], ""]


def test_text_parts_are_joined_by_newlines_and_empty_parts_skipped_in_string_format() -> None:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]
    parts.append({"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}})
    msgs = [{"role": "user", "content": parts}, {"role": "tool", "content": parts}]
    assert [m["content"] for m in prep(messages=msgs).messages] == ["a\nb", "a\nb"]


def test_openai_format_keeps_parts_and_their_extras_but_joins_tool_results() -> None:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]
    parts.append({"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}})
    msgs = [{"role": "user", "content": parts}, {"role": "tool", "content": parts}, USER]
    got = [m["content"] for m in prep(OPENAI, messages=msgs).messages]
    assert got == [parts, "a\n\nb", [{"type": "text", "text": "hi"}]]


@pytest.mark.parametrize(
    ("content", "string", "openai"),
    [
        ("x-anthropic-billing-header: cch=1;\nBe brief.", "Be brief.", ["Be brief."]),
        ("x-anthropic-billing-header: cch=1;", "", []),
        ("x-anthropic-billing-header: a\nb\nc", "b\nc", ["b\nc"]),
        ("Be x-anthropic-billing-header", "Be x-anthropic-billing-header", None),
        (
            [
                {"type": "text", "text": "x-anthropic-billing-header: q\nA", "cache_control": {}},
                {"type": "text", "text": "B"},
            ],
            "A\nB",
            ["A", "B"],
        ),
    ],
)
def test_billing_header_line_leaves_system_text(
    content: Any, string: str, openai: list[str] | None
) -> None:
    msgs = [{"role": "system", "content": content}, USER]
    assert prep(messages=msgs).messages[0]["content"] == string
    if openai is not None:
        parts = prep(OPENAI, messages=msgs).messages[0]["content"]
        assert [p["text"] for p in parts] == openai


def test_billing_header_stays_in_user_and_developer_text() -> None:
    text = "x-anthropic-billing-header: q\nA"
    msgs = [{"role": "developer", "content": text}, {"role": "user", "content": text}]
    assert [m["content"] for m in prep(messages=msgs).messages] == [text, text]


# -- developer and system ----------------------------------------------------------------


def test_a_lone_first_developer_becomes_system_in_place() -> None:
    msgs = [{"role": "developer", "content": "d", "name": "x", "tools": None}, USER]
    assert prep(messages=msgs).messages == [
        {"role": "system", "content": "d", "name": "x"},
        USER,
    ]


def test_developer_and_system_messages_merge_at_the_front() -> None:
    msgs = [
        USER,
        {"role": "system", "content": "s1", "name": "dropped"},
        {"role": "developer", "content": "d1"},
        {"role": "system", "content": ""},
    ]
    assert prep(messages=msgs).messages == [{"role": "system", "content": "s1\n\nd1"}, USER]


def test_merged_parts_are_joined_by_newlines_even_in_openai_format() -> None:
    parts = [{"type": "text", "text": "d1"}, {"type": "text", "text": "d2"}]
    msgs = [{"role": "system", "content": "s"}, {"role": "developer", "content": parts}, USER]
    assert prep(OPENAI, messages=msgs).messages[0] == {"role": "system", "content": "s\n\nd1\nd2"}


def test_several_system_messages_without_developer_are_left_alone() -> None:
    msgs = [{"role": "system", "content": "a"}, USER, {"role": "system", "content": "b"}]
    assert prep(messages=msgs).messages == msgs


def test_a_template_naming_developer_gets_developer_messages() -> None:
    msgs = [USER, {"role": "developer", "content": "d"}]
    assert prep(DEVELOPER, messages=msgs).messages == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "developer", "content": [{"type": "text", "text": "d"}], "tools": None},
    ]


# -- template kwargs ---------------------------------------------------------------------


AGP = {"add_generation_prompt": True}
DOCS = [{"title": "T", "text": "x"}]


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({}, AGP),
        ({"add_generation_prompt": False}, {"add_generation_prompt": False}),
        ({"chat_template_kwargs": {"add_generation_prompt": False}}, AGP),  # top level wins
        ({"reasoning_effort": "none"}, AGP | {"enable_thinking": False}),
        ({"reasoning_effort": "low"}, AGP | {"enable_thinking": True}),
        (
            {"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": True}},
            AGP | {"enable_thinking": True},
        ),
        ({"reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": None}}, AGP),
        ({"chat_template_kwargs": {"enable_thinking": False}}, AGP | {"enable_thinking": False}),
        ({"chat_template_kwargs": {"enable_thinking": "auto"}}, AGP),
        ({"chat_template_kwargs": {"unused": 1, "max_length": 3}}, AGP),
        ({"chat_template_kwargs": {"continue_final_message": True}}, AGP),
        ({"documents": DOCS}, AGP | {"documents": DOCS}),
        ({"chat_template_kwargs": {"documents": [{"t": 1}]}}, AGP | {"documents": [{"t": 1}]}),
        ({"documents": DOCS, "chat_template_kwargs": {"documents": []}}, AGP | {"documents": DOCS}),
    ],
)
def test_template_kwargs_resolution(body: dict[str, Any], want: dict[str, Any]) -> None:
    assert prep(**body).template_kwargs == want


def test_only_variables_the_template_reads_are_kept() -> None:
    source = "{{ messages[0].content }}{{ flavour }}"
    kwargs = {"flavour": "x", "enable_thinking": False, "reasoning_effort": "y"}
    got = prep(source, chat_template_kwargs=kwargs, reasoning_effort="high").template_kwargs
    assert got == {"add_generation_prompt": True, "flavour": "x"}


# -- pass-through ------------------------------------------------------------------------

PASS_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("invalid_request", {"messages": []}, TINY),
    ("invalid_request", {"messages": [{"role": "user", "content": None}]}, TINY),
    ("invalid_request", {"tools": []}, TINY),
    ("invalid_request", {"messages": [{"role": "user", "content": "x", "name": 5}]}, TINY),
    ("invalid_request", {"reasoning_effort": "bogus"}, TINY),
    ("invalid_request", {"documents": [{"title": 1}]}, TINY),
    ("invalid_request", {"chat_template_kwargs": {"documents": "abc"}}, TINY),
    (
        "invalid_request",
        {"messages": [{"role": "assistant", "tool_calls": [call(function={"name": "f"})]}]},
        TINY,
    ),
    ("kv_transfer_params", {"kv_transfer_params": {"do_remote_decode": True}}, TINY),
    ("echo", {"echo": True}, TINY),
    ("request_chat_template", {"chat_template": "{{ 1 }}"}, TINY),
    ("request_chat_template", {"chat_template_kwargs": {"chat_template": "x"}}, TINY),
    ("continue_final_message", {"continue_final_message": True}, TINY),
    ("add_special_tokens", {"add_special_tokens": True}, TINY),
    ("truncate_prompt_tokens", {"truncate_prompt_tokens": 10}, TINY),
    ("return_prompt_text", {"return_prompt_text": True}, TINY),
    (
        "non_text_content",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        TINY,
    ),
    ("unsupported_content", {"messages": [{"role": "user", "content": ["plain"]}]}, TINY),
    ("unsupported_content", {"messages": [{"role": "user", "content": [{"text": "x"}]}]}, TINY),
    (
        "unsupported_content",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "uuid": "u"}]}]},
        TINY,
    ),
    (
        "unsupported_content",
        {"messages": [{"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]},
        TINY,
    ),
    ("unsupported_role", {"messages": [{"role": "critic", "content": "x"}]}, TINY),
    (
        "unsupported_message",
        {"messages": [{"role": "assistant", "content": "x", "reasoning": 5}]},
        TINY,
    ),
    (
        "unsupported_message",
        {"messages": [{"role": "developer", "content": "d", "tools": [{"function": {}}]}]},
        DEVELOPER,
    ),
    ("unsupported_tool", {"tools": [{"type": "custom", "function": {"name": "f"}}]}, TINY),
    ("unsupported_tool", {"tools": [{"function": {"name": "f", "strict": "true"}}]}, TINY),
    (
        "unsupported_tool_call",
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "type": "custom"}]}]},
        TINY,
    ),
    ("unsupported_value", {"add_generation_prompt": "true"}, TINY),
    ("template_kwargs", {"chat_template_kwargs": {"tokenize": True}}, TINY),
    ("template_kwargs", {"chat_template_kwargs": {"tools": [{"name": "raw"}]}}, TINY),
    ("template_kwargs", {"chat_template_kwargs": {"messages": []}}, TINY),
    ("template_kwargs", {"chat_template_kwargs": {"return_assistant_tokens_mask": True}}, TINY),
    ("content_format", {}, "{% macro m(c) %}{% for p in c %}{% endfor %}{% endmacro %}"),
    ("content_format", {}, "{% for m in msgs %}{% for p in m.content %}{% endfor %}{% endfor %}"),
    ("template", {}, "{% for %}"),
    ("template", {}, "{{ pad_token }}{{ messages }}"),
    (
        "template",
        {"messages": [{"role": "assistant", "content": "x", "reasoning": "r"}]},
        "{% for m in messages %}{{ m | tojson }}{% endfor %}",
    ),
    (
        "template",
        {"messages": [{"role": "assistant", "content": "x", "reasoning": "r"}]},
        "{% for m in messages %}{{ m.thinking }}{% endfor %}",
    ),
]


@pytest.mark.parametrize(("reason", "body", "template"), PASS_CASES)
def test_pass_through_reason(reason: str, body: dict[str, Any], template: str) -> None:
    assert reason_of(template, **body) == reason


def test_every_pass_reason_has_a_case() -> None:
    assert {reason for reason, _, _ in PASS_CASES} == set(get_args(ChatPassReason))


def test_pass_through_carries_reason_and_detail() -> None:
    with pytest.raises(PassThrough) as exc:
        prep(echo=True)
    assert (exc.value.reason, exc.value.detail) == ("echo", "echo=True")
    assert str(exc.value) == "echo: echo=True"


@pytest.mark.parametrize(
    ("flag", "value"),
    [("echo", False), ("kv_transfer_params", None), ("return_prompt_text", False)],
)
def test_neutral_flag_values_do_not_pass_through(flag: str, value: Any) -> None:
    assert prep(**{flag: value}) == prep()


@pytest.mark.parametrize(
    "template",
    [
        "{% for m in messages %}{% for p in m['content'] | list %}{% endfor %}{% endfor %}",
        "{% for m in messages[1:] %}{% for p in m.content %}{% endfor %}{% endfor %}",
        "{% for p in content %}{% endfor %}{{ messages }}",
    ],
)
def test_templates_looping_over_content_get_openai_format(template: str) -> None:
    assert prep(template).messages == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


@pytest.mark.parametrize(
    "template",
    [
        "{% for m in messages %}{% for k, v in m.items() %}{{ k }}{% endfor %}{% endfor %}",
        "{{ messages[0] | tojson }}",
        "{% for m in messages %}{{ loop.previtem | string }}{% endfor %}",
        "{% for m in messages %}{{ m }}{% endfor %}",
        "{% for m in messages %}{{ m.get('thinking') }}{% endfor %}",
    ],
)
def test_templates_that_could_see_the_thinking_alias_pass_reasoning_through(template: str) -> None:
    msgs = [{"role": "assistant", "content": "a", "reasoning": "r"}]
    assert reason_of(template, messages=msgs) == "template"
    assert prep(template).messages == [USER]  # without reasoning nothing differs


# -- rendering with the tiny model's template --------------------------------------------


def test_tool_conversation_renders_as_vllm_does() -> None:
    body = {
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "look it up",
                "tool_calls": [call('{"city": "Paris"}'), call("not json")],
            },
            {"role": "tool", "content": "12 C", "tool_call_id": "c1"},
            {"role": "tool", "content": [{"type": "text", "text": "n/a"}], "tool_call_id": "c1"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "junk": True}}],
        "reasoning_effort": "none",
    }
    i = prepare_chat(body, TINY)
    text = ChatRenderer(None, TINY).render(i.messages, tools=i.tools, **i.template_kwargs)
    assert text == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou can call the functions whose JSON "
        "signatures are listed in <tools></tools>:\n<tools>\n"
        '{"type": "function", "function": {"name": "f", "description": null, "parameters": null}}'
        "\n</tools>\n\nTo call one, answer with a JSON object per call inside "
        '<tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        "<arguments-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nweather?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nlook it up\n</think>\n\n"
        '<tool_call>\n{"name": "f", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n12 C\n</tool_response>\n"
        "<tool_response>\nn/a\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


# -- fuzz --------------------------------------------------------------------------------

_text = st.sampled_from(["", "hi", "a\nb", "x-anthropic-billing-header: c\nz", "<tool_call>"])
_args = st.sampled_from(["", "{}", '{"a": [1, 2.5]}', "[1]", "null", "{bad", '"s"', " {} "])
_part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
    st.fixed_dictionaries({"type": st.sampled_from(["refusal", "image_url"])}),
    st.just("plain"),
)
_content = st.one_of(st.none(), _text, st.lists(_part, max_size=3), st.integers())
_function = st.fixed_dictionaries(
    {"name": _text, "arguments": st.one_of(_args, st.just({"a": 1}))},
    optional={"extra": st.integers()},
)
_call = st.fixed_dictionaries(
    {"id": st.sampled_from(["c1", 2]), "function": _function},
    optional={"type": st.sampled_from(["function", "custom"]), "index": st.integers(0, 2)},
)
_message: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "critic"])},
    optional={
        "content": _content,
        "tool_calls": st.one_of(st.none(), st.lists(_call, max_size=2)),
        "reasoning_content": st.one_of(st.none(), _text, st.integers()),
        "tool_call_id": st.one_of(st.none(), _text, st.integers()),
        "name": st.one_of(_text, st.integers()),
    },
)
_tool: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"function": st.fixed_dictionaries({"name": _text}, optional={"parameters": st.just({})})},
    optional={"type": st.sampled_from(["function", "custom"])},
)
_body: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"messages": st.lists(_message, max_size=5)},
    optional={
        "tools": st.lists(_tool, max_size=2),
        "tool_choice": st.sampled_from([None, "auto", "none", "required", "bogus"]),
        "reasoning_effort": st.sampled_from([None, "none", "high", "bogus"]),
        "chat_template_kwargs": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["enable_thinking", "tools", "x"]), _text)
        ),
        "add_generation_prompt": st.sampled_from([True, False, "yes"]),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_body, template=st.sampled_from([TINY, OPENAI, DEVELOPER]))
def test_fuzzed_tool_conversations_pass_through_or_render(
    body: dict[str, Any], template: str
) -> None:
    before = copy.deepcopy(body)
    try:
        first = prepare_chat(body, template)
    except PassThrough as exc:
        event(f"pass through: {exc.reason}")
        assert exc.reason in get_args(PassReason)
        with pytest.raises(PassThrough) as again:
            prepare_chat(body, template)
        assert again.value.reason == exc.reason  # deterministic
    else:
        event("accepted")
        assert prepare_chat(body, template) == first  # deterministic
        if template == TINY:  # the tiny model's template renders every accepted request
            ChatRenderer(None, TINY).render(
                first.messages, tools=first.tools, **first.template_kwargs
            )
    assert body == before  # the body is never changed

"""The fixed corpus the start-up check renders: one body per (API, shape class).

Each body has its class's feature and nothing more than a plain conversation around it, so
a mismatch names the class that caused it. ``model`` is filled in by the check.
:func:`shape_classes` of each body holds its own class (a unit test keeps them in step).

>>> from ttftscope.gateway.pipeline.shapes import SHAPES
>>> all(set(CORPUS[api]) == set(SHAPES[api]) for api in SHAPES)
True
"""

from __future__ import annotations

from typing import Any

import orjson

from ttftscope.gateway.pipeline.shapes import NativeApi

__all__ = ["CORPUS", "corpus_body"]

_Q = "Which file defines the parser?"
_A = "The parser lives in src/parse.py."
_FN = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
_IMG = "data:image/png;base64,iVBORw0KGgo="


def _call(i: int) -> dict[str, Any]:
    args = '{"path": "src/m' + str(i) + '.py"}'
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "read_file", "arguments": args},
    }


def _chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messages": [*messages], "max_tokens": 16, **extra}


_U = {"role": "user", "content": _Q}
_CHAT: dict[str, dict[str, Any]] = {
    "plain": _chat(
        _U, {"role": "assistant", "content": _A}, {"role": "user", "content": "Thanks."}
    ),
    "system_developer": _chat(
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": "Answer in one line."},
        _U,
    ),
    "tools": _chat(_U, tools=[_FN]),
    "tools_empty": _chat(_U, tools=[]),
    "tool_results": _chat(
        _U,
        {"role": "assistant", "content": None, "tool_calls": [_call(1)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def parse(): ..."},
        tools=[_FN],
    ),
    "parallel_calls": _chat(
        _U,
        {"role": "assistant", "content": None, "tool_calls": [_call(1), _call(2)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "tool", "tool_call_id": "call_2", "content": "two"},
        tools=[_FN],
    ),
    "reasoning_history": _chat(
        _U,
        {"role": "assistant", "content": _A, "reasoning": "Look in src first."},
        {"role": "user", "content": "And the tests?"},
    ),
    "image": _chat(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is shown?"},
                {"type": "image_url", "image_url": {"url": _IMG}},
            ],
        }
    ),
    "non_ascii": _chat({"role": "user", "content": "Grüße — 日本語のテスト 🚀 naïve café"}),
    "reasoning_effort": _chat(_U, reasoning_effort="low"),
}


def _msg(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"messages": [*messages], "max_tokens": 16, **extra}


_MU = {"role": "user", "content": _Q}
_USE = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
_USE2 = {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.py"}}
_ATOOL = {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}}


def _result(tool_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


_MESSAGES: dict[str, dict[str, Any]] = {
    "plain": _msg(_MU, {"role": "assistant", "content": _A}, {"role": "user", "content": "Ok."}),
    "system_developer": _msg(_MU, system=[{"type": "text", "text": "You are terse."}]),
    "tools": _msg(_MU, tools=[_ATOOL]),
    "tools_empty": _msg(_MU, tools=[]),
    "tool_results": _msg(
        _MU,
        {"role": "assistant", "content": [_USE]},
        {"role": "user", "content": [_result("toolu_1", "def parse(): ...")]},
        tools=[_ATOOL],
    ),
    "parallel_calls": _msg(
        _MU,
        {"role": "assistant", "content": [_USE, _USE2]},
        {"role": "user", "content": [_result("toolu_1", "one"), _result("toolu_2", "two")]},
        tools=[_ATOOL],
    ),
    "reasoning_history": _msg(
        _MU,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look in src first.", "signature": "s"},
                {"type": "text", "text": _A},
            ],
        },
        {"role": "user", "content": "And the tests?"},
    ),
    "image": _msg(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is shown?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        }
    ),
    "non_ascii": _msg({"role": "user", "content": "Grüße — 日本語のテスト 🚀 naïve café"}),
    "reasoning_effort": _msg(_MU, output_config={"effort": "low"}),
    "thinking_disabled": _msg(_MU, thinking={"type": "disabled"}),
    "thinking_adaptive": _msg(_MU, thinking={"type": "adaptive"}),
    "thinking_between_tools": _msg(_MU, thinking={"type": "between_tools"}),
    "tool_reference": _msg(
        _MU,
        {"role": "assistant", "content": [_USE]},
        {
            "role": "user",
            "content": [_result("toolu_1", [{"type": "tool_reference", "tool_name": "read_file"}])],
        },
        tools=[_ATOOL],
    ),
}


def _resp(*items: Any, **extra: Any) -> dict[str, Any]:
    return {"input": [*items], "max_output_tokens": 16, "store": False, **extra}


def _item(role: str, text: str) -> dict[str, Any]:
    kind = "input_text" if role != "assistant" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _fcall(i: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"call_{i}", "name": "read_file", "arguments": "{}"}


def _fout(i: int, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call_{i}", "output": text}


_RTOOL = {"type": "function", "name": "read_file", "parameters": {"type": "object"}}
_RU = _item("user", _Q)
_RESPONSES: dict[str, dict[str, Any]] = {
    "plain": _resp(_RU, _item("assistant", _A), _item("user", "Thanks.")),
    "system_developer": _resp(
        _item("developer", "Answer in one line."), _RU, instructions="Be terse."
    ),
    "tools": _resp(_RU, tools=[_RTOOL]),
    "tools_empty": _resp(_RU, tools=[]),
    "tool_results": _resp(_RU, _fcall(1), _fout(1, "def parse(): ..."), tools=[_RTOOL]),
    "parallel_calls": _resp(
        _RU, _fcall(1), _fcall(2), _fout(1, "one"), _fout(2, "two"), tools=[_RTOOL]
    ),
    "reasoning_history": _resp(
        _RU,
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look in src first."}]},
        _item("assistant", _A),
        _item("user", "And the tests?"),
    ),
    "image": _resp(
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is shown?"},
                {"type": "input_image", "image_url": _IMG},
            ],
        }
    ),
    "non_ascii": _resp(_item("user", "Grüße — 日本語のテスト 🚀 naïve café")),
    "reasoning_effort": _resp(_RU, reasoning={"effort": "low"}),
    "untyped_items": _resp({"role": "user", "content": _Q}, {"role": "assistant", "content": _A}),
}
CORPUS: dict[NativeApi, dict[str, dict[str, Any]]] = {
    "chat": _CHAT,
    "messages": _MESSAGES,
    "responses": _RESPONSES,
}


def corpus_body(api: NativeApi, shape: str, model: str) -> dict[str, Any]:
    """The corpus body of ``shape`` on ``api``, for ``model`` (a fresh dict each call).

    >>> corpus_body("chat", "plain", "m")["model"]
    'm'
    """
    fresh: dict[str, Any] = orjson.loads(orjson.dumps(CORPUS[api][shape]))
    fresh["model"] = model
    return fresh

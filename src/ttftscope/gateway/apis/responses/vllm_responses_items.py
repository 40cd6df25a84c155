"""Responses input items as chat messages, as vLLM 0.32-0.34 build them (for ``vllm_responses``).

``entrypoints/openai/responses/utils.py::construct_input_messages``: instructions as a system
message, then each input item as a message of its own or merged into the assistant message
before it (text, tool calls, reasoning). Items whose keys or values vLLM's request models
would treat otherwise raise ``PassThrough``.

>>> responses_messages({"input": "hi"})
[{'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ttftscope.gateway.pipeline.passthrough import PassThrough

__all__ = ["one_of", "responses_messages"]

_STATUSES = frozenset({"in_progress", "completed", "incomplete"})
_PARTIAL = frozenset({"in_progress", "incomplete"})
_MEDIA_PARTS = frozenset({"input_image", "input_file", "input_audio"})
_ROLES = frozenset({"user", "system", "developer"})
# Keys whose values vLLM's request models check: items with other keys are not reproduced.
_ROLE_KEYS = frozenset({"type", "role", "content", "status", "phase", "id"})
_CALL_KEYS = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
_CUSTOM_CALL_KEYS = frozenset({"type", "call_id", "name", "input", "id"})
_OUTPUT_KEYS = frozenset({"type", "call_id", "output", "id", "status"})
_REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})
_OUTPUT_TEXT_KEYS = frozenset({"type", "text", "annotations", "logprobs"})


def one_of(value: Any, names: frozenset[str]) -> bool:
    """``value`` is one of ``names`` (JSON lists and objects are unhashable: never).

    >>> one_of("low", frozenset({"low"})), one_of(["low"], frozenset({"low"}))
    (True, False)
    """
    return isinstance(value, str) and value in names


def responses_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """construct_input_messages: instructions as a system message, then the input.

    >>> responses_messages({"instructions": "Be brief.", "input": [{"type": "reasoning",
    ...     "summary": [{"type": "summary_text", "text": "s"}]}]})
    [{'role': 'system', 'content': 'Be brief.'}, {'role': 'assistant', 'reasoning': 's'}]
    """
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise PassThrough("invalid_request", "instructions is not a string")
    messages = [{"role": "system", "content": instructions}] if instructions else []
    raw = body.get("input")
    if isinstance(raw, str):
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise PassThrough("invalid_request", "input is neither text nor a list of items")
    _check_partial(raw)
    for item in raw:
        _add_item(messages, item)
    if not messages:
        # A 400 at render time ("empty conversation"), which forwarded ids would skip.
        raise PassThrough("invalid_request", "no instructions and no input items")
    return messages


def _check_partial(items: list[Any]) -> None:
    """should_continue_final_message: a last message or reasoning still in progress."""
    last = items[-1] if items else None
    if not isinstance(last, dict) or not one_of(last.get("status"), _PARTIAL):
        return
    if last.get("type", "message") in ("message", "reasoning"):
        raise PassThrough("continue_final_message", f"last item status {last['status']!r}")


def _add_item(messages: list[dict[str, Any]], item: Any) -> None:
    """_construct_message_from_response_item: a new message, or one merged into the last."""
    if not isinstance(item, dict):
        raise PassThrough("invalid_request", "an input item is not an object")
    kind = item.get("type", "message")
    if kind == "message" and item.get("role") == "assistant":
        _merge(messages, "content", _assistant_text(item))
    elif kind == "message":
        messages.append(_role_message(item))
    elif kind == "function_call":
        _merge(messages, "tool_calls", _tool_call(item))
    elif kind == "custom_tool_call":
        _merge(messages, "tool_calls", _custom_call(item))
    elif kind in ("function_call_output", "custom_tool_call_output"):
        messages.append(_tool_message(item))
    elif kind == "reasoning":
        _merge(messages, "reasoning", _reasoning_text(item))
    else:
        raise PassThrough("unsupported_item", f"input item of type {kind!r}")


def _merge(messages: list[dict[str, Any]], key: str, value: Any) -> None:
    """Into the previous assistant message while its ``key`` is unset; tool calls always."""
    prev = messages[-1] if messages and messages[-1]["role"] == "assistant" else None
    if key == "tool_calls":
        if prev is not None:
            prev.setdefault("tool_calls", []).append(value)
        else:
            messages.append({"role": "assistant", "tool_calls": [value]})
    elif prev is not None and prev.get(key) is None:
        prev[key] = value
    else:
        messages.append({"role": "assistant", key: value})


def _check_keys(item: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    if extra := sorted(item.keys() - allowed):
        raise PassThrough("unsupported_item", f"{what} with keys {extra}")
    # Not always a 400 (a message may validate as a type that keeps odd keys): not reproduced.
    if item.get("id") is not None and not isinstance(item["id"], str):
        raise PassThrough("unsupported_item", f"{what} id is not a string")
    if item.get("status") is not None and not one_of(item["status"], _STATUSES):
        raise PassThrough("unsupported_item", f"{what} status {item['status']!r}")


def _role_message(item: dict[str, Any]) -> dict[str, Any]:
    """A user, system or developer item is kept as a chat message (only these keys vLLM reads).

    >>> _role_message({"type": "message", "role": "user",
    ...                "content": [{"type": "input_text", "text": "hi"}]})
    {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}
    """
    _check_keys(item, _ROLE_KEYS, "a message")
    role = item.get("role")
    if not one_of(role, _ROLES):
        raise PassThrough("unsupported_item", f"a message with role {role!r}")
    content = item.get("content")
    if isinstance(content, list):
        return {"role": role, "content": _input_text_parts(content)}
    if not isinstance(content, str):
        raise PassThrough("invalid_request", "message content is neither text nor parts")
    return {"role": role, "content": content}


def _input_text_parts(parts: list[Any]) -> list[dict[str, Any]]:
    """input_text parts as chat text parts: vLLM's chat parser reads them as text parts."""
    out = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if one_of(kind, _MEDIA_PARTS):
            raise PassThrough("non_text_content", f"content part of type {kind!r}")
        if kind != "input_text" or not isinstance(part.get("text"), str):
            raise PassThrough("unsupported_item", f"content part of type {kind!r}")
        if part.keys() != {"type", "text"}:  # other keys would reach openai-format templates
            raise PassThrough("unsupported_item", f"content part keys {sorted(part)}")
        out.append({"type": "text", "text": part["text"]})
    return out


def _assistant_text(item: dict[str, Any]) -> str:
    """Text content as is; of output_text parts only the first one's text (content[0].text).

    >>> _assistant_text({"type": "message", "role": "assistant", "content": [
    ...     {"type": "output_text", "text": "a"}, {"type": "output_text", "text": "b"}]})
    'a'
    """
    _check_keys(item, _ROLE_KEYS, "an assistant message")
    if item.get("phase") not in (None, "commentary", "final_answer"):
        raise PassThrough("unsupported_item", f"phase {item['phase']!r}")
    content = item.get("content")
    if isinstance(content, str):
        return content
    # A list becomes a ResponseOutputMessage only with an explicit type and valid parts.
    if not isinstance(content, list) or not content or "type" not in item:
        raise PassThrough("unsupported_item", "assistant content is not output_text parts")
    for part in content:
        if not (isinstance(part, dict) and part.get("type") == "output_text"):
            raise PassThrough("unsupported_item", "assistant content is not output_text parts")
        plain = part.get("annotations", []) == [] and part.get("logprobs") in (None, [])
        if part.keys() - _OUTPUT_TEXT_KEYS or not plain or not isinstance(part.get("text"), str):
            raise PassThrough("unsupported_item", f"output_text part keys {sorted(part)}")
    text: str = content[0]["text"]
    return text


def _tool_call(item: dict[str, Any]) -> dict[str, Any]:
    """A function_call item as a chat tool call (call_id becomes the id)."""
    _check_keys(item, _CALL_KEYS, "a function_call")
    fields = (item.get("call_id"), item.get("name"), item.get("arguments"))
    if not all(isinstance(f, str) for f in fields):
        raise PassThrough("invalid_request", "a function_call lacks call_id, name or arguments")
    function = {"name": item["name"], "arguments": item["arguments"]}
    return {"id": item["call_id"], "type": "function", "function": function}


def _custom_call(item: dict[str, Any]) -> dict[str, Any]:
    """A freeform (``custom``) tool call as the function call vLLM shows the model: its input
    wrapped as ``{"input": …}`` JSON, non-ASCII kept (``encode_custom_tool_input``).

    >>> _custom_call({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch",
    ...               "input": "*** Begin Patch ü"})["function"]["arguments"]
    '{"input": "*** Begin Patch ü"}'
    """
    _check_keys(item, _CUSTOM_CALL_KEYS, "a custom_tool_call")
    fields = (item.get("call_id"), item.get("name"))
    if not all(isinstance(f, str) for f in fields) or not isinstance(item.get("input"), str):
        raise PassThrough("invalid_request", "a custom_tool_call lacks call_id, name or input")
    arguments = json.dumps({"input": item["input"]}, ensure_ascii=False)
    function = {"name": item["name"], "arguments": arguments}
    return {"id": item["call_id"], "type": "function", "function": function}


def _tool_message(item: dict[str, Any]) -> dict[str, Any]:
    """A function_call_output (or custom_tool_call_output) item as a tool message; a missing
    call_id stays None."""
    _check_keys(item, _OUTPUT_KEYS, f"a {item.get('type')}")
    call_id = item.get("call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise PassThrough("invalid_request", "call_id is not a string")
    output = item.get("output")
    if isinstance(output, list) and item.get("type") == "custom_tool_call_output":
        # vLLM hands the raw list to the chat parser: not reproduced
        raise PassThrough("unsupported_item", "a custom_tool_call_output with parts")
    if isinstance(output, list):
        output = _input_text_parts(output)
    elif not isinstance(output, str):
        raise PassThrough("invalid_request", "output is neither text nor parts")
    return {"role": "tool", "content": output, "tool_call_id": call_id}


def _reasoning_text(item: dict[str, Any]) -> str:
    """The first content text, else the first summary text, else ""; encrypted → 400.

    >>> _reasoning_text({"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]})
    's'
    """
    _check_keys(item, _REASONING_KEYS, "a reasoning item")
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise PassThrough("unsupported_item", "encrypted_content is not a string")
    summary = _reasoning_parts(item.get("summary"), "summary_text")
    content = _reasoning_parts(item.get("content", []), "reasoning_text")
    if encrypted:
        raise PassThrough("invalid_request", "vLLM does not support encrypted reasoning content")
    return content[0] if content else summary[0] if summary else ""


def _reasoning_parts(parts: Any, kind: str) -> list[str]:
    if parts is None and kind == "reasoning_text":
        return []
    if not isinstance(parts, list):
        raise PassThrough("unsupported_item", f"reasoning {kind} is not a list")
    for part in parts:
        ok = isinstance(part, dict) and part.keys() == {"type", "text"}
        if not ok or part["type"] != kind or not isinstance(part["text"], str):
            raise PassThrough("unsupported_item", f"a reasoning part is not plain {kind}")
    return [part["text"] for part in parts]

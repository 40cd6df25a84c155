"""One chat message as vLLM 0.32's parser rebuilds it (for ``vllm_chat.prepare_chat``).

Known fields in a fixed order, content as text or text parts by the template's content
format, tool calls with parsed arguments, Claude Code's billing header left out of system
text, and developer messages made system ones for templates that never name "developer".
What is not reproduced exactly raises :class:`~ttftscope.gateway.pipeline.passthrough.PassThrough`.

>>> info = TemplateInfo(frozenset(), "string", False, False)
>>> chat_message({"role": "user", "content": [{"type": "text", "text": "hi"}]}, info)
{'role': 'user', 'content': 'hi'}
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.template_info import TemplateInfo

__all__ = ["chat_message", "developer_to_system"]

_ROLES = frozenset("system developer user assistant tool".split())
_TEXT_PART_KEYS = frozenset({"type", "text", "cache_control"})  # keys reproduced exactly
_TEXTLIKE = frozenset("text input_text output_text refusal thinking tool_reference".split())
_MEDIA_KEYS = frozenset(
    "image_url input_image image_pil image_embeds audio_url input_audio audio_embeds video_url"
    " video_embeds prompt_embeds".split()
)
_BILLING_HEADER = "x-anthropic-billing-header"
# the extras of a tool_reference part (compared by identity): it stays a part, by name
_REFERENCE: dict[str, Any] = {}


def chat_message(raw: Any, info: TemplateInfo, *, thinking_key: bool = False) -> dict[str, Any]:
    """One message as vLLM's parser rebuilds it: known fields, in a fixed order.

    ``thinking_key``: the server's transformers aliases reasoning as ``thinking``.

    >>> i = TemplateInfo(frozenset(), "string", False, False)
    >>> chat_message({"role": "assistant", "content": None, "reasoning_content": "r", "x": 1}, i)
    {'role': 'assistant', 'content': '', 'reasoning': 'r', 'reasoning_content': 'r'}
    """
    role = raw.get("role") if isinstance(raw, dict) else None
    if not isinstance(role, str):
        raise PassThrough("invalid_request", "a message has no role")
    if role not in _ROLES:
        raise PassThrough("unsupported_role", f"role {role!r}")
    out: dict[str, Any] = {"role": role, "content": _content(role, raw, info)}
    if role == "assistant":
        calls = raw.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise PassThrough("invalid_request", "tool_calls is not a list")
        if calls:  # an empty list is dropped, so templates take the plain assistant path
            out["tool_calls"] = [_tool_call(c) for c in calls]
        reasoning = _reasoning(raw)
        if reasoning is not None:
            out["reasoning"] = out["reasoning_content"] = reasoning
            # ChatRenderer also exposes it as "thinking", as transformers 5.21+ does: vLLM's
            # templates see it only where the profile says so (``assistant_thinking_key``)
            if info.reads_thinking and not thinking_key:
                raise PassThrough("template", "the template reads message.thinking")
    elif role == "tool" and "tool_call_id" in raw:
        if not (raw["tool_call_id"] is None or isinstance(raw["tool_call_id"], str)):
            raise PassThrough("invalid_request", "tool_call_id is not a string")
        out["tool_call_id"] = raw["tool_call_id"]
    if isinstance(raw.get("name"), str):
        out["name"] = raw["name"]
    elif "name" in raw and role != "tool":  # a tool message's odd name is just dropped
        raise PassThrough("invalid_request", "name is not a string")
    if isinstance(raw.get("task"), str):
        out["task"] = raw["task"]
    if role == "developer":
        if raw.get("tools") is not None and info.supports_developer:
            raise PassThrough("unsupported_message", "developer tools reach the template")
        out["tools"] = None
    return out


def _reasoning(raw: Mapping[str, Any]) -> str | None:
    # reasoning_content is the old name of reasoning; reasoning wins when both are given.
    value = raw.get("reasoning")
    value = raw.get("reasoning_content") if value is None else value
    if value is not None and not isinstance(value, str):
        raise PassThrough("unsupported_message", "reasoning is not a string")
    return value


def _content(role: str, raw: Mapping[str, Any], info: TemplateInfo) -> str | list[dict[str, Any]]:
    """Text parts joined by newlines ("string" format) or as text parts ("openai" format)."""
    content = raw.get("content")
    if content is None and "content" in raw and role != "assistant":
        raise PassThrough("invalid_request", f"a {role} message has null content")
    if content is None:
        parts: list[tuple[str, dict[str, Any]]] = []
    elif isinstance(content, str):
        parts = [(content, {})]
    elif isinstance(content, list):
        parts = [_text_part(p) for p in content]
    else:
        raise PassThrough("invalid_request", "content is neither text nor a list of parts")
    if role == "system":
        parts = list(_strip_billing_header(parts))
    if info.content_format == "string":  # empty texts are skipped in this format only
        return "\n".join(text for text, _ in parts if text)
    refs = any(extras is _REFERENCE for _, extras in parts)
    if role == "tool" and not refs:  # a tool's text parts become one string…
        return "\n".join(text for text, _ in parts)
    return [_part_dict(text, extras) for text, extras in parts]  # …its references stay parts


def _part_dict(text: str, extras: dict[str, Any]) -> dict[str, Any]:
    if extras is _REFERENCE:
        return {"type": "tool_reference", "name": text}
    return {"type": "text", "text": text, **extras}


def _text_part(part: Any) -> tuple[str, dict[str, Any]]:
    """A content part's text and the extra keys an "openai"-format template also sees."""
    if not isinstance(part, dict):
        raise PassThrough("unsupported_content", "a content part is not an object")
    kind = part.get("type", "text")  # vLLM counts a part without a type as text…
    if _MEDIA_KEYS & part.keys() or not isinstance(kind, str) or kind not in _TEXTLIKE:
        raise PassThrough("non_text_content", f"content part of type {kind!r}")
    if kind == "tool_reference":  # a deferred tool's name, for the template to expand
        if part.keys() != {"type", "name"} or not isinstance(part["name"], str):
            raise PassThrough("unsupported_content", f"tool_reference keys {sorted(part)}")
        return part["name"], _REFERENCE
    # …but its request model then rejects it while rendering; only exact text parts are kept.
    plain = part.get("type") == "text" and isinstance(part.get("text"), str)
    if not plain or part.keys() - _TEXT_PART_KEYS:
        raise PassThrough("unsupported_content", f"content part keys {sorted(part)}")
    return part["text"], {k: v for k, v in part.items() if k not in ("type", "text")}


def _strip_billing_header(
    parts: list[tuple[str, dict[str, Any]]],
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Claude Code's per-request attribution line leaves system text (it would break caching).

    >>> list(_strip_billing_header([("x-anthropic-billing-header: c=1\\nBe brief.", {})]))
    [('Be brief.', {})]
    """
    for text, extras in parts:
        if not text.startswith(_BILLING_HEADER):
            yield text, extras
        elif rest := text.partition("\n")[2]:
            yield rest, extras


def _tool_call(call: Any) -> dict[str, Any]:
    """A tool call in vLLM's order (id, function, type, extras), arguments parsed to a dict.

    >>> _tool_call({"type": "function", "id": "1", "function": {"name": "f", "arguments": "7"}})
    {'id': '1', 'function': {'arguments': {}, 'name': 'f'}, 'type': 'function'}
    """
    if not isinstance(call, dict):
        raise PassThrough("invalid_request", "a tool call is not an object")
    if "type" in call and call["type"] != "function":
        raise PassThrough("unsupported_tool_call", f"tool call type {call['type']!r}")
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else {}
    fields = (call.get("type"), call.get("id"), fn.get("name"), fn.get("arguments"))
    if not all(isinstance(f, str) for f in fields):
        raise PassThrough("invalid_request", "a tool call lacks id, type, name or arguments")
    out_fn = {"arguments": _arguments(fn["arguments"]), "name": fn["name"]}
    out_fn.update((k, v) for k, v in fn.items() if k not in out_fn)
    out = {"id": call["id"], "function": out_fn, "type": "function"}
    out.update((k, v) for k, v in call.items() if k not in out)
    return out


def _arguments(text: str) -> dict[str, Any]:
    """Arguments as templates expect them: an object; "", invalid JSON and non-objects → {}.

    >>> _arguments('{"a": 1}'), _arguments(""), _arguments("[1]"), _arguments("{bad")
    ({'a': 1}, {}, {}, {})
    """
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return {}
    except RecursionError as exc:  # vLLM does not catch this one: its request fails
        raise PassThrough("invalid_request", "tool call arguments nest too deep") from exc
    return parsed if isinstance(parsed, dict) else {}


def developer_to_system(messages: list[dict[str, Any]], info: TemplateInfo) -> list[dict[str, Any]]:
    """For templates that never name "developer": developer → system, systems merged at 0.

    >>> i = TemplateInfo(frozenset(), "string", False, False)
    >>> developer_to_system([{"role": "user"}, {"role": "developer", "content": "d"}], i)
    [{'role': 'system', 'content': 'd'}, {'role': 'user'}]
    """
    if info.supports_developer or all(m["role"] != "developer" for m in messages):
        return messages
    converted = [
        {k: v for k, v in {**m, "role": "system"}.items() if k != "tools"}
        if m["role"] == "developer"
        else m
        for m in messages
    ]
    if not any(i > 0 and m["role"] == "system" for i, m in enumerate(converted)):
        return converted  # a single system message, already first: kept as it is
    texts = [
        c if isinstance(c := m["content"], str) else "\n".join(p["text"] for p in c)
        for m in converted
        if m["role"] == "system"
    ]
    merged = {"role": "system", "content": "\n\n".join(t for t in texts if t)}
    return [merged, *(m for m in converted if m["role"] != "system")]

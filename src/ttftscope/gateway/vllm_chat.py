"""vLLM 0.32's chat-request preprocessing, reproduced: an OpenAI chat body in, template inputs out.

vLLM rewrites a chat request before its template sees it; :func:`prepare_chat` makes the same
rewrites, so ``ChatRenderer(tok, source).render(i.messages, tools=i.tools, **i.template_kwargs)``
is the prompt vLLM's ``/v1/chat/completions`` renders and its ids can go upstream in
``kv_transfer_params.prompt_token_ids`` (vLLM then skips its template and tokenizer). Assumed
server flags: none of ``--chat-template``, ``--default-chat-template-kwargs``,
``--chat-template-content-format``, ``--exclude-tools-when-tool-choice-none``.

What the stage cannot reproduce exactly raises :class:`PassThrough` (send the text instead), as
does what vLLM rejects while rendering, which forwarded ids would skip. Request-validation 400s
happen with forwarded ids too. Template errors at render time are the caller's to catch.
Owns the rules; imports only ``tokenization``, ``errors`` and the standard library.

>>> i = prepare_chat({"messages": [{"role": "user", "content": "hi"}]}, "{{ messages }}")
>>> i.messages, i.tools, i.template_kwargs
([{'role': 'user', 'content': 'hi'}], None, {'add_generation_prompt': True})
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ttftscope.gateway.template_info import TemplateInfo, template_info

log = logging.getLogger("ttftscope.gateway")

ChatPassReason = Literal[
    "invalid_request",  # vLLM answers 400 (at render time, or certainly at validation)
    "kv_transfer_params",  # the client sends its own; vLLM would use or ignore those
    "echo",  # vLLM ignores forwarded ids with echo
    "request_chat_template",  # a template in the request (400 unless the server trusts it)
    "continue_final_message",  # the render is cut after the last message; not reproduced
    "add_special_tokens",  # vLLM's tokenizer call would add special tokens
    "truncate_prompt_tokens",  # forwarded ids skip vLLM's truncation
    "return_prompt_text",  # forwarded ids have no prompt text to return
    "non_text_content",  # media parts: vLLM ignores forwarded ids and renders itself
    "unsupported_content",  # text-like parts not reproduced (refusal, thinking, strings, keys)
    "unsupported_role",  # roles beyond system, developer, user, assistant, tool
    "unsupported_message",  # message fields whose handling is not reproduced
    "unsupported_tool",  # tool definitions whose validation or coercion is not reproduced
    "unsupported_tool_call",  # assistant tool calls not of type function (400 at render)
    "unsupported_value",  # a field vLLM would coerce (e.g. "true" for a boolean)
    "template_kwargs",  # chat_template_kwargs that change the call itself (tools, tokenize, …)
    "content_format",  # the template's content format cannot be told for certain
    "template",  # the template does not compile or reads variables the renderer lacks
]
# and those of the stages around this one (the endpoints' conversions, the id path)
PassReason = Literal[
    ChatPassReason,
    "stateful",  # Responses state kept by the server (previous_response_id, store, conversation)
    "unsupported_item",  # a Responses input item or field whose conversion is not reproduced
    "unsupported_block",  # an Anthropic content block or field whose conversion is not reproduced
    "render_error",  # the template raised: vLLM answers that its own way
    "verify_mismatch",  # the upstream's own rendering differed (logged where)
    "upstream_api",  # the upstream takes no ids on this API (not chat-ids)
    "conversion_error",  # a conversion raised on a shape it does not expect: vLLM answers it
]

_ROLES = frozenset("system developer user assistant tool".split())
_EFFORTS = frozenset("none minimal low medium high xhigh max".split())
_TEXT_PART_KEYS = frozenset({"type", "text", "cache_control"})  # keys reproduced exactly
_TEXTLIKE = frozenset("text input_text output_text refusal thinking tool_reference".split())
_MEDIA_KEYS = frozenset(
    "image_url input_image image_pil image_embeds audio_url input_audio audio_embeds video_url"
    " video_embeds prompt_embeds".split()
)
_BILLING_HEADER = "x-anthropic-billing-header"
# apply_chat_template's own parameters: consumed by the call, never template variables.
_CONSUMED = frozenset(
    "padding truncation max_length return_tensors return_dict tokenizer_kwargs"
    " return_assistant_tokens_mask continue_final_message".split()
)
# Keys that change the call (tools, tokenize) or collide with its arguments (a TypeError → 400).
_CLASHES = frozenset("tools tokenize messages conversation self model_config tokenizer".split())


class PassThrough(Exception):
    """The request must go upstream as text: ``reason`` (a metric label) and ``detail``.

    >>> PassThrough("echo", "echo is set").reason
    'echo'
    """

    def __init__(self, reason: PassReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: PassReason = reason
        self.detail = detail


def converted(convert: Callable[[], _T]) -> _T:
    """``convert()``, a conversion of a client's body (to vLLM's chat body, to template inputs);
    an error it raises on a shape it does not expect (a list where a string goes, values
    nested past what ``repr`` and ``json`` take) becomes ``PassThrough("conversion_error")``:
    the body then goes as text and vLLM answers it, rather than the gateway failing.

    >>> converted(lambda: {}["missing"])
    Traceback (most recent call last):
    ...
    ttftscope.gateway.vllm_chat.PassThrough: conversion_error: KeyError
    """
    try:
        return convert()
    except _CONVERSION_ERRORS as exc:
        log.info("a body could not be converted (%s); sent as text", type(exc).__name__)
        raise PassThrough("conversion_error", type(exc).__name__) from None


_T = TypeVar("_T")
_CONVERSION_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError)


@dataclass(frozen=True)
class ChatInputs:
    """What the chat template receives: ``render(messages, tools=tools, **template_kwargs)``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    template_kwargs: dict[str, Any]


def prepare_chat(body: Mapping[str, Any], template_source: str) -> ChatInputs:
    """The template inputs vLLM 0.32's chat endpoint derives from ``body``; or PassThrough.

    The body is not changed; the result may share leaf values (strings, schemas) with it.

    >>> prepare_chat({"messages": []}, "x")
    Traceback (most recent call last):
    ...
    ttftscope.gateway.vllm_chat.PassThrough: invalid_request: messages must be a non-empty list
    """
    if not isinstance(body, Mapping):
        raise PassThrough("invalid_request", "the body is not a JSON object")
    info = template_info(template_source)
    if info.problem:
        raise PassThrough("template", info.problem)
    _check_request(body)
    tools = _tools(body)
    _check_tool_choice(body, tools)
    kwargs = _template_kwargs(body, info)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise PassThrough("invalid_request", "messages must be a non-empty list")
    if info.content_format is None:
        raise PassThrough("content_format", "the template's content format is uncertain")
    messages = [_message(m, info) for m in raw]
    return ChatInputs(_developer_to_system(messages, info), tools, kwargs)


def _check_request(body: Mapping[str, Any]) -> None:
    """Request fields that make forwarded ids wrong or ignored."""
    flags: tuple[tuple[str, tuple[Any, ...], PassReason], ...] = (
        ("kv_transfer_params", (None,), "kv_transfer_params"),
        ("echo", (False,), "echo"),
        ("chat_template", (None,), "request_chat_template"),
        ("continue_final_message", (False,), "continue_final_message"),
        ("add_special_tokens", (False,), "add_special_tokens"),
        ("truncate_prompt_tokens", (None,), "truncate_prompt_tokens"),
        ("return_prompt_text", (None, False), "return_prompt_text"),
    )
    for key, neutral, reason in flags:
        # ``is``: a lax value such as "false" or 0 is not reproduced, so it passes through too.
        if key in body and not any(body[key] is v for v in neutral):
            raise PassThrough(reason, f"{key}={body[key]!r}")
    if not isinstance(body.get("add_generation_prompt", True), bool):
        raise PassThrough("unsupported_value", "add_generation_prompt is not a boolean")


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Tools as vLLM's request model dumps them: fixed key order, nulls, unknown keys dropped.

    >>> _tools({"tools": [{"function": {"name": "f", "junk": 1}}]})
    [{'type': 'function', 'function': {'name': 'f', 'description': None, 'parameters': None}}]
    """
    raw = body.get("tools")
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise PassThrough("invalid_request", "tools must be a non-empty list")
    return [_tool(t) for t in raw]


def _tool(tool: Any) -> dict[str, Any]:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise PassThrough("invalid_request", "a tool has no function name")
    if tool.get("type", "function") != "function":
        raise PassThrough("unsupported_tool", f"tool type {tool.get('type')!r}")
    kinds = {"description": str, "parameters": dict, "strict": bool, "defer_loading": bool}
    values = [(fn.get(k), kind) for k, kind in kinds.items()]
    if any(v is not None and not isinstance(v, kind) for v, kind in values) or not isinstance(
        tool.get("defer_loading", False), bool | None
    ):
        raise PassThrough("unsupported_tool", f"tool {fn['name']!r} has a field vLLM coerces")
    out_fn = {k: fn.get(k) for k in ("name", "description", "parameters")}
    if fn.get("strict") is not None:
        out_fn["strict"] = fn["strict"]
    # A tool-level defer_loading is copied into the function when the function has none.
    defer = fn.get("defer_loading")
    defer = tool.get("defer_loading") if defer is None else defer
    if defer is not None:
        out_fn["defer_loading"] = defer
    out: dict[str, Any] = {"type": "function", "function": out_fn}
    if tool.get("defer_loading") is not None:
        out["defer_loading"] = tool["defer_loading"]
    return out


def _check_tool_choice(body: Mapping[str, Any], tools: list[dict[str, Any]] | None) -> None:
    """tool_choice never changes the render: tools are rendered even for "none".

    Absent, it is "auto" when tools are given; vLLM checks its tool parser with ids too.
    """
    choice = body.get("tool_choice")
    if choice is None or choice == "none":
        return
    if tools is None:
        raise PassThrough("invalid_request", "tool_choice without tools")
    if choice in ("auto", "required"):
        return
    fn = choice.get("function") if isinstance(choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not any(name == t["function"]["name"] for t in tools):
        raise PassThrough("invalid_request", f"tool_choice {choice!r} names no given tool")


def _template_kwargs(body: Mapping[str, Any], info: TemplateInfo) -> dict[str, Any]:
    """Template variables: request kwargs < top-level fields; unset values and unused keys go.

    >>> info = TemplateInfo(frozenset({"enable_thinking"}), "string", False, False)
    >>> _template_kwargs({"reasoning_effort": "none"}, info)
    {'add_generation_prompt': True, 'enable_thinking': False}
    """
    user = body.get("chat_template_kwargs")
    user = {} if user is None else user
    effort = body.get("reasoning_effort")
    bad_docs = not _documents(body.get("documents"), str)
    bad_effort = effort is not None and not (isinstance(effort, str) and effort in _EFFORTS)
    if not isinstance(user, dict) or bad_effort or bad_docs:
        raise PassThrough("invalid_request", "chat_template_kwargs, effort or documents invalid")
    if user.get("chat_template") is not None:
        raise PassThrough("request_chat_template", "chat_template_kwargs.chat_template")
    top = {
        "add_generation_prompt": body.get("add_generation_prompt", True),
        "documents": body.get("documents"),
        "reasoning_effort": effort,
    }
    # Any effort turns thinking on or off, unless the request's kwargs name it (even as null).
    if effort is not None and "enable_thinking" not in user:
        top["enable_thinking"] = effort != "none"
    merged = {**user, **_given(top)}
    merged = _given(merged)  # vLLM merges twice; the second pass drops the user's unset values
    clashes = sorted(_CLASHES & merged.keys())
    if clashes or merged.get("return_assistant_tokens_mask"):
        raise PassThrough("template_kwargs", f"chat_template_kwargs {clashes or 'mask'}")
    if not _documents(merged.get("documents"), object):
        raise PassThrough("invalid_request", "documents must be a list of objects")
    keep = info.variables - _CONSUMED | {"add_generation_prompt", "documents"}
    return {k: v for k, v in merged.items() if k in keep}


def _given(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if not (v is None or v == "auto")}


def _documents(raw: Any, value: type) -> bool:
    """Absent, or a list of objects (of strings, where vLLM's request model says so)."""
    ok = isinstance(raw, list) and all(isinstance(d, dict) for d in raw)
    return raw is None or (ok and all(isinstance(v, value) for d in raw for v in d.values()))


def _message(raw: Any, info: TemplateInfo) -> dict[str, Any]:
    """One message as vLLM's parser rebuilds it: known fields, in a fixed order.

    >>> i = TemplateInfo(frozenset(), "string", False, False)
    >>> _message({"role": "assistant", "content": None, "reasoning_content": "r", "x": 1}, i)
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
            if info.reads_thinking:  # ChatRenderer also exposes it as "thinking"; vLLM not
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
    if role == "tool":
        return "\n".join(text for text, _ in parts)
    return [{"type": "text", "text": text, **extras} for text, extras in parts]


def _text_part(part: Any) -> tuple[str, dict[str, Any]]:
    """A content part's text and the extra keys an "openai"-format template also sees."""
    if not isinstance(part, dict):
        raise PassThrough("unsupported_content", "a content part is not an object")
    kind = part.get("type", "text")  # vLLM counts a part without a type as text…
    if _MEDIA_KEYS & part.keys() or not isinstance(kind, str) or kind not in _TEXTLIKE:
        raise PassThrough("non_text_content", f"content part of type {kind!r}")
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


def _developer_to_system(
    messages: list[dict[str, Any]], info: TemplateInfo
) -> list[dict[str, Any]]:
    """For templates that never name "developer": developer → system, systems merged at 0.

    >>> i = TemplateInfo(frozenset(), "string", False, False)
    >>> _developer_to_system([{"role": "user"}, {"role": "developer", "content": "d"}], i)
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

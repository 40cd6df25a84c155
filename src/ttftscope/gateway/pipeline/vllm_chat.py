"""vLLM's chat-request preprocessing, reproduced per release (0.32 to 0.34): an OpenAI chat
body in, template inputs out.

vLLM rewrites a chat request before its template sees it; :func:`prepare_chat` makes the same
rewrites, so ``ChatRenderer(tok, source).render(i.messages, tools=i.tools, **i.template_kwargs)``
is the prompt vLLM's ``/v1/chat/completions`` renders and its ids can go upstream in
``kv_transfer_params.prompt_token_ids`` (vLLM then skips its template and tokenizer). Assumed
server flags: none of ``--chat-template``, ``--default-chat-template-kwargs``,
``--chat-template-content-format``, ``--exclude-tools-when-tool-choice-none``.

What the stage cannot reproduce exactly raises :class:`PassThrough` (send the text instead), as
does what vLLM rejects while rendering, which forwarded ids would skip. Request-validation 400s
happen with forwarded ids too. Template errors at render time are the caller's to catch.
Owns the request-level rules (flags, tools, template variables); one message's rules are in
``vllm_chat_messages``, the pass-through vocabulary in ``passthrough``.

>>> i = prepare_chat({"messages": [{"role": "user", "content": "hi"}]}, "{{ messages }}")
>>> i.messages, i.tools, i.template_kwargs
([{'role': 'user', 'content': 'hi'}], None, {'add_generation_prompt': True})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ttftscope.gateway.pipeline.passthrough import (
    PassReason,
    PassThrough,
)
from ttftscope.gateway.pipeline.profiles import BASELINE, Profile
from ttftscope.gateway.pipeline.template_info import TemplateInfo, template_info
from ttftscope.gateway.pipeline.vllm_chat_messages import chat_message, developer_to_system

# the pass-through vocabulary is also read from here, where it was first defined
__all__ = ["ChatInputs", "prepare_chat"]

_EFFORTS = frozenset("none minimal low medium high xhigh max".split())
# apply_chat_template's own parameters: consumed by the call, never template variables.
_CONSUMED = frozenset(
    "padding truncation max_length return_tensors return_dict tokenizer_kwargs"
    " return_assistant_tokens_mask continue_final_message".split()
)
# Keys that change the call (tools, tokenize) or collide with its arguments (a TypeError → 400).
_CLASHES = frozenset("tools tokenize messages conversation self model_config tokenizer".split())


@dataclass(frozen=True)
class ChatInputs:
    """What the chat template receives: ``render(messages, tools=tools, **template_kwargs)``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    template_kwargs: dict[str, Any]


def prepare_chat(
    body: Mapping[str, Any], template_source: str, profile: Profile = BASELINE
) -> ChatInputs:
    """The template inputs vLLM's chat endpoint derives from ``body`` on a server of
    ``profile`` (0.32's unless told); or PassThrough.

    The body is not changed; the result may share leaf values (strings, schemas) with it.

    >>> try:
    ...     prepare_chat({"messages": []}, "x")
    ... except PassThrough as exc:
    ...     print(exc)
    invalid_request: messages must be a non-empty list
    """
    if not isinstance(body, Mapping):
        raise PassThrough("invalid_request", "the body is not a JSON object")
    info = template_info(template_source)
    if info.problem:
        raise PassThrough("template", info.problem)
    _check_request(body)
    tools, choice = _tools(body, profile)
    _check_tool_choice(choice, tools)
    kwargs = _template_kwargs(body, info)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise PassThrough("invalid_request", "messages must be a non-empty list")
    if info.content_format is None:
        raise PassThrough("content_format", "the template's content format is uncertain")
    key = profile.has("assistant_thinking_key")
    messages = [chat_message(m, info, thinking_key=key) for m in raw]
    return ChatInputs(developer_to_system(messages, info), tools, kwargs)


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


def _tools(body: Mapping[str, Any], profile: Profile) -> tuple[list[dict[str, Any]] | None, Any]:
    """Tools as vLLM's request model dumps them (fixed key order, nulls, unknown keys
    dropped), and the tool_choice vLLM goes on with.

    >>> _tools({"tools": [{"function": {"name": "f", "junk": 1}}]}, BASELINE)[0]
    [{'type': 'function', 'function': {'name': 'f', 'description': None, 'parameters': None}}]
    >>> _tools({"tools": [], "tool_choice": "auto"}, Profile("0.34", (0, 34)))
    (None, 'none')
    """
    raw, choice = body.get("tools"), body.get("tool_choice")
    if raw is None:
        return None, choice
    if raw == [] and profile.has("tools_empty_is_none") and not isinstance(choice, dict):
        return None, "none" if choice in ("auto", "required") else choice
    if not isinstance(raw, list) or not raw:
        raise PassThrough("invalid_request", "tools must be a non-empty list")
    return [_tool(t) for t in raw], choice


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


def _check_tool_choice(choice: Any, tools: list[dict[str, Any]] | None) -> None:
    """tool_choice never changes the render: tools are rendered even for "none".

    Absent, it is "auto" when tools are given; vLLM checks its tool parser with ids too.
    """
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

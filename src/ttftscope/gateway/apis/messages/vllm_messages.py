"""vLLM's Anthropic Messages → chat conversion, reproduced per release (0.32 to 0.34): a
``/v1/messages`` body in, the chat body vLLM builds from it out.

vLLM serves ``/v1/messages`` by converting the request to a chat request
(``entrypoints/anthropic/serving.py::AnthropicServingMessages.to_chat_completion_request``) and
running its chat path. :func:`messages_to_chat` makes the same conversion, so
``prepare_chat(messages_to_chat(body, ...), source)`` and the renderer give the prompt vLLM
renders for the Anthropic request, and its ids can go upstream in the Anthropic body's own
``kv_transfer_params.prompt_token_ids`` (the converter copies them into the chat request).

Rules reproduced (vLLM names in brackets):

- system: a string as it is; text blocks with text joined by ``""``, Claude Code's
  ``x-anthropic-billing-header`` block left out (``_convert_system_message``); inline
  ``system`` messages kept in place, or merged into the leading system text when the
  template rejects a non-leading system message (``_detect_merge_inline_system``);
- blocks: non-empty text → text parts (one part becomes a string); thinking → the
  assistant's ``reasoning``; tool_use → a tool call with ``json.dumps(input)`` arguments;
  a user's tool_result → a ``tool`` message placed *before* the user's remaining text; an
  assistant's → ``"Tool result: …"`` text; tool_reference blocks inside a user's tool_result
  → a second tool message of ``{"type": "tool_reference", "name": …}`` parts, or (0.34,
  ``tool_reference_one_message``) one tool message, references first, then the text;
  redacted_thinking and top-level tool_reference blocks dropped;
  a user message left with no content dropped (``_convert_messages``, ``_convert_block``);
- fields vLLM's request model does not know (``cache_control``, ``metadata``,
  ``context_management``, …) are ignored, as pydantic ignores them;
- tools: ``input_schema`` gains ``"type": "object"`` at its end when it has no type; tools
  given without tool_choice get "auto"; tool_choice any → "required", tool → named
  (``_convert_tools``, ``_convert_tool_choice``);
- effort: ``output_config.effort`` is the reasoning effort; ``thinking.type == "disabled"``
  overrides it with the effort vLLM probes for (``_get_disabled_thinking_effort``, passed in
  by the caller), and so does ``between_tools`` from 0.34 (earlier releases reject it: the
  request passes through to get vLLM's 400); adaptive and enabled thinking change no
  prompt (``_handle_thinking``).

What is not reproduced exactly raises :class:`PassThrough` (the request goes as text):
images, tool results with images, tool_addition/tool_removal blocks, a
tool_use without an id (vLLM names it after the clock), values pydantic would coerce.
Assumed server flag: ``--anthropic-disabled-thinking-effort auto`` (the default).

>>> messages_to_chat({"model": "m", "max_tokens": 9, "system": "Be brief.",
...                   "messages": [{"role": "user", "content": "hi"}]})["messages"]
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.profiles import BASELINE, Profile

_BILLING = "x-anthropic-billing-header"
_BLOCK_TYPES = frozenset(
    "text image tool_use tool_result tool_reference thinking redacted_thinking"
    " tool_addition tool_removal".split()
)
_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def messages_to_chat(
    body: Mapping[str, Any],
    *,
    merge_inline_system: bool = False,
    disabled_effort: str = "none",
    profile: Profile = BASELINE,
) -> dict[str, Any]:
    """The chat body vLLM 0.32 builds from Anthropic ``body`` (only what reaches the render).

    ``merge_inline_system`` comes from :func:`merges_inline_system` on the upstream's
    template, ``disabled_effort`` from :func:`disabled_thinking_effort`.

    >>> chat = messages_to_chat({"model": "m", "messages": [
    ...     {"role": "assistant", "content": [
    ...         {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}]},
    ...     {"role": "user", "content": [
    ...         {"type": "tool_result", "tool_use_id": "t1", "content": "text"},
    ...         {"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}]}]})
    >>> [m["role"] for m in chat["messages"]], chat["messages"][0]["tool_calls"][0]["function"]
    (['assistant', 'tool', 'user'], {'name': 'Read', 'arguments': '{"p": "a"}'})
    """
    if not isinstance(body, Mapping):
        raise PassThrough("invalid_request", "the body is not a JSON object")
    if body.get("kv_transfer_params") is not None:
        raise PassThrough("kv_transfer_params", "the client sends its own")
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise PassThrough("invalid_request", "messages must be a list")
    messages = [_checked_message(m) for m in raw]
    out: list[dict[str, Any]] = []
    system = _system_text(body.get("system"), messages if merge_inline_system else [])
    if system:
        out.append({"role": "system", "content": system})
    for role, content in messages:
        _convert_message(role, content, out, merge_inline_system, profile)
    chat: dict[str, Any] = {"model": body.get("model"), "messages": out}
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None:
        chat["chat_template_kwargs"] = kwargs
    effort = _effort(body, disabled_effort, profile)
    if effort is not None:
        chat["reasoning_effort"] = effort
    _tools_and_choice(body, chat)
    return chat


def _checked_message(raw: Any) -> tuple[str, str | list[dict[str, Any]]]:
    """Role and content of one message, as vLLM's request model accepts them."""
    role = raw.get("role") if isinstance(raw, dict) else None
    if role not in ("user", "assistant", "system"):
        raise PassThrough("invalid_request", f"message role {role!r}")
    content = raw.get("content")
    if isinstance(content, str):
        return role, content
    if not isinstance(content, list) or not all(_valid_block(b) for b in content):
        raise PassThrough("invalid_request", "content is neither text nor a list of blocks")
    if any(b["type"] in ("tool_addition", "tool_removal") for b in content):
        raise PassThrough("unsupported_block", "tool_addition/tool_removal blocks")
    return role, content


def _valid_block(block: Any) -> bool:
    """A block of a known type whose fields have the types vLLM's model takes as they are."""
    if not isinstance(block, dict) or block.get("type") not in _BLOCK_TYPES:
        return False
    kinds: dict[str, type | tuple[type, ...]] = {
        "text": str,
        "id": str,
        "tool_use_id": str,
        "name": str,
        "input": dict,
        "thinking": str,
        "source": dict,
        "content": (str, list),
    }
    return all(block.get(k) is None or isinstance(block[k], t) for k, t in kinds.items())


def _system_text(system: Any, inline: list[tuple[str, str | list[dict[str, Any]]]]) -> str:
    parts: list[str] = []
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list) and all(_valid_block(b) for b in system):
        parts += [b["text"] for b in system if _kept_text(b)]
    elif system is not None:
        raise PassThrough("invalid_request", "system is neither text nor a list of blocks")
    for role, content in inline:
        if role == "system" and (text := _inline_system_text(content)):
            parts.append(text)
    return "".join(parts)


def _kept_text(block: dict[str, Any]) -> bool:
    text = block.get("text")
    return block["type"] == "text" and bool(text) and not str(text).startswith(_BILLING)


def _inline_system_text(content: str | list[dict[str, Any]]) -> str | None:
    if isinstance(content, str):
        return None if content.startswith(_BILLING) else content
    return "".join(b["text"] for b in content if _kept_text(b)) or None


def _convert_message(
    role: str,
    content: str | list[dict[str, Any]],
    out: list[dict[str, Any]],
    merged: bool,
    profile: Profile,
) -> None:
    if role == "system":
        text = None if merged else _inline_system_text(content)
        if text:
            out.append({"role": "system", "content": text})
        return
    msg: dict[str, Any] = {"role": role}
    if isinstance(content, str):
        msg["content"] = content
    else:
        _convert_blocks(role, content, msg, out, profile)
    if not (role == "user" and "content" not in msg):
        out.append(msg)


def _convert_blocks(
    role: str,
    blocks: list[dict[str, Any]],
    msg: dict[str, Any],
    out: list[dict[str, Any]],
    profile: Profile,
) -> None:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for block in blocks:
        kind = block["type"]
        if kind == "text" and block.get("text"):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image" and block.get("source"):
            raise PassThrough("non_text_content", "an image block")
        elif kind == "thinking" and block.get("thinking") is not None:
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            calls.append(_tool_call(role, block))
        elif kind == "tool_result":
            _tool_result(role, block, parts, out, profile)
    if reasoning:
        msg["reasoning"] = "".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    if len(parts) == 1:
        msg["content"] = parts[0]["text"]
    elif parts:
        msg["content"] = parts


def _tool_call(role: str, block: dict[str, Any]) -> dict[str, Any]:
    if role != "assistant":
        raise PassThrough("unsupported_block", f"a tool_use block in a {role} message")
    if not block.get("id"):
        raise PassThrough("unsupported_block", "a tool_use block without an id")
    try:
        arguments = json.dumps(block.get("input") or {})
    except RecursionError as exc:  # vLLM's json.dumps fails the same way: its answer, not ours
        raise PassThrough("unsupported_block", "tool_use input nests too deep") from exc
    fn = {"name": block.get("name") or "", "arguments": arguments}
    return {"id": block["id"], "type": "function", "function": fn}


def _tool_result(
    role: str,
    block: dict[str, Any],
    parts: list[dict[str, Any]],
    out: list[dict[str, Any]],
    profile: Profile,
) -> None:
    content = block.get("content")
    if role != "user":
        if content and not isinstance(content, str):
            raise PassThrough("unsupported_block", "an assistant's tool_result with blocks")
        parts.append({"type": "text", "text": f"Tool result: {content or ''}"})
        return
    refs: list[dict[str, Any]] = []
    if isinstance(content, list):
        content, refs = _tool_result_text(content)
    call_id = block.get("tool_use_id") or ""
    if refs and profile.has("tool_reference_one_message"):  # references first, then the text
        text = [{"type": "text", "text": content}] if content else []
        out.append({"role": "tool", "tool_call_id": call_id, "content": refs + text})
        return
    out.append({"role": "tool", "tool_call_id": call_id, "content": content or ""})
    if refs:  # before 0.34: the text's tool message, then one of the references
        out.append({"role": "tool", "tool_call_id": call_id, "content": refs})


def _tool_result_text(items: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """A user tool_result's text (texts joined by newlines) and its tool references."""
    texts: list[str] = []
    refs: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            text = item.get("text", "")
            if not isinstance(text, str):
                raise PassThrough("invalid_request", "a tool_result text is not a string")
            texts.append(text)
        elif kind == "image":
            raise PassThrough("non_text_content", "an image in a tool_result")
        elif kind == "tool_reference" and (item.get("tool_name") or item.get("name")):
            name = item.get("tool_name") or item.get("name")
            if not isinstance(name, str):
                raise PassThrough("invalid_request", "a tool_reference name is not a string")
            refs.append({"type": "tool_reference", "name": name})
    return "\n".join(texts), refs


def _effort(body: Mapping[str, Any], disabled_effort: str, profile: Profile) -> str | None:
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    if effort is not None and effort not in _EFFORTS:
        raise PassThrough("invalid_request", f"output_config.effort {effort!r}")
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "disabled" or (kind == "between_tools" and profile.has("thinking_between_tools")):
        return disabled_effort
    if thinking is not None and kind not in ("enabled", "adaptive"):
        # vLLM's request model rejects it (between_tools before 0.34): its 400, not ours
        raise PassThrough("invalid_request", f"thinking type {kind!r}")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    most = body.get("max_tokens")
    if isinstance(budget, int) and isinstance(most, int) and budget >= most:
        # validate_thinking_budget's 400, which vLLM skips when ids are forwarded
        raise PassThrough("invalid_request", "thinking.budget_tokens must be below max_tokens")
    return effort


def _tools_and_choice(body: Mapping[str, Any], chat: dict[str, Any]) -> None:
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind == "tool" and isinstance(choice.get("name"), str) and choice["name"]:
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif kind in _CHOICES:
            chat["tool_choice"] = _CHOICES[kind]
        else:
            raise PassThrough("invalid_request", f"tool_choice {choice!r}")
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise PassThrough("invalid_request", "tools is not a list")
    chat["tools"] = [_tool(t) for t in tools]
    chat.setdefault("tool_choice", "auto")


def _tool(tool: Any) -> dict[str, Any]:
    """A chat tool from an Anthropic one; pydantic's coercions pass through."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise PassThrough("invalid_request", "a tool has no name")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise PassThrough("invalid_request", f"tool {tool['name']!r} has no input_schema")
    flags = (tool.get("strict"), tool.get("defer_loading"))
    description = tool.get("description")
    if any(f is not None and not isinstance(f, bool) for f in flags) or not (
        description is None or isinstance(description, str)
    ):
        raise PassThrough("unsupported_block", f"tool {tool['name']!r} has a value vLLM coerces")
    if "type" not in schema:  # vLLM's validator sets it in place: it ends up last
        schema = {**schema, "type": "object"}
    fn = {
        "name": tool["name"],
        "description": description,
        "parameters": schema,
        "strict": flags[0],
        "defer_loading": flags[1],
    }
    return {"type": "function", "function": fn}


# -- what vLLM learns from the template once ------------------------------------------------
@lru_cache(maxsize=32)  # one answer per template: vLLM decides it once at start-up
def merges_inline_system(template_source: str | None) -> bool:
    """Whether vLLM merges inline system messages into the leading one for this template.

    vLLM renders ``[system, user, system, user]`` in a bare sandbox; a template that raises
    (a ``loop.first`` guard) needs the merge.

    >>> merges_inline_system("{% for m in messages %}{{ m.content }}{% endfor %}")
    False
    >>> merges_inline_system("{{ raise_exception('system first') }}")
    True
    """
    if not template_source:
        return True
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    probe = [{"role": r, "content": "t"} for r in ("system", "user", "system", "user")]
    try:
        env.from_string(template_source).render(messages=probe, add_generation_prompt=False)
    except jinja2.TemplateError:
        return True
    return False


def disabled_thinking_effort(render_hi: Any) -> str:
    """The effort vLLM maps ``thinking: disabled`` to: "none", or "low" where the template
    rejects "none" or renders it like a real effort.

    ``render_hi(effort)`` renders ``[{"role": "user", "content": "Hi"}]`` with that
    reasoning effort and returns the prompt, or None when rendering fails.

    >>> disabled_thinking_effort(lambda effort: "same")
    'low'
    >>> disabled_thinking_effort(lambda effort: f"effort={effort}")
    'none'
    """
    none = render_hi("none")
    if none is None:
        return "low"
    return "low" if any(render_hi(e) == none for e in _EFFORTS) else "none"

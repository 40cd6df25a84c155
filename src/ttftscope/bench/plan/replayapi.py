"""Which API a recorded request body was written for, checked, and its conversation items.

- **Responses** (Codex): ``input`` (a list of items, or a string) and optional
  ``instructions``; never ``messages``.
- **Anthropic Messages** (Claude Code): ``messages`` and ``max_tokens``, told from chat by
  what only Anthropic has: a top-level ``system`` (a string or text blocks), tools with
  ``input_schema``, content blocks such as ``tool_use``, ``tool_result`` or ``thinking``.
- **chat**: ``messages``, told by what only chat has: ``developer``/``tool`` roles,
  ``tool_calls``, function tools, ``max_completion_tokens``, ``stream_options``. (A
  ``system`` message is no sign: Claude Code sends them in ``messages`` too.)

A body of plain user, assistant and system text with a ``max_tokens`` fits chat and
Anthropic alike. A file speaks one API: ``--api``'s, or the one every body fits (chat first); a body
that fits another is an error naming its line (:func:`narrow`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ttftscope.client.apis import APIS, Api

__all__ = [
    "API_NAMES",
    "body_apis",
    "check_body",
    "conversation_items",
    "narrow",
    "the_api",
    "unfit",
]

API_NAMES: Mapping[Api, str] = {
    "chat": "OpenAI chat completions",
    "messages": "Anthropic Messages",
    "responses": "OpenAI Responses",
}
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "document", "server_tool_use"}
)
_ANTHROPIC_KEYS = ("system", "stop_sequences", "thinking")
# Not "system": Claude Code sends system messages in ``messages`` too (the environment)
_CHAT_ROLES = frozenset({"developer", "tool", "function"})
_CHAT_MESSAGE_KEYS = ("tool_calls", "function_call", "tool_call_id")
_CHAT_KEYS = ("max_completion_tokens", "stream_options", "response_format", "logprobs")


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _anthropic_signs(body: Mapping[str, object]) -> bool:
    if any(k in body for k in _ANTHROPIC_KEYS):
        return True
    if any("input_schema" in t for t in _dicts(body.get("tools"))):
        return True
    blocks = [b for m in _dicts(body.get("messages")) for b in _dicts(m.get("content"))]
    return any(b.get("type") in _ANTHROPIC_BLOCKS or "source" in b for b in blocks)


def _chat_signs(body: Mapping[str, object]) -> bool:
    if any(k in body for k in _CHAT_KEYS):
        return True
    if any("function" in t for t in _dicts(body.get("tools"))):
        return True
    messages = _dicts(body.get("messages"))
    return any(m.get("role") in _CHAT_ROLES for m in messages) or any(
        k in m for m in messages for k in _CHAT_MESSAGE_KEYS
    )


def body_apis(body: Mapping[str, object]) -> frozenset[Api]:
    """The APIs ``body`` could have been written for (none: no API's body, or a mix).

    >>> user = [{"role": "user", "content": "hi"}]
    >>> sorted(body_apis({"messages": user, "max_tokens": 8}))
    ['chat', 'messages']
    >>> body_apis({"messages": user, "system": "s", "max_tokens": 8})
    frozenset({'messages'})
    >>> body_apis({"messages": [{"role": "tool", "content": "s"}, *user], "max_tokens": 8})
    frozenset({'chat'})
    >>> body_apis({"input": "hi", "instructions": "s"})
    frozenset({'responses'})
    """
    if "input" in body or "instructions" in body:
        return frozenset() if "messages" in body else frozenset({"responses"})
    if "messages" not in body:
        return frozenset()
    anthropic, chat = _anthropic_signs(body), _chat_signs(body)
    if anthropic:
        return frozenset() if chat else frozenset({"messages"})
    if chat or "max_tokens" not in body:
        return frozenset({"chat"})
    return frozenset({"chat", "messages"})


def unfit(body: Mapping[str, object]) -> str:
    """Why ``body`` is no API's request body (for a body :func:`body_apis` finds none for).

    >>> unfit({"prompt": "x"}), unfit({"messages": [], "input": []})[:26]
    ("has no 'messages' list", "has both 'messages' and 'i")
    """
    if "messages" not in body:
        return "has no 'messages' list"
    if "input" in body or "instructions" in body:
        return "has both 'messages' and 'input' or 'instructions' (chat's and Responses' fields)"
    return "mixes chat fields and Anthropic Messages fields"


def _names(apis: frozenset[Api]) -> str:
    return " or ".join(API_NAMES[a] for a in APIS if a in apis)


def narrow(allowed: frozenset[Api], fits: frozenset[Api], line: int, wanted: Api | None) -> str:
    """Why a body on ``line`` that fits ``fits`` cannot join a file of ``allowed`` ("": it can).

    >>> narrow(frozenset({"chat", "messages"}), frozenset({"responses"}), 3, None)[:50]
    'line 3 is an OpenAI Responses request body, but th'
    >>> narrow(frozenset({"messages"}), frozenset({"chat"}), 2, "messages")
    'line 2 is an OpenAI chat completions request body, not Anthropic Messages (--api messages)'
    """
    if allowed & fits:
        return ""
    if wanted is not None:
        return (
            f"line {line} is an {_names(fits)} request body, not {API_NAMES[wanted]} "
            f"(--api {wanted})"
        )
    return (
        f"line {line} is an {_names(fits)} request body, but the lines before it are "
        f"{_names(allowed)} bodies (one API per file)"
    )


def the_api(allowed: frozenset[Api]) -> Api:
    """The file's API among those every body fits: chat first, then messages, responses.

    >>> the_api(frozenset({"messages", "chat"}))
    'chat'
    """
    return next(a for a in APIS if a in allowed)


def check_body(body: Mapping[str, object], api: Api) -> str:
    """What is wrong with ``body`` as a request of ``api`` ("" when nothing is).

    >>> check_body({"input": []}, "responses"), check_body({"messages": [{}]}, "chat")
    ("has an empty 'input'", "has a message without a 'role'")
    """
    if api == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return "" if items else "has an empty 'input'"
        if not isinstance(items, list) or not items:
            return "has an empty 'input'" if isinstance(items, list) else "has no 'input'"
        return "" if all(isinstance(i, dict) for i in items) else "has an input item not an object"
    messages = body.get("messages")
    if not (isinstance(messages, list) and messages):
        return "has no 'messages' list"
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "has a message without a 'role'"
    return ""


def _uncached(value: object) -> object:
    # Claude Code marks the newest block with cache_control, so the mark moves every turn
    if isinstance(value, list):
        return [_uncached(v) for v in value]
    if isinstance(value, dict):
        return {k: _uncached(v) for k, v in value.items() if k != "cache_control"}
    return value


def _anthropic_message(message: object) -> object:
    """A message as Anthropic reads it: marks left out, one text block as its text.

    Claude Code sends the marked newest message as blocks and the same message, a turn
    later and unmarked, as a string.
    """
    plain = _uncached(message)
    if not isinstance(plain, dict):
        return plain
    content = plain.get("content")
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        if isinstance(block, dict) and block.keys() == {"type", "text"} and block["type"] == "text":
            return {**plain, "content": block["text"]}
    return plain


def conversation_items(body: Mapping[str, object], api: Api) -> list[object]:
    """What a conversation grows by: its head (system or instructions), then its turns.

    A later request of the same conversation starts with the same items. Anthropic's moving
    ``cache_control`` marks, and the blocks they come in, do not hide that.

    >>> conversation_items({"input": "hi", "instructions": "s"}, "responses")
    ['s', 'hi']
    >>> m = {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]}
    >>> conversation_items({"messages": [m]}, "messages")[1]
    {'role': 'user', 'content': 'a'}
    """
    if api == "responses":
        items = body.get("input")
        turns: list[object] = [items] if isinstance(items, str) else list(_dicts(items))
        return [body.get("instructions"), *turns]
    messages = body.get("messages")
    assert isinstance(messages, list)
    if api == "messages":
        return [_uncached(body.get("system")), *(_anthropic_message(m) for m in messages)]
    return [None, *messages]

"""A request's shape classes, and which of them an upstream proved it renders as the gateway does.

A shape class names one way a request can differ from a plain chat (tools, tool results,
parallel calls, reasoning history, Anthropic thinking kinds, Responses item kinds, non-ASCII
text, …). The start-up check (:mod:`~ttftscope.gateway.proving.conformance`) renders one body
of each class per API locally and through the upstream's own rendering and records a
:class:`Verdict` per (API, class) in a :class:`ShapeTable`. On the request path
:func:`shape_classes` reads the classes of a body (one walk over its messages, no copies)
and :meth:`ShapeTable.gate` sends it as text unless every class it has was proven.

>>> sorted(shape_classes("chat", {"messages": [{"role": "user", "content": "héllo"}]}))
['non_ascii', 'plain']
>>> sorted(shape_classes("messages", {"thinking": {"type": "adaptive"}, "messages": []}))
['plain', 'thinking_adaptive']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ttftscope.gateway.pipeline.passthrough import PassThrough

__all__ = ["SHAPES", "NativeApi", "Oracle", "ShapeTable", "Verdict", "shape_classes"]

NativeApi = Literal["chat", "messages", "responses"]
# what proved (or could not prove) a verdict: the upstream's render route, its /tokenize,
# a 1-token request whose usage counted the ids sent, the gateway itself (it sends such a
# body as text anyway), or nothing that answered
Oracle = Literal["render", "tokenize", "probe", "local", "none", "verify"]
_COMMON = (
    "plain",
    "system_developer",
    "tools",
    "tools_empty",
    "tool_results",
    "parallel_calls",
    "reasoning_history",
    "image",
    "non_ascii",
    "reasoning_effort",
)
SHAPES: dict[NativeApi, tuple[str, ...]] = {
    "chat": _COMMON,
    "messages": (
        *_COMMON,
        "thinking_disabled",
        "thinking_adaptive",
        "thinking_between_tools",
        "tool_reference",
    ),
    "responses": (*_COMMON, "untyped_items"),
}
_IMAGES = frozenset({"image_url", "image", "input_image", "document", "input_file"})


@dataclass(frozen=True)
class Verdict:
    """Whether one (API, shape class) goes as ids on an upstream, and why."""

    ids: bool
    why: str  # what the check found (the proof, or why there is none)
    oracle: Oracle
    blocked: str = ""  # why a proven class still goes as text (the upstream takes no ids there)


_UNCHECKED = Verdict(False, "not checked", "none")


class ShapeTable:
    """The verdicts of one upstream's check, by (API, shape class).

    >>> t = ShapeTable({("chat", "plain"): Verdict(True, "render: equal", "render"),
    ...                 ("chat", "tools"): Verdict(False, "render: differs at 3", "render")})
    >>> t.unproven("chat", {"plain"}), t.unproven("chat", {"plain", "tools", "image"})
    ([], ['image', 'tools'])
    """

    def __init__(self, verdicts: Mapping[tuple[NativeApi, str], Verdict]) -> None:
        self.verdicts = dict(verdicts)

    def unproven(self, api: NativeApi, classes: Iterable[str]) -> list[str]:
        """The classes of ``classes`` that do not go as ids (unchecked ones included)."""
        v = self.verdicts
        return sorted(c for c in classes if not ((x := v.get((api, c))) and x.ids))

    def gate(self, api: NativeApi, body: Mapping[str, Any]) -> None:
        """Raise ``PassThrough("unproven_shape")`` unless every class of ``body`` was proven."""
        missing = self.unproven(api, shape_classes(api, body))
        if missing:
            raise PassThrough("unproven_shape", f"{api}: {', '.join(missing)} not proven")

    def demote(self, api: NativeApi, body: Mapping[str, Any], why: str) -> list[str]:
        """Turn the classes of ``body`` that a mismatch blames to text, ``why`` named; the
        classes turned. ``plain`` is blamed only when the body has no other class (every
        request has it: one odd shape must not take the whole API off ids).

        >>> t = ShapeTable({("chat", "plain"): Verdict(True, "ok", "render"),
        ...                 ("chat", "tools"): Verdict(True, "ok", "render")})
        >>> t.demote("chat", {"messages": [], "tools": [{}]}, "verify: differs at 7")
        ['tools']
        >>> t.unproven("chat", {"plain", "tools"})
        ['tools']
        """
        classes = shape_classes(api, body)
        blamed = sorted(classes - {"plain"} or classes)
        for shape in blamed:
            self.verdicts[(api, shape)] = Verdict(False, why, "verify")
        return blamed

    def ids_count(self) -> int:
        """How many (API, class) pairs go as ids."""
        return sum(v.ids for v in self.verdicts.values())

    def get(self, api: NativeApi, shape: str) -> Verdict:
        """The verdict of one (API, class); a class the check did not reach goes as text."""
        return self.verdicts.get((api, shape), _UNCHECKED)

    def ids_of(self, api: NativeApi) -> int:
        """How many of ``api``'s classes go as ids."""
        return sum(self.get(api, s).ids for s in SHAPES[api])


def shape_classes(api: NativeApi, body: Mapping[str, Any]) -> set[str]:
    """The shape classes of ``body``, a request of ``api`` (always ``plain``).

    >>> sorted(shape_classes("responses", {"instructions": "x", "input": [
    ...     {"role": "user", "content": "hi"}, {"type": "function_call_output"}]}))
    ['plain', 'system_developer', 'tool_results', 'untyped_items']
    """
    out = {"plain"}
    tools = body.get("tools")
    if isinstance(tools, list):
        out.add("tools" if tools else "tools_empty")
    if api == "chat":
        _chat(body, out)
    elif api == "messages":
        _messages(body, out)
    else:
        _responses(body, out)
    return out


def _text(value: object, out: set[str]) -> None:
    """Mark non-ASCII text (a C-speed scan of each string)."""
    if isinstance(value, str) and not value.isascii():
        out.add("non_ascii")


def _parts(content: object, out: set[str]) -> None:
    """The classes of a message's content: a string or a list of typed parts."""
    if isinstance(content, str):
        _text(content, out)
        return
    if not isinstance(content, list):
        return
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in _IMAGES:
            out.add("image")
        _text(part.get("text"), out)


def _chat(body: Mapping[str, Any], out: set[str]) -> None:
    if body.get("reasoning_effort") is not None:
        out.add("reasoning_effort")
    for m in _list(body.get("messages")):
        role = m.get("role")
        if role in ("system", "developer"):
            out.add("system_developer")
        elif role == "tool":
            out.add("tool_results")
        elif role == "assistant":
            calls = m.get("tool_calls")
            if isinstance(calls, list) and len(calls) > 1:
                out.add("parallel_calls")
            if m.get("reasoning") or m.get("reasoning_content"):
                out.add("reasoning_history")
        _parts(m.get("content"), out)


def _messages(body: Mapping[str, Any], out: set[str]) -> None:
    if body.get("system"):
        out.add("system_developer")
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind in ("disabled", "adaptive", "between_tools"):
        out.add(f"thinking_{kind}")
    config = body.get("output_config")
    if isinstance(config, dict) and config.get("effort") is not None:
        out.add("reasoning_effort")
    for m in _list(body.get("messages")):
        if m.get("role") == "system":
            out.add("system_developer")
        content = m.get("content")
        if not isinstance(content, list):
            _text(content, out)
            continue
        _blocks(content, out)


def _blocks(content: list[Any], out: set[str]) -> None:
    """The classes of an Anthropic message's blocks."""
    uses = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            uses += 1
        elif kind == "tool_result":
            out.add("tool_results")
            inner = block.get("content")
            if isinstance(inner, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_reference" for b in inner
            ):
                out.add("tool_reference")
            _parts(inner, out)
        elif kind in ("thinking", "redacted_thinking"):
            out.add("reasoning_history")
        elif kind in _IMAGES:
            out.add("image")
        _text(block.get("text"), out)
    if uses > 1:
        out.add("parallel_calls")


def _responses(body: Mapping[str, Any], out: set[str]) -> None:
    if body.get("instructions"):
        out.add("system_developer")
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        out.add("reasoning_effort")
    items = body.get("input")
    if isinstance(items, str):
        _text(items, out)
        return
    calls = 0  # function calls in a row: parallel calls
    for item in _list(items):
        kind = item.get("type")
        calls = calls + 1 if kind == "function_call" else 0
        if calls > 1:
            out.add("parallel_calls")
        if kind is None:
            out.add("untyped_items")
        if kind == "function_call_output":
            out.add("tool_results")
        elif kind == "reasoning":
            out.add("reasoning_history")
        elif item.get("role") in ("system", "developer"):
            out.add("system_developer")
        _parts(item.get("content"), out)


def _list(value: object) -> Iterator[dict[str, Any]]:
    """The dict entries of a list (anything else: none), without a copy."""
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))

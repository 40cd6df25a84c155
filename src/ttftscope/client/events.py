"""Folding a streamed completion's SSE events into what the stream said.

Owns the state built from events (:class:`EventFold`: text, usage, finish reason, failure)
and the rule for each event: OpenAI-compatible JSON chunks, ``[DONE]``, in-stream errors and
garbage. Whatever a server sends ends as data or as a classified failure, never as an
exception. :mod:`.stream` extends the state with the request's timing. A fold's ``api``
picks the rule for the JSON of each event: chat's here, the Anthropic Messages and OpenAI
Responses rules in :mod:`.agentevents`.

>>> from ttftscope.client.sse import SSEDecoder
>>> fold = EventFold(url="http://h/v1/completions")
>>> fold_chunk(SSEDecoder(), b'data: {"choices":[{"text":"hi","finish_reason":"stop"}]}\\n\\n',
...            fold)
True
>>> fold.text, fold.finish_reason, fold.done, fold.failure
(['hi'], 'stop', True, None)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ttftscope.client.agentevents import (
    error_message,
    mid_stream_error,
    on_messages_event,
    on_responses_event,
    read_usage,
)
from ttftscope.client.apis import Api
from ttftscope.client.classify import JSON_ERRORS, RequestFailure, json_problem, server_text
from ttftscope.client.sse import SSEDecoder, SSEEvent
from ttftscope.errors import FailureKind
from ttftscope.records import clean_text

__all__ = ["EventFold", "fold_chunk", "fold_end", "on_event"]


@dataclass(kw_only=True)
class EventFold:
    """What the events of one stream said so far; ``stamps`` are ``perf_counter_ns`` times.

    >>> EventFold(url="u").done
    False
    """

    url: str
    api: Api = "chat"
    stamps: dict[str, int] = field(default_factory=dict)
    failure: RequestFailure | None = None
    done: bool = False
    text: list[str] = field(default_factory=list)
    events: int = 0
    content_events: int = 0
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None

    def stamp(self, name: str, *, first: bool = False) -> None:
        """Stamp ``name`` now; with ``first``, only if it has no stamp yet."""
        if not (first and name in self.stamps):
            self.stamps[name] = time.perf_counter_ns()

    def arrived(self, name: str) -> None:
        """Stamp ``name`` once, at the arrival of the chunk being folded (not when its events
        are parsed: a whole short answer comes in one chunk, and its first token arrived
        with it, not after it).

        >>> f = EventFold(url="u"); f.stamps["last_byte"] = 5; f.arrived("first_content")
        >>> f.stamps["first_content"]
        5
        """
        if name not in self.stamps:
            last = self.stamps.get("last_byte")
            self.stamps[name] = time.perf_counter_ns() if last is None else last


def fold_chunk(decoder: SSEDecoder, chunk: bytes, fold: EventFold) -> bool:
    """Stamp the arrival of one network chunk and fold the events it completes.

    Returns False when reading should stop (an in-stream error or garbage).

    >>> fold_chunk(SSEDecoder(), b"data: <html>\\n\\n", f := EventFold(url="u")), f.failure.kind
    (False, <FailureKind.STREAM_ERROR: 'stream_error'>)
    """
    fold.stamp("last_byte")
    return all(on_event(event, fold) for event in decoder.feed(chunk))


def fold_end(decoder: SSEDecoder, fold: EventFold) -> None:
    """The body ended: fold what the decoder still held (a last unterminated event).

    >>> d, f = SSEDecoder(), EventFold(url="u")
    >>> fold_chunk(d, b"data: [DONE]", f), f.done
    (True, False)
    >>> fold_end(d, f); f.done
    True
    """
    for event in decoder.close():
        if not on_event(event, fold):
            return


def on_event(event: SSEEvent, fold: EventFold) -> bool:
    """Fold one event into ``fold``; False stops reading (in-stream error, garbage).

    >>> f = EventFold(url="u")
    >>> on_event(SSEEvent(data="[" * 100_000), f), f.failure.message[:48]
    (False, 'u sent an event that is JSON nested too deeply t')
    """
    fold.arrived("first_event")
    fold.events += 1
    if event.is_done:
        fold.done = True
        return True
    try:
        obj = json.loads(event.data)
    except JSON_ERRORS as exc:
        fold.failure = RequestFailure(
            FailureKind.STREAM_ERROR,
            f"{fold.url} sent an event that is {json_problem(exc)}: {event.data[:120]!r}",
            hint="is base_url an OpenAI-compatible server? if it is, it is broken: check its log",
        )
        return False
    if not isinstance(obj, dict):
        return True
    return _RULES[fold.api](obj, fold)


def _on_chat_event(obj: dict[str, Any], fold: EventFold) -> bool:
    if "error" in obj or obj.get("object") == "error":
        fold.failure = mid_stream_error(error_message(obj), fold.url)
        return False
    _on_chunk(obj, fold)
    return True


def _on_chunk(obj: dict[str, Any], fold: EventFold) -> None:
    if obj.get("model") and fold.model is None:
        fold.model = server_text(obj["model"], 200)
    usage = obj.get("usage")
    read_usage(fold, usage, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
    choices = obj.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        part = delta if isinstance(delta, dict) else choice
        text = part.get("content") if isinstance(delta, dict) else part.get("text")
        reasoning = part.get("reasoning_content") or part.get("reasoning")
        # Role-only chunks (and empty strings) are framing, not the first token.
        if text or reasoning:
            fold.arrived("first_content")
            fold.content_events += 1
            if isinstance(text, str) and choice.get("index", 0) == 0:
                fold.text.append(clean_text(text))  # JSON "\ud800" escapes: no UTF-8 form
        if choice.get("finish_reason"):
            fold.finish_reason = server_text(choice["finish_reason"], 200)
            fold.done = True


# One rule per API for an event's JSON object; False stops reading.
_RULES: Mapping[Api, Callable[[dict[str, Any], EventFold], bool]] = {
    "chat": _on_chat_event,
    "messages": on_messages_event,
    "responses": on_responses_event,
}

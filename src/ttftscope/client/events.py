"""Folding a streamed completion's SSE events into what the stream said.

Owns the state built from events (:class:`EventFold`: text, usage, finish reason, failure)
and the rule for each event: OpenAI-compatible JSON chunks, ``[DONE]``, in-stream errors and
garbage. Whatever a server sends ends as data or as a classified failure, never as an
exception. :mod:`.stream` extends the state with the request's timing.

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
from dataclasses import dataclass, field
from typing import Any

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
    if "first_event" not in fold.stamps:
        last = fold.stamps.get("last_byte")
        fold.stamps["first_event"] = time.perf_counter_ns() if last is None else last
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
    if "error" in obj or obj.get("object") == "error":
        fold.failure = _stream_error(obj, fold.url)
        return False
    _on_chunk(obj, fold)
    return True


def _stream_error(obj: dict[str, Any], url: str) -> RequestFailure:
    err = obj.get("error")
    message = err.get("message", err) if isinstance(err, dict) else err or obj.get("message")
    said = "(no message)" if message is None or message == "" else server_text(message)
    return RequestFailure(
        FailureKind.STREAM_ERROR,
        f"{url} reported an error mid-stream: {said}",
        hint="the request was accepted but failed while generating; check the server's log",
    )


def _on_chunk(obj: dict[str, Any], fold: EventFold) -> None:
    if obj.get("model") and fold.model is None:
        fold.model = server_text(obj["model"], 200)
    usage = obj.get("usage")
    if isinstance(usage, dict):
        fold.prompt_tokens = _int(usage.get("prompt_tokens"))
        fold.completion_tokens = _int(usage.get("completion_tokens"))
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            fold.cached_tokens = _int(details.get("cached_tokens"))
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
            fold.stamp("first_content", first=True)
            fold.content_events += 1
            if isinstance(text, str) and choice.get("index", 0) == 0:
                fold.text.append(clean_text(text))  # JSON "\ud800" escapes: no UTF-8 form
        if choice.get("finish_reason"):
            fold.finish_reason = server_text(choice["finish_reason"], 200)
            fold.done = True


def _int(value: object) -> int | None:
    # Outside 0..2**63 it is no token count, and float() of a huge one would fail later.
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None

"""What :func:`~ttftscope.sdkinstrument.wrap.instrument` does inside the user's call.

Only timestamps and counters: a :class:`Call` is filled while the SDK works and handed to the
background worker (:mod:`.worker`) when it ends. A stream keeps its own type and
identity: its chunk iterator (``Stream._iterator``, which ``__next__`` and ``__iter__`` read)
is replaced by one that notes when chunks arrive, and its ``close`` by one that ends the call.
Every line of ours that runs in the user's call is guarded; the SDK's own exceptions pass
through unchanged.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from ttftscope.records import Variant
from ttftscope.tracing.context import TraceContext

log = logging.getLogger("ttftscope.instrument")

T = TypeVar("T")
Endpoint = Literal["chat", "completions"]
# arguments of create() that are not part of the request body
_NOT_BODY = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})


@dataclass(slots=True)
class Call:
    """One SDK call, as seen from inside it; times are ``time.monotonic_ns()`` stamps."""

    index: int
    endpoint: Endpoint
    variant: Variant
    model: str | None
    stream: bool
    t_wall: float
    start_ns: int
    busy_at_start: bool  # another call was in flight when this one began
    body: dict[str, Any] | None = None  # a snapshot, only when tokenizing or logging bodies
    end_ns: int | None = None
    returned_ns: int | None = None  # create() returned (a stream: its headers arrived)
    first_event_ns: int | None = None
    first_content_ns: int | None = None
    last_content_ns: int | None = None
    content_chunks: int = 0
    max_gap_ns: int = 0
    response_model: str | None = None
    usage: Any = None
    error: BaseException | None = None
    mid_stream: bool = False
    overlapped: bool = False
    abandoned: bool = False  # a stream closed or collected before its end
    done: bool = field(default=False, repr=False)
    trace_id: str | None = None  # of the traceparent sent (ours or the caller's own)
    request_id: str | None = None  # the X-Request-Id sent (ours or the caller's own)
    trace: TraceContext | None = None  # ours only: the client span carries its ids


def call_variant(endpoint: Endpoint, kwargs: Mapping[str, Any]) -> Variant:
    """``chat`` for chat; ``ids`` for a completions prompt of token ids, else ``text``.

    >>> call_variant("completions", {"prompt": [1, 2]}), call_variant("chat", {})
    ('ids', 'chat')
    """
    if endpoint == "chat":
        return "chat"
    prompt = kwargs.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], str):
        return "ids"
    return "text"


def body_snapshot(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request body as the SDK sends it, copied so later edits by the caller don't show.

    Headers, query and timeout are left out; ``extra_body`` is merged as the SDK merges it.

    >>> body_snapshot({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    ...                "extra_headers": {"x-key": "s"}, "extra_body": {"top_k": 5}})
    {'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}], 'top_k': 5}
    """
    body: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in _NOT_BODY or _omitted(value):
            continue
        if isinstance(value, list):
            value = [dict(v) if isinstance(v, dict) else v for v in value]
        body[key] = value
    extra = kwargs.get("extra_body")
    if isinstance(extra, Mapping):
        body.update(extra)
    return body


def _omitted(value: object) -> bool:
    # openai.NOT_GIVEN / openai.omit: the SDK leaves these out of the body
    return type(value).__name__ in ("NotGiven", "Omit")


def _has_content(chunk: Any) -> bool:
    """Whether a chat or completions chunk carries output (text, tool calls, reasoning)."""
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        if delta is None:
            if getattr(choice, "text", None):
                return True
            continue
        if delta.content or delta.tool_calls or getattr(delta, "reasoning_content", None):
            return True
    return False


class CallTracker:
    """Chunk and end bookkeeping of one call; ``finish`` hands the call on exactly once."""

    def __init__(self, call: Call, finish: Callable[[Call], None]) -> None:
        self.call = call
        self._finish = finish

    def chunk(self, item: Any) -> None:
        call = self.call
        try:
            now = time.monotonic_ns()
            if call.first_event_ns is None:
                call.first_event_ns = now
                call.response_model = getattr(item, "model", None)
            usage = getattr(item, "usage", None)
            if usage is not None:
                call.usage = usage
            if _has_content(item):
                last = call.last_content_ns
                if last is None:
                    call.first_content_ns = now
                elif now - last > call.max_gap_ns:
                    call.max_gap_ns = now - last
                call.last_content_ns = now
                call.content_chunks += 1
        except Exception as exc:  # a chunk shape we don't know: never the user's problem
            _once("chunk", exc)

    def end(
        self,
        error: BaseException | None = None,
        *,
        abandoned: bool = False,
        mid_stream: bool = False,
    ) -> None:
        call = self.call
        if call.done:
            return
        call.done = True
        try:
            call.end_ns = time.monotonic_ns()
            call.error = error
            call.mid_stream = mid_stream
            call.abandoned = abandoned
            self._finish(call)
        except Exception as exc:
            _once("end", exc)


class SyncChunks(Generic[T]):
    """The chunk iterator of a patched ``openai.Stream``: the same items, timed."""

    def __init__(self, inner: Iterator[T], tracker: CallTracker) -> None:
        self._inner, self._tracker = inner, tracker

    def __iter__(self) -> SyncChunks[T]:
        return self

    def __next__(self) -> T:
        try:
            item = next(self._inner)
        except StopIteration:
            self._tracker.end()
            raise
        except BaseException as exc:
            self._tracker.end(exc, mid_stream=True)
            raise
        self._tracker.chunk(item)
        return item


class AsyncChunks(Generic[T]):
    """The chunk iterator of a patched ``openai.AsyncStream``: the same items, timed."""

    def __init__(self, inner: AsyncIterator[T], tracker: CallTracker) -> None:
        self._inner, self._tracker = inner, tracker

    def __aiter__(self) -> AsyncChunks[T]:
        return self

    async def __anext__(self) -> T:
        try:
            item = await self._inner.__anext__()
        except StopAsyncIteration:
            self._tracker.end()
            raise
        except BaseException as exc:
            self._tracker.end(exc, mid_stream=True)
            raise
        self._tracker.chunk(item)
        return item


def patch_stream(stream: Any, tracker: CallTracker, *, is_async: bool) -> bool:
    """Time ``stream`` in place (same object, same type); False if its shape is unknown."""
    inner = getattr(stream, "_iterator", None)
    close = getattr(type(stream), "close", None)
    if inner is None or close is None:
        return False
    # The replacement close() holds the stream weakly: a cycle would keep every finished
    # stream (and its response buffers) alive until the cyclic garbage collector runs.
    ref = weakref.ref(stream)
    if is_async:
        stream._iterator = AsyncChunks(inner, tracker)

        async def aclose() -> None:
            try:
                target = ref()
                if target is not None:
                    await close(target)
            finally:
                tracker.end(abandoned=True)

        stream.close = aclose
    else:
        stream._iterator = SyncChunks(inner, tracker)

        def sclose() -> None:
            try:
                target = ref()
                if target is not None:
                    close(target)
            finally:
                tracker.end(abandoned=True)

        stream.close = sclose
    # a stream dropped unread still ends its call (end() is a no-op once it has ended)
    weakref.finalize(stream, tracker.end, abandoned=True)
    return True


_warned: set[str] = set()


def _once(where: str, exc: BaseException) -> None:
    if where not in _warned:
        _warned.add(where)
        log.warning(
            "ttftscope.instrument: internal error (%s: %s) while timing a call; the call "
            "is unaffected, its record may be incomplete",
            where,
            type(exc).__name__,
        )

"""Arrival times of a stream's content chunks, for inter-token latency (ITL).

:func:`~ttftscope.client.stream.stream_completion` times a request's phases but keeps no
per-chunk times. An httpx transport wrapper stamps every network chunk that carries
content as it arrives, into a list that the request's own task declares in a context
variable (each request runs in its own task, and httpx reads the response in the caller's
task), so concurrent requests never see each other's stamps and the stream code is
unchanged.

A chunk "carries content" when it holds a non-empty ``content``, ``text`` or
``reasoning_content`` string: the role-only first chunk, the usage chunk and ``[DONE]``
do not count. Chunks that hold several events count once (as in ``vllm bench serve``).
"""

from __future__ import annotations

import contextvars
import itertools
import re
import time
from collections.abc import AsyncIterator

import httpx

_CONTENT = re.compile(rb'"(?:content|text|reasoning_content|reasoning)"\s*:\s*"(?!")')
_STAMPS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "ttftscope_bench_chunk_stamps", default=None
)


def carries_content(chunk: bytes) -> bool:
    """Whether a network chunk of an SSE stream holds generated text.

    >>> carries_content(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\\n\\n')
    True
    >>> carries_content(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}')
    False
    """
    return _CONTENT.search(chunk) is not None


def collect_stamps() -> list[int]:
    """Start collecting this task's content-chunk times (``perf_counter_ns``); returns the list.

    >>> collect_stamps() == []
    True
    """
    stamps: list[int] = []
    _STAMPS.set(stamps)
    return stamps


class _StampedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, stamps: list[int]) -> None:
        self._inner, self._stamps = inner, stamps

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            if carries_content(chunk):
                self._stamps.append(time.perf_counter_ns())
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class ChunkTimingTransport(httpx.AsyncBaseTransport):
    """Wraps a transport; responses of tasks that called :func:`collect_stamps` are stamped."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        stamps = _STAMPS.get()
        if stamps is not None and isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _StampedStream(response.stream, stamps)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def gaps_ms(stamps: list[int]) -> list[float]:
    """Milliseconds between consecutive content chunks.

    >>> gaps_ms([0, 2_000_000, 5_000_000])
    [2.0, 3.0]
    """
    return [(b - a) / 1e6 for a, b in itertools.pairwise(stamps)]

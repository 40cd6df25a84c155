"""Received spans kept in memory by trace, bounded, with waits for a trace's spans.

Exporters send spans in batches some time after they end (vLLM's batch processor: after
``OTEL_BSP_SCHEDULE_DELAY``, 5 s unless set), so a caller that has just seen its response end
waits for the spans it needs, with a timeout. A vLLM span is also found by the request id it
carries (our ``X-Request-Id``), for a request whose ``traceparent`` did not reach vLLM.

The oldest traces are dropped beyond ``max_traces``, so a long run cannot grow it unbounded.

>>> from ttftscope.tracing.otlpdecode import Span
>>> store = SpanStore(max_traces=2)
>>> store.add([Span("ab" * 16, "cd" * 8, None, "llm_request", "vllm", 0, 1)])
>>> [s.name for s in store.wait("ab" * 16, timeout_s=0)]
['llm_request']
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ttftscope.tracing.names import VLLM_SPAN
from ttftscope.tracing.otlpdecode import Span
from ttftscope.tracing.vllmspan import REQUEST_ID, sent_request_id

DEFAULT_MAX_TRACES = 20_000


@dataclass
class _Waiter:
    key: str
    names: frozenset[str]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


class SpanStore:
    """Spans by trace id (and vLLM spans also by our request id); thread-safe."""

    def __init__(self, max_traces: int = DEFAULT_MAX_TRACES) -> None:
        self.max_traces = max_traces
        self._traces: OrderedDict[str, list[Span]] = OrderedDict()
        self._alias: dict[str, str] = {}  # our request id -> the trace id vLLM's span is in
        self._aliased: dict[str, list[str]] = {}  # the reverse, to forget with the trace
        self._cond = threading.Condition()
        self._waiters: list[_Waiter] = []
        self.received = 0  # spans ever added
        self.dropped_traces = 0

    def add(self, spans: Iterable[Span]) -> None:
        """Keep ``spans`` and wake whoever waits for them."""
        with self._cond:
            for span in spans:
                self._traces.setdefault(span.trace_id, []).append(span)
                self._traces.move_to_end(span.trace_id)
                self.received += 1
                sent = sent_request_id(_str(span.attributes.get(REQUEST_ID)))
                if span.name == VLLM_SPAN and sent is not None and sent != span.trace_id:
                    self._alias[sent] = span.trace_id
                    self._aliased.setdefault(span.trace_id, []).append(sent)
            while len(self._traces) > self.max_traces:
                old, _ = self._traces.popitem(last=False)
                self.dropped_traces += 1
                for sent in self._aliased.pop(old, ()):
                    self._alias.pop(sent, None)
            self._cond.notify_all()
            self._wake_async()

    def spans(self, key: str) -> list[Span]:
        """The spans of trace ``key``, plus the vLLM span whose request id is ``key``.

        >>> SpanStore().spans("ab" * 16)
        []
        """
        with self._cond:
            return self._spans(key)

    def _spans(self, key: str) -> list[Span]:
        found = list(self._traces.get(key, ()))
        other = self._alias.get(key)
        if other is not None and other != key:
            found += [s for s in self._traces.get(other, ()) if s.name == VLLM_SPAN]
        return found

    def _complete(self, key: str, names: Collection[str]) -> bool:
        have = {s.name for s in self._spans(key)}
        return all(n in have for n in names)

    def wait(
        self, key: str, names: Collection[str] = (VLLM_SPAN,), *, timeout_s: float
    ) -> list[Span]:
        """The spans of ``key`` once every span name in ``names`` is there, or at the timeout
        whatever is there (possibly nothing)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._complete(key, names):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._spans(key)

    async def wait_async(
        self, key: str, names: Collection[str] = (VLLM_SPAN,), *, timeout_s: float
    ) -> list[Span]:
        """:meth:`wait` for an event loop: no thread is held while waiting."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._complete(key, names):
                return self._spans(key)
            waiter = _Waiter(key, frozenset(names), loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout_s)
        except TimeoutError:
            pass
        finally:
            with self._cond:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return self.spans(key)

    def _wake_async(self) -> None:
        for waiter in [w for w in self._waiters if self._complete(w.key, w.names)]:
            self._waiters.remove(waiter)
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits any more
                waiter.loop.call_soon_threadsafe(_resolve, waiter.future)

    def __len__(self) -> int:
        with self._cond:
            return len(self._traces)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None

"""Spans batched to an OTLP/HTTP endpoint by a thread of their own, encoded by ours.

What :func:`~ttftscope.tracing.emit.open_emitter` returns for an endpoint. The caller's
thread only queues: :meth:`BatchEmitter.emit` a list of spans, :meth:`BatchEmitter.emit_later`
a :class:`~ttftscope.tracing.spans.SpanSource` that writes them (the gateway's event loop
hands over its request's stamps and never builds, encodes or sends a span). The exporting
thread wakes every schedule delay (``OTEL_BSP_SCHEDULE_DELAY``, 5 s) or when an eighth of
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (512) requests wait. It writes their spans as OTLP protobuf
(:mod:`~ttftscope.tracing.otlpencode`: the SDK encoder's bytes at a fraction of its cost),
posts a body once it holds that many spans (a request's spans stay in one body;
:mod:`~ttftscope.tracing.otlpsend`) and lets the other threads run between every few
requests it encodes. Beyond ``OTEL_BSP_MAX_QUEUE_SIZE`` (2048) queued requests, new ones
are dropped and counted, as the SDK drops spans. Resources are the SDK's
(``Resource.create``: ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` merged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from ttftscope.tracing.otlpencode import Header, export_body, resource_header, span_bytes
from ttftscope.tracing.otlpsend import OtlpSender, SendConfig
from ttftscope.tracing.spans import SpanData, SpanSource

__all__ = ["BatchEmitter"]

_log = logging.getLogger(__name__)
_YIELD_EVERY = 32  # requests encoded (~0.4 ms) between two chances for others to take the GIL
_YIELD_S = 20e-6  # a sleep, not sleep(0): that gives the GIL back only if no one else takes it

Spans = Sequence[SpanData] | SpanSource


def _written(spans: Spans) -> Sequence[bytes]:
    """The spans as ``ScopeSpans.spans`` fields; none when writing them fails (a bug in one
    request's spans drops those only)."""
    try:
        if hasattr(spans, "span_fields"):
            return spans.span_fields()
        return [span_bytes(s) for s in spans]
    except Exception:
        _log.exception("spans that cannot be written are dropped")
        return ()


def _int_env(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else default


class BatchEmitter:
    """Queues spans on the caller's thread; a daemon thread encodes and posts them."""

    def __init__(
        self,
        sender: OtlpSender,
        environ: Mapping[str, str],
        *,
        schedule_delay_ms: int | None = None,
    ) -> None:
        delay_ms = schedule_delay_ms or _int_env(environ, "OTEL_BSP_SCHEDULE_DELAY", 5000)
        self._delay_s = delay_ms / 1000
        self._max_queue = _int_env(environ, "OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self._batch = _int_env(environ, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)  # spans a post
        self._wake_at = max(1, min(self._batch, self._max_queue) // 8)  # requests queued
        self._sender = sender
        self._queue: deque[tuple[str, Spans]] = deque()
        self._wake = threading.Event()
        self._stopped = False
        self.dropped = 0
        self._headers: dict[str, Header] = {}
        self._thread = threading.Thread(target=self._run, name="ttftscope-otlp", daemon=True)
        self._thread.start()

    @classmethod
    def to(
        cls, url: str, environ: Mapping[str, str], *, schedule_delay_ms: int | None = None
    ) -> BatchEmitter:
        """An emitter posting to ``url`` as the ``OTEL_EXPORTER_OTLP_*`` variables say."""
        sender = OtlpSender(SendConfig.from_env(url, environ))
        return cls(sender, environ, schedule_delay_ms=schedule_delay_ms)

    def emit(self, service: str, spans: Sequence[SpanData]) -> None:
        self._put(service, spans)

    def emit_later(self, service: str, source: SpanSource) -> None:
        """The spans of ``source``, written on the exporting thread."""
        self._put(service, source)

    def shutdown(self) -> None:
        """Send what is queued (within the sender's timeout), then stop the thread."""
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        self._thread.join()
        self._sender.close()

    def _put(self, service: str, spans: Spans) -> None:
        queue = self._queue
        if self._stopped or len(queue) >= self._max_queue:
            self.dropped += 1
            return
        queue.append((service, spans))
        if len(queue) >= self._wake_at and not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            stopping = self._stopped
            try:
                self._export_queued()
            except Exception:  # nothing must end the thread: what follows still goes
                _log.exception("OTLP export failed; its spans are dropped")
            if stopping:
                return

    def _export_queued(self) -> None:
        groups: dict[Header, list[bytes]] = {}
        count = 0
        for i in range(len(self._queue)):
            service, spans = self._queue.popleft()
            fields = _written(spans)
            groups.setdefault(self._header(service), []).extend(fields)
            count += len(fields)
            if count >= self._batch:
                self._sender.send(export_body(groups))
                groups, count = {}, 0
            if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                time.sleep(_YIELD_S)
        if groups:
            self._sender.send(export_body(groups))

    def _header(self, service: str) -> Header:
        head = self._headers.get(service)
        if head is None:
            res = Resource.create({SERVICE_NAME: service})
            attrs = dict(res.attributes)  # str, bool, int, float and their lists
            head = self._headers[service] = resource_header(attrs, schema_url=res.schema_url)  # type: ignore[arg-type]
        return head

"""Spans handed to the OpenTelemetry SDK's batch processor and OTLP/HTTP exporter.

Only :func:`~ttftscope.tracing.emit.open_emitter` imports this, and only when tracing is on
with an SDK exporter given (tests) or a credential provider set; otherwise spans go through
:mod:`~ttftscope.tracing.batchemit`, which writes the same bytes at a fraction of the cost.
Spans are built as finished :class:`~opentelemetry.sdk.trace.ReadableSpan` objects with the
ids that went out in ``traceparent`` and the times already measured, then handed to the
:class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor`: no live span objects while the
request runs, and no id generator to steer (a tracer makes its own ids and reads the clock).

>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> from ttftscope.tracing.spans import SpanData, SpanSource
>>> sink = InMemorySpanExporter()
>>> em = OtlpEmitter(None, exporter=sink)
>>> em.emit("svc", [SpanData("s", "ab" * 16, "cd" * 8, None, 1, 2)])
>>> em.shutdown()
>>> [(s.name, format(s.context.span_id, "016x")) for s in sink.get_finished_spans()]
[('s', 'cdcdcdcdcdcdcdcd')]
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from ttftscope.tracing.spans import SpanData, SpanSource

__all__ = ["OtlpEmitter"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE = InstrumentationScope("ttftscope")
_OK = Status(StatusCode.UNSET)
_KINDS = {"client": SpanKind.CLIENT, "server": SpanKind.SERVER, "internal": SpanKind.INTERNAL}


class OtlpEmitter:
    """Batches finished spans to an OTLP/HTTP endpoint (or to the ``exporter`` given)."""

    def __init__(
        self,
        endpoint: str | None,
        *,
        exporter: SpanExporter | None = None,
        schedule_delay_ms: int | None = None,
    ) -> None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # headers, timeout and compression come from OTEL_EXPORTER_OTLP_* as the SDK reads
            exporter = OTLPSpanExporter(endpoint=endpoint)
        self._processor = BatchSpanProcessor(exporter, schedule_delay_millis=schedule_delay_ms)
        self._resources: dict[str, Resource] = {}

    def emit(self, service: str, spans: Sequence[SpanData]) -> None:
        resource = self._resources.get(service)
        if resource is None:
            resource = self._resources[service] = _Resource.of(service)
        for span in spans:
            self._processor.on_end(_readable(span, resource))

    def emit_later(self, service: str, source: SpanSource) -> None:
        self.emit(service, source.spans())

    def shutdown(self) -> None:
        self._processor.shutdown()  # type: ignore[no-untyped-call]


class _Resource(Resource):
    """A resource that hashes once: the SDK's encoder groups spans by resource, and
    ``Resource.__hash__`` serializes every attribute to JSON each time (~8 us a span)."""

    _hash: int

    @classmethod
    def of(cls, service: str) -> _Resource:
        base = Resource.create({SERVICE_NAME: service})  # OTEL_RESOURCE_ATTRIBUTES merged in
        res = cls(base.attributes, base.schema_url)
        res._hash = Resource.__hash__(res)
        return res

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return Resource.__eq__(self, other)


def _readable(span: SpanData, resource: Resource) -> ReadableSpan:
    trace_id = int(span.trace_id, 16)
    ctx = SpanContext(trace_id, int(span.span_id, 16), is_remote=False, trace_flags=_SAMPLED)
    parent = None
    if span.parent_id is not None:
        parent = SpanContext(trace_id, int(span.parent_id, 16), True, trace_flags=_SAMPLED)
    status = _OK if span.error is None else Status(StatusCode.ERROR, span.error)
    return ReadableSpan(
        name=span.name,
        context=ctx,
        parent=parent,
        resource=resource,
        attributes=span.attributes,
        events=[Event(name, timestamp=ns) for name, ns in span.events],
        kind=_KINDS[span.kind],
        status=status,
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=_SCOPE,
    )

"""Spans as plain data, built after the fact from times already measured.

Nothing here needs OpenTelemetry: a request is timed as it always is, and only when tracing is
on does :mod:`~ttftscope.tracing.emit` turn these into SDK spans. Ids are the ones that went out
in ``traceparent``, so the server's span is a child of the span built here.

>>> from ttftscope.records import RequestRecord
>>> from ttftscope.tracing.context import parse_traceparent
>>> ctx = parse_traceparent("00-" + "ab" * 16 + "-" + "cd" * 8 + "-01")
>>> rec = RequestRecord(run_id="r", index=0, variant="chat", phase="warm", ok=True,
...                     t_wall=1000.0, serialize_ms=1.0, headers_ms=10.0, first_event_ms=12.0,
...                     wire_ttft_ms=15.0, last_byte_ms=40.0)
>>> span = client_span(rec, ctx)
>>> span.name, span.span_id == "cd" * 8, span.parent_id, span.end_ns - span.start_ns
('request', True, None, 41000000)
>>> [e[0] for e in span.events]
['serialize', 'headers', 'first_byte', 'first_token']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ttftscope.records import RequestRecord
from ttftscope.tracing.context import TraceContext
from ttftscope.tracing.names import CLIENT_SPAN, FIRST_BYTE, FIRST_TOKEN

__all__ = ["AttrValue", "SpanData", "SpanKindName", "SpanSource", "client_span"]

AttrValue = str | int | float | bool
# OpenTelemetry's span kinds we use: the request as sent, as received, and work inside a hop
SpanKindName = Literal["client", "server", "internal"]


@dataclass(slots=True)
class SpanData:
    """One finished span: ids as hex, times in nanoseconds since the epoch."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue] = field(default_factory=dict)
    events: list[tuple[str, int]] = field(default_factory=list)
    error: str | None = None  # the span's status: None is OK
    kind: SpanKindName = "internal"


class SpanSource(Protocol):
    """Spans that are built when an emitter gets to them, maybe on another thread (what it
    reads must be final), as plain data or straight as OTLP protobuf."""

    def spans(self) -> Sequence[SpanData]: ...

    def span_fields(self) -> Sequence[bytes]:
        """The same spans as :func:`ttftscope.tracing.otlpencode.span_bytes` writes them."""
        ...


def client_span(rec: RequestRecord, ctx: TraceContext) -> SpanData:
    """The client's ``request`` span of one record: its phases as events, its outcome.

    It starts where client work starts (tokenizing, serializing), ``t_wall`` is when the
    request went to the HTTP stack, and it ends at the last byte (or the last phase reached).
    """
    t0 = int((rec.t_wall or 0.0) * 1e9)
    work_ms = (rec.tokenize_ms or 0.0) + (rec.serialize_ms or 0.0)
    start = t0 - int(work_ms * 1e6)
    phases = [
        ("serialize", 0.0),
        ("connect", rec.connect_ms),
        ("headers", rec.headers_ms),
        (FIRST_BYTE, rec.first_event_ms),
        (FIRST_TOKEN, rec.wire_ttft_ms),
    ]
    events = [(name, t0 + int(ms * 1e6)) for name, ms in phases if ms is not None]
    reached = [ms for _, ms in phases if ms is not None]
    end = t0 + int(max([rec.last_byte_ms or 0.0, *reached]) * 1e6)
    attrs: dict[str, AttrValue] = {
        "ttftscope.run_id": rec.run_id,
        "ttftscope.index": rec.index,
        "ttftscope.variant": rec.variant,
        "ttftscope.phase": rec.phase,
    }
    optional: dict[str, AttrValue | None] = {
        "http.response.status_code": rec.status,
        "gen_ai.request.model": rec.model,
        "gen_ai.usage.input_tokens": rec.prompt_tokens,
        "gen_ai.usage.output_tokens": rec.completion_tokens,
        "ttftscope.ttft_ms": rec.client_ttft_ms,
        "ttftscope.target": rec.target,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    error = None if rec.ok else (rec.error_kind.value if rec.error_kind else "error")
    return SpanData(
        name=CLIENT_SPAN,
        trace_id=ctx.trace_id,
        span_id=ctx.span_id,
        parent_id=None,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        events=events,
        error=error,
        kind="client",
    )

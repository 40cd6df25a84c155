"""Read an OTLP trace export (``ExportTraceServiceRequest``) into plain, typed spans.

Both OTLP/HTTP encodings are read: binary protobuf (``application/x-protobuf``, what
OpenTelemetry SDK exporters and vLLM send) and OTLP/JSON (``application/json``), whose trace
and span ids are hex strings, not base64 as protobuf's JSON mapping would have them. A
``gzip`` body is inflated first, up to :data:`MAX_INFLATED_BYTES`. Anything else raises
:class:`OtlpError` (or :class:`UnsupportedMediaType`), never another exception.

Needs the ``trace`` extra (``opentelemetry-proto``).

>>> body = (b'{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",'
...         b' "value": {"stringValue": "vllm"}}]}, "scopeSpans": [{"spans": [{"traceId":'
...         b' "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name":'
...         b' "llm_request", "startTimeUnixNano": "1000", "endTimeUnixNano": "3000",'
...         b' "attributes": [{"key": "gen_ai.latency.e2e",'
...         b' "value": {"doubleValue": 2e-6}}]}]}]}]}')
>>> [span] = decode_export(body, "application/json")
>>> span.service, span.name, span.duration_ns, span.attributes["gen_ai.latency.e2e"]
('vllm', 'llm_request', 2000, 2e-06)
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ttftscope.errors import MissingExtra, TtftscopeError

# a decompressed body larger than this is refused: a gzip bomb must not exhaust memory
MAX_INFLATED_BYTES = 64 * 1024 * 1024
UNKNOWN_SERVICE = "unknown_service"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"

AttrValue: TypeAlias = (
    "str | bool | int | float | bytes | list[AttrValue] | dict[str, AttrValue] | None"
)


class OtlpError(TtftscopeError):
    """An OTLP body that cannot be read: not the encoding it claims, or not a trace export.

    >>> OtlpError("bad").status
    400
    """

    status = 400  # the HTTP status a receiver answers with


class UnsupportedMediaType(OtlpError):
    """A body in an encoding OTLP/HTTP does not define (a receiver answers 415)."""

    status = 415


@dataclass(frozen=True)
class SpanEvent:
    """A point in time a span marks (``first_token``, ...), with its attributes."""

    name: str
    time_unix_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One received span, its ids as lowercase hex, its times as unix nanoseconds.

    >>> Span("ab" * 16, "cd" * 8, None, "gateway", "ttftscope-gateway", 5, 9).duration_ns
    4
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    service: str
    start_unix_ns: int
    end_unix_ns: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()

    @property
    def duration_ns(self) -> int:
        return self.end_unix_ns - self.start_unix_ns


def decode_export(
    body: bytes, content_type: str | None, content_encoding: str | None = None
) -> list[Span]:
    """Every span of an OTLP/HTTP trace export body, in the order the body lists them.

    >>> decode_export(b"", "application/x-protobuf")
    []
    >>> try:
    ...     decode_export(b"{}", "text/plain")
    ... except UnsupportedMediaType as exc:
    ...     print(exc.status, exc.message[-34:])
    415 application/json, not 'text/plain'

    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(
            f"an OTLP trace export must be {PROTOBUF} or {JSON}, not {media!r}",
            hint="send OTLP/HTTP (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf or http/json)",
        )
    raw = inflate(body, content_encoding)
    request = _parse_json(raw) if media == JSON else _parse_protobuf(raw)
    return spans_of(request)


def inflate(body: bytes, content_encoding: str | None) -> bytes:
    """``body`` without its ``Content-Encoding`` (none/identity or gzip), size-capped.

    >>> import gzip
    >>> inflate(gzip.compress(b"abc"), "gzip"), inflate(b"abc", None)
    (b'abc', b'abc')
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding != "gzip":
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported",
            hint="send the body uncompressed or gzip-compressed",
        )
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, MAX_INFLATED_BYTES + 1)
    except zlib.error as exc:
        raise OtlpError(f"the gzip body does not inflate: {exc}") from None
    if len(out) > MAX_INFLATED_BYTES:
        raise OtlpError(
            f"the gzip body inflates to more than {MAX_INFLATED_BYTES} bytes",
            hint="export in smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)",
        )
    if not inflater.eof:
        raise OtlpError("the gzip body is truncated")
    return out


def _request_type() -> Any:
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    except ImportError as exc:
        raise MissingExtra("trace", ("opentelemetry-proto",), command="traces") from exc
    return trace_service_pb2.ExportTraceServiceRequest


def _parse_protobuf(raw: bytes) -> Any:
    request = _request_type()()
    try:
        request.ParseFromString(raw)
    except Exception as exc:  # protobuf raises DecodeError, and others on odd input
        raise OtlpError(f"the body is not an OTLP protobuf trace export: {exc}") from None
    return request


def _parse_json(raw: bytes) -> Any:
    from google.protobuf import json_format

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise OtlpError(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OtlpError("an OTLP/JSON trace export is a JSON object with resourceSpans")
    request = _request_type()()
    try:
        json_format.ParseDict(_ids_to_base64(data), request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as exc:
        raise OtlpError(f"the body is not an OTLP/JSON trace export: {exc}") from None
    return request


_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


def _ids_to_base64(value: Any) -> Any:
    """OTLP/JSON's hex ids as the base64 protobuf's JSON mapping reads into bytes fields."""
    if isinstance(value, list):
        return [_ids_to_base64(v) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _ID_KEYS and isinstance(item, str):
            try:
                item = base64.b64encode(bytes.fromhex(item)).decode()
            except ValueError:
                raise OtlpError(f"{key} {item[:40]!r} is not a hex id (OTLP/JSON)") from None
        out[key] = _ids_to_base64(item)
    return out


def spans_of(request: Any) -> list[Span]:
    """The spans of a parsed ``ExportTraceServiceRequest`` message."""
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        service = service if isinstance(service, str) and service else UNKNOWN_SERVICE
        for scope_spans in resource_spans.scope_spans:
            spans.extend(_span(s, service) for s in scope_spans.spans)
    return spans


def _span(s: Any, service: str) -> Span:
    return Span(
        trace_id=_hex_id(s.trace_id, 16, "trace id"),
        span_id=_hex_id(s.span_id, 8, "span id"),
        parent_span_id=_hex_id(s.parent_span_id, 8, "parent span id") if s.parent_span_id else None,
        name=s.name,
        service=service,
        start_unix_ns=int(s.start_time_unix_nano),
        end_unix_ns=int(s.end_time_unix_nano),
        attributes=_attributes(s.attributes),
        events=tuple(
            SpanEvent(e.name, int(e.time_unix_nano), _attributes(e.attributes)) for e in s.events
        ),
    )


def _hex_id(raw: bytes, size: int, what: str) -> str:
    if len(raw) != size or not any(raw):
        raise OtlpError(
            f"a span's {what} has {len(raw)} bytes {binascii.hexlify(raw)[:40]!r}; "
            f"OTLP asks for {size} bytes, not all zero"
        )
    return raw.hex()


def _attributes(kvs: Any) -> dict[str, AttrValue]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _value(v: Any) -> AttrValue:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    value: AttrValue = getattr(v, kind)
    return value

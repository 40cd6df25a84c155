"""The OTLP reader: both encodings round-trip generated exports; garbage only raises OtlpError."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from ttftscope.errors import TtftscopeError
from ttftscope.tracing.otlpdecode import (
    JSON,
    PROTOBUF,
    OtlpError,
    Span,
    UnsupportedMediaType,
    decode_export,
)

Scalar = str | bool | int | float | bytes
scalars = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.binary(max_size=8),
)
attributes = st.dictionaries(
    st.text(min_size=1, max_size=12), st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=4
)


def nonzero(size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=size, max_size=size).filter(any)


spans = st.fixed_dictionaries(
    {
        "trace": nonzero(16),
        "span": nonzero(8),
        "parent": st.one_of(st.just(b""), nonzero(8)),
        "name": st.text(max_size=20),
        "start": st.integers(0, 2**63),
        "length": st.integers(0, 2**20),
        "attributes": attributes,
    }
)
exports = st.lists(
    st.tuples(st.text(min_size=1, max_size=10), st.lists(spans, max_size=3)), max_size=3
)


def _pb_value(value: Any) -> AnyValue:
    if isinstance(value, list):
        out = AnyValue()
        out.array_value.values.extend(_pb_value(v) for v in value)
        return out
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=value)


def _json_value(value: Any) -> dict[str, Any]:
    import base64

    if isinstance(value, list):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # OTLP/JSON: 64-bit integers as strings
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    return {"stringValue": value}


def _pb(export: list[tuple[str, list[dict[str, Any]]]]) -> bytes:
    msg = ExportTraceServiceRequest()
    for service, items in export:
        rs = ResourceSpans()
        rs.resource.attributes.append(KeyValue(key="service.name", value=_pb_value(service)))
        scope = ScopeSpans()
        for s in items:
            pb = PbSpan(
                trace_id=s["trace"],
                span_id=s["span"],
                parent_span_id=s["parent"],
                name=s["name"],
                start_time_unix_nano=s["start"],
                end_time_unix_nano=s["start"] + s["length"],
            )
            pb.attributes.extend(
                KeyValue(key=k, value=_pb_value(v)) for k, v in s["attributes"].items()
            )
            scope.spans.append(pb)
        rs.scope_spans.append(scope)
        msg.resource_spans.append(rs)
    body: bytes = msg.SerializeToString()
    return body


def _json(export: list[tuple[str, list[dict[str, Any]]]]) -> bytes:
    resource_spans = []
    for service, items in export:
        out = []
        for s in items:
            span: dict[str, Any] = {
                "traceId": s["trace"].hex(),
                "spanId": s["span"].hex(),
                "name": s["name"],
                "kind": 2,
                "startTimeUnixNano": str(s["start"]),
                "endTimeUnixNano": str(s["start"] + s["length"]),
                "attributes": [
                    {"key": k, "value": _json_value(v)} for k, v in s["attributes"].items()
                ],
            }
            if s["parent"]:
                span["parentSpanId"] = s["parent"].hex()
            out.append(span)
        resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
        resource_spans.append({"resource": resource, "scopeSpans": [{"spans": out}]})
    return json.dumps({"resourceSpans": resource_spans}).encode()


def _expected(export: list[tuple[str, list[dict[str, Any]]]]) -> list[Span]:
    return [
        Span(
            trace_id=s["trace"].hex(),
            span_id=s["span"].hex(),
            parent_span_id=s["parent"].hex() or None,
            name=s["name"],
            service=service,
            start_unix_ns=s["start"],
            end_unix_ns=s["start"] + s["length"],
            attributes=s["attributes"],
        )
        for service, items in export
        for s in items
    ]


@settings(max_examples=60, deadline=None)
@given(exports)
def test_protobuf_round_trip(export: list[tuple[str, list[dict[str, Any]]]]) -> None:
    assert decode_export(_pb(export), PROTOBUF) == _expected(export)


@settings(max_examples=60, deadline=None)
@given(exports)
def test_json_round_trip_with_hex_ids(export: list[tuple[str, list[dict[str, Any]]]]) -> None:
    assert decode_export(_json(export), "application/json; charset=utf-8") == _expected(export)


@settings(max_examples=30, deadline=None)
@given(exports)
def test_gzip_bodies_read_as_plain(export: list[tuple[str, list[dict[str, Any]]]]) -> None:
    body = _pb(export)
    assert decode_export(gzip.compress(body), PROTOBUF, "gzip") == decode_export(body, PROTOBUF)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([PROTOBUF, JSON]), st.sampled_from([None, "gzip"]))
def test_garbage_raises_only_our_error(body: bytes, ctype: str, encoding: str | None) -> None:
    try:
        decode_export(body, ctype, encoding)
    except OtlpError as exc:
        assert isinstance(exc, TtftscopeError) and exc.message


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "name", "x"]
                ),
                inner,
                max_size=3,
            )
        ),
        max_leaves=12,
    )
)
def test_json_of_any_shape_raises_only_our_error(value: object) -> None:
    with contextlib.suppress(OtlpError):
        decode_export(json.dumps(value).encode(), JSON)


def test_a_span_with_a_short_trace_id_is_refused_with_its_size() -> None:
    bad = ExportTraceServiceRequest()
    bad.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 8, span_id=b"\x02" * 8)
    with pytest.raises(OtlpError, match="trace id has 8 bytes"):
        decode_export(bad.SerializeToString(), PROTOBUF)


def test_base64_ids_in_json_are_refused_as_not_hex() -> None:
    body = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"W47/95gDgQPSabYzgT/GDA=="}]}]}]}'
    )
    with pytest.raises(OtlpError, match="not a hex id"):
        decode_export(body, JSON)


def test_missing_service_name_reads_as_unknown_service() -> None:
    body = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"'
        + b"ab" * 16
        + (b'","spanId":"' + b"cd" * 8 + b'","name":"x"}]}]}]}')
    )
    [span] = decode_export(body, JSON)
    assert (span.service, span.parent_span_id, span.start_unix_ns) == ("unknown_service", None, 0)


@pytest.mark.parametrize(
    ("ctype", "encoding"), [("text/plain", None), (None, None), (PROTOBUF, "br")]
)
def test_other_encodings_are_unsupported_media(ctype: str | None, encoding: str | None) -> None:
    with pytest.raises(UnsupportedMediaType) as info:
        decode_export(b"", ctype, encoding)
    assert info.value.status == 415


def test_a_gzip_bomb_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ttftscope.tracing.otlpdecode.MAX_INFLATED_BYTES", 1000)
    with pytest.raises(OtlpError, match="inflates to more than 1000 bytes"):
        decode_export(gzip.compress(b"\0" * 5000), PROTOBUF, "gzip")


def test_non_finite_doubles_survive() -> None:
    msg = ExportTraceServiceRequest()
    span = (
        msg.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    )
    span.attributes.append(KeyValue(key="x", value=AnyValue(double_value=math.inf)))
    [read] = decode_export(msg.SerializeToString(), PROTOBUF)
    assert read.attributes["x"] == math.inf

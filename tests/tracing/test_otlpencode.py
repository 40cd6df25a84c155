"""Our OTLP protobuf encoder against the OpenTelemetry SDK's: the same messages, span by span.

The reference is the path spans took before (:mod:`ttftscope.tracing.otlp`: a
``ReadableSpan`` each, the SDK's ``encode_spans``), parsed by ``opentelemetry-proto``; what
ours writes is parsed by the same and must be the same message, and decode
(:mod:`ttftscope.tracing.otlpdecode`) to the same spans.
"""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ttftscope.errors import FailureKind
from ttftscope.gateway.transport.hoptrace import FinishedHop, begin
from ttftscope.records import RequestRecord
from ttftscope.tracing.context import new_context
from ttftscope.tracing.names import ENCODED_TOKENS, REUSED_TOKENS
from ttftscope.tracing.otlp import _readable, _Resource
from ttftscope.tracing.otlpdecode import decode_export, spans_of
from ttftscope.tracing.otlpencode import export_body, resource_header, span_bytes
from ttftscope.tracing.spans import AttrValue, SpanData, client_span

SERVICE = "ttftscope-gateway"


def _ours(spans: list[SpanData], service: str = SERVICE) -> ExportTraceServiceRequest:
    res = _Resource.of(service)
    head = resource_header(dict(res.attributes), schema_url=res.schema_url)  # type: ignore[arg-type]
    request = ExportTraceServiceRequest()
    request.ParseFromString(export_body({head: [span_bytes(s) for s in spans]}))
    return request


def _sdks(spans: list[SpanData], service: str = SERVICE) -> ExportTraceServiceRequest:
    res = _Resource.of(service)
    return encode_spans([_readable(s, res) for s in spans])


def _finished(status: int, inbound: bool) -> FinishedHop:
    """A request as the gateway hands it over: every stage, token counts, two events."""
    headers = [(b"traceparent", new_context().traceparent.encode())] if inbound else []
    hop = begin(headers, on=True)
    assert hop is not None
    hop.stage("parse", hop.start_ns)
    t0 = time.perf_counter_ns()
    hop.stage("rewrite", t0)
    hop.stage("render", t0)
    hop.stage("encode", t0, {REUSED_TOKENS: 120, ENCODED_TOKENS: 0})
    hop.open("upstream")
    hop.mark("first_byte")
    hop.mark("first_token")
    return hop.finish("/v1/chat/completions", status)


def _gateway_spans(status: int, inbound: bool) -> list[SpanData]:
    return _finished(status, inbound).spans()


def _client_span(ok: bool) -> SpanData:
    rec = RequestRecord(
        run_id="r", index=7, variant="chat", phase="warm", ok=ok, t_wall=1_700_000_000.5,
        serialize_ms=1.0, headers_ms=9.0, first_event_ms=10.0, wire_ttft_ms=12.5,
        last_byte_ms=40.0, status=200 if ok else 504, model="m", prompt_tokens=0,
        error_kind=None if ok else FailureKind.TIMEOUT,
    )  # fmt: skip
    return client_span(rec, new_context())


def test_the_gateways_and_the_clients_spans_are_the_messages_the_sdk_writes() -> None:
    spans = _gateway_spans(200, inbound=True) + _gateway_spans(503, inbound=False)
    assert len(spans) == 12 and spans[6].parent_id is None and spans[0].parent_id is not None
    assert _ours(spans) == _sdks(spans)
    client = [_client_span(True), _client_span(False)]
    assert _ours(client, "ttftscope") == _sdks(client, "ttftscope")


def test_what_ours_writes_decodes_to_the_trace_the_sdks_decodes_to() -> None:
    spans = [*_gateway_spans(200, inbound=True), _client_span(False)]
    ours = spans_of(_ours(spans))
    assert ours == spans_of(_sdks(spans))
    gateway = ours[0]
    assert (gateway.name, gateway.service) == ("gateway", SERVICE)
    assert [s.parent_span_id for s in ours[1:6]] == [gateway.span_id] * 5
    assert ours[4].attributes == {REUSED_TOKENS: 120, ENCODED_TOKENS: 0}
    assert [e.name for e in ours[5].events] == ["first_byte", "first_token"]


def test_a_requests_spans_written_at_once_are_what_each_span_makes_and_what_the_sdk_writes() -> (
    None
):
    for status, inbound in ((200, True), (200, False), (502, True)):
        done = _finished(status, inbound)
        fields = done.span_fields()
        assert fields == [span_bytes(s) for s in done.spans()]
        res = _Resource.of(SERVICE)
        head = resource_header(dict(res.attributes), schema_url=res.schema_url)  # type: ignore[arg-type]
        request = ExportTraceServiceRequest()
        request.ParseFromString(export_body({head: fields}))
        assert request == _sdks(done.spans())


_values = st.one_of(
    st.text(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
)


@given(
    name=st.text(min_size=1),
    attributes=st.dictionaries(st.text(), _values, max_size=6),
    events=st.lists(st.tuples(st.text(), st.integers(0, 2**64 - 1)), max_size=3),
    times=st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)),
    error=st.one_of(st.none(), st.text()),
    kind=st.sampled_from(["client", "server", "internal"]),
    parent=st.booleans(),
)
def test_any_span_of_our_shape_is_the_message_the_sdk_writes(
    name: str,
    attributes: dict[str, AttrValue],
    events: list[tuple[str, int]],
    times: tuple[int, int],
    error: str | None,
    kind: str,
    parent: bool,
) -> None:
    span = SpanData(
        name, "0a" * 16, "0b" * 8, "0c" * 8 if parent else None, times[0], times[1],
        attributes, events, error, kind,  # type: ignore[arg-type]
    )  # fmt: skip
    assert _ours([span]) == _sdks([span])


def test_an_export_of_two_services_reads_back_per_service() -> None:
    a, b = _gateway_spans(200, inbound=True), [_client_span(True)]
    heads = {s: resource_header({"service.name": s}) for s in ("x", "y")}
    body = export_body({heads["x"]: [span_bytes(s) for s in a], heads["y"]: [span_bytes(b[0])]})
    got = decode_export(body, "application/x-protobuf")
    assert [s.service for s in got] == ["x"] * 6 + ["y"]
    assert [s.span_id for s in got] == [s.span_id for s in a + b]

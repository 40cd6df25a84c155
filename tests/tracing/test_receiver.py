"""The OTLP/HTTP receiver, fed by the real OpenTelemetry SDK exporter (as vLLM exports)."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ttftscope.tracing.context import new_context
from ttftscope.tracing.receiver import TraceReceiver, receiving
from ttftscope.tracing.vllmspan import vllm_timing


@pytest.fixture
def receiver() -> Iterator[TraceReceiver]:
    with TraceReceiver() as rx:
        yield rx


def _vllm_like_provider(endpoint: str, *, gzip_body: bool = False) -> TracerProvider:
    """A tracer provider set up as vLLM's init_otel_tracer does, with a short batch delay."""
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    compression = Compression.Gzip if gzip_body else Compression.NoCompression
    exporter = OTLPSpanExporter(endpoint=endpoint, compression=compression)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=20))
    return provider


def _emit_llm_request(provider: TracerProvider, traceparent: str, request_id: str) -> None:
    """What vLLM's output processor does when a request finishes (do_tracing)."""
    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    span = provider.get_tracer("vllm.llm_engine").start_span(
        "llm_request", context=parent, kind=SpanKind.SERVER, start_time=1_000_000_000
    )
    span.set_attributes(
        {
            "gen_ai.latency.time_to_first_token": 0.0421,
            "gen_ai.latency.time_in_queue": 0.0013,
            "gen_ai.latency.time_in_model_prefill": 0.0302,
            "gen_ai.latency.time_in_model_decode": 0.0105,
            "gen_ai.latency.e2e": 0.0530,
            "gen_ai.usage.prompt_tokens": 812,
            "gen_ai.request.id": request_id,
        }
    )
    span.end(end_time=1_053_000_000)


@pytest.mark.parametrize("gzip_body", [False, True])
def test_the_sdk_exporters_spans_arrive_by_trace_id(
    receiver: TraceReceiver, gzip_body: bool
) -> None:
    ctx = new_context()
    provider = _vllm_like_provider(receiver.endpoint, gzip_body=gzip_body)
    try:
        _emit_llm_request(provider, ctx.traceparent, f"chatcmpl-{ctx.request_id}")
        [span] = receiver.store.wait(ctx.trace_id, timeout_s=10)
    finally:
        provider.shutdown()
    assert (span.service, span.parent_span_id) == ("vllm", ctx.span_id)
    timing = vllm_timing(span)
    assert timing is not None
    assert timing.queue_ms == pytest.approx(1.3)
    assert timing.prefill_ms == pytest.approx(30.2)
    assert timing.server_ttft_ms == pytest.approx(42.1)
    assert timing.sent_request_id == ctx.trace_id
    assert receiver.rejected == 0


def test_a_span_in_another_trace_is_found_by_its_request_id(receiver: TraceReceiver) -> None:
    sent, other = new_context(), new_context()  # the traceparent did not reach vLLM
    provider = _vllm_like_provider(receiver.endpoint)
    try:
        _emit_llm_request(provider, other.traceparent, f"cmpl-{sent.request_id}-0")
        spans = receiver.store.wait(sent.trace_id, timeout_s=10)
    finally:
        provider.shutdown()
    assert [s.trace_id for s in spans] == [other.trace_id]


def test_async_waiters_wake_when_the_export_lands(receiver: TraceReceiver) -> None:
    ctx = new_context()
    provider = _vllm_like_provider(receiver.endpoint)

    async def main() -> list[str]:
        waiting = asyncio.create_task(receiver.store.wait_async(ctx.trace_id, timeout_s=10))
        await asyncio.sleep(0)
        _emit_llm_request(provider, ctx.traceparent, f"chatcmpl-{ctx.request_id}")
        return [s.name for s in await waiting]

    try:
        assert asyncio.run(main()) == ["llm_request"]
    finally:
        provider.shutdown()


def test_waiting_for_a_trace_that_never_comes_returns_nothing(receiver: TraceReceiver) -> None:
    assert receiver.store.wait(new_context().trace_id, timeout_s=0.05) == []
    assert asyncio.run(receiver.store.wait_async(new_context().trace_id, timeout_s=0.05)) == []


def _post(
    rx: TraceReceiver, body: bytes, headers: dict[str, str], path: str = "/v1/traces"
) -> tuple[int, bytes, str | None]:
    conn = http.client.HTTPConnection("127.0.0.1", rx.port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("Content-Type")
    finally:
        conn.close()


def test_json_exports_are_answered_in_json(receiver: TraceReceiver) -> None:
    trace = "ab" * 16
    body = json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": trace, "spanId": "cd" * 8}]}]}]}
    ).encode()
    status, answer, ctype = _post(receiver, body, {"Content-Type": "application/json"})
    assert (status, json.loads(answer), ctype) == (200, {}, "application/json")
    assert len(receiver.store.spans(trace)) == 1


def test_protobuf_exports_get_an_export_response(receiver: TraceReceiver) -> None:
    status, answer, ctype = _post(
        receiver,
        gzip.compress(b""),
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert (status, ctype) == (200, "application/x-protobuf")
    assert ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 0


@pytest.mark.parametrize(
    ("body", "headers", "path", "status"),
    [
        (b"\xff\xff", {"Content-Type": "application/x-protobuf"}, "/v1/traces", 400),
        (b"{", {"Content-Type": "application/json"}, "/v1/traces", 400),
        (b"{}", {"Content-Type": "text/plain"}, "/v1/traces", 415),
        (b"x", {"Content-Type": "application/json", "Content-Encoding": "gzip"}, "/v1/traces", 400),
        (b"", {"Content-Type": "application/json"}, "/v1/metrics", 404),
    ],
)
def test_bad_exports_are_refused_and_the_receiver_keeps_serving(
    receiver: TraceReceiver, body: bytes, headers: dict[str, str], path: str, status: int
) -> None:
    assert _post(receiver, body, headers, path)[0] == status
    assert _post(receiver, b"", {"Content-Type": "application/x-protobuf"})[0] == 200


def test_a_taken_port_is_a_clear_error(receiver: TraceReceiver) -> None:
    from ttftscope.errors import TtftscopeError

    with pytest.raises(TtftscopeError, match="trace_receiver_port"), TraceReceiver(receiver.port):
        pass


def test_stop_frees_the_port_and_is_idempotent() -> None:
    rx = TraceReceiver().start()
    port = rx.port
    rx.stop()
    rx.stop()
    with TraceReceiver(port) as again:
        assert again.port == port


def test_an_exporter_kept_alive_reaches_the_next_receiver_on_the_port() -> None:
    first = TraceReceiver().start()
    provider = _vllm_like_provider(first.endpoint)
    try:
        before, after = new_context(), new_context()
        _emit_llm_request(provider, before.traceparent, f"chatcmpl-{before.request_id}")
        assert len(first.store.wait(before.trace_id, timeout_s=10)) == 1
        first.stop()
        with TraceReceiver(first.port) as second:
            _emit_llm_request(provider, after.traceparent, f"chatcmpl-{after.request_id}")
            assert len(second.store.wait(after.trace_id, timeout_s=30)) == 1
        assert first.store.spans(after.trace_id) == []
    finally:
        first.stop()
        provider.shutdown()


def test_a_run_whose_port_is_taken_goes_on_without_spans(
    receiver: TraceReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    # a second --shard, or a probe beside a bench: the first run keeps the port
    with receiving(receiver.port) as store:
        assert store is None
    assert "trace_receiver_port" in caplog.text and "histograms" in caplog.text
    with receiving(None) as store:
        assert store is None

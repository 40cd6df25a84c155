"""The batch emitter: what it posts is what the SDK's exporter posts, with its settings."""

from __future__ import annotations

import pytest

from tests.tracing.otlpsink import OtlpSink
from tests.tracing.test_otlpencode import _client_span, _finished, _gateway_spans
from ttftscope.tracing.batchemit import BatchEmitter
from ttftscope.tracing.emit import open_emitter
from ttftscope.tracing.otlp import OtlpEmitter
from ttftscope.tracing.spans import SpanData


def _ours(url: str) -> BatchEmitter:
    em = open_emitter(url, environ={})
    assert isinstance(em, BatchEmitter)
    return em


def test_it_posts_the_export_the_sdks_batch_processor_and_exporter_post() -> None:
    # the gateway's requests as it hands them over: ours writes them, the SDK's gets SpanData
    requests = [_finished(200, inbound=True), _finished(503, inbound=False)]
    client = _client_span(False)
    with OtlpSink() as ours, OtlpSink() as sdk:
        for em in (_ours(ours.url), OtlpEmitter(sdk.url + "/v1/traces")):
            em.emit("ttftscope", [client])
            for done in requests:
                em.emit_later("ttftscope-gateway", done)
            em.shutdown()
    (got,), (want,) = ours.exports, sdk.exports
    assert got.request == want.request
    assert got.path == want.path == "/v1/traces"
    assert got.headers["content-type"] == "application/x-protobuf"


def test_headers_and_gzip_come_from_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=sekrit-123")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    with OtlpSink() as sink:
        em = _ours(sink.url)
        em.emit("ttftscope", [_client_span(True)])
        em.shutdown()
    (export,) = sink.exports
    assert export.headers["x-collector-key"] == "sekrit-123"
    assert export.headers["content-encoding"] == "gzip"
    assert [span.name for _, span in export.spans()] == ["request"]


def test_a_busy_collector_is_asked_again_and_a_refusal_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with OtlpSink(answers=[503, 429]) as busy, OtlpSink(answers=[400]) as refusing:
        for sink in (busy, refusing):
            em = _ours(sink.url)
            em.emit("ttftscope", [_client_span(True)])
            em.shutdown()
    assert busy.refused == 2 and len(busy.exports) == 1
    assert refusing.refused == 1 and refusing.exports == []


def test_a_body_holds_about_a_batch_of_spans_and_a_request_stays_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "7")
    requests = [_gateway_spans(200, inbound=False) for _ in range(5)]
    with OtlpSink() as sink:
        em = _ours(sink.url)
        for spans in requests:
            em.emit("g", spans)
        em.shutdown()
    # however the thread's wake-ups fall: a body is sent once it holds 7 spans or more, so
    # none holds more than 6 + 6; a request's 6 spans are never split; none is lost or moved
    bodies = [[span.span_id.hex() for _, span in e.spans()] for e in sink.exports]
    assert all(0 < len(body) <= 12 and len(body) % 6 == 0 for body in bodies), bodies
    assert [i for body in bodies for i in body] == [s.span_id for r in requests for s in r]


def test_spans_go_after_the_schedule_delay_and_a_failing_build_drops_only_its_own() -> None:
    with OtlpSink() as sink:
        em = BatchEmitter.to(sink.url, {}, schedule_delay_ms=10)

        class Broken:
            def spans(self) -> list[SpanData]:
                raise RuntimeError("a bug in a span builder")

            def span_fields(self) -> list[bytes]:
                raise RuntimeError("a bug in a span writer")

        em.emit("g", [_client_span(True)])
        em.emit_later("g", Broken())
        em.emit("g", [_client_span(False)])
        assert sink.arrived.wait(30)  # no shutdown: the schedule delay sent it
        em.shutdown()
    assert [span.status.code for _, span in sink.spans()] == [0, 2]  # both, in order
    assert em.dropped == 0


def test_the_sdks_exporter_is_there_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFTSCOPE_OTLP_EXPORTER", "sdk")
    em = open_emitter("http://127.0.0.1:9", environ={})
    assert isinstance(em, OtlpEmitter)
    em.shutdown()

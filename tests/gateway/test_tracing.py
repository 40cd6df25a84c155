"""The gateway passes trace context on, and with tracing on continues the trace in spans."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.faultserver import FaultServer
from tests.gateway.gatewayserver import GatewayServer
from tests.gateway.reference import reference_ids
from tests.tracing.otlpsink import OtlpSink
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.records import RequestRecord
from ttftscope.tracing.context import new_context, parse_traceparent
from ttftscope.tracing.emit import open_emitter
from ttftscope.tracing.join import apply_spans
from ttftscope.tracing.names import ENCODED_TOKENS, REUSED_TOKENS
from ttftscope.tracing.otlpdecode import spans_of

CHAT = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


def _settings(srv: FaultServer, qwen2_dir: Path) -> GatewaySettings:
    ids = UpstreamSettings(
        base_url=srv.base_url("normal"), model_dir=qwen2_dir, models=("tiny-llama",)
    )
    text = UpstreamSettings(
        base_url=srv.base_url("normal"), mode="text", models=("tiny-qwen-chat",)
    )
    return GatewaySettings(upstreams={"ids": ids, "text": text})


def _chat(gw: GatewayServer, model: str, headers: dict[str, str], stream: bool = True) -> None:
    body = {"model": model, "messages": CHAT, "stream": stream}
    resp = httpx.post(
        gw.base_url + "/chat/completions", content=json.dumps(body), headers=headers, timeout=30
    )
    assert resp.status_code == 200, resp.text


def _times(span: ReadableSpan) -> tuple[int, int]:
    assert span.start_time is not None and span.end_time is not None
    return span.start_time, span.end_time


def _hex(span: ReadableSpan, parent: bool = False) -> str:
    ctx = span.parent if parent else span.context
    assert ctx is not None
    return format(ctx.span_id, "016x")


def test_off_the_callers_trace_headers_go_on_unchanged_and_none_are_made_up(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    ctx = new_context()
    with GatewayServer(_settings(upstream, qwen2_dir)) as gw:
        for model in ("tiny-llama", "tiny-qwen-chat"):
            _chat(gw, model, ctx.headers())
            got = upstream.last_request.headers
            assert got["traceparent"] == ctx.traceparent
            assert got["x-request-id"] == ctx.trace_id
        _chat(gw, "tiny-llama", {})
        assert "traceparent" not in upstream.last_request.headers
        assert "x-request-id" not in upstream.last_request.headers


def _traced(
    upstream: FaultServer, qwen2_dir: Path, headers: dict[str, str], **kw: Any
) -> list[ReadableSpan]:
    sink = InMemorySpanExporter()
    with GatewayServer(
        _settings(upstream, qwen2_dir), emitter=open_emitter(None, exporter=sink)
    ) as gw:
        _chat(gw, "tiny-llama", headers, **kw)
    return list(sink.get_finished_spans())


def test_on_the_trace_continues_through_the_gateways_stages_to_the_upstream(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    ctx = new_context()
    spans = {s.name: s for s in _traced(upstream, qwen2_dir, ctx.headers())}
    sent = upstream.last_request.headers
    assert set(spans) == {"gateway", "parse", "rewrite", "render", "encode", "upstream"}
    assert {format(s.context.trace_id, "032x") for s in spans.values()} == {ctx.trace_id}
    gateway = spans["gateway"]
    assert _hex(gateway, parent=True) == ctx.span_id  # a child of the client's span
    for name in ("parse", "rewrite", "render", "encode", "upstream"):
        assert _hex(spans[name], parent=True) == _hex(gateway)
        start, end = _times(spans[name])
        assert _times(gateway)[0] <= start <= end <= _times(gateway)[1]
    # the upstream gets a new parent: the gateway's upstream span; the request id stays
    onward = parse_traceparent(sent["traceparent"])
    assert onward.trace_id == ctx.trace_id and onward.span_id == _hex(spans["upstream"])
    assert onward.span_id != ctx.span_id and sent["x-request-id"] == ctx.trace_id
    ids = reference_ids(qwen2_dir, CHAT)
    counts = dict(spans["encode"].attributes or {})
    assert counts.keys() == {REUSED_TOKENS, ENCODED_TOKENS}
    assert sum(int(str(v)) for v in counts.values()) == len(ids)
    events = [e.name for e in spans["upstream"].events]
    assert events == ["first_byte", "first_token"]
    assert gateway.resource.attributes["service.name"] == "ttftscope-gateway"


def test_on_without_a_trace_in_the_gateway_starts_one_and_names_it_as_the_request_id(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    spans = {s.name: s for s in _traced(upstream, qwen2_dir, {}, stream=False)}
    sent = upstream.last_request.headers
    gateway = spans["gateway"]
    assert gateway.parent is None
    onward = parse_traceparent(sent["traceparent"])
    assert onward.trace_id == format(gateway.context.trace_id, "032x") == sent["x-request-id"]
    assert [e.name for e in spans["upstream"].events] == ["first_byte"]  # no stream


def test_an_unsampled_trace_is_passed_on_but_not_recorded(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    ctx = new_context()
    off = ctx.traceparent[:-2] + "00"
    assert _traced(upstream, qwen2_dir, {"traceparent": off}) == []
    onward = parse_traceparent(upstream.last_request.headers["traceparent"])
    assert onward.trace_id == ctx.trace_id and not onward.sampled


def test_on_over_otlp_the_exported_trace_decodes_and_joins_its_record(
    upstream: FaultServer, qwen2_dir: Path
) -> None:
    ctx = new_context()
    with OtlpSink() as sink:
        with GatewayServer(
            _settings(upstream, qwen2_dir), emitter=open_emitter(sink.url, environ={})
        ) as gw:
            _chat(gw, "tiny-llama", ctx.headers())
        spans = [s for e in sink.exports for s in spans_of(e.request)]
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["encode", "gateway", "parse", "render", "rewrite", "upstream"]
    gateway = by_name["gateway"]
    assert gateway.service == "ttftscope-gateway" and gateway.parent_span_id == ctx.span_id
    assert {s.parent_span_id for s in spans if s is not gateway} == {gateway.span_id}
    sent = parse_traceparent(upstream.last_request.headers["traceparent"])
    assert sent.span_id == by_name["upstream"].span_id
    rec = RequestRecord(
        run_id="r", index=0, variant="chat", phase="warm", ok=True,
        t_wall=gateway.start_unix_ns / 1e9, trace_id=ctx.trace_id,
    )  # fmt: skip
    apply_spans(rec, spans)
    upstream_at = (by_name["upstream"].start_unix_ns - gateway.start_unix_ns) / 1e6
    assert rec.gateway_ms is not None and rec.gateway_ms > 0
    assert rec.gateway_ms == pytest.approx(upstream_at)
    counts = next(t.counts for t in rec.spans if t.name == "encode")
    assert sum(counts.values()) == len(reference_ids(qwen2_dir, CHAT))

"""Traces against the real local vLLM: the probe's client spans and the traced gateway's spans
form one trace per request, and vLLM serves requests that carry traceparent + X-Request-Id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.gateway.gatewayserver import GatewayServer
from tests.tracing.otlpsink import OtlpSink
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.tracing.emit import open_emitter

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as s:
        yield s


def test_a_probe_through_the_traced_gateway_is_one_trace_per_request(
    vllm: LocalServer, sink: OtlpSink
) -> None:
    settings = GatewaySettings(
        upstreams={"local": UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())}
    )
    ep = Endpoint(
        base_url=vllm.base_url,
        metrics_url=vllm.root_url + "/metrics",
        model=vllm.model,
        timeout_s=120,
        max_tokens=4,
    )
    opts = ProbeOptions(context_tokens=[500], repeat=2, num_warmups=0, metrics_settle_s=1)
    client_emitter = open_emitter(sink.url, environ={})
    with GatewayServer(settings, emitter=open_emitter(sink.url, environ={})) as gw:
        opts.gateway_url = gw.base_url
        run = asyncio.run(run_probe(ep, opts, emitter=client_emitter))
    assert client_emitter is not None
    client_emitter.shutdown()  # the gateway's emitter was shut down with the gateway
    assert run.records and all(r.ok and r.trace_id for r in run.records), run.records
    spans = sink.spans()
    clients = {s.trace_id.hex(): s for svc, s in spans if svc == "ttftscope"}
    assert set(clients) == {r.trace_id for r in run.records}
    through = [r for r in run.records if r.variant == "gateway"]
    assert through
    for rec in through:
        mine = {
            s.name: s
            for svc, s in spans
            if svc == "ttftscope-gateway" and s.trace_id.hex() == rec.trace_id
        }
        assert {"gateway", "parse", "render", "encode", "upstream"} <= set(mine)
        assert mine["gateway"].parent_span_id == clients[str(rec.trace_id)].span_id
        assert [e.name for e in mine["upstream"].events] == ["first_byte", "first_token"]
    direct = {r.trace_id for r in run.records if r.variant != "gateway"}
    assert not any(s.trace_id.hex() in direct for svc, s in spans if svc == "ttftscope-gateway")

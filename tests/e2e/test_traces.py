"""vLLM's per-request spans against the real local vLLM: they agree with the /metrics deltas
one request at a time, and every request gets its own under concurrency.

The session's vLLM exports its spans to the receiver's port (tests/e2e/conftest.py); a server
that was already running without traces (``trace_port`` 0 in its state) fails these tests with
a message saying so.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ttftscope.bench.options import BenchOptions
from ttftscope.bench.runner import run_bench
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.gateway.serve import BackgroundGateway
from ttftscope.localserver.model import model_dir
from ttftscope.localserver.traces import SCHEDULE_DELAY_MS
from ttftscope.localstate import LocalServer
from ttftscope.probe import send as probe_send
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.records import RequestRecord, ServerPart
from ttftscope.tracing.emit import open_emitter
from ttftscope.tracing.join import await_spans
from ttftscope.tracing.store import SpanStore

pytestmark = pytest.mark.e2e
PARTS: tuple[ServerPart, ...] = ("server_ttft_ms", "queue_ms", "prefill_ms")


def _endpoint(server: LocalServer) -> Endpoint:
    return Endpoint(
        base_url=server.base_url,
        metrics_url=server.root_url + "/metrics",
        model=server.model,
        timeout_s=300,
        max_tokens=4,
    )


def _trace_port(server: LocalServer) -> int:
    if not server.trace_port:
        pytest.fail(
            f"the local vLLM (pid {server.pid}) runs without --otlp-traces-endpoint: "
            "stop it (ttftscope local-server stop) so the e2e fixture starts it traced"
        )
    return server.trace_port


def test_one_at_a_time_span_and_histogram_figures_agree_within_2_ms(
    vllm: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    histogram: dict[str, dict[str, float | None]] = {}

    async def keep_histogram_figures(
        rec: RequestRecord, store: SpanStore, wait_s: float, *, client_span_id: str | None
    ) -> RequestRecord:
        assert rec.trace_id is not None
        histogram[rec.trace_id] = {p: getattr(rec, p) for p in PARTS}
        return await await_spans(rec, store, wait_s, client_span_id=client_span_id)

    monkeypatch.setattr(probe_send, "await_spans", keep_histogram_figures)
    opts = ProbeOptions(
        context_tokens=(0, 4000),
        repeat=3,
        num_warmups=1,
        trace_port=_trace_port(vllm),
        span_wait_s=15,
    )
    run = asyncio.run(run_probe(_endpoint(vllm), opts))
    assert run.records and all(r.ok for r in run.records)
    for rec in run.records:
        assert rec.trace_id is not None
        assert {p: rec.part_sources.get(p) for p in PARTS} == dict.fromkeys(PARTS, "span"), (
            rec.notes
        )
        for part in PARTS:
            from_span, from_histogram = getattr(rec, part), histogram[rec.trace_id][part]
            assert from_span is not None and from_histogram is not None, (part, rec.notes)
            assert abs(from_span - from_histogram) <= 2.0, (part, from_span, from_histogram)
        assert rec.checks["span_matches_histogram"] is True
        assert [s.name for s in rec.spans if s.service == "server"] == ["llm_request"]


def test_four_at_once_every_record_gets_its_own_span_parts(
    vllm: LocalServer, tmp_path: Path
) -> None:
    opts = BenchOptions(
        sessions=4,
        max_concurrency=4,
        scale=0.05,
        num_prompts=12,
        think_time_s=0.0,
        num_warmups=0,
        seed=time.time_ns() % 2**32,
        max_tokens=4,
        duration_s=150,
        trace_port=_trace_port(vllm),
        span_wait_s=15,
    )
    done = asyncio.run(run_bench(_endpoint(vllm), opts, result_dir=tmp_path))
    assert done.abort is None and len(done.records) == 12
    assert len({r.trace_id for r in done.records}) == 12
    for rec in done.records:
        assert rec.ok, rec.error
        assert {p: rec.part_sources.get(p) for p in PARTS} == dict.fromkeys(PARTS, "span"), (
            rec.notes
        )
        assert rec.queue_ms is not None and rec.prefill_ms is not None
        assert rec.server_ttft_ms is not None and rec.wire_ttft_ms is not None
        assert rec.queue_ms + rec.prefill_ms <= rec.server_ttft_ms + 1.0
        assert rec.server_ttft_ms <= rec.wire_ttft_ms + 1.0  # the server's part of the client's


def test_through_the_traced_gateway_one_record_holds_client_gateway_and_vllm(
    vllm: LocalServer,
) -> None:
    # what the demo does: the gateway exports its spans to the same receiver as vLLM
    port = _trace_port(vllm)
    emitter = open_emitter(f"http://127.0.0.1:{port}", schedule_delay_ms=SCHEDULE_DELAY_MS)
    assert emitter is not None
    upstream = UpstreamSettings(base_url=vllm.base_url, model_dir=model_dir())
    settings = GatewaySettings(upstreams={"local": upstream})
    try:
        with BackgroundGateway(settings, emitter=emitter) as gw:
            opts = ProbeOptions(
                context_tokens=(2000,),
                repeat=2,
                num_warmups=1,
                gateway_url=gw.base_url,
                trace_port=port,
                span_wait_s=15,
            )
            run = asyncio.run(run_probe(_endpoint(vllm), opts))
    finally:
        emitter.shutdown()
    through = [r for r in run.records if r.variant == "gateway" and r.phase != "warmup"]
    direct = [r for r in run.records if r.variant == "direct" and r.phase != "warmup"]
    assert through and direct and all(r.ok for r in run.records)
    for rec in through:
        names = {(s.service, s.name) for s in rec.spans}
        assert {("gateway", "gateway"), ("gateway", "upstream"), ("server", "llm_request")} <= (
            names
        ), (names, rec.notes)
        assert rec.gateway_ms is not None and rec.gateway_ms > 0
        assert rec.part_sources.get("queue_ms") == "span"
        upstream_span = next(s for s in rec.spans if s.name == "upstream")
        vllm_span = next(s for s in rec.spans if s.name == "llm_request")
        # one clock on one machine: vLLM's request lies inside the gateway's upstream hop
        assert upstream_span.start_ms <= vllm_span.start_ms + 1.0
    for rec in direct:
        assert rec.gateway_ms is None
        assert not any(s.service == "gateway" for s in rec.spans)

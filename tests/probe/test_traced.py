"""The probe reads vLLM's span of each request when it runs a trace receiver (fake vLLM)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.tracing.fakevllm import MODEL, TracedVllm, figures
from ttftscope.client.endpoint import Endpoint
from ttftscope.probe.experiments import ProbeOptions, run_probe


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ep(srv: TracedVllm) -> Endpoint:
    root = f"http://127.0.0.1:{srv.port}"
    return Endpoint(base_url=root + "/v1", metrics_url=root + "/metrics", model=MODEL)


def test_each_record_gets_its_own_spans_figures_and_they_match_the_histograms() -> None:
    port = _free_port()
    with TracedVllm(f"http://127.0.0.1:{port}/v1/traces") as srv:
        opts = ProbeOptions(repeat=2, num_warmups=1, trace_port=port, span_wait_s=10)
        run = asyncio.run(run_probe(_ep(srv), opts))
    assert len(run.records) == 4
    for n, rec in enumerate(run.records, start=1):
        want = figures(n)
        assert rec.ok and rec.trace_id is not None
        assert rec.part_sources == dict.fromkeys(
            ("server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms"), "span"
        )
        assert rec.queue_ms == pytest.approx(want["queue"] * 1000)
        assert rec.prefill_ms == pytest.approx(want["prefill"] * 1000)
        assert rec.server_ttft_ms == pytest.approx(want["ttft"] * 1000)
        assert rec.checks["span_matches_histogram"] is True
        assert [(s.service, s.name) for s in rec.spans] == [("server", "llm_request")]
    assert len({r.trace_id for r in run.records}) == 4


def test_a_span_that_disagrees_with_the_histograms_fails_the_check() -> None:
    port = _free_port()
    with TracedVllm(f"http://127.0.0.1:{port}/v1/traces", span_skew_s=0.005) as srv:
        opts = ProbeOptions(repeat=1, num_warmups=0, trace_port=port, span_wait_s=10)
        [cold, warm] = asyncio.run(run_probe(_ep(srv), opts)).records
    for rec in (cold, warm):
        assert rec.checks["span_matches_histogram"] is False
        assert any("disagree on server_ttft_ms by 5.0 ms" in n for n in rec.notes)


def test_without_a_span_the_histogram_figures_stay_with_a_note() -> None:
    port = _free_port()
    with TracedVllm(None) as srv:  # a vLLM that does not export spans
        opts = ProbeOptions(repeat=1, num_warmups=0, trace_port=port, span_wait_s=0.2)
        run = asyncio.run(run_probe(_ep(srv), opts))
    for n, rec in enumerate(run.records, start=1):
        assert rec.part_sources["queue_ms"] == "histogram"
        assert rec.queue_ms == pytest.approx(figures(n)["queue"] * 1000)
        assert any("no vLLM span" in note for note in rec.notes)

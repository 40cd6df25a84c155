"""Probe behaviour on faults real vLLM will not produce on demand (in-process test server)."""

from __future__ import annotations

import asyncio

import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope.client.endpoint import Endpoint
from ttftscope.errors import ModelNotFound
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.probe.summary import summarize_probe


def _ep(srv: FaultServer, scenario: str) -> Endpoint:
    base = srv.base_url(scenario)
    return Endpoint(
        base_url=base,
        metrics_url=base[: -len("/v1")] + "/metrics",
        model="tiny-llama",
        timeout_s=10,
    )


def test_rate_limited_requests_are_recorded_but_never_latency_samples() -> None:
    with FaultServer(FaultOptions(retry_after="3")) as srv:
        run = asyncio.run(
            run_probe(_ep(srv, "rate_limited"), ProbeOptions(repeat=2, num_warmups=0))
        )
    assert len(run.records) == 3
    assert all(not r.ok and r.error_kind == "rate_limited" for r in run.records)
    assert all(r.retry_after == "3" and r.client_ttft_ms is None for r in run.records)
    summary = summarize_probe(run.records, model="m", base_url="b")
    assert summary["failed"] == 3 and summary["median_ttft_ms"] is None


def test_server_without_metrics_degrades_to_client_view_with_a_note() -> None:
    with FaultServer(FaultOptions(first_content_delay_s=0.05)) as srv:
        run = asyncio.run(run_probe(_ep(srv, "normal"), ProbeOptions(repeat=2, num_warmups=1)))
    assert [r.phase for r in run.records] == ["cold", "warmup", "warm", "warm"]
    for r in run.records:
        assert r.ok and r.server_ttft_ms is None and r.checks == {}
        assert r.wire_ttft_ms is not None and r.wire_ttft_ms >= 40
        assert any("no server metrics" in n for n in r.notes)
    # each warm request carries the whole conversation so far plus one fresh turn
    assert summarize_probe(run.records, model="m", base_url="b")["median_ttft_ms"] is not None


def test_dropped_stream_is_a_classified_failure() -> None:
    with FaultServer() as srv:
        run = asyncio.run(run_probe(_ep(srv, "drop"), ProbeOptions(repeat=1, num_warmups=0)))
    assert all(not r.ok and r.error_kind == "stream_error" for r in run.records)


def test_wrong_model_names_the_served_models_not_the_base_url() -> None:
    with FaultServer() as srv:
        ep = _ep(srv, "normal")
        ep.model = "tiny-lama"
        with pytest.raises(ModelNotFound) as info:
            asyncio.run(run_probe(ep, ProbeOptions(repeat=1, num_warmups=0)))
    assert "available: tiny-llama, tiny-qwen-chat" in info.value.message
    assert info.value.hint == "did you mean 'tiny-llama'?"


def test_stages_and_records_are_reported_as_they_happen() -> None:
    stages: list[str] = []
    seen: list[int] = []
    opts = ProbeOptions(repeat=2, num_warmups=0)
    with FaultServer() as srv:
        asyncio.run(
            run_probe(
                _ep(srv, "normal"),
                opts,
                on_stage=stages.append,
                on_record=lambda r: seen.append(r.index),
            )
        )
    assert stages == ["context 0 tokens: chat requests"]
    assert seen == list(range(opts.total_requests))

"""Under concurrency, each bench record gets its own request's server parts from vLLM's span."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.bench.conftest import FAST, run
from tests.tracing.fakevllm import MODEL, TracedVllm, figures
from ttftscope.client.endpoint import Endpoint


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_every_record_of_a_concurrent_run_gets_its_own_span_parts(tmp_path: Path) -> None:
    port = _free_port()
    with TracedVllm(f"http://127.0.0.1:{port}/v1/traces", first_token_s=0.02) as srv:
        root = f"http://127.0.0.1:{srv.port}"
        ep = Endpoint(
            base_url=root + "/v1",
            metrics_url=root + "/metrics",
            model=MODEL,
            timeout_s=10,
            max_tokens=4,
        )
        done = run(ep, FAST, tmp_path, trace_port=port, span_wait_s=10)
    assert len(done.records) == 12 and all(r.ok for r in done.records)
    for rec in done.records:
        assert rec.part_sources.get("queue_ms") == "span", rec.notes
        assert [s.name for s in rec.spans] == ["llm_request"]
    # request n (in the order the server finished them) had queue n ms: each record holds
    # exactly one request's figures, none twice
    got = sorted(r.queue_ms or 0.0 for r in done.records)
    assert got == pytest.approx([figures(n)["queue"] * 1000 for n in range(1, 13)])
    written = [json.loads(line) for line in done.files.records.read_text().splitlines()]
    assert sorted(r["index"] for r in written) == sorted(r.index for r in done.records)
    assert all(r["part_sources"]["server_ttft_ms"] == "span" for r in written)


def test_without_a_receiver_records_have_no_span_parts(tmp_path: Path) -> None:
    with TracedVllm(None) as srv:
        root = f"http://127.0.0.1:{srv.port}"
        ep = Endpoint(
            base_url=root + "/v1",
            metrics_url=root + "/metrics",
            model=MODEL,
            timeout_s=10,
            max_tokens=4,
        )
        done = run(ep, FAST, tmp_path, num_prompts=4)
    assert all(r.part_sources == {} and r.trace_id is not None for r in done.records)

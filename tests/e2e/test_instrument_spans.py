"""instrument(client) against the real local vLLM, exporting its spans: overlapping calls each
get their own queue, prefill and server TTFT from vLLM's ``llm_request`` span.

The session's vLLM exports to the trace receiver's default port (tests/e2e/conftest.py) and
its state file records that, so ``read_traces = "auto"`` (the default) reads the spans.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from openai import OpenAI

from ttftscope import Settings, instrument, instrumentation
from ttftscope.localstate import LocalServer, trace_port_for
from ttftscope.records import RequestRecord, ServerPart
from ttftscope.sdkinstrument.spanjoin import SPAN_NOTE

pytestmark = pytest.mark.e2e
N = 3
PARTS: tuple[ServerPart, ...] = ("queue_ms", "prefill_ms", "server_ttft_ms")


def _overlapping(client: OpenAI, model: str) -> None:
    """N streamed calls, all in flight together: each reads on once every one has its headers."""
    barrier = threading.Barrier(N, timeout=120)

    def one(i: int) -> None:
        messages: Any = [{"role": "user", "content": f"Count to {i + 3}, please."}]
        stream = client.chat.completions.create(
            model=model, messages=messages, max_tokens=8, stream=True
        )
        barrier.wait()
        with stream:
            assert sum(1 for _ in stream) > 0

    with ThreadPoolExecutor(N) as pool:
        list(pool.map(one, range(N)))


def test_three_overlapping_instrumented_calls_all_get_span_sourced_parts(
    vllm: LocalServer,
) -> None:
    settings = Settings()  # read_traces "auto": the traced local server's port
    if trace_port_for(settings, vllm.base_url) != vllm.trace_port or not vllm.trace_port:
        pytest.fail(
            f"the local vLLM (pid {vllm.pid}) is not found traced in its state file "
            f"(trace_port {vllm.trace_port}): stop it (ttftscope local-server stop) so the "
            "e2e fixture starts it with --otlp-traces-endpoint"
        )
    with instrument(
        OpenAI(api_key="EMPTY", base_url=vllm.base_url, max_retries=0), settings=settings
    ) as client:
        _overlapping(client, vllm.model)
        handle = instrumentation(client)
        assert handle.close(timeout=60)
    records: list[RequestRecord] = handle.records
    assert len(records) == N and all(r.ok for r in records)
    assert len({r.trace_id for r in records}) == N
    for rec in records:
        assert all(rec.part_sources.get(p) == "span" for p in PARTS), rec.notes
        assert SPAN_NOTE in rec.notes  # they overlapped, and the span replaced the histograms
        assert rec.queue_ms is not None and rec.queue_ms >= 0
        assert rec.prefill_ms is not None and rec.prefill_ms > 0
        assert rec.server_ttft_ms is not None and rec.client_ttft_ms is not None
        assert rec.server_ttft_ms <= rec.client_ttft_ms + 1.0
        assert rec.checks.get("queue_prefill_le_server_ttft") is True
        assert any(s.name == "llm_request" for s in rec.spans)

"""Every bench request carries its trace; with an emitter each is a client span."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.bench.conftest import FAST, endpoint, quarter
from tests.faultserver import FaultServer
from ttftscope.bench.runner import run_bench
from ttftscope.tracing.context import parse_traceparent
from ttftscope.tracing.emit import open_emitter


def test_records_hold_the_trace_id_sent_and_spans_the_span_id_sent(
    fault: FaultServer, tmp_path: Path
) -> None:
    sink = InMemorySpanExporter()
    emitter = open_emitter(None, exporter=sink)
    opts = dataclasses.replace(FAST, num_prompts=6, num_warmups=1)
    done = asyncio.run(
        run_bench(endpoint(fault), opts, result_dir=tmp_path, count_tokens=quarter, emitter=emitter)
    )
    assert emitter is not None
    emitter.shutdown()
    posts = [r for r in fault.requests if r.path.endswith("/chat/completions")]
    sent = {parse_traceparent(r.headers["traceparent"]) for r in posts}
    assert all(r.headers["x-request-id"] in {c.trace_id for c in sent} for r in posts)
    assert {r.trace_id for r in done.records} == {c.trace_id for c in sent}
    assert len(done.records) == len(sent) == 7  # a warmup and six measured, each its own
    spans = {
        (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"))
        for s in sink.get_finished_spans()
    }
    assert spans == {(c.trace_id, c.span_id) for c in sent}

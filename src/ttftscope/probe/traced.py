"""The probe's records joined with vLLM's span of each request, when the server exports spans.

A probe that runs a trace receiver (``ProbeOptions.trace_port``) waits, after each response,
for vLLM's ``llm_request`` span of that request (vLLM exports it a batch delay after the
request finishes) and fills the record's server figures from it (``part_sources`` "span").
The histogram deltas the probe also took stay as a check: ``span_matches_histogram``.

>>> with span_store(None) as store:
...     store is None
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ttftscope.records import RequestRecord
from ttftscope.tracing.join import apply_spans
from ttftscope.tracing.names import VLLM_SPAN
from ttftscope.tracing.receiver import TraceReceiver
from ttftscope.tracing.store import SpanStore


@contextlib.contextmanager
def span_store(port: int | None) -> Iterator[SpanStore | None]:
    """A receiver on ``127.0.0.1:port`` for the block and its store; None without a port."""
    if port is None:
        yield None
        return
    with TraceReceiver(port) as receiver:
        yield receiver.store


async def attach_spans(rec: RequestRecord, store: SpanStore, wait_s: float) -> RequestRecord:
    """Wait up to ``wait_s`` for vLLM's span of ``rec`` and join what arrived; the same record."""
    if rec.trace_id is None:
        return rec
    spans = await store.wait_async(rec.trace_id, (VLLM_SPAN,), timeout_s=wait_s)
    if spans:
        apply_spans(rec, spans)
    if not any(s.name == VLLM_SPAN for s in spans):
        rec.notes.append(
            f"no vLLM span for this request within {wait_s:.0f}s: the server figures are the "
            "/metrics deltas (is vLLM started with --otlp-traces-endpoint to this receiver?)"
        )
    return rec

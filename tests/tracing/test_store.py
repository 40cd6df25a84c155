"""The span store: bounded, found by trace id and by our request id, waits that end."""

from __future__ import annotations

import threading

from ttftscope.tracing.otlpdecode import Span
from ttftscope.tracing.store import SpanStore


def _span(trace: str, name: str = "llm_request", request_id: str | None = None) -> Span:
    attrs = {} if request_id is None else {"gen_ai.request.id": request_id}
    return Span(trace, "cd" * 8, None, name, "vllm", 0, 1, attrs)


def test_oldest_traces_are_dropped_beyond_the_bound() -> None:
    store = SpanStore(max_traces=3)
    traces = [f"{i:032x}" for i in range(1, 6)]
    store.add(_span(t) for t in traces)
    assert len(store) == 3 and store.dropped_traces == 2
    assert store.spans(traces[0]) == [] and len(store.spans(traces[-1])) == 1


def test_a_request_id_alias_goes_with_its_trace() -> None:
    store = SpanStore(max_traces=1)
    sent = "ef" * 16
    store.add([_span("ab" * 16, request_id=f"chatcmpl-{sent}")])
    assert [s.trace_id for s in store.spans(sent)] == ["ab" * 16]
    store.add([_span("12" * 16)])
    assert store.spans(sent) == []


def test_only_the_vllm_span_of_another_trace_joins_by_request_id() -> None:
    store = SpanStore()
    sent = "ef" * 16
    store.add([_span("ab" * 16, request_id=f"cmpl-{sent}-0"), _span("ab" * 16, "other")])
    assert [s.name for s in store.spans(sent)] == ["llm_request"]


def test_wait_returns_when_every_asked_name_is_there() -> None:
    store = SpanStore()
    trace = "ab" * 16
    store.add([_span(trace, "gateway")])
    adder = threading.Timer(0.01, store.add, args=([_span(trace)],))
    adder.start()
    try:
        got = store.wait(trace, ("gateway", "llm_request"), timeout_s=10)
    finally:
        adder.join()
    assert sorted(s.name for s in got) == ["gateway", "llm_request"]


def test_wait_at_the_timeout_returns_what_is_there() -> None:
    store = SpanStore()
    trace = "ab" * 16
    store.add([_span(trace, "gateway")])
    assert [s.name for s in store.wait(trace, timeout_s=0.01)] == ["gateway"]

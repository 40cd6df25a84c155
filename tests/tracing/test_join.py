"""Records joined with their trace's spans: server figures from vLLM's span, gateway time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ttftscope.records import RequestRecord
from ttftscope.tracing.join import apply_spans, await_spans, join_records
from ttftscope.tracing.otlpdecode import AttrValue, Span
from ttftscope.tracing.store import SpanStore

T0_NS = 1_700_000_000_000_000_000  # the record's client start, as unix ns
TRACE = "ab" * 16


def _rec(trace: str | None = TRACE, **fields: Any) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        index=0,
        variant="chat",
        phase="warm",
        ok=True,
        trace_id=trace,
        t_wall=T0_NS / 1e9,
        wire_ttft_ms=60.0,
        **fields,
    )


def _vllm(
    trace: str = TRACE,
    *,
    ttft: float = 0.050,
    queue: float = 0.004,
    prefill: float = 0.030,
    request_id: str | None = None,
) -> Span:
    attrs: dict[str, AttrValue] = {
        "gen_ai.latency.time_to_first_token": ttft,
        "gen_ai.latency.time_in_queue": queue,
        "gen_ai.latency.time_in_model_prefill": prefill,
        "gen_ai.usage.prompt_tokens": 900,
    }
    if request_id is not None:
        attrs["gen_ai.request.id"] = request_id
    return Span(
        trace,
        "11" * 8,
        "22" * 8,
        "llm_request",
        "vllm",
        T0_NS + 5_000_000,
        T0_NS + 80_000_000,
        attrs,
    )


def _gateway_spans() -> list[Span]:
    g = "33" * 8

    def child(name: str, start_ms: float, end_ms: float, **attrs: int) -> Span:
        return Span(
            TRACE,
            f"{len(name):016x}",
            g,
            name,
            "ttftscope-gateway",
            T0_NS + int(start_ms * 1e6),
            T0_NS + int(end_ms * 1e6),
            attrs,
        )

    return [
        Span(
            TRACE,
            g,
            "44" * 8,
            "gateway",
            "ttftscope-gateway",
            T0_NS + 1_000_000,
            T0_NS + 90_000_000,
        ),
        child(
            "encode", 2.0, 3.5, **{"ttftscope.tokens.reused": 800, "ttftscope.tokens.encoded": 100}
        ),
        child("upstream", 4.0, 89.0),
    ]


def test_span_figures_fill_the_server_fields_with_their_source() -> None:
    rec = apply_spans(_rec(), [_vllm()])
    assert (rec.server_ttft_ms, rec.queue_ms, rec.prefill_ms) == pytest.approx((50.0, 4.0, 30.0))
    assert rec.server_frontend_ms == pytest.approx(16.0)
    assert rec.outside_server_ms == pytest.approx(10.0)
    assert rec.part_sources == dict.fromkeys(
        ("server_ttft_ms", "queue_ms", "prefill_ms", "server_frontend_ms"), "span"
    )
    assert rec.checks == {"server_ttft_le_client": True, "queue_prefill_le_server_ttft": True}
    assert "span_matches_histogram" not in rec.checks  # nothing to compare with


def test_histogram_figures_within_2_ms_agree_and_the_span_is_kept() -> None:
    rec = _rec(server_ttft_ms=51.5, queue_ms=4.1, prefill_ms=29.0, server_frontend_ms=18.4)
    rec.part_sources = dict.fromkeys(("server_ttft_ms", "queue_ms", "prefill_ms"), "histogram")
    apply_spans(rec, [_vllm()])
    assert rec.checks["span_matches_histogram"] is True
    assert rec.server_ttft_ms == pytest.approx(50.0)


def test_histogram_figures_further_off_fail_the_check_with_a_note() -> None:
    rec = apply_spans(_rec(server_ttft_ms=53.0, queue_ms=4.0, prefill_ms=30.0), [_vllm()])
    assert rec.checks["span_matches_histogram"] is False
    assert any("server_ttft_ms by 3.0 ms" in n for n in rec.notes)


def test_gateway_time_is_received_to_sent_upstream_and_spans_are_relative() -> None:
    rec = apply_spans(_rec(), [_vllm(), *_gateway_spans()])
    assert rec.gateway_ms == pytest.approx(3.0)  # gateway start 1 ms, upstream start 4 ms
    by_name = {s.name: s for s in rec.spans}
    assert [s.service for s in rec.spans] == ["gateway", "gateway", "gateway", "server"]
    assert (by_name["encode"].start_ms, by_name["encode"].end_ms) == pytest.approx((2.0, 3.5))
    assert by_name["encode"].counts == {
        "ttftscope.tokens.reused": 800,
        "ttftscope.tokens.encoded": 100,
    }
    assert by_name["llm_request"].counts == {"gen_ai.usage.prompt_tokens": 900}


def test_records_join_by_trace_id_or_by_request_id_and_others_are_left_alone() -> None:
    by_trace, by_request_id, unmatched, no_id = (
        _rec("ab" * 16),
        _rec("cd" * 16),
        _rec("ef" * 16),
        _rec(None),
    )
    spans = [_vllm("ab" * 16), _vllm("99" * 16, request_id="chatcmpl-" + "cd" * 16)]
    assert join_records([by_trace, by_request_id, unmatched, no_id], spans) == 2
    assert by_trace.part_sources["queue_ms"] == by_request_id.part_sources["queue_ms"] == "span"
    assert unmatched.part_sources == no_id.part_sources == {}
    assert unmatched.queue_ms is None


def test_a_vllm_span_of_another_request_in_the_trace_is_not_taken_first() -> None:
    mine = _vllm(request_id=f"chatcmpl-{TRACE}", ttft=0.050)
    other = _vllm(request_id="chatcmpl-" + "77" * 16, ttft=0.500)
    rec = apply_spans(_rec(), [mine, other])
    assert rec.server_ttft_ms == pytest.approx(50.0)


def _await(rec: RequestRecord, store: SpanStore, client_span_id: str) -> RequestRecord:
    """await_spans with a long wait, bounded well below it: waiting in vain fails the test."""

    async def run() -> RequestRecord:
        return await asyncio.wait_for(
            await_spans(rec, store, 60.0, client_span_id=client_span_id), 20.0
        )

    return asyncio.run(run())


def test_vllm_parented_by_our_client_span_waits_for_nothing_more() -> None:
    # a gateway that only passed traceparent on: vLLM's parent is the span we sent
    store = SpanStore()
    store.add([_vllm()])  # parent "22" * 8
    rec = _await(_rec(), store, client_span_id="22" * 8)
    assert rec.gateway_ms is None and rec.part_sources["queue_ms"] == "span"


def test_a_hop_that_continued_the_trace_is_waited_for_and_joined() -> None:
    # vLLM's parent is not our client span: the gateway's spans are on their way
    store = SpanStore()
    store.add([_vllm()])

    async def run() -> RequestRecord:
        joining = asyncio.create_task(await_spans(_rec(), store, 60.0, client_span_id="55" * 8))
        await asyncio.sleep(0)  # the join is waiting now
        assert not joining.done()
        store.add(_gateway_spans())
        return await asyncio.wait_for(joining, 20.0)

    rec = asyncio.run(run())
    assert rec.gateway_ms == pytest.approx(3.0)  # gateway span start 1.0 → upstream start 4.0
    assert {s.name for s in rec.spans} >= {"gateway", "encode", "upstream", "llm_request"}


def test_requests_under_one_callers_trace_each_get_their_own_vllm_span() -> None:
    # the caller's traceparent is shared; each request went out with its own X-Request-Id
    store = SpanStore()
    first, second = "01" * 16, "02" * 16
    store.add([_vllm(queue=0.001, request_id=f"chatcmpl-{first}")])
    store.add([_vllm(queue=0.009, request_id=f"chatcmpl-{second}")])
    got = [
        asyncio.run(await_spans(_rec(request_id=rid), store, 5.0)).queue_ms
        for rid in (first, second)
    ]
    assert got == pytest.approx([1.0, 9.0])


def test_a_span_of_another_request_in_the_same_trace_is_never_taken() -> None:
    rec = apply_spans(_rec(request_id="03" * 16), [_vllm(request_id="chatcmpl-" + "04" * 16)])
    assert rec.queue_ms is None and "queue_ms" not in rec.part_sources

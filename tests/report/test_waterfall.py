"""The waterfall of the slowest and the median request: bars, order and positions."""

from __future__ import annotations

from typing import Any

from tests.results.traced import bench_run, old, traced
from ttftscope.records import RequestRecord, SpanTiming
from ttftscope.report.waterfall import picked_requests, waterfall_figure


def _span(service: str, name: str, start: float, end: float) -> SpanTiming:
    return SpanTiming.model_validate(
        {"service": service, "name": name, "start_ms": start, "end_ms": end}
    )


def _slowest() -> RequestRecord:
    """300 ms through the gateway, its spans given out of order."""
    spans = [
        _span("server", "llm_request", 40.0, 295.0),
        _span("gateway", "encode", 8.0, 30.0),
        _span("client", "request", 0.0, 300.0),
        _span("gateway", "upstream", 30.0, 40.0),
        _span("gateway", "parse", 6.0, 8.0),
        _span("gateway", "gateway", 6.0, 40.0),
    ]
    return traced(
        2,
        queue=100.0,
        prefill=140.0,
        frontend=8.0,
        outside=50.0,
        gateway=34.0,
        spans=spans,
        serialize_ms=2.0,
        connect_ms=1.0,
        request_sent_ms=3.0,
        headers_ms=280.0,
        first_event_ms=290.0,
        wire_ttft_ms=298.0,
        client_ttft_ms=300.0,
    )


def _median() -> RequestRecord:
    """120 ms, no trace: the server's parts come from its fields."""
    return old(
        5,
        ttft=120.0,
        headers_ms=100.0,
        first_event_ms=110.0,
        server_ttft_ms=100.0,
        server_frontend_ms=10.0,
        queue_ms=30.0,
        prefill_ms=60.0,
        outside_server_ms=20.0,
    )


def _records() -> list[RequestRecord]:
    fast = traced(0, queue=1.0, prefill=40.0, frontend=2.0, outside=7.0)  # TTFT 50
    mid = traced(1, queue=50.0, prefill=120.0, frontend=5.0, outside=25.0)  # TTFT 200
    return [fast, _slowest(), mid, _median()]


def _bars(trace: Any) -> list[tuple[str, float, float]]:
    return [(y, b, b + x) for y, b, x in zip(trace.y, trace.base, trace.x, strict=True)]


def test_the_slowest_and_the_lower_middle_request_are_picked() -> None:
    picks = picked_requests(bench_run(_records()))
    # TTFTs 50, 120, 200, 300: the slowest is 300, the lower middle of four is 120
    assert [(kind, r.index) for kind, r in picks] == [("slowest", 2), ("median", 5)]


def test_spans_follow_the_clients_phases_in_time_order() -> None:
    fig = waterfall_figure([bench_run(_records())])
    slowest, median = fig.data
    assert _bars(slowest) == [
        ("client · serialize", 0.0, 2.0),
        ("client · connect", 2.0, 3.0),
        ("client · send", 3.0, 5.0),
        ("client · headers", 5.0, 282.0),
        ("client · first event", 282.0, 292.0),
        ("client · first token", 292.0, 300.0),
        ("client · request", 0.0, 300.0),
        ("gateway · gateway", 6.0, 40.0),
        ("gateway · parse", 6.0, 8.0),
        ("gateway · encode", 8.0, 30.0),
        ("gateway · upstream", 30.0, 40.0),
        ("server · llm_request", 40.0, 295.0),
        # inside vLLM's span, from its arrival (40) after the front end's 8 ms
        ("server · queue", 48.0, 148.0),
        ("server · prefill", 148.0, 288.0),
    ]
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0].startswith("slowest request: #2, gateway") and "(spans)" in titles[0]
    assert titles[1].startswith("median request: #5") and "by estimate" in titles[1]
    assert _bars(median) == [
        ("client · headers", 0.0, 100.0),
        ("client · first event", 100.0, 110.0),
        ("client · first token", 110.0, 120.0),
        # server TTFT 100 ends at the first token (120): front end, queue, prefill from 20
        ("server · front end", 20.0, 30.0),
        ("server · queue", 30.0, 60.0),
        ("server · prefill", 60.0, 120.0),
    ]


def test_one_request_is_drawn_once_and_no_request_says_so() -> None:
    fig = waterfall_figure([bench_run([_median()])])
    assert [t.name for t in fig.data] == ["slowest"]
    empty = waterfall_figure([bench_run([])])
    assert not empty.data
    assert empty.layout.annotations[0].text == "no request with a client TTFT"

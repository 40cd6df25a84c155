"""Decomposition and consistency checks on hand-made results and breakdowns."""

from __future__ import annotations

from ttftscope.client.stream import PhaseTimes, StreamResult
from ttftscope.decompose import RequestIdentity, add_server_view, client_record
from ttftscope.metrics.engines import ServerBreakdown
from ttftscope.records import RequestRecord


def _result(first_content: float = 100.0, serialize: float = 2.0) -> StreamResult:
    phases = PhaseTimes(
        connect_ms=1,
        request_sent_ms=3,
        headers_ms=20,
        first_event_ms=50,
        first_content_ms=first_content,
        last_byte_ms=first_content + 10,
    )
    return StreamResult(ok=True, status=200, phases=phases, serialize_ms=serialize)


def _bd(**kw: float) -> ServerBreakdown:
    base = {
        "ttft_s": 0.080,
        "queue_s": 0.005,
        "prefill_s": 0.050,
        "ttft_count": 1,
        "queue_count": 1,
        "prefill_count": 1,
        "e2e_count": 1,
    }
    base.update(kw)
    return ServerBreakdown(engine="vllm-v1", **base)  # type: ignore[arg-type]


def _record(
    result: StreamResult, bd: ServerBreakdown, tokenize_ms: float | None = None
) -> RequestRecord:
    rec = client_record(result, RequestIdentity("r", 0, "chat", "warm"), tokenize_ms=tokenize_ms)
    return add_server_view(rec, bd)


def test_parts_come_from_client_and_server_views() -> None:
    rec = _record(_result(), _bd(), tokenize_ms=3.0)
    assert rec.wire_ttft_ms == 100.0
    assert rec.client_ttft_ms == 105.0  # wire + tokenize + serialize
    assert abs(rec.server_frontend_ms - 25.0) < 1e-6  # type: ignore[operator]
    assert abs(rec.outside_server_ms - 20.0) < 1e-6  # type: ignore[operator]
    assert rec.checks == {
        "server_ttft_le_client": True,
        "queue_prefill_le_server_ttft": True,
        "one_observation_each": True,
    }
    assert not rec.contaminated


def test_server_slower_than_client_fails_a_check() -> None:
    rec = _record(_result(first_content=50.0), _bd())
    assert rec.checks["server_ttft_le_client"] is False


def test_queue_plus_prefill_above_ttft_fails_a_check() -> None:
    rec = _record(_result(), _bd(prefill_s=0.1))
    assert rec.checks["queue_prefill_le_server_ttft"] is False


def test_queue_and_prefill_each_below_ttft_but_together_above_fails_the_check() -> None:
    # 40 + 50 ms > 80 ms server TTFT, though prefill alone (or queue alone) fits: the check
    # must add both parts (issue 34: a check reading prefill alone passed every other test)
    rec = _record(_result(), _bd(queue_s=0.040, prefill_s=0.050))
    assert rec.checks["queue_prefill_le_server_ttft"] is False
    rec = _record(_result(), _bd(queue_s=0.025, prefill_s=0.050))  # 75 ms: within TTFT
    assert rec.checks["queue_prefill_le_server_ttft"] is True


def test_extra_observations_mark_the_sample() -> None:
    rec = _record(_result(), _bd(ttft_count=2, e2e_count=2))
    assert rec.contaminated
    assert rec.checks["one_observation_each"] is False
    assert any("another client" in n for n in rec.notes)


def test_missing_metrics_leave_checks_out_not_passed() -> None:
    bd = ServerBreakdown(engine="unknown", notes=["no TTFT histogram"])
    rec = _record(_result(), bd)
    assert rec.checks == {}
    assert rec.server_frontend_ms is None
    assert "no TTFT histogram" in rec.notes


def test_the_servers_own_render_time_is_a_measured_part_of_the_front_end() -> None:
    rec = _record(_result(), _bd(render_s=0.012, render_count=1))
    assert rec.server_render_ms == 12.0 and rec.part_sources["server_render_ms"] == "histogram"
    assert rec.checks["render_le_frontend"] and rec.checks["one_observation_each"]
    too_long = _record(_result(), _bd(render_s=0.030, render_count=1))  # front end is 25 ms
    assert too_long.checks["render_le_frontend"] is False
    shared = _record(_result(), _bd(render_s=0.012, render_count=2))
    assert shared.contaminated
    older = _record(_result(), _bd())  # vLLM before 0.34 exports no render histogram
    assert older.server_render_ms is None and "server_render_ms" not in older.part_sources


def test_render_time_is_read_from_vllm_034s_histogram() -> None:
    from ttftscope import metrics_delta, parse_metrics, server_breakdown

    def scrape(n: int, total: float) -> str:
        name = "vllm:request_render_duration_seconds"
        labels = 'model_name="m",request_type="chat"'
        return (
            f"# TYPE {name} histogram\n"
            f'{name}_bucket{{{labels},le="+Inf"}} {n}\n'
            f"{name}_count{{{labels}}} {n}\n{name}_sum{{{labels}}} {total}\n"
        )

    before = parse_metrics(scrape(3, 0.5), taken_ns=0)
    after = parse_metrics(scrape(4, 0.52), taken_ns=10**9)
    bd = server_breakdown(metrics_delta(before, after))
    assert bd.render_count == 1 and abs((bd.render_s or 0) - 0.02) < 1e-9

"""The terminal table fits 80 columns; contamination is said in words, with the advice."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from ttftscope.bench.output.bench_summary import CONTAMINATION_ADVICE
from ttftscope.bench.output.live import LiveStats
from ttftscope.bench.output.table import print_bench_summary
from ttftscope.records import RequestRecord

ROW: dict[str, Any] = {
    "completed": 123456,
    "failed": 7890,
    "request_throughput": 1234.567,
    "median_ttft_ms": 123456.7,
    "p99_ttft_ms": 987654.3,
    "median_tpot_ms": 12.3,
    "peak_waiting": 512.0,
}


def _render(summary: dict[str, Any]) -> str:
    out = io.StringIO()
    print_bench_summary(summary, Console(file=out, width=80, force_terminal=False))
    return out.getvalue()


def test_the_table_fits_80_columns_with_long_names_and_big_numbers() -> None:
    summary = {
        "run_id": "bench-0123456789",
        "model": "Qwen/Qwen3-Coder-480B-A35B-Instruct",
        "targets": {"direct": ROW, "gateway-eu-west-1-replica-3": ROW},
        "duration": 612.3,
        "completed": 2,
        "failed": 0,
    }
    text = _render(summary)
    assert all(len(line) <= 80 for line in text.splitlines())
    rows = [line for line in text.splitlines() if "123,457" in line]
    assert len(rows) == 2 and "987,654" in rows[0] and "1234.57" in rows[0]


def test_a_contaminated_run_says_so_with_the_advice() -> None:
    summary = {
        "targets": {"direct": ROW},
        "contaminated": True,
        "rate_limited": 5,
        "rate_limited_share": 0.05,
        "contamination_advice": CONTAMINATION_ADVICE,
        "cancelled": 2,
    }
    text = " ".join(_render(summary).split())
    assert "CONTAMINATED: 5 of the requests were rate limited (429, 5.0%)" in text
    assert "separate API key" in text and "lower --request-rate" in text
    assert "2 request(s) in flight at the end of --duration were cancelled" in text


def test_live_stats_ignore_warmups_and_failures_in_latency() -> None:
    stats = LiveStats(total=3)
    base = {"run_id": "r", "index": 0, "variant": "chat"}
    stats.add(RequestRecord(**base, phase="warmup", ok=True, client_ttft_ms=1.0))  # type: ignore[arg-type]
    stats.add(RequestRecord(**base, phase="warm", ok=False, error_kind="rate_limited"))  # type: ignore[arg-type]
    stats.add(RequestRecord(**base, phase="warm", ok=True, client_ttft_ms=40.0))  # type: ignore[arg-type]
    assert (stats.completed, stats.failed, stats.rate_limited) == (1, 1, 1)
    assert stats.ttft_percentile(99) == 40.0 and "(429: 1)" in stats.line()


def test_live_percentiles_are_the_summarys_linear_ones() -> None:
    stats = LiveStats(total=4)
    for ms in (40.0, 10.0, 30.0, 20.0):
        stats.add(
            RequestRecord(
                run_id="r", index=0, variant="chat", phase="warm", ok=True, client_ttft_ms=ms
            )
        )
    # linear interpolation between ranks, as bench-summary.json's median and p99
    assert (stats.ttft_percentile(50), stats.ttft_percentile(99)) == (25.0, 39.7)

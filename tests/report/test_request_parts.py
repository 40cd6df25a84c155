"""Per-request parts in the report: the terminal table and the page's table, or the fallback."""

from __future__ import annotations

import html
import io
from pathlib import Path

from rich.console import Console

from tests.report.fixtures import BenchDir
from tests.results.traced import bench_run, mixed, old
from ttftscope.findings import Diagnosis
from ttftscope.report.html import render_html
from ttftscope.report.terminal import print_request_parts
from ttftscope.results.request_parts import NO_PARTS
from ttftscope.results.runs import Run, load_runs


def _old_bench(tmp_path: Path) -> Run:
    """A bench without traces: old-style records, the server's means in its summary."""
    summary = {
        "run_id": "bench-old",
        "completed": 2,
        "mean_ttft_ms": 200.0,
        "server_mean_ttft_ms": 180.0,
        "server_mean_queue_ms": 80.0,
        "server_mean_prefill_ms": 60.0,
        "server_mean_frontend_ms": 40.0,
    }
    records = [
        old(0, target="direct", run_id="bench-old"),
        old(1, target="direct", run_id="bench-old"),
    ]
    (run,) = load_runs([BenchDir(records=records, summary=summary).write(tmp_path / "old")])
    return run


def _terminal(runs: list[Run]) -> list[str]:
    out = io.StringIO()
    print_request_parts(runs, Console(file=out, width=80, color_system=None))
    return out.getvalue().splitlines()


def test_the_terminal_shows_each_buckets_parts_within_80_columns() -> None:
    lines = _terminal([bench_run(mixed())])
    assert all(len(line) <= 80 for line in lines)
    assert "per-request TTFT parts (ms), bench-t" in lines[1]
    rows = [line.split() for line in lines if line.split()[-1:] in (["4s"], ["2h"])]
    # n: how many requests had queue, prefill, front end, gateway, outside, and from where
    assert rows == [
        ["n", "4s", "4s", "4s", "4s", "4s"],
        ["n", "2h", "2h", "2h", "–", "2h"],
    ]


def test_without_request_parts_the_terminal_says_so_with_the_run_wide_means(
    tmp_path: Path,
) -> None:
    text = " ".join(" ".join(_terminal([_old_bench(tmp_path)])).split())
    assert f"old: {NO_PARTS}" in text
    # outside the server: client mean 200 − server mean 180
    assert (
        "run-wide means (ms), direct: outside the server 20.0, server front end 40.0, "
        "queue 80.0, prefill 60.0" in text
    )
    assert "per-request TTFT parts" not in text


def test_the_page_has_the_parts_table_and_the_fallback_note(tmp_path: Path) -> None:
    page = render_html([bench_run(mixed()), _old_bench(tmp_path)], Diagnosis(), generated="t")
    assert "<table id='request-parts'>" in page
    # gateway at 8K–16K: queue p50 25.0 / p90 37.0 over 4 requests from spans
    assert "<td>25.0 / 37.0<br><span class='notes'>4 span</span></td>" in page
    assert "<td>2.0 / 3.6<br><span class='notes'>2 histogram</span></td>" in page
    assert f"old: {html.escape(NO_PARTS)}" in page

"""Medians the report shows equal the probe's own summary; buckets, series and histograms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.fixtures import Parts, bench_records, probe_records, record, write_probe_dir
from ttftscope.results.parts import (
    Buckets,
    hit_rate,
    largest_bucket,
    latency_samples,
    records_breakdown,
    split_series,
    summary_breakdown,
)
from ttftscope.results.runs import load_runs
from ttftscope.results.summaries import BenchSummary


def test_group_medians_equal_the_probe_summary_written_beside_the_records(tmp_path: Path) -> None:
    path = write_probe_dir(tmp_path, probe_records())
    groups = json.loads(path.with_suffix(".summary.json").read_text())["groups"]
    (run,) = load_runs([tmp_path])
    assert len(groups) == 6
    for s in split_series(run):
        for g in (g for g in groups if g["variant"] == s.name):
            mine = [r for r in s.records if r.context_tokens_target == g["context_tokens"]]
            found = records_breakdown(mine)
            assert found is not None and found.n == g["n"] == 3
            assert found.ttft_ms == pytest.approx(g["median_ttft_ms"], abs=1e-3)
            assert found.part("queue") == pytest.approx(g["median_queue_ms"], abs=1e-3)
            assert found.part("prefill") == pytest.approx(g["median_prefill_ms"], abs=1e-3)
            front = g["median_server_frontend_ms"]
            assert found.part("server_frontend") == pytest.approx(front, abs=1e-3)
            # outside the server also holds the client's serialization (0.1 ms each)
            outside = g["median_outside_server_ms"] + 0.1
            assert found.part("outside_server") == pytest.approx(outside, abs=1e-3)
            assert hit_rate(mine) == pytest.approx(g["prefix_hit_rate"], abs=1e-4)


def test_probe_series_exclude_cold_and_overlapped_requests_bench_keeps_cold() -> None:
    recs = [record(0, phase="cold"), record(1), record(2, contaminated=True)]
    assert [r.index for r in latency_samples(recs, "probe")] == [1]
    assert [r.index for r in latency_samples(recs, "bench")] == [0, 1, 2]


def test_parts_add_up_to_ttft_per_request_and_shares_follow() -> None:
    r = record(
        0, Parts(frontend=64.0, queue=0.0, prefill=20.0, outside=10.0, serialize=1.0, tokenize=5.0)
    )
    found = records_breakdown([r])
    assert found is not None
    assert sum(v for _, v in found.parts) == pytest.approx(found.ttft_ms) == 100.0
    assert found.share("server_frontend") == pytest.approx(0.64)
    top = found.dominant()
    assert top is not None and top[0] == "server_frontend" and top[1] == pytest.approx(0.64)


def test_a_bench_without_per_request_parts_falls_back_to_its_histograms() -> None:
    summaries = [
        BenchSummary(
            completed=30, mean_ttft_ms=100.0, server_mean_ttft_ms=90.0, server_mean_queue_ms=50.0
        ),
        BenchSummary(
            completed=10, mean_ttft_ms=200.0, server_mean_ttft_ms=150.0, server_mean_queue_ms=10.0
        ),
    ]
    found = summary_breakdown(summaries)
    assert found is not None and (found.source, found.stat, found.n) == ("histograms", "mean", 40)
    assert found.ttft_ms == pytest.approx(125.0)  # weighted by completed requests
    assert found.part("queue") == pytest.approx(40.0)
    assert found.part("outside_server") == pytest.approx(125.0 - 105.0)
    assert summary_breakdown([BenchSummary(completed=3)]) is None
    # a shard that lacks a figure leaves it out rather than skewing the average
    partial = summary_breakdown([*summaries, BenchSummary(completed=5, mean_ttft_ms=100.0)])
    assert partial is None


def test_few_sizes_are_exact_buckets_a_workload_draw_is_binned_by_powers_of_two() -> None:
    sweep = probe_records(sizes=(0, 8000, 32000), variants=("chat",), repeat=1)
    assert Buckets.for_records(sweep).exact
    label, mine = largest_bucket(sweep)
    assert label == "32,000 tokens" and {r.context_tokens_target for r in mine} == {32000}
    drawn = bench_records(12, Parts())  # 6000..7500 tokens + 500-token prompts
    assert not Buckets.for_records(drawn, "bench").exact  # a draw, however few its sizes
    buckets = Buckets.for_records([*drawn, *(record(i, size=90_000 + i) for i in range(8))])
    assert not buckets.exact
    assert {buckets.label(buckets.key(r)) for r in drawn} == {"4K–8K tokens"}

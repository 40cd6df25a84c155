"""Summaries and samples are read leniently: a bad value costs its key, not the file."""

from __future__ import annotations

from pathlib import Path

from ttftscope.results.files import Sample, read_summary
from ttftscope.results.summaries import BenchSummary, ProbeSummaryHead, shard_position


def test_bench_summary_keeps_vllm_bench_keys_and_drops_bad_values(tmp_path: Path) -> None:
    path = tmp_path / "bench-summary.json"
    path.write_text(
        '{"completed": 98, "failed": 2, "duration": 31.5, "request_throughput": 3.1,'
        ' "median_ttft_ms": 840.0, "p99_ttft_ms": "n/a", "seed": 7, "shard": "2/4",'
        ' "server_mean_queue_ms": 120.5, "future": {"nested": [1, 2]},'
        ' "targets": {"direct": {"completed": 50, "peak_waiting": 4}, "bad": 3}}'
    )
    summary, dropped = read_summary(path, BenchSummary)
    assert summary is not None and dropped == ("p99_ttft_ms", "targets")
    assert (summary.completed, summary.failed, summary.duration) == (98, 2, 31.5)
    assert summary.median_ttft_ms == 840.0
    assert summary.server_mean_queue_ms == 120.5 and summary.p99_ttft_ms is None
    assert shard_position(summary.shard) == (2, 4)


def test_unreadable_summaries_are_absent_not_fatal(tmp_path: Path) -> None:
    for name, text in (("torn.json", '{"completed": 1'), ("list.json", "[1, 2]")):
        (tmp_path / name).write_text(text)
        assert read_summary(tmp_path / name, BenchSummary) == (None, ())
    assert read_summary(tmp_path / "missing.json", ProbeSummaryHead) == (None, ())


def test_shard_positions_outside_one_to_n_are_no_position() -> None:
    assert [shard_position(v) for v in ("1/1", " 3 / 4 ", "0/2", "3/2", "a/b", 2)] == [
        (1, 1),
        (3, 4),
        None,
        None,
        None,
        None,
    ]


def test_samples_read_benchs_lines_and_the_short_names() -> None:
    bench = Sample.model_validate_json(
        '{"t_s": 1.5, "t_wall": 1790000001.5, "source": "http://h:8000/metrics",'
        ' "targets": ["direct", "gateway"], "ok": true, "kv_cache_usage": 0.25, "waiting": 2}'
    )
    assert (bench.t, bench.kv_usage, bench.name) == (1.5, 0.25, "direct, gateway")
    short = Sample.model_validate_json('{"t": 2, "target": "gw", "kv_usage": 0.5}')
    assert (short.t, short.kv_usage, short.name, short.ok) == (2.0, 0.5, "gw", True)
    assert Sample.model_validate_json('{"t": 0, "source": "http://h/metrics"}').name == (
        "http://h/metrics"
    )

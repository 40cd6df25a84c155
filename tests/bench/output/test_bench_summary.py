"""The summary's per-bucket parts (schema 2), and summaries of schema 1 still read."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from tests.results.traced import mixed, old
from ttftscope.bench.output.bench_summary import SUMMARY_SCHEMA_VERSION, RunFacts, summarize_bench
from ttftscope.bench.output.table import print_bench_summary
from ttftscope.errors import FailureKind
from ttftscope.records import RequestRecord
from ttftscope.results.request_parts import NO_PARTS
from ttftscope.results.summaries import BenchSummary

HEAD = {"kind": "bench", "run_id": "r", "seed": 0, "shard": "1/1", "model": "m"}


def _summary(records: list[RequestRecord]) -> dict[str, Any]:
    facts = RunFacts(HEAD, records, {}, ["gateway", "direct"], [], 2.0, [99])
    return summarize_bench(facts)


def _noise() -> list[RequestRecord]:
    """A warm-up and a 429 with huge parts: neither may move a figure."""
    warmup = mixed()[0].model_copy(update={"phase": "warmup", "index": -1, "queue_ms": 1e6})
    limited = mixed()[0].model_copy(
        update={"ok": False, "error_kind": FailureKind.RATE_LIMITED, "queue_ms": 1e6, "index": 99}
    )
    return [warmup, limited]


def test_parts_by_bucket_are_written_rounded_and_read_back() -> None:
    summary = _summary([*_noise(), *mixed()])
    assert summary["schema_version"] == SUMMARY_SCHEMA_VERSION == 2
    gateway, direct = summary["parts_by_bucket"]
    assert (gateway["context"], gateway["target"], gateway["requests"]) == ("8K–16K", "gateway", 5)
    # queue 10, 20, 30, 40 ms from spans: median 25, p90 30 + 0.7 * 10
    assert (gateway["median_queue_ms"], gateway["p90_queue_ms"]) == (25.0, 37.0)
    assert (gateway["median_gateway_ms"], gateway["p90_gateway_ms"]) == (2.5, 3.7)
    assert gateway["queue_requests"] == 4 and gateway["queue_sources"] == {"span": 4}
    assert (direct["median_queue_ms"], direct["p90_queue_ms"]) == (2.0, 3.6)
    assert direct["prefill_sources"] == {"histogram": 2}
    read = BenchSummary.model_validate_json(json.dumps(summary))
    assert read.parts_by_bucket[0].target == "gateway"
    assert (read.parts_by_bucket[0].model_extra or {})["p90_prefill_ms"] == 176.0


def test_a_run_without_request_parts_writes_empty_groups_and_says_so() -> None:
    summary = _summary([old(0), old(1, target="direct")])
    assert [g["queue_requests"] for g in summary["parts_by_bucket"]] == [0, 0]
    summary["server_mean_queue_ms"] = 80.0
    summary["server_mean_prefill_ms"] = 60.0
    out = io.StringIO()
    print_bench_summary(summary, Console(file=out, width=80, force_terminal=False))
    text = " ".join(out.getvalue().split())
    assert NO_PARTS in text
    assert "run-wide means from /metrics histograms: queue 80.0 ms, prefill 60.0 ms" in text


def test_a_schema_1_summary_reads_with_no_groups() -> None:
    read = BenchSummary.model_validate({"schema_version": 1, "completed": 3, "targets": {}})
    assert read.parts_by_bucket == []


def test_the_parts_table_follows_the_run_table_within_80_columns() -> None:
    out = io.StringIO()
    print_bench_summary(_summary(mixed()), Console(file=out, width=80, force_terminal=False))
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    start = next(i for i, line in enumerate(lines) if "per-request TTFT parts" in line)
    rows = [line.split() for line in lines[start:] if " p50 " in line or " p90 " in line]
    # context, target, requests, p50, then queue, prefill, front end, gateway, outside
    assert rows[0] == ["8K–16K", "gateway", "5", "p50", "25.0", "115", "2.0", "2.5", "6.5"]
    assert rows[1] == ["p90", "37.0", "176", "2.0", "3.7", "7.7"]
    assert rows[2] == ["16K–32K", "direct", "2", "p50", "2.0", "50.0", "1.0", "–", "3.0"]

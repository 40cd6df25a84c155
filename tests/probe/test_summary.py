"""Flat summaries and groups from records."""

from __future__ import annotations

from typing import Any

from ttftscope.errors import FailureKind
from ttftscope.probe.summary import groups, summarize_probe
from ttftscope.records import Phase, RequestRecord, Variant
from ttftscope.stats import median, percentile


def _rec(
    i: int,
    variant: Variant = "chat",
    phase: Phase = "warm",
    ttft: float = 10.0,
    size: int = 0,
    **kw: Any,
) -> RequestRecord:
    return RequestRecord(
        run_id="r",
        index=i,
        variant=variant,
        phase=phase,
        ok=True,
        client_ttft_ms=ttft,
        context_tokens_target=size,
        **kw,
    )


def test_percentiles_interpolate_and_skip_missing() -> None:
    assert percentile([1, 2, 3, 4, 5], 90) == 4.6
    assert median([None, 5.0]) == 5.0
    assert percentile([], 50) is None


def test_summary_uses_only_warm_clean_successes() -> None:
    recs = [
        _rec(0, phase="cold", ttft=1000),
        _rec(1, phase="warmup", ttft=500),
        _rec(2, ttft=10),
        _rec(3, ttft=20),
        _rec(4, ttft=30),
        _rec(5, ttft=9999, contaminated=True),
        RequestRecord(
            run_id="r",
            index=6,
            variant="chat",
            phase="warm",
            ok=False,
            status=429,
            error_kind=FailureKind.RATE_LIMITED,
        ),
    ]
    s = summarize_probe(recs, model="m", base_url="b", percentiles=[50, 90, 99])
    assert s["median_ttft_ms"] == 20
    assert s["p99_ttft_ms"] < 31
    assert s["failed"] == 1 and s["contaminated"] == 1
    assert s["groups"][0]["cold_ttft_ms"] == 1000


def test_ab_ratio_and_hit_rate() -> None:
    recs = [
        _rec(0, "text", ttft=30, prefix_hits=90, prefix_queries=100),
        _rec(1, "ids", ttft=10, prefix_hits=95, prefix_queries=100),
    ]
    s = summarize_probe(recs, model="m", base_url="b")
    assert s["ab_ttft_ratio_text_over_ids"] == 3.0
    assert s["ab_text_prefix_hit_rate"] == 0.9


def test_groups_are_ordered_by_size_then_variant() -> None:
    recs = [_rec(0, "ids", size=8), _rec(1, "chat", size=8), _rec(2, "chat", size=0)]
    assert [(g["context_tokens"], g["variant"]) for g in groups(recs)] == [
        (0, "chat"),
        (8, "chat"),
        (8, "ids"),
    ]


AB_PAIR: list[tuple[Variant, float]] = [("text", 30.0), ("ids", 10.0)]


def test_ab_per_context_size_matches_the_rows() -> None:
    recs = [
        _rec(i, variant, ttft=ttft * (1 + size / 1000) + i, size=size)
        for size in (0, 16000)
        for i, (variant, ttft) in enumerate(AB_PAIR * 3)
    ]
    s = summarize_probe(recs, model="m", base_url="b")
    rows = {(g["context_tokens"], g["variant"]): g for g in s["groups"]}
    assert [ab["context_tokens"] for ab in s["ab"]] == [0, 16000]
    for ab in s["ab"]:
        size = ab["context_tokens"]
        assert ab["text_median_ttft_ms"] == rows[(size, "text")]["median_ttft_ms"]
        assert ab["ids_median_ttft_ms"] == rows[(size, "ids")]["median_ttft_ms"]
    # the pooled median matches no row: that is why the headline is per size
    assert s["ab_text_median_ttft_ms"] not in {ab["text_median_ttft_ms"] for ab in s["ab"]}


def test_summary_figures_are_rounded() -> None:
    s = summarize_probe([_rec(0, ttft=84.00939360000001)], model="m", base_url="b")
    assert s["median_ttft_ms"] == 84.009
    assert s["groups"][0]["median_ttft_ms"] == 84.009

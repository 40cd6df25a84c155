"""Turn probe records into groups and a flat summary in the style of ``vllm bench serve``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ttftscope.records import RequestRecord, Variant, failure_tally
from ttftscope.stats import median, percentile

# (summary key stem, record attribute); each gets median_ and pNN_ keys
PARTS: tuple[tuple[str, str], ...] = (
    ("ttft", "client_ttft_ms"),
    ("server_ttft", "server_ttft_ms"),
    ("queue", "queue_ms"),
    ("prefill", "prefill_ms"),
    ("server_frontend", "server_frontend_ms"),
    ("server_render", "server_render_ms"),
    ("outside_server", "outside_server_ms"),
    ("serialize", "serialize_ms"),
    ("tokenize", "tokenize_ms"),
)


def usable(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """Warm, successful, uncontaminated samples: the ones statistics are made of."""
    return [r for r in records if r.ok and r.phase == "warm" and not r.contaminated]


def part_stats(
    records: Sequence[RequestRecord], percentiles: Sequence[float] = (50, 90), prefix: str = ""
) -> dict[str, float | None]:
    """``{prefix}median_ttft_ms``, ``{prefix}p90_ttft_ms``, … for every part.

    >>> part_stats([])["median_ttft_ms"] is None
    True
    """
    out: dict[str, float | None] = {}
    for stem, attr in PARTS:
        values = [getattr(r, attr) for r in records]
        out[f"{prefix}median_{stem}_ms"] = median(values)
        for q in percentiles:
            if q != 50:
                out[f"{prefix}p{q:g}_{stem}_ms"] = percentile(values, q)
    hits = sum(r.prefix_hits or 0 for r in records)
    queries = sum(r.prefix_queries or 0 for r in records)
    out[f"{prefix}prefix_hit_rate"] = hits / queries if queries else None
    return out


def _cold_fields(cold: RequestRecord | None) -> dict[str, Any]:
    attrs = (
        "client_ttft_ms",
        "server_ttft_ms",
        "queue_ms",
        "prefill_ms",
        "server_frontend_ms",
        "prefix_hit_rate",
    )
    out = {f"cold_{a}": getattr(cold, a) if cold else None for a in attrs}
    out["cold_ttft_ms"] = out.pop("cold_client_ttft_ms")
    return out


def groups(
    records: Sequence[RequestRecord], percentiles: Sequence[float] = (50, 90)
) -> list[dict[str, Any]]:
    """One row per (context size, variant): the cold request, then warm statistics."""
    order = {"chat": 0, "non_ascii": 1, "text": 2, "ids": 3, "direct": 4, "gateway": 5}
    keys = sorted(
        {(r.context_tokens_target, r.variant) for r in records},
        key=lambda k: (k[0], order.get(k[1], 9), k[1]),
    )
    rows = []
    for size, variant in keys:
        mine = [r for r in records if r.context_tokens_target == size and r.variant == variant]
        cold = next((r for r in mine if r.phase == "cold" and r.ok), None)
        warm = usable(mine)
        row: dict[str, Any] = {
            "context_tokens": size,
            "variant": variant,
            "n": len(warm),
            **_cold_fields(cold),
            "prompt_tokens": warm[-1].prompt_tokens if warm else None,
            "computed_tokens": median(r.computed_tokens for r in warm),
        }
        row.update(part_stats(warm, percentiles))
        rows.append(row)
    return rows


def notes(records: Sequence[RequestRecord]) -> list[str]:
    """Distinct notes across records, in first-seen order, each with how often it occurred."""
    counts: dict[str, int] = {}
    for r in records:
        for n in r.notes:
            counts[n] = counts.get(n, 0) + 1
    return [n if c == 1 else f"{n} (×{c})" for n, c in counts.items()]


def summarize_probe(
    records: Sequence[RequestRecord],
    *,
    model: str,
    base_url: str,
    percentiles: Sequence[float] = (50, 90),
) -> dict[str, Any]:
    """Flat summary: overall warm chat statistics, A/B figures, counts and per-group rows.

    >>> from ttftscope import summarize_probe
    >>> summarize_probe([], model="m", base_url="u")["completed"]
    0
    """
    chat = usable(r for r in records if r.variant == "chat")
    out: dict[str, Any] = {
        "model": model,
        "base_url": base_url,
        "completed": sum(r.ok for r in records),
        "failed": sum(not r.ok for r in records),
        "contaminated": sum(r.contaminated for r in records),
        "checks_failed": sum(not all(r.checks.values()) for r in records),
    }
    out.update(part_stats(chat, percentiles))
    text = usable(r for r in records if r.variant == "text")
    ids = usable(r for r in records if r.variant == "ids")
    if text and ids:
        out.update(part_stats(text, percentiles, prefix="ab_text_"))
        out.update(part_stats(ids, percentiles, prefix="ab_ids_"))
        t, i = out["ab_text_median_ttft_ms"], out["ab_ids_median_ttft_ms"]
        out["ab_ttft_ratio_text_over_ids"] = t / i if t and i else None
    out["groups"] = groups(records, percentiles)
    out["ab"] = pairs_by_context(out["groups"], "text", "ids")
    out["gateway_ab"] = pairs_by_context(out["groups"], "direct", "gateway")
    out["failures"] = failure_tally(records)
    out["notes"] = notes(records)
    return {k: rounded(v, key=k) for k, v in out.items()}


def pairs_by_context(
    rows: Sequence[dict[str, Any]], first: Variant, second: Variant
) -> list[dict[str, Any]]:
    """Two variants side by side per context size, from the same rows the table shows.

    >>> g = [{"context_tokens": 0, "variant": v, "median_ttft_ms": t,
    ...       "median_server_frontend_ms": 1.0} for v, t in (("text", 3.0), ("ids", 2.0))]
    >>> pairs_by_context(g, "text", "ids")[0]["ttft_ratio_text_over_ids"]
    1.5
    """
    by_key = {(r["context_tokens"], r["variant"]): r for r in rows}
    out = []
    for size in sorted({size for size, _ in by_key}):
        a, b = by_key.get((size, first)), by_key.get((size, second))
        if a is None or b is None:
            continue
        t, u = a["median_ttft_ms"], b["median_ttft_ms"]
        out.append(
            {
                "context_tokens": size,
                f"{first}_median_ttft_ms": t,
                f"{second}_median_ttft_ms": u,
                f"ttft_ratio_{first}_over_{second}": t / u if t and u else None,
                f"{first}_median_server_frontend_ms": a["median_server_frontend_ms"],
                f"{second}_median_server_frontend_ms": b["median_server_frontend_ms"],
            }
        )
    return out


def rounded(value: Any, *, key: str = "") -> Any:
    """Figures rounded for people: ms to 3 decimals, rates and ratios to 4.

    >>> rounded({"median_ttft_ms": 84.00939360000001, "prefix_hit_rate": 0.987654321})
    {'median_ttft_ms': 84.009, 'prefix_hit_rate': 0.9877}
    """
    if isinstance(value, float):
        return round(value, 4 if ("rate" in key or "ratio" in key) else 3)
    if isinstance(value, dict):
        return {k: rounded(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, key=key) for v in value]
    return value

"""Findings about prefill: the prefix cache off, cold or missed, and prefill that dominates.

The cache is read from ``vllm:cache_config_info`` (live), from hit rates on repeated
prefixes, and from prefill that dominates TTFT at a low hit rate (one series at a time:
targets are never mixed). What the cache would save is measured, not guessed: a request of a
conversation repeats the prompt the one before it sent, so that share of its tokens could have
hit; the prefill of the tokens that could have hit and did not is the saving (prefill taken as
proportional to the tokens computed). Prefill that dominates while the cache works is its own
finding (informational): what is left is the model's compute on this hardware.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.findings import Evidence, Finding
from ttftscope.records import RequestRecord
from ttftscope.results.parts import (
    Series,
    hit_rate,
    records_breakdown,
    series_scope,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["cache_findings", "cache_saving_ms", "prefill_findings"]

COLD_HIT_RATE = 0.1
# prefill this large a share of a median TTFT at a hit rate this low: prompts are recomputed
LOW_HIT_RATE = 0.5
PREFILL_SHARE = 0.35
# prefill this large a share with the cache working: the model's compute is the bottleneck
DOMINANT_SHARE = 0.5
# Prompts shorter than this are not judged on their hit rate: a fresh agent turn (median 655
# tokens, the probe's ~350) is a third or more of them, so a healthy cache still misses most of
# a 1,000-token prompt; on a loaded machine the real vLLM showed 0.37 at ~1,100 tokens.
JUDGED_PROMPT_TOKENS = 4000
FAST_MS = 50.0  # a median TTFT under this has nothing worth removing
_CACHE_REMEDY = (
    "keep the prompt's start stable across turns (see dynamic-prefix), keep prefix caching "
    "on (--enable-prefix-caching) and send a session to one replica, so each turn's prefix "
    "is already in the cache"
)


def _where(run: Run) -> str:
    return ", ".join(str(p) for p in run.sources)


def _tokens(r: RequestRecord) -> int:
    return r.prompt_tokens or r.context_tokens_target or 0


def _rate(r: RequestRecord) -> float:
    """The request's own hit rate (its hits over its lookups), 0 when unknown."""
    if r.prefix_hits is None or not r.prefix_queries:
        return 0.0
    return min(1.0, r.prefix_hits / r.prefix_queries)


def _previous(series: Series) -> dict[int, RequestRecord]:
    """Each request's predecessor in its conversation (same series and session, sent before)."""
    done = [
        r
        for r in series.run.records
        if r.ok and (r.target or r.variant) == series.name and r.prompt_tokens
    ]
    done.sort(key=lambda r: (r.session or 0, r.index))
    return {b.index: a for a, b in itertools.pairwise(done) if (a.session or 0) == (b.session or 0)}


def cache_saving_ms(series: Series, records: Sequence[RequestRecord]) -> float | None:
    """Median prefill of the tokens that could have hit the cache and did not.

    A request could hit what the request before it in its conversation sent (its share of
    this prompt); the prefill is split over computed tokens in proportion.
    """
    before = _previous(series)
    saved: list[float] = []
    for r in records:
        prev = before.get(r.index)
        n, hits = _tokens(r), r.prefix_hits or 0.0
        if prev is None or r.prefill_ms is None or not n or _tokens(prev) > n:
            continue
        computed = max(n - hits, 1.0)
        could = max(0.0, _tokens(prev) - hits)
        saved.append(r.prefill_ms * min(could, computed) / computed)
    return median(saved)


def _off(facts: ServerFacts) -> Finding:
    return Finding(
        id="prefix-cache-off",
        severity="warning",
        title="the prefix cache is off: every request recomputes its whole prompt",
        evidence=[
            Evidence(
                fact='vllm:cache_config_info has enable_prefix_caching="False"',
                source=facts.source,
            )
        ],
        remedy="start vLLM with --enable-prefix-caching (and without --no-enable-prefix-caching)",
    )


def _judged(series: Series) -> tuple[str, list[RequestRecord]]:
    where, scoped = series_scope(series)
    return where, [r for r in scoped if _tokens(r) >= JUDGED_PROMPT_TOKENS]


def _missed(run: Run, series: Series, cold: bool) -> Finding | None:
    """A series whose prompts miss the cache: cold on repeated prefixes, or prefill that
    dominates at a low hit rate; with the prefill the cache would have saved."""
    where, records = _judged(series)
    found, rate = records_breakdown(records), hit_rate(records)
    share = None if found is None else found.share("prefill")
    if found is None or rate is None or share is None or found.ttft_ms < FAST_MS:
        return None
    if not cold and (rate >= LOW_HIT_RATE or share < PREFILL_SHARE):
        return None
    prefill = found.part("prefill") or 0.0
    saving = cache_saving_ms(series, records)
    facts = [
        f"median prefill {prefill:.0f} ms of {found.ttft_ms:.0f} ms median TTFT over "
        f"{found.n} requests of ~{median(_tokens(r) for r in records) or 0:,.0f} tokens; the "
        f"cache held {rate:.2f} of their tokens",
    ]
    if saving is not None:
        facts.append(
            f"{saving:.0f} ms of it is prefill of tokens the request before had already sent"
        )
    return Finding(
        id="prefix-cache-off",
        severity="warning",
        title=f"prefill is {share:.0%} of TTFT at a {rate:.2f} prefix hit rate "
        f"({series.name}{where}): most of each prompt is computed again",
        evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
        remedy=_CACHE_REMEDY,
        saving_ms=None if saving is None else round(saving, 1),
        part_ms=prefill,
    )


def _cold(run: Run, rates: dict[str, float], several: bool) -> Finding:
    """Series whose repeated prefixes missed the cache, each with its own rate: a target on
    a server with caching off is not averaged away by one that has it on."""
    worst = max(rates.values())
    named = f" ({', '.join(rates)})" if several else ""
    return Finding(
        id="prefix-cache-off",
        severity="warning",
        title=f"repeated prefixes hit the cache {worst:.0%} of the time{named}",
        evidence=[
            Evidence(
                fact=f"{name + ': ' if several else ''}warm requests that repeat a context hit "
                f"{rate:.2f} of their tokens",
                source=_where(run),
            )
            for name, rate in rates.items()
        ],
        remedy=(
            "check that prefix caching is on (--enable-prefix-caching), that the prompt "
            "does not change early (see dynamic-prefix), and that the KV cache is not "
            "evicting between turns (raise --gpu-memory-utilization or KV cache space)"
        ),
    )


def _cold_rates(run: Run) -> tuple[dict[str, float], bool]:
    """Each series' hit rate over its warm requests of 1,000 tokens or more, where it is
    below :data:`COLD_HIT_RATE`; and whether the run has several series."""
    series = split_series(run)
    out = {}
    for s in series:
        rate = hit_rate(
            r for r in s.records if (r.prompt_tokens or r.context_tokens_target) >= 1000
        )
        if rate is not None and rate < COLD_HIT_RATE:
            out[s.name] = rate
    return out, len(series) > 1


def cache_findings(runs: Sequence[Run], live: ServerFacts | None) -> list[Finding]:
    """The cache switched off (live scrape), or missed by prompts whose prefill dominates
    TTFT (records): the first such series of each run."""
    if live is not None and live.prefix_caching is False:
        return [_off(live)]
    out: list[Finding] = []
    for run in runs:
        rates, several = _cold_rates(run)
        found = (_missed(run, s, s.name in rates) for s in split_series(run))
        first = next((f for f in found if f is not None), None)
        if first is not None:
            out.append(first)
        elif rates:
            out.append(_cold(run, rates, several))
    return out


def _dominant(run: Run, series: Series) -> Finding | None:
    where, records = _judged(series)
    found, rate = records_breakdown(records), hit_rate(records)
    share = None if found is None else found.share("prefill")
    if found is None or share is None or share < DOMINANT_SHARE or found.ttft_ms < FAST_MS:
        return None
    if rate is None or rate < LOW_HIT_RATE:
        return None  # the cache's finding says it
    prefill = found.part("prefill") or 0.0
    computed = median(_tokens(r) * (1.0 - _rate(r)) for r in records) or 0.0
    facts = [
        f"median prefill {prefill:.0f} ms of {found.ttft_ms:.0f} ms median TTFT over "
        f"{found.n} requests; the cache held {rate:.2f} of their tokens",
    ]
    if computed >= 1:
        facts.append(
            f"~{computed:,.0f} uncached tokens per request: {prefill / computed * 1000:,.1f} ms "
            "per 1K computed tokens (this model on this hardware)"
        )
    return Finding(
        id="prefill-bound",
        severity="info",
        title=f"prefill is {share:.0%} of TTFT with the cache working ({series.name}{where})",
        evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
        remedy=(
            "prefill is the model's compute: send fewer uncached tokens per turn, serve a "
            "smaller or quantized model or faster hardware; with chunked prefill, a larger "
            "--max-num-batched-tokens prefills a long prompt in fewer steps"
        ),
        part_ms=prefill,
    )


def prefill_findings(runs: Sequence[Run]) -> list[Finding]:
    """Series whose prefill dominates TTFT though the cache works (the first of each run)."""
    out: list[Finding] = []
    for run in runs:
        found = (_dominant(run, s) for s in split_series(run))
        first = next((f for f in found if f is not None), None)
        if first is not None:
            out.append(first)
    return out

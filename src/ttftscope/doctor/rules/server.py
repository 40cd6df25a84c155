"""Findings from the server's side: queueing, rate limits, a shared server, the prefix cache.

Queueing is read from bench's ``/metrics`` samples (waiting and running over time), the
records' queue times and the bench summary; rate limits from failed records and summaries;
samples another client overlapped from the probe's own checks; the prefix cache from
``vllm:cache_config_info``, from hit rates on repeated prefixes, and from prefill that
dominates TTFT at a low hit rate (one series at a time: targets are never mixed).
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.doctor.rules.limits import queue_remedy
from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.errors import FailureKind
from ttftscope.findings import Evidence, Finding
from ttftscope.results.parts import (
    hit_rate,
    latency_samples,
    records_breakdown,
    series_scope,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.stats import median, percentile

__all__ = [
    "NOT_TOKENIZATION",
    "cache_findings",
    "queue_findings",
    "rate_limit_findings",
    "shared_server_findings",
]

# waiting > 0 in this share of samples (or of requests) is a queue worth fixing
MIN_WAITED_SHARE = 0.1
MIN_QUEUE_SHARE = 0.1
COLD_HIT_RATE = 0.1
# Said first, so that the saving printed after the remedy belongs to the queue's fix.
NOT_TOKENIZATION = "not a tokenization problem (token ids will not fix it): "
# prefill this large a share of a median TTFT at a hit rate this low: prompts are recomputed
LOW_HIT_RATE = 0.5
PREFILL_SHARE = 0.35
# Prompts shorter than this are not judged on their hit rate: a fresh agent turn (median 655
# tokens, the probe's ~350) is a third or more of them, so a healthy cache still misses most of
# a 1,000-token prompt; on a loaded machine the real vLLM showed 0.37 at ~1,100 tokens.
JUDGED_PROMPT_TOKENS = 4000
FAST_MS = 50.0  # a median TTFT under this has nothing worth removing


def _where(run: Run) -> str:
    return ", ".join(str(p) for p in run.sources)


def _queue_facts(run: Run) -> tuple[list[str], float, float | None]:
    """Facts, the share of time (or requests) that waited, and the mean queue ms."""
    facts: list[str] = []
    waited = 0.0
    samples = [s for s in run.samples if s.ok and s.waiting is not None]
    if samples:
        waited = sum(1 for s in samples if (s.waiting or 0) > 0) / len(samples)
        peak_w = max(s.waiting or 0 for s in samples)
        peak_r = max((s.running or 0 for s in samples), default=0)
        facts.append(
            f"waiting queue > 0 in {waited:.0%} of {len(samples)} /metrics samples "
            f"(peak {peak_w:.0f} waiting while {peak_r:.0f} ran)"
        )
    measured = latency_samples(run.records, run.kind)
    queued = [r.queue_ms for r in measured if r.queue_ms is not None]
    mean_q: float | None = sum(queued) / len(queued) if queued else None
    for summary in run.bench_summaries:
        if summary.server_mean_queue_ms is not None:
            mean_q = summary.server_mean_queue_ms
    if queued and not samples:
        waited = sum(1 for q in queued if q > 5.0) / len(queued)
        facts.append(f"{waited:.0%} of {len(queued)} requests queued > 5 ms in the engine")
    return facts, waited, mean_q


def _spread(run: Run) -> list[str]:
    """TTFT p99 over p50 per series, over the same requests as the report's row for it (a
    probe's largest context, a bench target's whole run): never two targets in one figure."""
    series = split_series(run)
    out = []
    for s in series:
        where, records = series_scope(s)
        ttfts = [r.client_ttft_ms for r in records]
        p50, p99 = median(ttfts), percentile(ttfts, 99)
        if p50 and p99:
            name = f" ({s.name}{where})" if len(series) > 1 or where else ""
            out.append(f"TTFT p99/p50{name} = {p99 / p50:.1f} ({p99:,.0f} / {p50:,.0f} ms)")
    return out


def queue_findings(runs: Sequence[Run], limit: int | None = None) -> list[Finding]:
    """Runs whose requests waited in the engine's queue for a significant part of the run.

    ``limit`` is the server's ``--max-num-seqs`` where it could be read (``/server_info``).
    """
    out: list[Finding] = []
    for run in runs:
        facts, waited, mean_q = _queue_facts(run)
        measured = latency_samples(run.records, run.kind)
        p50 = median(r.client_ttft_ms for r in measured)
        share = mean_q / p50 if mean_q is not None and p50 else None
        if waited < MIN_WAITED_SHARE and (share is None or share < MIN_QUEUE_SHARE):
            continue
        facts += _spread(run)
        if mean_q is not None and share is not None:
            every = " (every target's requests)" if len(split_series(run)) > 1 else ""
            facts.append(f"mean queue time {mean_q:,.0f} ms = {share:.0%} of median TTFT{every}")
        out.append(
            Finding(
                id="queueing",
                severity="warning",
                title=f"requests wait in the server's queue ({waited:.0%} of the run)",
                evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
                remedy=NOT_TOKENIZATION + queue_remedy(run, limit),
                saving_ms=None if mean_q is None else round(mean_q, 1),
                part_ms=mean_q,
            )
        )
    return out


def rate_limit_findings(runs: Sequence[Run]) -> list[Finding]:
    """429s, retried requests and contaminated summaries inside a measurement."""
    out: list[Finding] = []
    for run in runs:
        measured = [r for r in run.records if r.phase != "warmup"]
        limited = [
            r for r in measured if r.error_kind == FailureKind.RATE_LIMITED or r.status == 429
        ]
        retried = [r for r in measured if (r.attempt or 1) > 1]
        flagged = any(s.contaminated for s in run.bench_summaries)
        if not (limited or retried or flagged):
            continue
        facts = []
        if measured:
            facts.append(f"{len(limited)} of {len(measured)} requests answered 429")
        waits = sorted({r.retry_after for r in limited if r.retry_after})
        if waits:
            facts.append(f"Retry-After asked for: {', '.join(waits[:5])} s")
        if retried:
            facts.append(f"{len(retried)} requests were retried after waiting (Retry-After)")
        if flagged:
            facts.append("the bench summary flags the run contaminated (> 1% rate limited)")
        out.append(
            Finding(
                id="rate-limited",
                severity="warning",
                title="rate limiting (429) inside the measurement",
                evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
                remedy=(
                    "use a separate API key for load tests and a lower --request-rate; "
                    "429s are kept out of the latency statistics, but waits skew the run"
                ),
            )
        )
    return out


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


def _prefill_finding(run: Run) -> Finding | None:
    """The first series whose prefill dominates TTFT while most of its prompt misses the cache."""
    for series in split_series(run):
        where, scoped = series_scope(series)
        records = [
            r
            for r in scoped
            if (r.prompt_tokens or r.context_tokens_target or 0) >= JUDGED_PROMPT_TOKENS
        ]
        found, rate = records_breakdown(records), hit_rate(records)
        share = None if found is None else found.share("prefill")
        if found is None or rate is None or share is None or found.ttft_ms < FAST_MS:
            continue
        if rate >= LOW_HIT_RATE or share < PREFILL_SHARE:
            continue
        prefill = found.part("prefill") or 0.0
        return Finding(
            id="prefix-cache-off",
            severity="warning",
            title=f"prefill is {share:.0%} of TTFT at a {rate:.2f} prefix hit rate "
            f"({series.name}{where}): most of each prompt is computed again",
            evidence=[
                Evidence(
                    fact=f"median prefill {prefill:.0f} ms of {found.ttft_ms:.0f} ms median "
                    f"TTFT over {found.n} requests; the cache held {rate:.2f} of their tokens",
                    source=_where(run),
                )
            ],
            remedy=(
                "keep the prompt's start stable across turns (see dynamic-prefix) and send a "
                "session to one replica, so each turn's prefix is already in the cache"
            ),
            saving_ms=None,
        )
    return None


def cache_findings(runs: Sequence[Run], live: ServerFacts | None) -> list[Finding]:
    """The cache switched off (live scrape), cold on repeated prefixes, or missed by prompts
    whose prefill dominates TTFT (records)."""
    if live is not None and live.prefix_caching is False:
        return [_off(live)]
    out: list[Finding] = []
    for run in runs:
        rates, several = _cold_rates(run)
        if rates:
            out.append(_cold(run, rates, several))
        elif (missed := _prefill_finding(run)) is not None:
            out.append(missed)
    return out


def shared_server_findings(runs: Sequence[Run]) -> list[Finding]:
    """Probe samples another client's requests overlapped: left out of every figure.

    A probe owns each histogram observation only on a server nobody else uses; it marks the
    samples where that failed, and the rules do not judge them.
    """
    out: list[Finding] = []
    for run in runs:
        if run.kind != "probe":
            continue
        warm = [r for r in run.records if r.ok and r.phase == "warm"]
        overlapped = sum(r.contaminated for r in warm)
        if not overlapped:
            continue
        out.append(
            Finding(
                id="shared-server",
                severity="info",
                title=f"{overlapped} of {len(warm)} samples overlapped another client's requests",
                evidence=[
                    Evidence(
                        fact=f"{overlapped} warm request(s) saw more than one observation per "
                        "histogram between their two /metrics scrapes; they are left out",
                        source=_where(run),
                    )
                ],
                remedy="probe a server nobody else is using for exact per-request parts",
            )
        )
    return out

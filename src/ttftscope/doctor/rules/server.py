"""Findings from the server's side: queueing, rate limits, a shared server.

Queueing is read from bench's ``/metrics`` samples (waiting and running over time), the
records' queue times and the bench summary; rate limits from failed records and summaries;
samples another client overlapped from the probe's own checks. The prefix cache and
prefill are :mod:`ttftscope.doctor.rules.prefill`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.doctor.abtest import bootstrap_interval
from ttftscope.doctor.rules.limits import queue_remedy
from ttftscope.errors import FailureKind
from ttftscope.findings import Evidence, Finding
from ttftscope.results.parts import (
    latency_samples,
    series_scope,
    split_series,
)
from ttftscope.results.runs import Run
from ttftscope.stats import median, percentile

__all__ = [
    "NOT_TOKENIZATION",
    "queue_findings",
    "rate_limit_findings",
    "shared_server_findings",
]

# waiting > 0 in this share of samples (or of requests) is a queue worth fixing
MIN_WAITED_SHARE = 0.1
MIN_QUEUE_SHARE = 0.1
MIN_QUEUE_MS = 20.0  # mean time in queue under this is no alarm, however often it waited
# Said first, so that the saving printed after the remedy belongs to the queue's fix.
NOT_TOKENIZATION = "not a tokenization problem (token ids will not fix it): "


def _where(run: Run) -> str:
    return ", ".join(str(p) for p in run.sources)


def _queue_facts(run: Run) -> tuple[list[str], float, float | None]:
    """Facts, the share of time (or requests) that waited, and the mean queue ms."""
    facts: list[str] = []
    waited = 0.0
    samples = [s for s in run.samples if s.ok and s.waiting is not None]
    if samples:
        waited = sum(1 for s in samples if (s.waiting or 0) > 0) / len(samples)
        # what ran beside the most waiting, in that scrape: the run's peak running came
        # from another ("peak 1 waiting while 4 ran" where 3 ran when 1 waited)
        peak = max(samples, key=lambda s: (s.waiting or 0, s.running or 0))
        facts.append(
            f"waiting queue > 0 in {waited:.0%} of {len(samples)} /metrics samples "
            f"(peak {peak.waiting or 0:.0f} waiting while {peak.running or 0:.0f} ran)"
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


def _queue_interval(run: Run) -> str | None:
    """The per-request queue times' median with its 95% interval, where records have them."""
    queued = [r.queue_ms for r in latency_samples(run.records, run.kind) if r.queue_ms is not None]
    if len(queued) < 3:
        return None
    low, high = bootstrap_interval(queued)
    return (
        f"median queue time per request {median(queued):,.0f} ms (95% interval {low:,.0f} to "
        f"{high:,.0f} ms, {len(queued)} requests)"
    )


def _costs(mean_q: float | None, share: float | None) -> bool:
    """Queueing worth an alarm: its time measured, and large in ms and as a share of TTFT."""
    return (
        mean_q is not None
        and share is not None
        and mean_q >= MIN_QUEUE_MS
        and (share >= MIN_QUEUE_SHARE)
    )


def _queue_finding(run: Run, limit: int | None) -> Finding | None:
    facts, waited, mean_q = _queue_facts(run)
    measured = latency_samples(run.records, run.kind)
    p50 = median(r.client_ttft_ms for r in measured)
    share = mean_q / p50 if mean_q is not None and p50 else None
    if waited < MIN_WAITED_SHARE and (share is None or share < MIN_QUEUE_SHARE):
        return None
    costs = _costs(mean_q, share)
    facts += _spread(run)
    if mean_q is not None and share is not None:
        every = " (every target's requests)" if len(split_series(run)) > 1 else ""
        facts.append(f"mean queue time {mean_q:,.0f} ms = {share:.0%} of median TTFT{every}")
    facts += [i for i in (_queue_interval(run),) if i is not None]
    title = f"requests wait in the server's queue ({waited:.0%} of the run)"
    if not costs:
        cost = "not measured" if mean_q is None else f"{mean_q:,.0f} ms per request"
        title = f"requests were seen waiting ({waited:.0%} of the run); the time it cost: {cost}"
    return Finding(
        id="queueing",
        severity="warning" if costs else "info",
        title=title,
        evidence=[Evidence(fact=f, source=_where(run)) for f in facts],
        remedy=_queue_remedy(run, limit, mean_q, costs),
        saving_ms=None if mean_q is None or not costs else round(mean_q, 1),
        part_ms=mean_q,
    )


def _queue_remedy(run: Run, limit: int | None, mean_q: float | None, costs: bool) -> str:
    """What to change for the queue; nothing when its measured time is too small to matter
    (a server flag advised for one waiting request read as the cause of a slow TTFT, and
    runs of one server advised different flags for the same few ms)."""
    if mean_q is not None and not costs:
        return (
            f"nothing to change: the time in queue per request is under {MIN_QUEUE_MS:,.0f} ms "
            f"or {MIN_QUEUE_SHARE:.0%} of TTFT (its figures above); this finding says when it "
            "grows"
        )
    return NOT_TOKENIZATION + queue_remedy(run, limit)


def queue_findings(runs: Sequence[Run], limit: int | None = None) -> list[Finding]:
    """Runs whose requests waited in the engine's queue: a warning when the time in queue
    was measured and costs (:data:`MIN_QUEUE_MS` and :data:`MIN_QUEUE_SHARE` of TTFT),
    informational when waiting was seen at a cost too small or not measured.

    ``limit`` is the server's ``--max-num-seqs`` where it could be read (``/server_info``).
    """
    return [f for run in runs if (f := _queue_finding(run, limit)) is not None]


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

"""The written verdict: which part dominates TTFT, by how much, and what to do about it.

Rules, on the numbers of one series (a target or variant of a run; a probe at its largest
context size, a bench run over its whole workload):

- a run where more than 1% of requests were rate limited (or that bench flagged) is
  contaminated: warn, and say to use a separate key and a lower rate; samples that shared
  the server with another client are left out, and said so;
- a median TTFT under 50 ms is fast: nothing to remove;
- otherwise the largest part, if it is at least 35% of the median TTFT, names the remedy
  (server front end → send token ids with ``ttftscope gateway``; queue → more
  ``--max-num-seqs`` or a replica; client tokenization → incremental encoding; outside the
  server → the network path; prefill at a low hit rate → a stable prefix; prefill at a good
  hit rate is the model's own work, which is healthy), and every other removable part of
  25% or more gets its remedy too;
- A/B pairs (text vs ids, direct vs gateway, one bench target vs another) add what the
  switch changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ttftscope.errors import FailureKind
from ttftscope.records import ProbeRecord
from ttftscope.report.timeline import peak_waiting
from ttftscope.results.parts import (
    PART_LABELS,
    Breakdown,
    Part,
    Series,
    breakdown,
    hit_rate,
    largest_bucket,
    split_series,
    summary_breakdown,
)
from ttftscope.results.runs import Run
from ttftscope.stats import median

Level = Literal["ok", "info", "act", "warn"]
RATE_LIMIT_SHARE = 0.01
FAST_MS = 50.0
DOMINANT_SHARE = 0.35
ALSO_SHARE = 0.25
LOW_HIT_RATE = 0.5
_INSTRUMENTS = ("text", "ids")  # the probe's A/B variants measure; they are not a workload
_PAIRS = (("text", "ids", "token ids instead of text"), ("direct", "gateway", "via the gateway"))
_RANK: dict[Level, int] = {"warn": 0, "act": 1, "ok": 2, "info": 3}


@dataclass(frozen=True)
class Finding:
    """One sentence of the verdict: about ``subject``, at ``level`` (ok, info, act, warn)."""

    level: Level
    subject: str
    text: str
    part: Part | None = None
    share: float | None = None


@dataclass(frozen=True)
class Verdict:
    """Every finding, the most urgent first (warnings, then remedies by share).

    >>> Verdict((Finding("ok", "chat", "fast"),)).healthy
    True
    """

    findings: tuple[Finding, ...]

    @property
    def healthy(self) -> bool:
        """Nothing to act on and nothing to warn about."""
        return all(f.level in ("ok", "info") for f in self.findings)

    @property
    def headline(self) -> Finding | None:
        """The one finding to read if you read one."""
        return self.findings[0] if self.findings else None


@dataclass(frozen=True)
class Evidence:
    """The numbers the part rules judge for one series."""

    subject: str
    breakdown: Breakdown | None
    samples: int
    hit_rate: float | None = None
    peak_waiting: float | None = None
    via_gateway: bool = False  # the requests already went through ttftscope's gateway


@dataclass(frozen=True)
class RunHealth:
    """The numbers the contamination rules judge for one run."""

    subject: str
    requests: int
    rate_limited: int
    overlapped: int = 0
    flagged: bool = False


def ms(value: float) -> str:
    """Milliseconds as people read them.

    >>> ms(640.4), ms(19.34)
    ('640', '19.3')
    """
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def health_findings(h: RunHealth) -> list[Finding]:
    """Warnings about samples that cannot be trusted (rate limits, a shared server).

    >>> f = health_findings(RunHealth("run", requests=200, rate_limited=5))[0]
    >>> f.level, f.text.split(":")[0]
    ('warn', '5 of 200 requests (2.5%) were rate limited (429)')
    >>> health_findings(RunHealth("run", requests=200, rate_limited=1))
    []
    """
    out = []
    share = h.rate_limited / h.requests if h.requests else 0.0
    if share > RATE_LIMIT_SHARE or h.flagged:
        what = (
            f"{h.rate_limited} of {h.requests} requests ({share:.1%}) were rate limited (429)"
            if h.rate_limited
            else "bench flagged this run as contaminated"
        )
        out.append(
            Finding(
                "warn",
                h.subject,
                f"{what}: they are left out of the latency figures, but throttling delays "
                "the others too, so this run is contaminated — rerun with a separate API key "
                "and a lower --request-rate",
            )
        )
    if h.overlapped:
        out.append(
            Finding(
                "warn",
                h.subject,
                f"{h.overlapped} sample(s) overlapped another client's requests and were left "
                "out — probe a server nobody else is using for exact per-request parts",
            )
        )
    return out


def _amount(b: Breakdown, part: Part) -> str:
    share, value = b.share(part) or 0.0, b.part(part) or 0.0
    return f"{share:.0%} of {b.stat} TTFT ({ms(value)} of {ms(b.ttft_ms)} ms)"


def _at_hit_rate(e: Evidence) -> str:
    return "" if e.hit_rate is None else f" at a {e.hit_rate:.2f} prefix hit rate"


def _prefill_text(e: Evidence, amount: str) -> tuple[Level, str]:
    if e.hit_rate is not None and e.hit_rate < LOW_HIT_RATE:
        return "act", (
            f"prefill is {amount}{_at_hit_rate(e)}: most of each prompt is computed again — "
            "keep the prompt's start stable across turns and send a session to one replica"
        )
    return "ok", (
        f"prefill is {amount}{_at_hit_rate(e)}: the model's own work on the tokens the "
        "cache did not hold, as it should be"
    )


def part_finding(e: Evidence, part: Part) -> Finding:
    """The finding for ``part`` being a large share of TTFT, with its remedy.

    >>> b = Breakdown(n=9, ttft_ms=640.0, parts=(("server_frontend", 410.0),))
    >>> f = part_finding(Evidence("chat", b, 9, hit_rate=0.98), "server_frontend")
    >>> what, remedy = f.text.split(": ", 1); f.level, what.split(" is ")[1]
    ('act', '64% of median TTFT (410 of 640 ms) at a 0.98 prefix hit rate')
    >>> remedy
    'send token ids — run `ttftscope gateway`'
    """
    assert e.breakdown is not None
    amount, share = _amount(e.breakdown, part), e.breakdown.share(part)
    level: Level = "act"
    if part == "server_frontend" and e.via_gateway:
        text = (
            f"server front end is {amount}{_at_hit_rate(e)} even through the gateway: check "
            "in its /metrics that it sends ids (ttftscope_gateway_upstream_api) and why "
            "requests pass through as text (ttftscope_gateway_passthrough_total)"
        )
    elif part == "server_frontend":
        text = (
            f"server front end (chat rendering + tokenization) is {amount}{_at_hit_rate(e)}: "
            "send token ids — run `ttftscope gateway`"
        )
    elif part == "queue":
        peak = "" if e.peak_waiting is None else f", up to {e.peak_waiting:,.0f} waiting"
        text = (
            f"queue is {amount}{peak}: the server is saturated — raise --max-num-seqs or add "
            "a replica; not a tokenization problem"
        )
    elif part == "client_tokenize":
        text = (
            f"client tokenization is {amount}: encode only each new turn "
            "(ttftscope.IncrementalEncoder), or send chat through `ttftscope gateway`"
        )
    elif part == "outside_server":
        text = (
            f"outside the server (serialization, network, HTTP) is {amount}: the path to the "
            "server costs more than the server — keep connections alive, remove proxies in "
            "between, run the client near the server"
        )
    else:
        level, text = _prefill_text(e, amount)
    return Finding(level, e.subject, text, part, share)


def part_findings(e: Evidence) -> list[Finding]:
    """What the breakdown of one series says (see the module's rules).

    >>> b = Breakdown(n=9, ttft_ms=500.0, parts=(("queue", 200.0), ("prefill", 250.0)))
    >>> [(f.level, f.part) for f in part_findings(Evidence("chat", b, 9, hit_rate=0.9))]
    [('ok', 'prefill'), ('act', 'queue')]
    """
    b = e.breakdown
    if e.samples == 0:
        return [Finding("warn", e.subject, "no successful request to measure; see the failures")]
    if b is None:
        return [
            Finding(
                "info",
                e.subject,
                "the records have no server-side parts (no per-request /metrics deltas): run "
                "`ttftscope probe` against this server to split TTFT",
            )
        ]
    top = b.dominant()
    if b.ttft_ms < FAST_MS:
        largest = "" if top is None else f" (largest part: {PART_LABELS[top[0]]}, {top[1]:.0%})"
        return [Finding("ok", e.subject, f"{b.stat} TTFT is {ms(b.ttft_ms)} ms: fast{largest}")]
    dominant = top[0] if top is not None and top[1] >= DOMINANT_SHARE else None
    if dominant is not None:
        out = [part_finding(e, dominant)]
    else:
        largest = "" if top is None else f" (largest: {PART_LABELS[top[0]]}, {top[1]:.0%})"
        out = [Finding("ok", e.subject, f"no single part dominates TTFT{largest}")]
    for part, _ in b.parts:  # a removable quarter of TTFT is worth its remedy too
        if part not in (dominant, "prefill") and (b.share(part) or 0.0) >= ALSO_SHARE:
            out.append(part_finding(e, part))
    return out


def compare(first: Sequence[float | None], second: Sequence[float | None]) -> str | None:
    """``"median TTFT a → b ms (±x%)"`` for two samples of TTFTs, if both have values.

    >>> compare([57.0], [47.2])
    'median TTFT 57.0 → 47.2 ms (-17%)'
    """
    a, b = median(first), median(second)
    if a is None or b is None or a <= 0:
        return None
    return f"median TTFT {ms(a)} → {ms(b)} ms ({b / a - 1:+.0%})"


def _scope(series: Series) -> tuple[str, list[ProbeRecord]]:
    """What a verdict on ``series`` is about: a probe's largest context size, a bench's all.

    Returns the words that say so (``" at 8,000 tokens"``) and those requests.
    """
    if series.run.kind == "probe":
        label, records = largest_bucket(list(series.records))
        return f" at {label}", records
    return "", list(series.records)


def _series_evidence(series: Series, subject: str) -> Evidence:
    """The numbers of one series; a bench without per-request parts uses its histograms."""
    where, records = _scope(series)
    run = series.run
    found = breakdown(records)
    if found is None and run.kind == "bench":
        found = summary_breakdown(run.bench_summaries)
    rate = hit_rate(records)
    if rate is None:
        rate = next((s.prefix_hit_rate for s in run.bench_summaries if s.prefix_hit_rate), None)
    gateway = "gateway" in series.name or any(r.variant == "gateway" for r in records)
    # the queue in front of this target's server, if the summary says which one it was
    peaks = [t.peak_waiting for s in run.bench_summaries if (t := s.targets.get(series.name))]
    known = [p for p in peaks if p is not None]
    peak = max(known) if known else peak_waiting(run)
    return Evidence(subject + where, found, len(records), rate, peak, gateway)


def _run_health(run: Run, subject: str) -> RunHealth:
    """Requests, rate-limited requests and left-out samples of one run."""
    measured = [r for r in run.records if r.phase != "warmup"]
    limited = sum(r.error_kind == FailureKind.RATE_LIMITED for r in measured)
    requests = len(measured)
    if not measured:  # a bench directory with a summary but no records
        requests = sum((s.completed or 0) + (s.failed or 0) for s in run.bench_summaries)
        limited = sum(s.rate_limited or 0 for s in run.bench_summaries)
    overlapped = 0
    if run.kind == "probe":
        overlapped = sum(r.ok and r.phase == "warm" and r.contaminated for r in run.records)
    flagged = any(s.contaminated for s in run.bench_summaries)
    return RunHealth(subject, requests, limited, overlapped, flagged)


def _comparisons(run: Run, series: Sequence[Series], prefix: str = "") -> list[Finding]:
    """What switching paths changed: text → ids, direct → gateway, first target → others."""
    by_name = {s.name: s for s in series}
    pairs = [(a, b, label) for a, b, label in _PAIRS if a in by_name and b in by_name]
    if run.kind == "bench" and not pairs:
        pairs = [(series[0].name, s.name, f"{s.name} vs {series[0].name}") for s in series[1:]]
    out = []
    for a, b, label in pairs:
        where, first = _scope(by_name[a])
        _, second = _scope(by_name[b])
        text = compare([r.client_ttft_ms for r in first], [r.client_ttft_ms for r in second])
        if text is not None:
            out.append(Finding("info", f"{prefix}{label}{where}", text))
    return out


def _one_server_for_all(run: Run, series: Sequence[Series]) -> bool:
    """Bench targets judged only on run-wide histograms (no request has its own parts)."""
    return (
        run.kind == "bench"
        and len(series) > 1
        and all(breakdown(list(s.records)) is None for s in series)
    )


def _whole_run_evidence(run: Run, series: Sequence[Series], prefix: str) -> Evidence:
    names = " + ".join(s.name for s in series)
    first = _series_evidence(series[0], f"{prefix}{names} (run-wide server histograms)")
    n = sum(len(s.records) for s in series)
    return Evidence(first.subject, first.breakdown, n, first.hit_rate, peak_waiting(run), False)


def _run_findings(run: Run, prefix: str = "") -> list[Finding]:
    """Every finding about one run; ``prefix`` names the run when a report has several."""
    out = health_findings(_run_health(run, prefix.removesuffix(" · ") or "this run"))
    series = split_series(run)
    main = [s for s in series if s.name not in _INSTRUMENTS] or series
    if _one_server_for_all(run, main):
        # the targets' server-side parts come from the same histograms: one finding, not a
        # copy per target that would blame (or credit) a path for the others' requests
        out.extend(part_findings(_whole_run_evidence(run, main, prefix)))
    else:
        for s in main:
            out.extend(part_findings(_series_evidence(s, prefix + s.name)))
    if not series:
        found = summary_breakdown(run.bench_summaries)
        completed = sum(s.completed or 0 for s in run.bench_summaries)
        rate = next((s.prefix_hit_rate for s in run.bench_summaries if s.prefix_hit_rate), None)
        subject = prefix.removesuffix(" · ") or "this run"
        out.extend(part_findings(Evidence(subject, found, completed, rate, peak_waiting(run))))
    return out + _comparisons(run, series, prefix)


def verdict(runs: Sequence[Run]) -> Verdict:
    """The verdict on every run, most urgent first: warnings, then remedies by share.

    >>> verdict([]).findings
    ()
    """
    findings: list[Finding] = []
    for run in runs:
        findings.extend(_run_findings(run, "" if len(runs) == 1 else f"{run.label} · "))
    findings.sort(key=lambda f: (_RANK[f.level], -(f.share or 0.0)))
    return Verdict(tuple(findings))

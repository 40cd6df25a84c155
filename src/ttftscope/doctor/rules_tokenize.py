"""Finding: TTFT bound by tokenization (client or server front end) that grows with context.

The evidence is a line fit of the front end's time against prompt tokens over the warm
requests of one series (ms per 1K tokens), its share of TTFT at the largest context, and the
prefix-cache hit rate: the better the cache, the more of what is left is tokenization. Where a
run measured the same prompts as text and as ids (``probe --ab ids``) or direct and through
the gateway, the difference is the saving, measured rather than estimated. The server front
end is a finding when it is a large share of TTFT, or when that measured saving is material
in ms: on a slow or loaded machine prefill stretches TTFT and the share shrinks, while the
milliseconds ids save stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttftscope.doctor.findings import Evidence, Finding
from ttftscope.records import ProbeRecord
from ttftscope.results.parts import hit_rate, latency_samples
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["LineFit", "fit_line", "tokenization_findings"]

# A front end under this many ms at the largest context is not worth a gateway.
MIN_FRONTEND_MS = 20.0
MIN_SHARE = 0.3
# A measured text-vs-ids (or direct-vs-gateway) saving this large is a finding whatever its
# share of TTFT: the share moves with the machine's speed and load, the saving is evidence.
MIN_SAVING_MS = 20.0
# variants whose prompt the server renders and tokenizes itself
_SERVER_TOKENIZES = ("chat", "text", "direct", "messages", "responses")


@dataclass(frozen=True)
class LineFit:
    """Least-squares ``y = slope * x + intercept`` and how well it fits (r²).

    >>> f = fit_line([1, 2, 3], [2, 4, 6]); round(f.slope, 3), round(f.r2, 3)
    (2.0, 1.0)
    """

    slope: float
    intercept: float
    r2: float
    n: int


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """Fit a line; ``None`` with fewer than 3 points or one distinct ``x``."""
    n = len(xs)
    if n < 3 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    slope = sxy / sxx
    r2 = 1.0 if syy == 0 else (sxy * sxy) / (sxx * syy)
    return LineFit(slope, my - slope * mx, r2, n)


def _tokens(r: ProbeRecord) -> float | None:
    n = r.prompt_tokens or r.client_tokens or r.context_tokens_target
    return float(n) if n else None


def _largest(records: Sequence[ProbeRecord]) -> list[ProbeRecord]:
    sized = [(t, r) for r in records if (t := _tokens(r)) is not None]
    if not sized:
        return list(records)
    top = max(t for t, _ in sized)
    return [r for t, r in sized if t >= 0.8 * top]


@dataclass(frozen=True)
class _Series:
    name: str
    records: list[ProbeRecord]


def _series(run: Run) -> list[_Series]:
    samples = latency_samples(run.records, run.kind)
    names = sorted({r.target or r.variant for r in samples})
    return [_Series(n, [r for r in samples if (r.target or r.variant) == n]) for n in names]


def _fit(records: Sequence[ProbeRecord], part: str) -> LineFit | None:
    pts = [
        (t / 1000.0, v)
        for r in records
        if (t := _tokens(r)) is not None and (v := getattr(r, part)) is not None
    ]
    return fit_line([x for x, _ in pts], [y for _, y in pts])


def _measured_saving(run: Run, tokens: float) -> tuple[float, str] | None:
    """Median TTFT text − ids (or direct − gateway) at the largest context, where both ran."""
    series = {s.name: _largest(s.records) for s in _series(run)}
    for slow, fast in (("text", "ids"), ("direct", "gateway"), ("chat", "gateway")):
        a = median(r.client_ttft_ms for r in series.get(slow, []))
        b = median(r.client_ttft_ms for r in series.get(fast, []))
        if a is not None and b is not None:
            return a - b, f"median TTFT {slow} {a:.0f} ms vs {fast} {b:.0f} ms at ~{tokens:,.0f}"
    return None


def _finding_for(run: Run, s: _Series, part: str, where: str) -> Finding | None:
    top = _largest(s.records)
    value = median(getattr(r, part) for r in top)
    ttft = median(r.client_ttft_ms for r in top)
    tokens = median(_tokens(r) for r in top) or 0.0
    if value is None or not ttft or value < MIN_FRONTEND_MS:
        return None
    saving = _measured_saving(run, tokens)
    # a measured saving is what ids remove from the server's front end, not the client's
    measured = part == "server_frontend_ms" and saving is not None and saving[0] >= MIN_SAVING_MS
    if value / ttft < MIN_SHARE and not measured:
        return None
    fit = _fit(s.records, part)
    rate = hit_rate(s.records)
    source = f"{', '.join(str(p) for p in run.sources)} ({s.name}, {len(s.records)} requests)"
    facts = [
        f"{where} {value:.0f} ms of {ttft:.0f} ms median TTFT ({value / ttft:.0%}) "
        f"at ~{tokens:,.0f} prompt tokens"
    ]
    if fit is not None and fit.slope > 0:
        facts.append(f"grows {fit.slope:.2f} ms per 1K tokens (line fit, r² {fit.r2:.2f})")
    if rate is not None:
        facts.append(f"prefix-cache hit rate {rate:.2f}: the cache cannot help with this part")
    if saving is not None:
        facts.append(saving[1] + " tokens")
    return Finding(
        id="tokenization-bound",
        severity="warning",
        title=f"TTFT is {value / ttft:.0%} {where} ({s.name}) and grows with context",
        evidence=[Evidence(fact=f, source=source) for f in facts],
        remedy=_remedy(part),
        saving_ms=round(saving[0], 1) if saving is not None and saving[0] > 0 else round(value, 1),
    )


def _remedy(part: str) -> str:
    if part == "tokenize_ms":
        return (
            "tokenize incrementally on the client (ttftscope.ChatSession / "
            "IncrementalEncoder) and send the ids, or let the gateway do it"
        )
    return (
        "send token ids so the server skips rendering and tokenizing: run "
        "`ttftscope gateway --upstream URL --model-dir DIR` and point clients at it"
    )


def tokenization_findings(runs: Sequence[Run]) -> list[Finding]:
    """Per run: the worst server-tokenizing series, then client-side tokenization."""
    out: list[Finding] = []
    for run in runs:
        series = _series(run)
        server = [
            f
            for s in series
            if s.name in _SERVER_TOKENIZES
            and (f := _finding_for(run, s, "server_frontend_ms", "server-side tokenization"))
        ]
        if server:
            out.append(max(server, key=lambda f: f.saving_ms or 0.0))
        out += [
            f
            for s in series
            if (f := _finding_for(run, s, "tokenize_ms", "client-side tokenization"))
        ]
    return out

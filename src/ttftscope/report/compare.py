"""What switching paths changed, measured: text → ids, direct → gateway, one target → another.

Figures, not advice (advice is the doctor's): the median TTFT of each side of a pair, a probe
at its largest context size, a bench over its whole workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttftscope.results.parts import Series, series_scope, split_series
from ttftscope.results.runs import Run
from ttftscope.stats import median

__all__ = ["Comparison", "compare", "comparisons", "ms"]

_PAIRS = (("text", "ids", "token ids instead of text"), ("direct", "gateway", "via the gateway"))


@dataclass(frozen=True)
class Comparison:
    """One measured switch: what it is (``subject``) and the medians either side (``text``)."""

    subject: str
    text: str


def ms(value: float) -> str:
    """Milliseconds as people read them.

    >>> ms(640.4), ms(19.34)
    ('640', '19.3')
    """
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def compare(first: Sequence[float | None], second: Sequence[float | None]) -> str | None:
    """``"median TTFT a → b ms (±x%)"`` for two samples of TTFTs, if both have values.

    >>> compare([57.0], [47.2])
    'median TTFT 57.0 → 47.2 ms (-17%)'
    """
    a, b = median(first), median(second)
    if a is None or b is None or a <= 0:
        return None
    return f"median TTFT {ms(a)} → {ms(b)} ms ({b / a - 1:+.0%})"


def _run_comparisons(run: Run, series: Sequence[Series], prefix: str) -> list[Comparison]:
    by_name = {s.name: s for s in series}
    pairs = [(a, b, label) for a, b, label in _PAIRS if a in by_name and b in by_name]
    if run.kind == "bench" and not pairs:
        pairs = [(series[0].name, s.name, f"{s.name} vs {series[0].name}") for s in series[1:]]
    out = []
    for a, b, label in pairs:
        where, first = series_scope(by_name[a])
        _, second = series_scope(by_name[b])
        text = compare([r.client_ttft_ms for r in first], [r.client_ttft_ms for r in second])
        if text is not None:
            out.append(Comparison(f"{prefix}{label}{where}", text))
    return out


def comparisons(runs: Sequence[Run]) -> list[Comparison]:
    """Every pair measured in each run; runs are named when there are several.

    >>> comparisons([])
    []
    """
    out: list[Comparison] = []
    for run in runs:
        prefix = "" if len(runs) == 1 else f"{run.label} · "
        out += _run_comparisons(run, split_series(run), prefix)
    return out

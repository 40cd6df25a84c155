""" "Where TTFT goes" at 80 columns: one stacked bar per series, its parts as letters.

Each series is judged where the doctor judges it (a probe's largest context, a bench target
over its run: ``series_scope``), from the same medians (``records_breakdown``), so the bars
and the findings' figures are one computation. Bars share one scale, the longest median
TTFT, so rows compare; a letter per part reads without colour, in a pipe or a log.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftscope.results.parts import (
    PART_LABELS,
    PARTS,
    Breakdown,
    Part,
    records_breakdown,
    series_scope,
    split_series,
)
from ttftscope.results.runs import Run

__all__ = ["LETTERS", "where_lines"]

LETTERS: dict[Part, str] = {
    "client_tokenize": "t",
    "outside_server": "n",
    "server_frontend": "f",
    "queue": "q",
    "prefill": "p",
}
MAX_ROWS = 6
_NAME = 24
_MS = 9


def _rows(runs: Sequence[Run]) -> list[tuple[str, Breakdown]]:
    out: list[tuple[str, Breakdown]] = []
    for run in runs:
        for s in split_series(run):
            where, records = series_scope(s)
            found = records_breakdown(records)
            if found is not None:
                name = f"{s.name}{where}" if len(runs) == 1 else f"{run.label} · {s.name}"
                out.append((name, found))
    return out[:MAX_ROWS]


def _extent(found: Breakdown) -> float:
    """The longer of the median TTFT and its parts' medians added up (medians need not add)."""
    return max(found.ttft_ms, sum(v for _, v in found.parts))


def _bar(found: Breakdown, scale: float, width: int) -> str:
    """The parts end to end, each ending where its running total rounds to: never wider
    than ``width`` however the parts round."""
    out, total = "", 0.0
    for part, value in found.parts:
        total += value
        end = min(width, round(total * scale * width))
        out += LETTERS[part] * (end - len(out))
    return out


def where_lines(runs: Sequence[Run], width: int = 80) -> list[str]:
    """The chart's lines: a heading, a bar per series, the legend (none without parts).

    >>> where_lines([])
    []
    """
    rows = _rows(runs)
    if not rows:
        return []
    longest = max(_extent(found) for _, found in rows) or 1.0
    bar = width - _NAME - _MS - 2
    out = ["where TTFT goes (median ms per request, each part a letter):"]
    for name, found in rows:
        label = name if len(name) <= _NAME else name[: _NAME - 1] + "…"
        ms = f"{found.ttft_ms:,.0f} ms"
        out.append(f"{label:<{_NAME}} {ms:>{_MS}} {_bar(found, 1 / longest, bar)}")
    seen = {p for _, found in rows for p, _ in found.parts}
    legend = [f"{LETTERS[p]} {PART_LABELS[p]}" for p in PARTS if p in seen]
    out.append("  " + " · ".join(legend))
    return out

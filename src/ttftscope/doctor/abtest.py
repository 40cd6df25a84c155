"""Whether a measured A/B (text vs ids, direct vs gateway) decides that the faster path helps.

The probe sends the two forms of each prompt one after the other (``probe --ab ids``, and
direct vs gateway), so the k-th warm request of one series and the k-th of the other at one
context size are a pair, measured under the same conditions. The difference of each pair
(slow − fast, ms) is the evidence; its median is the estimate and a paired bootstrap (pairs
resampled :data:`BOOTSTRAP_SAMPLES` times, seeded, so a verdict never moves between runs of
the doctor on the same records) gives its 95% interval. The faster path *helps* when the
whole interval is above the minimum effect (:data:`MIN_HELP_MS` and :data:`MIN_HELP_SHARE`
of the slow path's median TTFT), *does not help* when the whole interval is below it, and is
*not decided* otherwise or with fewer than :data:`MIN_PAIRS` pairs: then the repeat count
that would decide it is computed from the observed spread.

>>> ab = paired_ab([300.0, 310.0, 305.0, 298.0], [200.0, 215.0, 190.0, 205.0])
>>> ab.verdict, ab.n, ab.median_ms, (ab.low_ms, ab.high_ms)
('helps', 4, 97.5, (93.0, 115.0))
>>> paired_ab([227.0, 240.0, 215.0], [324.0, 300.0, 350.0]).verdict
'does not help'
>>> ab = paired_ab([230.0, 200.0, 260.0], [228.0, 150.0, 262.0]); ab.verdict, ab.repeat_needed
('not decided', 56)
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ttftscope.records import RequestRecord
from ttftscope.results.parts import series_name
from ttftscope.results.runs import Run

MIN_HELP_MS = 5.0
MIN_HELP_SHARE = 0.05
MIN_PAIRS = 3
BOOTSTRAP_SAMPLES = 2000
MAX_REPEAT = 1000
# more pairs than a probe run of a few minutes sends: past it the spread, not the sample
# size, is what keeps the comparison open
PRACTICAL_REPEAT = 50
_Z95 = 1.96
_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)  # a median's spread over a mean's, normal data

__all__ = [
    "BOOTSTRAP_SAMPLES",
    "MAX_REPEAT",
    "MIN_HELP_MS",
    "MIN_HELP_SHARE",
    "MIN_PAIRS",
    "PairedAB",
    "Verdict",
    "bootstrap_interval",
    "paired_ab",
    "repeat_needed",
    "repeat_step",
    "sent_pairs",
]

Verdict = Literal["helps", "does not help", "not decided"]


@dataclass(frozen=True)
class PairedAB:
    """The paired differences' estimate, 95% interval, the minimum effect and the verdict."""

    n: int
    median_ms: float  # median of slow − fast over the pairs
    low_ms: float
    high_ms: float
    min_effect_ms: float  # the larger of MIN_HELP_MS and MIN_HELP_SHARE of the slow median
    verdict: Verdict
    repeat_needed: int | None  # pairs that would decide it (not decided only)

    def interval(self) -> str:
        """The estimate and its interval in words.

        >>> paired_ab([30.0, 31.0, 29.0], [10.0, 10.0, 10.0]).interval()
        '20 ms (95% interval 19 to 21 ms, 3 pairs)'
        """
        return (
            f"{self.median_ms:,.0f} ms (95% interval {self.low_ms:,.0f} to "
            f"{self.high_ms:,.0f} ms, {self.n} pairs)"
        )


def paired_ab(slow: Sequence[float], fast: Sequence[float]) -> PairedAB:
    """Judge the pairs ``zip(slow, fast)`` (the shorter series sets how many pairs there are).

    >>> paired_ab([50.0], [10.0]).verdict, paired_ab([50.0], [10.0]).repeat_needed
    ('not decided', 3)
    """
    diffs = [a - b for a, b in zip(slow, fast, strict=False)]
    slow_median = statistics.median(slow[: len(diffs)]) if diffs else 0.0
    effect = max(MIN_HELP_MS, MIN_HELP_SHARE * slow_median)
    if not diffs:
        return PairedAB(0, 0.0, 0.0, 0.0, effect, "not decided", MIN_PAIRS)
    mid = statistics.median(diffs)
    low, high = bootstrap_interval(diffs)
    verdict: Verdict = "not decided"
    if len(diffs) >= MIN_PAIRS and low > effect:
        verdict = "helps"
    elif len(diffs) >= MIN_PAIRS and high < effect:
        verdict = "does not help"
    needed = None if verdict != "not decided" else repeat_needed(diffs, effect)
    return PairedAB(len(diffs), mid, low, high, effect, verdict, needed)


def bootstrap_interval(diffs: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the median over resampled ``diffs`` (seeded).

    >>> bootstrap_interval([1.0, 2.0, 3.0])
    (1.0, 3.0)
    """
    rng = random.Random(seed)
    n = len(diffs)
    medians = sorted(statistics.median(rng.choices(diffs, k=n)) for _ in range(BOOTSTRAP_SAMPLES))
    return medians[int(0.025 * BOOTSTRAP_SAMPLES)], medians[int(0.975 * BOOTSTRAP_SAMPLES) - 1]


def repeat_needed(diffs: Sequence[float], effect_ms: float) -> int:
    """Pairs whose 95% interval would be narrower than the estimate's distance to the
    minimum effect, at the observed spread: ``(1.96 · 1.25 · sd / distance)²``.

    >>> repeat_needed([10.0, 30.0, 20.0], 5.0)
    3
    >>> repeat_needed([0.0, 40.0, 20.0], 5.0)
    11
    """
    if len(diffs) < 2:
        return MIN_PAIRS
    spread = statistics.stdev(diffs)
    distance = abs(statistics.median(diffs) - effect_ms)
    if distance == 0:
        return MAX_REPEAT
    needed = math.ceil((_Z95 * _MEDIAN_EFFICIENCY * spread / distance) ** 2)
    return max(MIN_PAIRS, min(MAX_REPEAT, needed))


def repeat_step(command: str, needed: int) -> str:
    """The next step of a comparison not decided: ``command`` with the repeats that would
    decide it, or, where the spread asks for more than a practical run sends, the most that
    is, and why that alone may not decide it.

    >>> repeat_step("ttftscope probe --ab ids", 12)
    'not decided: run `ttftscope probe --ab ids --repeat 12`'
    >>> repeat_step("ttftscope probe --ab ids", 1000)[:60]
    'not decided: run `ttftscope probe --ab ids --repeat 50` whil'
    """
    if needed <= PRACTICAL_REPEAT:
        return f"not decided: run `{command} --repeat {needed}`"
    more = "over " if needed >= MAX_REPEAT else "~"
    return (
        f"not decided: run `{command} --repeat {PRACTICAL_REPEAT}` while nothing else uses "
        f"the server (at this spread it would take {more}{needed:,} pairs: other work on the "
        "server, or the machine, makes each pair vary more than the difference)"
    )


_PairKey = tuple[str, int | None, int]


def _sent_numbers(run: Run, names: tuple[str, str]) -> dict[tuple[str, int], _PairKey]:
    """Each request of the two series numbered within its series and context size, in the
    order sent, whether measured or not: the k-th of each is pair k.

    The probe sends a pair's two requests back to back, so its k-th text and k-th ids request
    are one pair. Numbering only the *measured* requests would pair requests of different
    pairs as soon as one is left out (another client's traffic, a failure), and the drift of
    a loaded machine between them would read as a difference between the series.
    """
    out: dict[tuple[str, int], _PairKey] = {}
    sent: dict[tuple[str, str, int | None], int] = {}
    for r in sorted(run.records, key=lambda r: (r.run_id, r.index)):
        name = series_name(r)
        if name in names:
            at = (r.run_id, name, r.context_tokens_target)
            out[(r.run_id, r.index)] = (r.run_id, r.context_tokens_target, sent.get(at, 0))
            sent[at] = sent.get(at, 0) + 1
    return out


def sent_pairs(
    run: Run, names: tuple[str, str], slow: Sequence[RequestRecord], fast: Sequence[RequestRecord]
) -> tuple[list[float], list[float]]:
    """The client TTFTs of the pairs of series ``names`` whose two requests, ``slow``'s
    and ``fast``'s, are both among those measured (a subset of ``run``'s records).

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> recs = tuple(RequestRecord(run_id="r", index=i, variant=v, phase="warm", ok=True,
    ...                            client_ttft_ms=t) for i, (v, t) in
    ...              enumerate((("text", 90.0), ("ids", 80.0), ("ids", 99.0), ("text", 97.0))))
    >>> run = Run(kind="probe", key="r", label="p", parts=(RunPart(kind="probe", key="r",
    ...           label="p", source=Path("d"), records=recs),))
    >>> sent_pairs(run, ("text", "ids"), recs[3:], recs[1:3])  # the first text left out
    ([97.0], [99.0])
    """
    number = _sent_numbers(run, names)

    def ttfts(records: Sequence[RequestRecord]) -> dict[_PairKey, float]:
        return {
            number[(r.run_id, r.index)]: r.client_ttft_ms
            for r in records
            if r.client_ttft_ms is not None and (r.run_id, r.index) in number
        }

    xs, ys = ttfts(slow), ttfts(fast)
    both = [k for k in xs if k in ys]
    return [xs[k] for k in both], [ys[k] for k in both]

"""Histogram maths: ``le`` bucket bounds, one histogram summed over label sets, quantiles.

Servers send whatever they send, so nothing here raises on a value: a bucket whose ``le`` is
not a number is skipped with a note (Prometheus skips it too), and a quantile that cannot be
known — no observations, counts that are NaN or ±Inf, bounds that overflow — is ``None``.

>>> h = HistogramDelta("t", 0.25, 1.0, ((1.0, 1.0), (math.inf, 1.0)))
>>> (h.mean, h.quantile(0.5))
(0.25, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttftscope.metrics.prom import Labels, SampleView

_INF_SPELLINGS = frozenset({"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def sum_values(values: Iterable[float]) -> float:
    """Exact float sum (``math.fsum``) that never raises: ±Inf, NaN and overflow give the
    IEEE result (``inf``, ``nan``) instead of fsum's ValueError / OverflowError.

    >>> sum_values([0.1] * 10), sum_values([1e308, 1e308]), sum_values([math.inf, -math.inf])
    (1.0, inf, nan)
    """
    vals = list(values)
    try:
        return math.fsum(vals)
    except (OverflowError, ValueError):
        return float(sum(vals))


def is_inf_spelling(token: str) -> bool:
    """True for the spellings of ±Inf a float parser accepts (``+Inf``, ``-inf``, ``Infinity``).

    >>> is_inf_spelling("+Inf"), is_inf_spelling("1e999")
    (True, False)
    """
    return token.lower() in _INF_SPELLINGS


def bucket_bound(le: str) -> float | None:
    """The upper bound an ``le`` label names, or None when it is not a number.

    Accepts what Prometheus' Go parser accepts (``+Inf``, ``0.5``, ``1e3``); rejects text,
    NaN, padding, ``_`` separators, non-ASCII digits and literals beyond the float range.

    >>> bucket_bound("+Inf"), bucket_bound("0.5"), bucket_bound("abc"), bucket_bound("1e999")
    (inf, 0.5, None, None)
    """
    if not le.isascii() or le != le.strip() or "_" in le:
        return None
    try:
        bound = float(le)
    except ValueError:
        return None
    if math.isnan(bound) or (math.isinf(bound) and not is_inf_spelling(le)):
        return None
    return bound


@dataclass(frozen=True)
class HistogramDelta:
    """One histogram (summed over the selected label sets): cumulative buckets, sum, count.

    ``notes`` says which bucket series were skipped (an ``le`` that is not a number).

    >>> HistogramDelta("t", 2.0, 2.0, ((1.0, 1.0), (math.inf, 2.0))).mean
    1.0
    """

    name: str
    sum: float
    count: float
    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), sorted, ends at +Inf
    notes: tuple[str, ...] = ()

    @property
    def mean(self) -> float | None:
        """``sum / count``; None without observations or when either is NaN/±Inf."""
        if not (math.isfinite(self.count) and math.isfinite(self.sum)) or self.count <= 0:
            return None
        mean = self.sum / self.count
        return mean if math.isfinite(mean) else None

    def quantile(self, q: float) -> float | None:
        """Estimated ``q``-quantile of the observations, see :func:`histogram_quantile`."""
        return histogram_quantile(self.buckets, q)


def histogram_of(
    name: str, counts: Iterable[float], buckets: Mapping[Labels, float], total: float | None
) -> HistogramDelta:
    """Sum ``_count`` values and ``_bucket`` series (by their ``le``) into one histogram.

    >>> h = histogram_of("t", [1.0], {frozenset({("le", "+Inf")}): 1.0,
    ...                               frozenset({("le", "abc")}): 1.0}, 0.5)
    >>> h.buckets, h.notes[0][:45]
    (((inf, 1.0),), '1 bucket series of t have an le label that is')
    """
    by_le: dict[float, float] = {}
    bad: list[str] = []
    for lab, v in buckets.items():
        raw = dict(lab).get("le")
        le = None if raw is None else bucket_bound(raw)
        if le is None:
            bad.append("(none)" if raw is None else repr(raw[:40]))
        else:
            by_le[le] = by_le.get(le, 0.0) + v
    notes: tuple[str, ...] = ()
    if bad:
        notes = (
            f"{len(bad)} bucket series of {name} have an le label that is not a number "
            f"(e.g. le={bad[0]}) and were skipped, as Prometheus skips them; quantiles use "
            "the other buckets — the server's exposition is broken, report it upstream",
        )
    return HistogramDelta(
        name, total or 0.0, sum_values(counts), tuple(sorted(by_le.items())), notes
    )


def _cumulative(buckets: Sequence[tuple[float, float]]) -> list[tuple[float, float]] | None:
    """Sorted buckets with dips smoothed away; None when a bound is NaN or a count not finite."""
    ordered = sorted((float(le), float(c)) for le, c in buckets)
    if any(math.isnan(le) or not math.isfinite(c) for le, c in ordered):
        return None
    fixed: list[tuple[float, float]] = []
    for le, c in ordered:  # float noise can make cumulative counts dip; Prometheus smooths too
        fixed.append((le, max(c, fixed[-1][1]) if fixed else c))
    return fixed


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Estimate the ``q``-quantile from cumulative ``(le, count)`` buckets, as Prometheus does.

    Linear interpolation inside the bucket holding rank ``q·total``; the first bucket starts at
    0 (observations are assumed non-negative); ranks in the ``+Inf`` bucket give the highest
    finite bound. Counts that dip are smoothed (running maximum). None (no answer) when there
    are no observations, no ``+Inf`` bucket or no finite bucket, when any count is NaN or ±Inf
    (not a count) or a bound is NaN, and when the answer itself would not be finite (bounds
    near the float limit). ``q`` outside [0, 1] is a caller's bug: ValueError.

    >>> histogram_quantile([(1.0, 2), (2.0, 4), (math.inf, 4)], 0.75)
    1.5
    >>> histogram_quantile([(1.0, 2), (math.inf, math.nan)], 0.5) is None
    True
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {q}")
    fixed = _cumulative(buckets)
    if fixed is None or len(fixed) < 2 or fixed[-1][0] != math.inf:
        return None
    total = fixed[-1][1]
    if total <= 0:
        return None
    rank = q * total
    # rank <= total, so the +Inf bucket always qualifies: the default is never used.
    b = next((i for i, (_, c) in enumerate(fixed) if c >= rank and c > 0), len(fixed) - 1)
    if b == len(fixed) - 1:
        found = fixed[-2][0]
    elif b == 0 and fixed[0][0] <= 0:
        found = fixed[0][0]
    else:
        upper, count = fixed[b]
        lower, below = (0.0, 0.0) if b == 0 else fixed[b - 1]
        frac = (rank - below) / (count - below)
        if math.isfinite(upper - lower):
            found = lower + (upper - lower) * frac  # Prometheus' arithmetic, bit for bit
        else:  # bounds near the float limit: the convex form cannot overflow
            found = lower * (1.0 - frac) + upper * frac
        found = min(max(found, lower), upper)  # rounding must not leave the bucket
    return found if math.isfinite(found) else None


def histogram_quantiles(
    view: SampleView, name: str, qs: Iterable[float], *, match: Mapping[str, str] | None = None
) -> dict[float, float | None]:
    """Quantiles of histogram ``name`` in a snapshot or delta window; None where unknown.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> histogram_quantiles(parse_metrics('# TYPE t histogram\\nt_bucket{le="2.0"} 4\\n'
    ...     't_bucket{le="+Inf"} 4\\nt_sum 3\\nt_count 4\\n'), "t", [0.5])
    {0.5: 1.0}
    """
    hist = view.histogram(name, match)
    return {q: (hist.quantile(q) if hist else None) for q in qs}

"""Small, dependency-free percentile helpers used by probe summaries and reports."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in 0..100) of the non-missing values.

    >>> percentile([1, 2, 3, 4], 50)
    2.5
    >>> percentile([None], 90) is None
    True
    """
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        return None
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Iterable[float | None]) -> float | None:
    """Median of the non-missing values.

    >>> median([3, 1, None, 2])
    2.0
    """
    return percentile(values, 50)

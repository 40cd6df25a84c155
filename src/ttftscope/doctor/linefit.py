"""A least-squares line through (tokens, ms) points, and when its slope may be stated.

A growth slope ("grows N ms per 1K tokens") is evidence only when the line fits the points
(r² at least :data:`MIN_R2`) and the growth it implies up to the largest context is no
larger than the part itself: a steep slope through noise beside a small part is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MIN_R2", "LineFit", "fit_holds", "fit_line"]

# a slope is stated only from a line that fits, and whose growth fits inside the part
MIN_R2 = 0.8
SLOPE_SLACK = 0.25


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


def fit_holds(fit: LineFit, part_ms: float, tokens: float) -> bool:
    """Whether a growth slope may be stated: the line fits (r² ≥ :data:`MIN_R2`), it grows,
    and the growth it implies up to ``tokens`` is no larger than the part itself.

    >>> fit_holds(LineFit(slope=10.0, intercept=0.0, r2=0.95, n=6), 84.0, 8000.0)
    True
    >>> fit_holds(LineFit(slope=169.0, intercept=0.0, r2=0.29, n=6), 84.0, 6000.0)
    False
    >>> fit_holds(LineFit(slope=169.0, intercept=0.0, r2=0.9, n=6), 84.0, 6000.0)
    False
    """
    grown = fit.slope * tokens / 1000.0
    return fit.r2 >= MIN_R2 and fit.slope > 0 and grown <= part_ms * (1 + SLOPE_SLACK)

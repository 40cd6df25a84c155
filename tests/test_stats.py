"""Percentiles and medians against hand-computed values (numpy's "linear" method)."""

from __future__ import annotations

import math

import pytest

from ttftscope.stats import median, percentile


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([10.0, 20.0, 30.0, 40.0], 50, 25.0),  # halfway between the middle two
        ([10.0, 20.0, 30.0, 40.0], 90, 37.0),  # 0.7 of the way from 30 to 40
        ([40.0, 10.0, 30.0, 20.0], 25, 17.5),  # unsorted input
        ([5.0], 99, 5.0),
        ([1.0, 2.0], 0, 1.0),
        ([1.0, 2.0], 100, 2.0),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_gaps_and_nans_are_left_out() -> None:
    assert percentile([None, 10.0, math.nan, 20.0], 50) == pytest.approx(15.0)
    assert median([math.nan, 3.0, None, 1.0, 2.0]) == pytest.approx(2.0)
    assert percentile([None, math.nan], 50) is None
    assert median([]) is None

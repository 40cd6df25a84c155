"""The paired A/B verdict: hand-made pairs, whose intervals and verdicts are worked out here."""

from __future__ import annotations

import math

import pytest

from ttftscope.doctor.abtest import MAX_REPEAT, paired_ab, repeat_needed, repeat_step


def test_three_pairs_all_above_the_minimum_help() -> None:
    # diffs 100, 95, 115: with three pairs the bootstrap median's 95% interval is min..max
    ab = paired_ab([300.0, 310.0, 305.0], [200.0, 215.0, 190.0])
    assert (ab.verdict, ab.n, ab.median_ms, ab.low_ms, ab.high_ms) == (
        "helps", 3, 100.0, 95.0, 115.0,
    )  # fmt: skip
    assert ab.min_effect_ms == pytest.approx(0.05 * 305.0)  # 5% of 305 ms beats 5 ms
    assert ab.repeat_needed is None


def test_the_issues_measurement_ids_slower_does_not_help() -> None:
    # "median TTFT text 227 ms vs ids 324 ms", n = 3: ids were slower in every pair
    ab = paired_ab([227.0, 240.0, 215.0], [324.0, 300.0, 350.0])
    assert ab.verdict == "does not help" and ab.high_ms < 0


def test_pairs_straddling_the_minimum_are_not_decided_with_the_repeats_that_would() -> None:
    ab = paired_ab([230.0, 200.0, 260.0], [228.0, 150.0, 262.0])  # diffs 2, 50, -2
    assert ab.verdict == "not decided"
    # sd of (2, 50, -2) = 28.94; distance |2 - 11.5| = 9.5; (1.96 * 1.2533 * 28.94 / 9.5)^2
    sd = math.sqrt(((2 - 50 / 3) ** 2 + (50 - 50 / 3) ** 2 + (-2 - 50 / 3) ** 2) / 2)
    assert ab.repeat_needed == math.ceil((1.96 * math.sqrt(math.pi / 2) * sd / 9.5) ** 2) == 56


def test_a_small_gain_below_five_ms_does_not_help() -> None:
    assert paired_ab([50.0, 51.0, 52.0], [47.0, 48.0, 48.5]).verdict == "does not help"


def test_fewer_than_three_pairs_never_decide() -> None:
    assert paired_ab([500.0, 510.0], [100.0, 90.0]).verdict == "not decided"
    assert paired_ab([], []).verdict == "not decided"


def test_the_verdict_is_the_same_every_time() -> None:
    slow = [float(200 + (k * 37) % 41) for k in range(12)]
    fast = [float(180 + (k * 53) % 47) for k in range(12)]
    assert len({paired_ab(slow, fast) for _ in range(3)}) == 1


def test_repeat_needed_is_bounded() -> None:
    assert repeat_needed([20.0, 0.0, 10.0], 10.0) == MAX_REPEAT  # estimate on the minimum
    assert repeat_needed([7.0], 5.0) == 3


def test_a_spread_too_wide_for_a_practical_run_asks_for_what_one_sends() -> None:
    # the demo's bench through an in-process gateway: pairs from -830 to +226 ms
    ab = paired_ab([900.0, 60.0, 70.0, 400.0, 55.0], [70.0, 890.0, 65.0, 60.0, 58.0])
    assert ab.verdict == "not decided" and ab.repeat_needed == 1000
    step = repeat_step("ttftscope probe --gateway-url URL", ab.repeat_needed)
    assert step.startswith("not decided: run `ttftscope probe --gateway-url URL --repeat 50`")
    assert "over 1,000 pairs" in step and "--repeat 1000" not in step


def test_a_practical_repeat_is_asked_for_as_computed() -> None:
    assert repeat_step("ttftscope probe --ab ids", 11) == (
        "not decided: run `ttftscope probe --ab ids --repeat 11`"
    )
    assert "--repeat 50`" in repeat_step("ttftscope probe --ab ids", 51)

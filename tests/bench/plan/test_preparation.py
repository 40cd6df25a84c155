"""A synthetic workload too long for the server's ``max_model_len`` is scaled down to fit.

Whether a plan fits is judged by :func:`check_fits` (the refusal bench made before), so the
fitted scale is checked against the rule it must satisfy, not against itself.
"""

from __future__ import annotations

import dataclasses

import pytest

from ttftscope.bench.options import BenchOptions, ContextSizes, TargetSpec
from ttftscope.bench.plan.preparation import check_fits, fit_scale
from ttftscope.bench.plan.workload import plan_workload
from ttftscope.errors import ConfigError

# The README's multi-target bench: 16 sessions of the default 86K-123K contexts, two targets;
# on the local server (max_model_len 131,072) it exited 2 ("would grow to ~132,245 tokens").
README_MULTI = BenchOptions(
    sessions=16,
    request_rate=4.0,
    max_concurrency=12,
    targets=(TargetSpec("direct"), TargetSpec("gateway", "http://127.0.0.1:8100/v1")),
)
LOCAL_MAX_MODEL_LEN = 131_072
ANSWER = 216  # the traces' median answer, bench's default


def fits(opts: BenchOptions, scale: float, limit: int) -> bool:
    plans = plan_workload(dataclasses.replace(opts, scale=scale), len(opts.targets))
    try:
        check_fits(plans, limit, ANSWER, "m")
    except ConfigError:
        return False
    return True


def test_the_readme_bench_did_not_fit_the_local_server_at_full_scale() -> None:
    assert not fits(README_MULTI, 1.0, LOCAL_MAX_MODEL_LEN)


@pytest.mark.parametrize("limit", [LOCAL_MAX_MODEL_LEN, 100_000, 32_768, 8_192, 2_000])
def test_the_fitted_scale_fits_and_is_the_largest_of_two_digits(limit: int) -> None:
    scale = fit_scale(README_MULTI, 2, limit, ANSWER)
    assert scale is not None and 0 < scale < 1
    assert fits(README_MULTI, scale, limit)
    next_up = {0.1: 0.01, 0.01: 0.001}[0.1 if scale >= 0.1 else 0.01]  # 2nd digit's unit
    assert not fits(README_MULTI, round(scale + next_up, 6), limit)


def test_the_fitted_scale_is_two_significant_digits() -> None:
    scale = fit_scale(README_MULTI, 2, LOCAL_MAX_MODEL_LEN, ANSWER)
    assert scale is not None and f"{scale:g}" in {f"0.{d}" for d in range(10, 100)}


def test_a_workload_that_fits_keeps_its_scale() -> None:
    assert fit_scale(README_MULTI, 2, 1_000_000, ANSWER) == 1.0
    assert fit_scale(dataclasses.replace(README_MULTI, scale=0.05), 2, 10_000, ANSWER) == 0.05


def test_nothing_fits_when_the_turns_alone_are_too_long() -> None:
    # 1,000 turns in one session: each turn's template and shortest text do not scale
    many = BenchOptions(sessions=1, num_prompts=1_000, context_tokens=ContextSizes("list", (0,)))
    assert fit_scale(many, 1, 4_096, ANSWER) is None

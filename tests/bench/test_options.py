"""Flag parsers: every input is a value or a ConfigError that names the flag."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.bench.options import (
    BenchOptions,
    ContextSizes,
    Shard,
    TargetSpec,
    parse_context_tokens,
    parse_extra_body,
    parse_percentiles,
    parse_rate,
    parse_shard,
    parse_target,
    unique_targets,
)
from ttftscope.errors import ConfigError

SIZES = st.integers(min_value=0, max_value=10_000_000)


@given(st.lists(SIZES, min_size=1, max_size=6))
def test_a_list_of_sizes_round_trips(values: list[int]) -> None:
    got = parse_context_tokens(",".join(f"{v:_}" for v in values))
    assert got == ContextSizes("list", tuple(values))


@given(SIZES, SIZES)
def test_a_range_round_trips_or_says_low_is_above_high(a: int, b: int) -> None:
    if a <= b:
        assert parse_context_tokens(f"{a}-{b}") == ContextSizes("range", (a, b))
    else:
        with pytest.raises(ConfigError, match="low end is above its high end"):
            parse_context_tokens(f"{a}-{b}")


@given(st.text(max_size=30))
def test_context_tokens_never_fail_any_other_way(text: str) -> None:
    try:
        sizes = parse_context_tokens(text)
    except ConfigError as exc:
        assert "--context-tokens" in exc.message and exc.hint
    else:
        assert max(sizes.values) <= 10_000_000 and min(sizes.values) >= 0


def test_context_tokens_above_any_model_are_refused() -> None:
    with pytest.raises(ConfigError, match="above the largest context"):
        parse_context_tokens("1000-99999999")


@given(st.integers(1, 999), st.integers(0, 999))
def test_shards_round_trip(count: int, extra: int) -> None:
    index = 1 + extra % count
    assert parse_shard(f"{index}/{count}") == Shard(index, count)
    assert str(parse_shard(f" {index} / {count} ")) == f"{index}/{count}"


@given(st.text(max_size=12))
def test_shard_text_is_a_shard_or_a_config_error(text: str) -> None:
    try:
        shard = parse_shard(text)
    except ConfigError as exc:
        assert "--shard" in exc.message
    else:
        assert 1 <= shard.index <= shard.count


@given(st.floats(min_value=1e-6, max_value=1e9))
def test_rates_round_trip(rate: float) -> None:
    assert parse_rate(repr(rate)) == rate


@given(st.text(max_size=10))
def test_rate_text_is_positive_or_inf_or_a_config_error(text: str) -> None:
    try:
        rate = parse_rate(text)
    except ConfigError as exc:
        assert "--request-rate" in exc.message
    else:
        assert rate > 0 and (math.isfinite(rate) or text.strip().lower() == "inf")


@given(st.text(max_size=20))
def test_percentiles_are_in_range_or_refused(text: str) -> None:
    try:
        got = parse_percentiles(text)
    except ConfigError as exc:
        assert "--metric-percentiles" in exc.message
    else:
        assert got and all(0 <= q <= 100 for q in got) and len(set(got)) == len(got)


@given(st.text(max_size=40))
def test_targets_are_parsed_or_refused(text: str) -> None:
    try:
        spec = parse_target(text)
    except ConfigError as exc:
        assert "--target" in exc.message and exc.hint
    else:
        assert spec.name == "direct" or (spec.url or "").startswith(("http://", "https://"))


def test_target_direct_cannot_be_renamed_and_names_are_unique() -> None:
    with pytest.raises(ConfigError, match="'direct' is the configured base URL"):
        parse_target("direct=http://h:1/v1")
    with pytest.raises(ConfigError, match="gw is given twice"):
        unique_targets((TargetSpec("gw", "http://a/v1"), TargetSpec("gw", "http://b/v1")))
    with pytest.raises(ConfigError, match="not the endpoint"):
        parse_target("gw=http://h:1/v1/chat/completions")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[1]", "must be a JSON object"),
        ("{", "is not JSON"),
        ('{"messages": []}', "sets messages, which the workload owns"),
        ('{"x": "\\ud800"}', "UTF-8 cannot carry"),
    ],
)
def test_extra_body_must_be_an_object_that_leaves_the_prompt_alone(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_extra_body(text)


def test_rate_and_concurrency_are_totals_over_shards() -> None:
    opts = BenchOptions(request_rate=9.0, max_concurrency=7, shard=Shard(2, 3))
    assert (opts.shard_rate, opts.shard_concurrency) == (3.0, 3)
    assert BenchOptions(shard=Shard(3, 3)).workload_key() == BenchOptions().workload_key()
    assert BenchOptions(seed=1).workload_key() != BenchOptions().workload_key()

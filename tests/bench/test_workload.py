"""The seeded workload: deterministic, shards disjoint and complete, realistic turn sizes."""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.bench.options import BenchOptions, ContextSizes, Shard
from ttftscope.bench.sessions import ContextRecipe, SyntheticSession, build_sessions, turn_text
from ttftscope.bench.workload import (
    TURN_MAX_CHARS,
    TURN_MIN_CHARS,
    plan_workload,
    shard_plan,
    turns_per_session,
)

OPTIONS = st.builds(
    BenchOptions,
    sessions=st.integers(1, 40),
    num_prompts=st.integers(1, 300),
    seed=st.integers(0, 2**32),
    think_time_s=st.sampled_from([0.0, 0.5]),
    context_tokens=st.sampled_from(
        [ContextSizes("range", (86_000, 123_000)), ContextSizes("list", (0, 8000, 32000))]
    ),
    scale=st.sampled_from([1.0, 0.05]),
)


@given(OPTIONS, st.integers(1, 3))
def test_the_same_options_plan_the_same_workload(opts: BenchOptions, n_targets: int) -> None:
    assert plan_workload(opts, n_targets) == plan_workload(opts, n_targets)


@given(OPTIONS, st.integers(1, 3), st.integers(1, 9))
def test_shards_are_disjoint_and_together_the_whole_workload(
    opts: BenchOptions, n_targets: int, count: int
) -> None:
    whole = plan_workload(opts, n_targets)
    ids = [(t.session, t.turn, t.index) for p in whole for t in p.turns]
    assert sorted(i for _s, _t, i in ids) == list(range(opts.synthetic_prompts))
    seen: list[tuple[int, int, int]] = []
    for index in range(1, count + 1):
        part = shard_plan(plan_workload(opts, n_targets), Shard(index, count))
        seen += [(t.session, t.turn, t.index) for p in part for t in p.turns]
    assert len(seen) == len(set(seen)) and set(seen) == set(ids)


@given(st.integers(1, 50), st.integers(0, 500))
def test_turns_are_dealt_evenly_and_turn_major(sessions: int, prompts: int) -> None:
    counts = turns_per_session(sessions, prompts)
    assert sum(counts) == prompts and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)


def test_turn_sizes_are_log_normal_around_1400_characters() -> None:
    plans = plan_workload(BenchOptions(sessions=50, num_prompts=4000), 1)
    chars = [t.chars for p in plans for t in p.turns]
    assert 1300 <= statistics.median(chars) <= 1500
    assert statistics.quantiles(chars, n=10)[-1] > 3 * 1400  # a long tail, as tool output has
    assert min(chars) >= TURN_MIN_CHARS and max(chars) <= TURN_MAX_CHARS


def test_contexts_come_from_the_range_scaled_and_lists_are_dealt_evenly() -> None:
    plans = plan_workload(BenchOptions(sessions=30, num_prompts=30, scale=0.05), 1)
    assert all(4300 <= p.context_tokens <= 6150 for p in plans)
    assert len({p.context_tokens for p in plans}) > 20
    listed = BenchOptions(sessions=6, num_prompts=6, context_tokens=ContextSizes("list", (0, 8)))
    assert Counter(p.context_tokens for p in plan_workload(listed, 1)) == {0: 3, 8: 3}


def test_targets_alternate_within_sessions_and_cold_turns_are_dealt_evenly() -> None:
    plans = plan_workload(BenchOptions(sessions=4, num_prompts=16), 2)
    for p in plans:
        assert [t.target for t in p.turns] == [(p.session + k) % 2 for k in range(4)]
    assert Counter(p.turns[0].target for p in plans) == {0: 2, 1: 2}
    assert all(p.turns[0].think_s == 0.0 for p in plans)


def _sessions(opts: BenchOptions, shared: bool) -> list[SyntheticSession]:
    plans = plan_workload(opts, 1)
    tokens = min(p.context_tokens for p in plans) if shared else None
    recipe = ContextRecipe(opts.seed, opts.workload_key(), tokens)

    async def count(text: str) -> int:
        return len(text) // 4

    return asyncio.run(build_sessions(plans, recipe, count))


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 1000))
def test_session_text_is_deterministic_and_sessions_never_share_a_prefix(seed: int) -> None:
    opts = BenchOptions(
        sessions=3, num_prompts=6, seed=seed, context_tokens=ContextSizes("range", (2000, 4000))
    )
    a, b = _sessions(opts, False), _sessions(opts, False)
    assert [s.messages(1) for s in a] == [s.messages(1) for s in b]
    systems = [s.messages(0)[0]["content"] for s in a]
    assert len({text[:70] for text in systems}) == 3  # the session header comes first
    for s in a:  # about the planned size (the probe's builder cuts at a line end)
        tokens = len(s.messages(0)[0]["content"]) // 4
        assert abs(tokens - s.plan.context_tokens) < 0.05 * s.plan.context_tokens + 40


def test_a_shared_system_prompt_is_the_same_text_in_every_session() -> None:
    opts = BenchOptions(
        sessions=3, num_prompts=3, context_tokens=ContextSizes("list", (400, 800, 1200))
    )
    sessions = _sessions(opts, True)
    assert len({s.messages(0)[0]["content"] for s in sessions}) == 1
    assert len({s.messages(0)[1]["content"] for s in sessions}) == 3  # each one's own files


def test_turn_text_has_the_agent_mix_and_some_non_ascii() -> None:
    texts = [turn_text(0, s, t, 1400) for s in range(5) for t in range(5)]
    assert len(set(texts)) == 25 and all(len(t) == 1400 for t in texts)
    assert any(not t.isascii() for t in texts)

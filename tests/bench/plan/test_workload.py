"""The seeded workload: deterministic, shards disjoint and complete, shaped by the traces."""

from __future__ import annotations

import asyncio
import statistics
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.bench.options import BenchOptions, ContextSizes, Shard
from ttftscope.bench.plan.conversations import (
    SUMMARY_HEAD,
    ContextRecipe,
    SyntheticSession,
    build_sessions,
    turn_text,
)
from ttftscope.bench.plan.traces import APPEND_P99_TOKENS
from ttftscope.bench.plan.workload import (
    CHARS_PER_TOKEN,
    TURN_MIN_CHARS,
    SessionPlan,
    TurnPlan,
    plan_workload,
    shard_plan,
    shared_prefix_tokens,
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
    tokens = shared_prefix_tokens(plans) if shared else None
    recipe = ContextRecipe(opts.seed, opts.workload_key(), tokens)

    async def count(text: str) -> int:
        return len(text) // 4

    return asyncio.run(build_sessions(plans, recipe, count))


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 1000))
def test_session_text_is_deterministic_and_sessions_never_share_a_prefix(seed: int) -> None:
    opts = BenchOptions(
        sessions=3,
        num_prompts=6,
        seed=seed,
        context_tokens=ContextSizes("range", (20_000, 40_000)),
        scale=0.1,  # 2,000-4,000 tokens: tools 1,230, system prompt 280, files the rest
    )
    a, b = _sessions(opts, False), _sessions(opts, False)
    assert [s.prompt(1) for s in a] == [s.prompt(1) for s in b]
    assert len({s.system[:70] for s in a}) == 3  # the session header comes first
    for s in a:  # about the planned size (the probe's builder cuts at a line end)
        files = s.prompt(0).messages[0].text
        tools = sum(len(t.description) // 4 + 40 for t in s.tools)  # 40: a tool's frame
        tokens = (len(s.system) + len(files)) // 4 + tools
        assert abs(tokens - s.plan.context_tokens) < 0.05 * s.plan.context_tokens + 40
        assert abs(len(s.system) // 4 - 280) < 40 and abs(tools - 1230) < 80


def test_a_shared_system_prompt_is_the_same_text_in_every_session() -> None:
    opts = BenchOptions(
        sessions=3,
        num_prompts=3,
        context_tokens=ContextSizes("list", (4000, 8000, 12000)),
        scale=0.1,  # tools 1,230 tokens each; the shared prompt is 400 - 123 tokens
    )
    sessions = _sessions(opts, True)
    assert len({s.system for s in sessions}) == 1
    assert len({s.prompt(0).messages[0].text for s in sessions}) == 3  # each one's own files


def test_turn_text_has_the_agent_mix_and_some_non_ascii() -> None:
    texts = [turn_text(0, s, t, 1400) for s in range(5) for t in range(5)]
    assert len(set(texts)) == 25 and all(len(t) == 1400 for t in texts)
    assert any(not t.isascii() for t in texts)


def test_the_default_plan_follows_the_claude_code_traces() -> None:
    plans = plan_workload(BenchOptions(sessions=50, num_prompts=4000), 1)
    appends = [t.chars / CHARS_PER_TOKEN for p in plans for t in p.turns]
    # a seeded sample of 4,000 draws: the traces' median 655 and p90 3,541, in a wide band
    assert 560 <= statistics.median(appends) <= 760
    assert 2900 <= statistics.quantiles(appends, n=10)[-1] <= 4300
    assert max(appends) <= APPEND_P99_TOKENS + 1  # capped at the traces' p99
    assert {(p.tools_tokens, p.system_tokens) for p in plans} == {(12_300, 2_800)}
    compacted = [t for p in plans for t in p.turns if t.compact]
    assert 15 <= len(compacted) <= 70 and all(t.turn > 0 for t in compacted)  # ~1 in 100
    other = plan_workload(BenchOptions(sessions=50, num_prompts=4000, seed=1), 1)
    assert [t.chars for p in other for t in p.turns] != [t.chars for p in plans for t in p.turns]


def test_scale_shrinks_every_size_but_keeps_the_shape() -> None:
    plans = plan_workload(BenchOptions(sessions=50, num_prompts=4000, scale=0.05), 1)
    assert {(p.tools_tokens, p.system_tokens) for p in plans} == {(615, 140)}
    chars = [t.chars for p in plans for t in p.turns]
    assert abs(statistics.median(chars) - 655 * 0.05 * CHARS_PER_TOKEN) < 15
    assert min(chars) >= TURN_MIN_CHARS


def test_a_compaction_replaces_the_history_with_a_summary_then_it_grows_again() -> None:
    turns = tuple(TurnPlan(0, t, t, 300, 0.0, 0, compact=t == 3) for t in range(6))
    plan = SessionPlan(0, 4000, turns, tools_tokens=1000, system_tokens=200, summary_tokens=100)
    [s] = asyncio.run(build_sessions([plan], ContextRecipe(0, "k"), _quarter))
    sizes = [sum(len(m.text) for m in s.prompt(t).messages) for t in range(6)]
    assert sizes[0] < sizes[1] < sizes[2] and sizes[3] < sizes[2] / 3  # the summary is short
    assert sizes[3] < sizes[4] < sizes[5]  # and grows again, turn by turn
    after = s.prompt(4).messages
    assert after[0].text.startswith(SUMMARY_HEAD) and after[-1].text == s.turn_texts[4]
    assert s.prompt(4).system == s.prompt(0).system and s.prompt(4).tools == s.prompt(0).tools


def test_every_session_shares_one_tools_block() -> None:
    opts = BenchOptions(sessions=3, num_prompts=3, scale=0.05)
    sessions = _sessions(opts, False)
    assert all(s.tools == sessions[0].tools for s in sessions)
    assert len(sessions[0].tools) == 3  # 615 tokens at this scale: three tools' worth
    assert len({s.system for s in sessions}) == 3


async def _quarter(text: str) -> int:
    return len(text) // 4

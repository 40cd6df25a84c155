"""The seeded plan of a bench workload: sessions, their sizes, turns, compactions and shards.

A plan holds no text, only sizes and identities, so every shard computes the whole plan
cheaply and keeps its slice. Requests are numbered turn-major (turn 0 of every session,
then turn 1, …): ``--num-prompts`` then gives each session an even share of turns, and a
request's number is its place in the whole workload, the same in every shard.

The default plan follows the public Claude Code traces (:mod:`.traces`): a session starts
from its ``--context-tokens`` context, of which the tools block (shared by all sessions)
and the system prompt take the traces' sizes and the files the session has read the rest;
each turn appends a log-normal number of tokens through the traces' median and p90, capped
at their p99; about 1 turn in 100 compacts (the history is replaced by a short summary, then
grows again); think times are exponential around ``--think-time-s``. ``--scale`` shrinks
every size. Targets alternate per request, so each session's turns go to every target in
turn and cold first turns are dealt evenly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ttftscope.bench.options import BenchOptions, ContextSizes, Shard
from ttftscope.bench.plan.traces import (
    COMPACTION_SUMMARY_TOKENS,
    SYSTEM_PROMPT_TOKENS,
    TOOLS_TOKENS,
    AppendShape,
)

# Agent text (code, diffs, shell output) is ~2.7-3 characters a token on BPE vocabularies
# (2.75 on cl100k, measured): turn sizes planned in tokens are written as this many chars.
CHARS_PER_TOKEN = 2.8
TURN_MIN_CHARS = 64  # a scaled-down append is still a turn of its own


@dataclass(frozen=True)
class TurnPlan:
    """One request of the workload: which session and turn, how big, where it goes.

    >>> TurnPlan(session=1, turn=0, index=1, chars=1400, think_s=0.0, target=1).compact
    False
    """

    session: int
    turn: int
    index: int  # place in the whole workload (turn-major), equal in every shard
    chars: int  # size of the appended turn (synthetic workloads)
    think_s: float  # pause before this turn is sent (not before a session's first)
    target: int  # position in the run's target list
    compact: bool = False  # the history before this turn is replaced by a summary


@dataclass(frozen=True)
class SessionPlan:
    """One agent session: its context size in tokens (tools and system prompt included),
    its turns in order, and the sizes of its tools block, system prompt and compaction
    summary (all scaled)."""

    session: int
    context_tokens: int
    turns: tuple[TurnPlan, ...]
    tools_tokens: int = 0
    system_tokens: int = 0
    summary_tokens: int = 0

    @property
    def files_tokens(self) -> int:
        """The part of the context that is the session's own files (read before turn 0)."""
        return max(0, self.context_tokens - self.tools_tokens - self.system_tokens)


def _rng(seed: int, *parts: object) -> random.Random:
    # str seeds hash with SHA-512: the same numbers on every machine and Python version
    return random.Random("-".join(str(p) for p in (seed, *parts)))


def turns_per_session(sessions: int, num_prompts: int) -> list[int]:
    """Turn-major dealing of ``num_prompts`` requests over ``sessions`` sessions.

    >>> turns_per_session(3, 7)
    [3, 2, 2]
    """
    return [max(0, (num_prompts - s + sessions - 1) // sessions) for s in range(sessions)]


def context_sizes(sizes: ContextSizes, sessions: int, seed: int) -> list[int]:
    """One context size per session: uniform in a range, or a list dealt evenly.

    A list is repeated to cover every session and shuffled, so each size appears
    ``sessions / len(list)`` times, rounded, in a seeded order.

    >>> sorted(context_sizes(ContextSizes("list", (0, 8000)), 4, seed=1))
    [0, 0, 8000, 8000]
    """
    if sizes.kind == "range":
        low, high = sizes.values
        return [_rng(seed, "context", s).randint(low, high) for s in range(sessions)]
    deck = list(sizes.values) * math.ceil(sessions / len(sizes.values))
    deck = deck[:sessions]
    _rng(seed, "contexts").shuffle(deck)
    return deck


def append_tokens(seed: int, session: int, turn: int, shape: AppendShape) -> int:
    """How many tokens one turn appends, unscaled: a seeded draw from ``shape``.

    >>> from ttftscope.bench.plan.traces import TRACE_APPENDS
    >>> append_tokens(0, 1, 2, TRACE_APPENDS) == append_tokens(0, 1, 2, TRACE_APPENDS)
    True
    """
    return shape.size(_rng(seed, "append", session, turn).gauss(0.0, 1.0))


def turn_chars(seed: int, session: int, turn: int, opts: BenchOptions) -> int:
    """The size of one turn in characters: its scaled append, written as agent text.

    >>> turn_chars(0, 1, 2, BenchOptions(scale=0.001))
    64
    """
    tokens = append_tokens(seed, session, turn, opts.appends) * opts.scale
    return max(TURN_MIN_CHARS, round(tokens * CHARS_PER_TOKEN))


def compacts(seed: int, session: int, turn: int, share: float) -> bool:
    """Whether the history is compacted before this turn: a seeded draw, never the first.

    >>> compacts(0, 0, 0, 1.0), compacts(0, 0, 1, 1.0), compacts(0, 0, 1, 0.0)
    (False, True, False)
    """
    return turn > 0 and _rng(seed, "compact", session, turn).random() < share


def think_time(seed: int, session: int, turn: int, mean_s: float) -> float:
    """Exponential think time around ``mean_s`` before a turn; none before the first.

    >>> think_time(0, 0, 0, 1.0), think_time(0, 0, 1, 0.0)
    (0.0, 0.0)
    """
    if turn == 0 or mean_s <= 0:
        return 0.0
    return _rng(seed, "think", session, turn).expovariate(1.0 / mean_s)


def plan_turns(
    session: int, turns: int, opts: BenchOptions, n_targets: int
) -> tuple[TurnPlan, ...]:
    """The turns of one session of the synthetic workload.

    Dealt turn-major, every row of turns below the last is full, so request ``(s, t)`` is
    number ``t * sessions + s``.

    >>> [t.index for t in plan_turns(1, 3, BenchOptions(sessions=4), n_targets=2)]
    [1, 5, 9]
    """
    return tuple(
        TurnPlan(
            session=session,
            turn=turn,
            index=turn * opts.sessions + session,
            chars=turn_chars(opts.seed, session, turn, opts),
            think_s=think_time(opts.seed, session, turn, opts.think_time_s),
            target=(session + turn) % n_targets,
            compact=compacts(opts.seed, session, turn, opts.compaction_share),
        )
        for turn in range(turns)
    )


def prefix_tokens(context: int, scale: float) -> tuple[int, int]:
    """The tools block and system prompt a context of ``context`` tokens starts with.

    The traces' sizes, scaled; a context too small for both is all tools, then system.

    >>> prefix_tokens(100_000, 1.0), prefix_tokens(5_000, 0.05), prefix_tokens(500, 0.05)
    ((12300, 2800), (615, 140), (500, 0))
    """
    tools = min(context, round(TOOLS_TOKENS * scale))
    return tools, min(context - tools, round(SYSTEM_PROMPT_TOKENS * scale))


def plan_workload(opts: BenchOptions, n_targets: int) -> tuple[SessionPlan, ...]:
    """Every session of the synthetic workload (all shards); :func:`shard_plan` slices it.

    >>> plans = plan_workload(BenchOptions(sessions=2, num_prompts=3), n_targets=1)
    >>> [(p.session, [t.index for t in p.turns]) for p in plans]
    [(0, [0, 2]), (1, [1])]
    """
    counts = turns_per_session(opts.sessions, opts.synthetic_prompts)
    sizes = context_sizes(opts.context_tokens.scaled(opts.scale), opts.sessions, opts.seed)
    summary = round(COMPACTION_SUMMARY_TOKENS * opts.scale)
    return tuple(
        SessionPlan(
            s,
            sizes[s],
            plan_turns(s, counts[s], opts, n_targets),
            *prefix_tokens(sizes[s], opts.scale),
            summary_tokens=summary,
        )
        for s in range(opts.sessions)
    )


def shard_plan(plans: Sequence[SessionPlan], shard: Shard) -> tuple[SessionPlan, ...]:
    """The sessions this shard runs (round-robin by session number), in order.

    >>> plans = plan_workload(BenchOptions(sessions=3, num_prompts=6), n_targets=2)
    >>> [p.session for p in shard_plan(plans, Shard(1, 2))]
    [0, 2]
    """
    return tuple(p for p in plans if shard.includes(p.session))


def shared_prefix_tokens(plans: Sequence[SessionPlan]) -> int:
    """With ``--shared-system-prompt``: the size of the one system prompt every session
    shares, the smallest session context less its tools (each session adds the rest as
    its own files).

    >>> shared_prefix_tokens(plan_workload(BenchOptions(sessions=2, num_prompts=2), 1)) > 0
    True
    """
    return min((p.context_tokens - p.tools_tokens for p in plans), default=0)


def session_tokens(plan: SessionPlan) -> int:
    """At most how many tokens the session's last request carries: its context, a
    compaction summary if it compacts, every turn (at :data:`CHARS_PER_TOKEN`) and the
    chat template and fixed reply of every turn.

    >>> session_tokens(SessionPlan(0, 1000, (TurnPlan(0, 0, 0, 280, 0.0, 0),)))
    1116
    """
    summary = plan.summary_tokens if any(t.compact for t in plan.turns) else 0
    turns = sum(math.ceil(t.chars / CHARS_PER_TOKEN) + 16 for t in plan.turns)
    return plan.context_tokens + summary + turns

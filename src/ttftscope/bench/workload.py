"""The seeded plan of a bench workload: sessions, their context sizes, turns and shards.

A plan holds no text, only sizes and identities, so every shard computes the whole plan
cheaply and keeps its slice. Requests are numbered turn-major (turn 0 of every session,
then turn 1, …): ``--num-prompts`` then gives each session an even share of turns, and a
request's number is its place in the whole workload, the same in every shard.

Turn sizes follow a log-normal distribution with the median ``turn_median_chars`` (~1.4K
characters: tool output, file contents, diffs, short user text) and a long tail; think
times are exponential around ``--think-time-s``. Targets alternate per request, so each
session's turns go to every target in turn and cold first turns are dealt evenly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ttftscope.bench.options import BenchOptions, ContextSizes, Shard

TURN_SIGMA = 1.0  # log-normal spread: p90 ≈ 3.6x the median, p99 ≈ 10x
TURN_MIN_CHARS, TURN_MAX_CHARS = 64, 32_768


@dataclass(frozen=True)
class TurnPlan:
    """One request of the workload: which session and turn, how big, where it goes.

    >>> TurnPlan(session=1, turn=0, index=1, chars=1400, think_s=0.0, target=1).index
    1
    """

    session: int
    turn: int
    index: int  # place in the whole workload (turn-major), equal in every shard
    chars: int  # size of the appended turn (synthetic workloads)
    think_s: float  # pause before this turn is sent (not before a session's first)
    target: int  # position in the run's target list


@dataclass(frozen=True)
class SessionPlan:
    """One agent session: its context size in tokens and its turns, in order."""

    session: int
    context_tokens: int
    turns: tuple[TurnPlan, ...]


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


def turn_chars(seed: int, session: int, turn: int, median: int) -> int:
    """The size of one turn in characters: log-normal around ``median``, bounded.

    >>> turn_chars(0, 1, 2, 1400) == turn_chars(0, 1, 2, 1400)
    True
    """
    draw = _rng(seed, "turn", session, turn).gauss(0.0, TURN_SIGMA)
    return min(TURN_MAX_CHARS, max(TURN_MIN_CHARS, round(median * math.exp(draw))))


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
            chars=turn_chars(opts.seed, session, turn, opts.turn_median_chars),
            think_s=think_time(opts.seed, session, turn, opts.think_time_s),
            target=(session + turn) % n_targets,
        )
        for turn in range(turns)
    )


def plan_workload(opts: BenchOptions, n_targets: int) -> tuple[SessionPlan, ...]:
    """Every session of the synthetic workload (all shards); :func:`shard_plan` slices it.

    >>> plans = plan_workload(BenchOptions(sessions=2, num_prompts=3), n_targets=1)
    >>> [(p.session, [t.index for t in p.turns]) for p in plans]
    [(0, [0, 2]), (1, [1])]
    """
    counts = turns_per_session(opts.sessions, opts.synthetic_prompts)
    sizes = context_sizes(opts.context_tokens.scaled(opts.scale), opts.sessions, opts.seed)
    return tuple(
        SessionPlan(s, sizes[s], plan_turns(s, counts[s], opts, n_targets))
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
    shares, the smallest session context (each session adds the rest as its own files).

    >>> shared_prefix_tokens(plan_workload(BenchOptions(sessions=2, num_prompts=2), 1)) > 0
    True
    """
    return min((p.context_tokens for p in plans), default=0)


def session_tokens(plan: SessionPlan) -> int:
    """About how many tokens the session's last request carries (~3 characters a token
    for agent text, plus the chat template and the fixed reply of every turn).

    >>> session_tokens(SessionPlan(0, 1000, (TurnPlan(0, 0, 0, 300, 0.0, 0),)))
    1116
    """
    return plan.context_tokens + sum(t.chars // 3 + 16 for t in plan.turns)

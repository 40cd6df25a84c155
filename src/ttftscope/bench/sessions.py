"""The text of a synthetic session and the request body of each of its turns.

The text is the probe's (:mod:`ttftscope.probe.workload`): a deterministic coding-agent
context (source with line numbers, diffs, shell output, prose, some non-ASCII) and fresh
turns appended one per request, each answered by a fixed assistant reply, exactly as an
agent's conversation grows. Each session's system prompt starts with its own header (the
workload key and session number), so sessions never share a cached prefix by accident;
with ``--shared-system-prompt`` they share one system prompt on purpose and each brings
the rest of its context as a first user message (the files it read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ttftscope.bench.workload import SessionPlan, TurnPlan
from ttftscope.probe.workload import TokenCounter as TokenCounter
from ttftscope.probe.workload import agent_turn, build_context_async

SYSTEM_PROMPT = "You are a coding agent. Work carefully.\n"
ASSISTANT_REPLY = "Understood. Continuing."
FILES_ACK = "Read them."
# agent_turn's index space: one block of turn numbers per session
_TURNS_PER_SESSION = 1_000_003

Message = dict[str, str]


@dataclass(frozen=True)
class BodyDefaults:
    """What every request body gets: model, sampling, and ``--extra-body`` on top.

    ``force_max_tokens`` (``--max-tokens`` given) also replaces a replayed body's own limit.
    """

    model: str
    max_tokens: int
    temperature: float
    force_max_tokens: bool = False
    extra: Mapping[str, object] | None = None


class Conversation(Protocol):
    """A session whose turns can be turned into request bodies (synthetic or replayed)."""

    @property
    def plan(self) -> SessionPlan:
        """The session's identity, context size and turns."""
        ...

    def body(self, turn: TurnPlan, defaults: BodyDefaults) -> dict[str, object]:
        """The request body ``turn`` sends."""
        ...


def turn_text(seed: int, session: int, turn: int, chars: int) -> str:
    """The appended text of one turn: the probe's agent text, unique per session and turn.

    >>> t = turn_text(0, 2, 1, 900); len(t), t == turn_text(0, 2, 1, 900)
    (900, True)
    """
    return agent_turn(session * _TURNS_PER_SESSION + turn, seed=seed, chars=chars)


@dataclass(frozen=True)
class SyntheticSession:
    """A session's fixed prefix (system prompt, own files) and its turns' texts."""

    plan: SessionPlan
    prefix: tuple[Message, ...]
    turn_texts: tuple[str, ...]

    def messages(self, turn: int) -> list[Message]:
        """The conversation as turn ``turn`` sends it: prefix, earlier turns, this turn.

        >>> s = SyntheticSession(SessionPlan(0, 0, ()), ({"role": "system", "content": "s"},),
        ...                      ("a", "b"))
        >>> [m["content"] for m in s.messages(1)]
        ['s', 'a', 'Understood. Continuing.', 'b']
        """
        history: list[Message] = []
        for text in self.turn_texts[:turn]:
            history += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": ASSISTANT_REPLY},
            ]
        return [*self.prefix, *history, {"role": "user", "content": self.turn_texts[turn]}]

    def body(self, turn: TurnPlan, defaults: BodyDefaults) -> dict[str, object]:
        """The chat request body of ``turn``."""
        return {
            "model": defaults.model,
            "messages": self.messages(turn.turn),
            "max_tokens": defaults.max_tokens,
            "temperature": defaults.temperature,
            **(defaults.extra or {}),
        }


def _seed_of(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:12], 16)


@dataclass(frozen=True)
class ContextRecipe:
    """How the sessions' contexts are made: seed, workload key and the shared part."""

    seed: int
    workload_key: str
    shared_tokens: int | None = None  # --shared-system-prompt: its size in tokens


async def build_sessions(
    plans: Sequence[SessionPlan],
    recipe: ContextRecipe,
    counter: TokenCounter,
    on_stage: Callable[[str], None] | None = None,
) -> list[SyntheticSession]:
    """Build every planned session's context (token-counted) and turn texts, in order.

    >>> import asyncio
    >>> async def count(text: str) -> int:
    ...     return len(text) // 4
    >>> plan = SessionPlan(0, 100, (TurnPlan(0, 0, 0, 300, 0.0, 0),))
    >>> [s] = asyncio.run(build_sessions([plan], ContextRecipe(0, "k"), count))
    >>> [m["role"] for m in s.messages(0)], len(s.turn_texts[0])
    (['system', 'user'], 300)
    """
    say = on_stage or (lambda _text: None)
    shared = ""
    if recipe.shared_tokens is not None:
        say(f"building the shared system prompt ({recipe.shared_tokens:,} tokens)")
        shared = await build_context_async(
            recipe.shared_tokens, _seed_of(recipe.seed, "shared"), counter
        )
    out = []
    for n, plan in enumerate(plans, start=1):
        own = plan.context_tokens - (recipe.shared_tokens or 0)
        if own > 0:
            say(f"building session {n}/{len(plans)}'s context ({own:,} tokens)")
        ctx = await build_context_async(
            own, _seed_of(recipe.seed, "context", plan.session), counter
        )
        header = f"# session {recipe.workload_key}-{plan.session}\n"
        prefix: tuple[Message, ...]
        if recipe.shared_tokens is None:
            prefix = ({"role": "system", "content": SYSTEM_PROMPT + header + ctx},)
        else:
            prefix = (
                {"role": "system", "content": SYSTEM_PROMPT + shared},
                {"role": "user", "content": header + ctx},
                {"role": "assistant", "content": FILES_ACK},
            )
        texts = tuple(turn_text(recipe.seed, plan.session, t.turn, t.chars) for t in plan.turns)
        out.append(SyntheticSession(plan, prefix, texts))
    return out


def warmup_body(defaults: BodyDefaults, seed: int, k: int) -> dict[str, object]:
    """A short request of its own (no session's prefix), to open connections and warm up.

    >>> warmup_body(BodyDefaults("m", 4, 0.0), 0, 1)["messages"][0]["role"]
    'user'
    """
    text = agent_turn(10**9 + k, seed=seed, chars=400)
    return {
        "model": defaults.model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": defaults.max_tokens,
        "temperature": defaults.temperature,
        **(defaults.extra or {}),
    }

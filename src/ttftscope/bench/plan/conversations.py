"""The text of a synthetic session and the request of each of its turns, in any API.

The text is the probe's (:mod:`ttftscope.agenttext`): deterministic coding-agent text
(source with line numbers, diffs, shell output, prose, some non-ASCII). A session is what a
coding agent sends: one tools block (the same in every session, as an agent's tool
definitions are), a system prompt, the files it read, then fresh turns appended one per
request, each answered by a fixed assistant reply. At a compaction the history before the
turn is replaced by a summary, and the conversation grows again from there.

Each session's system prompt starts with its own header (the workload key and session
number), so sessions never share a cached prefix by accident; with
``--shared-system-prompt`` they share one system prompt on purpose and each brings its
header and the rest of its context as a first user message (the files it read).
A turn's :class:`~ttftscope.bench.plan.bodies.Prompt` is API-neutral; ``body`` writes it for
the run's API (:mod:`.bodies`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ttftscope.agenttext import TokenCounter, agent_turn, build_context_async
from ttftscope.bench.plan.bodies import Body, BodyDefaults, Message, Prompt, Tool, build_body
from ttftscope.bench.plan.workload import CHARS_PER_TOKEN, TURN_MIN_CHARS, SessionPlan, TurnPlan

SYSTEM_PROMPT = "You are a coding agent. Work carefully.\n"
ASSISTANT_REPLY = "Understood. Continuing."
FILES_ACK = "Read them."
SUMMARY_HEAD = "This session continues an earlier conversation that was compacted. Summary:\n"
SUMMARY_ACK = "Understood. Continuing from the summary."
# agent_turn's index space: one block of turn numbers per session
_TURNS_PER_SESSION = 1_000_003
# Claude Code's own tools, as names; the definitions are agent text of the traces' size
TOOL_NAMES = (
    "Task", "Bash", "Glob", "Grep", "ExitPlanMode", "Read", "Edit", "MultiEdit",
    "Write", "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput",
    "KillShell", "SlashCommand",
)  # fmt: skip
_TOOL_FRAME_TOKENS = 40  # a tool's name, schema and JSON punctuation, about


class Conversation(Protocol):
    """A session whose turns can be turned into request bodies (synthetic or replayed)."""

    @property
    def plan(self) -> SessionPlan:
        """The session's identity, context size and turns."""
        ...

    def body(self, turn: TurnPlan, defaults: BodyDefaults) -> Body:
        """The request body ``turn`` sends, in ``defaults.api``'s format."""
        ...


def turn_text(seed: int, session: int, turn: int, chars: int) -> str:
    """The appended text of one turn: the probe's agent text, unique per session and turn.

    >>> t = turn_text(0, 2, 1, 900); len(t), t == turn_text(0, 2, 1, 900)
    (900, True)
    """
    return agent_turn(session * _TURNS_PER_SESSION + turn, seed=seed, chars=chars)


def _pair(user: str, reply: str) -> tuple[Message, ...]:
    return (Message("user", user), Message("assistant", reply))


@dataclass(frozen=True)
class SyntheticSession:
    """A session's fixed parts (system prompt, tools, files), its turns and summaries."""

    plan: SessionPlan
    system: str
    tools: tuple[Tool, ...]
    files: tuple[Message, ...]  # the files read before turn 0 and their acknowledgement
    turn_texts: tuple[str, ...]
    summaries: Mapping[int, str] = field(default_factory=dict)  # compacting turn -> summary

    def prompt(self, turn: int) -> Prompt:
        """The conversation as turn ``turn`` sends it: since the last compaction, if any.

        >>> s = SyntheticSession(SessionPlan(0, 0, ()), "s", (), (), ("a", "b", "c"), {2: "x"})
        >>> [m.text for m in s.prompt(1).messages]
        ['a', 'Understood. Continuing.', 'b']
        >>> [m.text[-1:] for m in s.prompt(2).messages]
        ['x', '.', 'c']
        """
        start = max((t for t in self.summaries if t <= turn), default=None)
        head = self.files
        if start is not None:
            head = _pair(SUMMARY_HEAD + self.summaries[start], SUMMARY_ACK)
        history = [
            m for text in self.turn_texts[start or 0 : turn] for m in _pair(text, ASSISTANT_REPLY)
        ]
        now = Message("user", self.turn_texts[turn])
        return Prompt(self.system, self.tools, (*head, *history, now))

    def body(self, turn: TurnPlan, defaults: BodyDefaults) -> Body:
        """The request body of ``turn`` in ``defaults.api``'s format."""
        return build_body(self.prompt(turn.turn), defaults)


def _seed_of(*parts: object) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:12], 16)


@dataclass(frozen=True)
class ContextRecipe:
    """How the sessions' contexts are made: seed, workload key and the shared part."""

    seed: int
    workload_key: str
    shared_tokens: int | None = None  # --shared-system-prompt: its size in tokens


def _split_lines(text: str, parts: int) -> list[str]:
    """``text`` cut at line ends into at most ``parts`` pieces of about equal length."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        if len(out) < parts - 1 and size >= len(text) * (len(out) + 1) / parts:
            out.append("".join(current))
            current = []
    return [p for p in [*out, "".join(current)] if p]


async def build_tools(tokens: int, seed: int, counter: TokenCounter) -> tuple[Tool, ...]:
    """Tool definitions of about ``tokens`` tokens: agent text as descriptions.

    >>> import asyncio
    >>> async def count(text: str) -> int:
    ...     return len(text) // 4
    >>> tools = asyncio.run(build_tools(12_300, 0, count))
    >>> len(tools), tools[0].name, tools[0].parameters["required"]
    (16, 'Task', ['input'])
    """
    if tokens <= 0:
        return ()
    n = max(1, min(len(TOOL_NAMES), tokens // (4 * _TOOL_FRAME_TOKENS)))
    text = await build_context_async(max(1, tokens - n * _TOOL_FRAME_TOKENS), seed, counter)
    schema = {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "What to act on."}},
        "required": ["input"],
    }
    pieces = _split_lines(text, n)
    return tuple(Tool(TOOL_NAMES[i], piece, schema) for i, piece in enumerate(pieces))


def _summaries(seed: int, plan: SessionPlan) -> dict[int, str]:
    chars = max(TURN_MIN_CHARS, round(plan.summary_tokens * CHARS_PER_TOKEN))
    own = _seed_of(seed, "summary")
    return {t.turn: turn_text(own, plan.session, t.turn, chars) for t in plan.turns if t.compact}


@dataclass
class _Shared:
    """What sessions share, built once: tools blocks by size, the shared system text."""

    recipe: ContextRecipe
    counter: TokenCounter
    tools: dict[int, tuple[Tool, ...]] = field(default_factory=dict)
    system: dict[int, str] = field(default_factory=dict)

    async def tools_of(self, tokens: int) -> tuple[Tool, ...]:
        if tokens not in self.tools:
            seed = _seed_of(self.recipe.seed, "tools")
            self.tools[tokens] = await build_tools(tokens, seed, self.counter)
        return self.tools[tokens]

    async def system_text(self, tokens: int) -> str:
        if tokens not in self.system:
            seed = _seed_of(self.recipe.seed, "system")
            self.system[tokens] = await build_context_async(tokens, seed, self.counter)
        return self.system[tokens]


async def _session(plan: SessionPlan, shared: _Shared) -> SyntheticSession:
    recipe = shared.recipe
    header = f"# session {recipe.workload_key}-{plan.session}\n"
    context = _seed_of(recipe.seed, "context", plan.session)
    if recipe.shared_tokens is None:
        system = SYSTEM_PROMPT + header + await shared.system_text(plan.system_tokens)
        own = await build_context_async(plan.files_tokens, context, shared.counter)
        files = _pair(own, FILES_ACK) if own else ()
    else:
        system = SYSTEM_PROMPT + await shared.system_text(recipe.shared_tokens)
        size = plan.context_tokens - plan.tools_tokens - recipe.shared_tokens
        files = _pair(header + await build_context_async(size, context, shared.counter), FILES_ACK)
    texts = tuple(turn_text(recipe.seed, plan.session, t.turn, t.chars) for t in plan.turns)
    tools = await shared.tools_of(plan.tools_tokens)
    return SyntheticSession(plan, system, tools, files, texts, _summaries(recipe.seed, plan))


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
    >>> [m.role for m in s.prompt(0).messages], len(s.turn_texts[0])
    (['user', 'assistant', 'user'], 300)
    """
    say = on_stage or (lambda _text: None)
    shared = _Shared(recipe, counter)
    if recipe.shared_tokens is not None:
        say(f"building the shared system prompt ({recipe.shared_tokens:,} tokens)")
    out = []
    for n, plan in enumerate(plans, start=1):
        if plan.context_tokens > 0:
            say(f"building session {n}/{len(plans)}'s context ({plan.context_tokens:,} tokens)")
        out.append(await _session(plan, shared))
    return out


def warmup_body(defaults: BodyDefaults, seed: int, k: int) -> Body:
    """A short request of its own (no session's prefix), to open connections and warm up.

    >>> warmup_body(BodyDefaults("m", 4, 0.0), 0, 1)["messages"][0]["role"]
    'user'
    """
    text = agent_turn(10**9 + k, seed=seed, chars=400)
    return build_body(Prompt("", (), (Message("user", text),)), defaults)

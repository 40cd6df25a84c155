"""Replay recorded chat requests (JSONL of OpenAI chat request bodies) as agent sessions.

A recorded log (a gateway's or an instrumented client's) interleaves conversations. Each
request is put in the session whose latest request its messages extend (an agent appends
to its conversation), or starts a new one; sessions then replay turn by turn, in order,
with the same pacing, targets and shards as a synthetic workload. The model is always the
run's; a recorded ``max_tokens`` is kept unless ``--max-tokens`` is given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from ttftscope.bench.options import BenchOptions
from ttftscope.bench.sessions import BodyDefaults
from ttftscope.bench.workload import SessionPlan, TurnPlan, think_time
from ttftscope.errors import ConfigError

MAX_REPLAY_BYTES = 1 << 30
MAX_REPLAY_REQUESTS = 1_000_000
_LIMIT_KEYS = ("max_tokens", "max_completion_tokens")

Body = dict[str, object]


@dataclass(frozen=True)
class ReplayLog:
    """The requests of a replay file grouped into conversations (first-seen order).

    ``digest`` identifies the file's content, so shards can check they replay one log.
    """

    conversations: tuple[tuple[Body, ...], ...]
    digest: str

    @property
    def requests(self) -> int:
        """How many requests the file holds."""
        return sum(len(c) for c in self.conversations)


@dataclass(frozen=True)
class ReplaySession:
    """One recorded conversation, replayed turn by turn."""

    plan: SessionPlan
    bodies: tuple[Body, ...]

    def body(self, turn: TurnPlan, defaults: BodyDefaults) -> Body:
        """The recorded body of ``turn`` with the run's model, limits and extra body.

        >>> s = ReplaySession(SessionPlan(0, 0, ()), ({"model": "x", "messages": []},))
        >>> s.body(TurnPlan(0, 0, 0, 0, 0.0, 0), BodyDefaults("m", 16, 0.0))["model"]
        'm'
        """
        body = dict(self.bodies[turn.turn])
        body["model"] = defaults.model
        if defaults.force_max_tokens or not any(k in body for k in _LIMIT_KEYS):
            body.pop("max_completion_tokens", None)
            body["max_tokens"] = defaults.max_tokens
        body.setdefault("temperature", defaults.temperature)
        body.update(defaults.extra or {})
        return body


def _bad(path: Path, line: int, why: str) -> ConfigError:
    return ConfigError(
        f"--replay {path}: line {line} {why}",
        hint='each line must be one chat request body: {"model": ..., "messages": [...]}',
    )


def parse_body(raw: bytes, path: Path, line: int) -> Body:
    """One line as a chat request body; :class:`ConfigError` naming the line otherwise.

    >>> parse_body(b'{"messages": [{"role": "user", "content": "hi"}]}', Path("f"), 1)
    {'messages': [{'role': 'user', 'content': 'hi'}]}
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # also lone surrogates, which UTF-8 cannot carry
        raise _bad(path, line, f"is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise _bad(path, line, "is not a JSON object")
    messages = body.get("messages")
    if not (isinstance(messages, list) and messages):
        raise _bad(path, line, "has no 'messages' list (only chat requests replay)")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise _bad(path, line, "has a message without a 'role'")
    return body


def _message_keys(messages: Sequence[object]) -> list[bytes]:
    """Rolling digests of every prefix of ``messages`` (prefix j: the first j+1)."""
    out, h = [], b""
    for m in messages:
        h = hashlib.blake2b(h + orjson.dumps(m, option=orjson.OPT_SORT_KEYS)).digest()
        out.append(h)
    return out


def group_conversations(bodies: Iterable[Body]) -> list[list[Body]]:
    """Requests put into conversations: each joins the one whose latest request it extends.

    >>> a1 = {"messages": [{"role": "user", "content": "a"}]}
    >>> b1 = {"messages": [{"role": "user", "content": "b"}]}
    >>> a2 = {"messages": [*a1["messages"], {"role": "assistant", "content": "x"},
    ...                    {"role": "user", "content": "c"}]}
    >>> [len(c) for c in group_conversations([a1, b1, a2])]
    [2, 1]
    """
    sessions: list[list[Body]] = []
    latest: dict[bytes, int] = {}  # digest of a session's latest messages -> session
    for body in bodies:
        messages = body["messages"]
        assert isinstance(messages, list)
        keys = _message_keys(messages)
        match = next((k for k in reversed(keys) if k in latest), None)
        if match is None:
            found = len(sessions)
            sessions.append([])
        else:
            found = latest.pop(match)
        sessions[found].append(body)
        latest[keys[-1]] = found
    return sessions


def read_replay(path: Path, limit: int | None = None) -> ReplayLog:
    """Read and group the first ``limit`` requests of a replay file (all when None).

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = p.write_text('{"messages": [{"role": "user", "content": "hi"}]}\\n')
    >>> read_replay(p).requests
    1
    """
    try:
        size = path.stat().st_size
        if size > MAX_REPLAY_BYTES:
            raise ConfigError(
                f"--replay {path} is {size / 2**30:.1f} GiB, above the 1 GiB bound",
                hint="replay a slice of it (head -n 10000 file.jsonl > slice.jsonl)",
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read --replay {path}: {exc.strerror or exc}",
            hint="pass a JSONL file of chat request bodies",
        ) from None
    bodies: list[Body] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        if len(bodies) >= min(limit or MAX_REPLAY_REQUESTS, MAX_REPLAY_REQUESTS):
            break
        bodies.append(parse_body(line, path, number))
    if not bodies:
        raise ConfigError(f"--replay {path} holds no requests", hint="pass a non-empty JSONL file")
    groups = group_conversations(bodies)
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return ReplayLog(tuple(tuple(g) for g in groups), digest)


def replay_sessions(log: ReplayLog, opts: BenchOptions, n_targets: int) -> list[ReplaySession]:
    """Every conversation as a session; requests are numbered session by session.

    >>> log = ReplayLog(((({"messages": []}),), ({"messages": []}, {"messages": []})), "d")
    >>> [[t.index for t in s.plan.turns] for s in replay_sessions(log, BenchOptions(), 2)]
    [[0], [1, 2]]
    """
    out = []
    index = 0
    for session, bodies in enumerate(log.conversations):
        turns = []
        for turn in range(len(bodies)):
            think = think_time(opts.seed, session, turn, opts.think_time_s)
            target = (session + turn) % n_targets
            turns.append(TurnPlan(session, turn, index, 0, think, target))
            index += 1
        out.append(ReplaySession(SessionPlan(session, 0, tuple(turns)), bodies))
    return out

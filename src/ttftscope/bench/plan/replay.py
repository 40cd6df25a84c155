"""Replay recorded requests (JSONL, one request body a line) as agent sessions.

Bodies of OpenAI chat completions, the Anthropic Messages API (Claude Code) and the OpenAI
Responses API (Codex) replay; a file speaks one of them, ``--api``'s or the one its bodies
show (:mod:`.replayapi`), and is sent to that API's path. A recorded log (a gateway's or an
instrumented client's) interleaves conversations. Each request is put in the session whose
latest request its conversation (messages, or Responses input) extends (an agent appends
to its conversation), or starts a new one; sessions then replay turn by turn, in order,
with the same pacing, targets and shards as a synthetic workload. The model is always the
run's; a recorded output limit (``max_tokens``, ``max_completion_tokens``,
``max_output_tokens``) is kept unless ``--max-tokens`` is given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ttftscope.bench.options import BenchOptions
from ttftscope.bench.plan.bodies import Body, BodyDefaults
from ttftscope.bench.plan.replayapi import (
    body_apis,
    check_body,
    conversation_items,
    narrow,
    the_api,
    unfit,
)
from ttftscope.bench.plan.workload import SessionPlan, TurnPlan, think_time
from ttftscope.client.apis import APIS, Api
from ttftscope.errors import ConfigError

MAX_REPLAY_BYTES = 1 << 30
MAX_REPLAY_REQUESTS = 1_000_000
# The output limit of each API; the first is the one the run sets
_LIMIT_KEYS: Mapping[Api, tuple[str, ...]] = {
    "chat": ("max_tokens", "max_completion_tokens"),
    "messages": ("max_tokens",),
    "responses": ("max_output_tokens",),
}
_HINT = (
    "each line must be one request body: chat or Anthropic Messages "
    '{"model": ..., "messages": [...]}, or OpenAI Responses {"model": ..., "input": [...]}'
)


@dataclass(frozen=True)
class ReplayLog:
    """The requests of a replay file grouped into conversations (first-seen order).

    ``digest`` identifies the file's content, so shards can check they replay one log;
    ``api`` is the API its bodies are written for.
    """

    conversations: tuple[tuple[Body, ...], ...]
    digest: str
    api: Api = "chat"

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

        A Responses body keeps nothing on the server unless it asked to (``store``).

        >>> s = ReplaySession(SessionPlan(0, 0, ()), ({"model": "x", "input": "hi"},))
        >>> b = s.body(TurnPlan(0, 0, 0, 0, 0.0, 0), BodyDefaults("m", 16, 0.0, api="responses"))
        >>> b["model"], b["max_output_tokens"], b["store"]
        ('m', 16, False)
        """
        body = dict(self.bodies[turn.turn])
        body["model"] = defaults.model
        keys = _LIMIT_KEYS[defaults.api]
        if defaults.force_max_tokens or not any(k in body for k in keys):
            for key in keys:
                body.pop(key, None)
            body[keys[0]] = defaults.max_tokens
        body.setdefault("temperature", defaults.temperature)
        if defaults.api == "responses":
            body.setdefault("store", False)
        body.update(defaults.extra or {})
        return body


def _bad(path: Path, line: int, why: str) -> ConfigError:
    return ConfigError(f"--replay {path}: line {line} {why}", hint=_HINT)


def parse_body(raw: bytes, path: Path, line: int) -> Body:
    """One line as a JSON object; :class:`ConfigError` naming the line otherwise.

    >>> parse_body(b'{"messages": [{"role": "user", "content": "hi"}]}', Path("f"), 1)
    {'messages': [{'role': 'user', 'content': 'hi'}]}
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # also lone surrogates, which UTF-8 cannot carry
        raise _bad(path, line, f"is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise _bad(path, line, "is not a JSON object")
    return body


@dataclass
class ApiOfFile:
    """The APIs every body so far fits; each body narrows them, or is refused by line.

    >>> f = ApiOfFile(Path("f"), None)
    >>> f.add({"messages": [{"role": "user", "content": "a"}], "max_tokens": 8}, 1)
    >>> f.add({"messages": [{"role": "user", "content": "b"}], "system": "s"}, 2); f.api
    'messages'
    """

    path: Path
    wanted: Api | None  # --api
    allowed: frozenset[Api] = field(init=False)

    def __post_init__(self) -> None:
        self.allowed = frozenset(APIS) if self.wanted is None else frozenset({self.wanted})

    def add(self, body: Body, line: int) -> None:
        """Check ``body`` (line ``line``) and narrow the file's API by it."""
        fits = body_apis(body)
        if not fits:
            raise _bad(self.path, line, unfit(body))
        why = narrow(self.allowed, fits, line, self.wanted)
        if why:
            raise ConfigError(f"--replay {self.path}: {why}", hint=_HINT)
        self.allowed &= fits
        problem = check_body(body, the_api(fits))
        if problem:
            raise _bad(self.path, line, problem)

    @property
    def api(self) -> Api:
        """The file's API: chat when its bodies fit chat and Anthropic alike."""
        return the_api(self.allowed)


def _message_keys(items: Sequence[object]) -> list[bytes]:
    """Rolling digests of every prefix of ``items`` (prefix j: the first j+1)."""
    out, h = [], b""
    for m in items:
        h = hashlib.blake2b(h + orjson.dumps(m, option=orjson.OPT_SORT_KEYS)).digest()
        out.append(h)
    return out


def group_conversations(bodies: Iterable[Body], api: Api = "chat") -> list[list[Body]]:
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
        keys = _message_keys(conversation_items(body, api))
        match = next((k for k in reversed(keys) if k in latest), None)
        if match is None:
            found = len(sessions)
            sessions.append([])
        else:
            found = latest.pop(match)
        sessions[found].append(body)
        latest[keys[-1]] = found
    return sessions


def read_replay(path: Path, limit: int | None = None, api: Api | None = None) -> ReplayLog:
    """Read and group the first ``limit`` requests of a replay file (all when None).

    ``api`` (``--api``): every body must be that API's; None: the file's own.

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
            hint="pass a JSONL file of request bodies, one a line",
        ) from None
    bodies: list[Body] = []
    kind = ApiOfFile(path, api)
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        if len(bodies) >= min(limit or MAX_REPLAY_REQUESTS, MAX_REPLAY_REQUESTS):
            break
        bodies.append(parse_body(line, path, number))
        kind.add(bodies[-1], number)
    if not bodies:
        raise ConfigError(f"--replay {path} holds no requests", hint="pass a non-empty JSONL file")
    groups = group_conversations(bodies, kind.api)
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return ReplayLog(tuple(tuple(g) for g in groups), digest, kind.api)


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

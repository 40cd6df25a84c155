"""Request bodies from files: one JSON body, or a lenient JSONL log of them; conversation pairs.

A log line is an OpenAI request body (chat: ``messages``; completions: ``prompt``), or an
object holding one under ``body`` or ``request`` (how loggers that add a timestamp or an id
beside the body write it). Lines that are torn, not JSON or not a body are skipped and
counted by their 1-based line number, as :func:`ttftscope.records.read_records_report` does.

May import errors only (and the standard library).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ttftscope.errors import ConfigError

__all__ = [
    "LoggedBodies",
    "conversation_pairs",
    "prompt_body",
    "read_body",
    "read_request_log",
    "token_ids",
]

Body = Mapping[str, object]
_HINT_BODY = (
    "give an OpenAI request body: a chat body with a 'messages' list, or a completions "
    "body with a 'prompt' string"
)


@dataclass(frozen=True)
class LoggedBodies:
    """The bodies of a request log, the line each came from, and the lines that held none.

    >>> LoggedBodies(bodies=(), lines=(), skipped_lines=(2, 5)).skipped
    2
    """

    bodies: tuple[Body, ...]
    lines: tuple[int, ...]
    skipped_lines: tuple[int, ...] = ()

    @property
    def skipped(self) -> int:
        """How many non-blank lines held no request body."""
        return len(self.skipped_lines)


def _are_ids(prompt: object) -> bool:
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    )


def _is_prompt(prompt: object) -> bool:
    """A completions prompt: text, or token ids (a non-empty list of ints)."""
    return isinstance(prompt, str) or _are_ids(prompt)


def token_ids(body: Body) -> list[int] | None:
    """The token ids a completions body sends as its prompt, if it sends ids.

    >>> token_ids({"prompt": [1, 2]}), token_ids({"prompt": "hi"}), token_ids({"prompt": [True]})
    ([1, 2], None, None)
    """
    prompt = body.get("prompt")
    return list(prompt) if isinstance(prompt, list) and _are_ids(prompt) else None


def prompt_body(value: object) -> Body | None:
    """``value`` as a request body (itself or its ``body`` / ``request`` member), else None.

    >>> prompt_body({"ts": 1, "body": {"prompt": "hi"}})
    {'prompt': 'hi'}
    >>> prompt_body({"messages": "nope"}) is None, prompt_body({"prompt": [1, 2]}) is None
    (True, False)
    """
    if not isinstance(value, Mapping):
        return None
    if isinstance(value.get("messages"), list) or _is_prompt(value.get("prompt")):
        return value
    for key in ("body", "request"):
        inner = value.get(key)
        if inner is not value and prompt_body(inner) is not None:
            return prompt_body(inner)
    return None


def read_request_log(path: Path) -> LoggedBodies:
    """Every request body in a JSONL log; lines that hold none are skipped and numbered.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "requests.jsonl"
    >>> _ = p.write_text('{"prompt": "a"}\\n{"prompt": \\n\\n{"body": {"prompt": "b"}}\\n')
    >>> log = read_request_log(p)
    >>> [b["prompt"] for b in log.bodies], log.lines, log.skipped_lines
    (['a', 'b'], (1, 4), (2,))
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _unreadable(path, exc) from None
    bodies: list[Body] = []
    lines: list[int] = []
    skipped: list[int] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            body = prompt_body(json.loads(line))
        except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep
            body = None
        if body is None:
            skipped.append(number)
        else:
            bodies.append(body)
            lines.append(number)
    return LoggedBodies(tuple(bodies), tuple(lines), tuple(skipped))


def read_body(path: Path) -> Body:
    """One request body from a JSON file; a clear error naming the file otherwise.

    >>> read_body(Path("/nonexistent.json"))
    Traceback (most recent call last):
    ...
    ttftscope.ConfigError: cannot read /nonexistent.json: No such file or directory...
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text", hint="save it as UTF-8 JSON") from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            hint="fix the JSON there; for many requests, pass one JSONL log instead of two files",
        ) from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply", hint=_HINT_BODY) from None
    body = prompt_body(value)
    if body is None:
        raise ConfigError(
            f"{path} holds no request body (no 'messages' or 'prompt')", hint=_HINT_BODY
        )
    return body


def _unreadable(path: Path, exc: OSError) -> ConfigError:
    if path.is_dir():
        return ConfigError(
            f"{path} is a directory, not a request file",
            hint="pass two JSON request bodies, or one JSONL log of them (requests.jsonl)",
        )
    return ConfigError(
        f"cannot read {path}: {exc.strerror or exc}", hint="check the path and its permissions"
    )


def _messages(body: Body) -> list[Mapping[str, object]]:
    raw = body.get("messages")
    return [m for m in raw if isinstance(m, Mapping)] if isinstance(raw, list) else []


def _content(message: Mapping[str, object]) -> str:
    return json.dumps(message.get("content"), sort_keys=True, default=str)


def _same_chat(a: Body, b: Body) -> bool:
    """B continues A's conversation (system prompts are ignored: they may carry a timestamp)."""
    ma, mb = _messages(a), _messages(b)
    if not ma or len(mb) < len(ma):
        return False
    rest_a = [m for m in ma if m.get("role") != "system"]
    rest_b = [m for m in mb if m.get("role") != "system"]
    if not rest_a or not rest_b:
        return False
    if _content(rest_a[0]) == _content(rest_b[0]):
        return True
    # the first user message itself may carry a dynamic value: then the turns after it decide
    if [m.get("role") for m in ma] != [m.get("role") for m in mb[: len(ma)]] or len(rest_a) < 2:
        return False
    same = sum(_content(x) == _content(y) for x, y in zip(rest_a[1:], rest_b[1:], strict=False))
    return 2 * same >= len(rest_a) - 1


def _same_completion(a: Body, b: Body) -> bool:
    pa, pb = a.get("prompt"), b.get("prompt")
    if not (isinstance(pa, str) and isinstance(pb, str) and pa):
        return False
    tail = pa[-64:]  # B continues A when A's end appears in B, whatever changed before it
    return pa[:64] == pb[:64] or tail in pb


def _same_conversation(a: Body, b: Body) -> bool:
    if a.get("model") != b.get("model"):
        return False
    if "messages" in a and "messages" in b:
        return _same_chat(a, b)
    return "prompt" in a and "prompt" in b and _same_completion(a, b)


_LOOKBACK = 512  # earlier requests searched: more than the sessions a load test interleaves


def conversation_pairs(bodies: Sequence[Body]) -> list[tuple[int, int]]:
    """Index pairs ``(a, b)``: each request with the latest earlier one of its conversation.

    Same conversation: the same model, and the same first non-system message, or B's
    messages extend A's with the same roles and most of A's later turns unchanged (a
    completions prompt: the same start, or A's end found in B). A shared system prompt alone
    does not make two requests one conversation.

    >>> sys = {"role": "system", "content": "Be brief."}
    >>> u = lambda text: {"role": "user", "content": text}
    >>> conversation_pairs([{"messages": [sys, u("a")]}, {"messages": [sys, u("b")]},
    ...                     {"messages": [sys, u("a"), {"role": "assistant"}, u("c")]}])
    [(0, 2)]
    """
    pairs: list[tuple[int, int]] = []
    for j, body in enumerate(bodies):
        for i in range(j - 1, max(-1, j - 1 - _LOOKBACK), -1):
            if _same_conversation(bodies[i], body):
                pairs.append((i, j))
                break
    return pairs

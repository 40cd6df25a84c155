"""The gateway's one JSON policy: what it reads, it writes back; past that, a 400 naming the limit.

orjson reads bodies nested up to :data:`MAX_DEPTH` (1024) levels but writes only 254, and the
gateway writes a body again when it puts token ids in it (and when it logs or verifies one).
:func:`dumps` therefore writes whatever :func:`loads` read, at any depth: orjson for the
bulk, a loop over the levels orjson refuses. Bodies deeper than :data:`MAX_DEPTH` are refused
by :func:`loads` with a message that names the limit (vLLM's own parser stops near 1000).

What vLLM's parser (Python's ``json``, through FastAPI) reads and orjson does not, a lone
UTF-16 surrogate escape (``"\\udc80"``: an agent's tool output cut inside an emoji),
``NaN``/``Infinity``, a byte order mark, UTF-16 or UTF-32, is read too
(:func:`loads_as_vllm`), so vLLM gets to answer it: such a body is not written back
exactly, and its bytes go upstream as they came, as text.

Numbers: orjson reads integers of up to 64 bits exactly and anything larger as a double, so
a body re-written around token ids would carry a *different* number upstream.
:func:`inexact_number` finds such a number; the endpoints then send that body upstream as
it came (its bytes, exact), as text.

>>> dumps(loads(b"[" * 300 + b"]" * 300)) == b"[" * 300 + b"]" * 300
True
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import orjson

MAX_DEPTH: Final = 1024  # orjson.loads' own limit: 1025 levels are refused
# below the first levels (where bodies are wide), orjson is tried on a subtree every so many
_TRY_EVERY: Final = 16


class JsonRejected(ValueError):
    """A request body outside the gateway's JSON policy; the message says which limit."""


class JsonTooDeep(JsonRejected):
    """A request body nested deeper than :data:`MAX_DEPTH`."""


class InexactNumber(ValueError):
    """A parsed body holds a number orjson read inexactly (an integer beyond 64 bits)."""


def loads(raw: bytes) -> Any:
    """``raw`` parsed; :class:`JsonRejected` with a message for the client when it is not
    JSON or nests deeper than :data:`MAX_DEPTH`.

    >>> try:
    ...     loads(b"[" * 1025 + b"]" * 1025)
    ... except JsonRejected as exc:
    ...     print(exc)
    the request body nests deeper than 1024 levels, the gateway's JSON limit
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):  # orjson: "depth limit exceeded"
            raise JsonTooDeep(
                f"the request body nests deeper than {MAX_DEPTH} levels, the gateway's JSON limit"
            ) from None
        raise JsonRejected(f"the request body is not valid JSON ({exc})") from None


def loads_as_vllm(raw: bytes) -> tuple[Any, bool]:
    """``raw`` parsed as vLLM's parser reads it, and whether the gateway writes it back
    exactly (orjson read it); :class:`JsonRejected` for what neither reads.

    >>> loads_as_vllm(b'{"a": 1}')
    ({'a': 1}, True)
    >>> loads_as_vllm(b'{"text": "cut \\\\udc80"}')
    ({'text': 'cut \\udc80'}, False)
    """
    try:
        return loads(raw), True
    except JsonTooDeep:
        raise
    except JsonRejected as exc:
        try:  # vLLM's own parser: Python's json, as Starlette's Request.json() calls it
            return json.loads(raw), False
        except (ValueError, RecursionError):
            raise exc from None


def dumps(obj: Any) -> bytes:
    """``obj`` as compact JSON, at any depth :func:`loads` reads (orjson stops at 254).

    >>> dumps({"a": [[[1]]], "b": "é"})
    b'{"a":[[[1]]],"b":"\\xc3\\xa9"}'
    """
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError as exc:
        if "surrogates" in str(exc):  # read by loads_as_vllm: written with ASCII escapes
            return json.dumps(obj, separators=(",", ":")).encode()
        if not isinstance(obj, dict | list):
            raise
    return b"".join(_deep_parts(obj))


def _deep_parts(obj: dict[str, Any] | list[Any]) -> Iterator[bytes]:
    """The JSON of a container orjson refused for depth: its outer levels written here with an
    explicit stack (no recursion limit), every subtree orjson can write by orjson."""
    stack: list[_Open] = []
    value: Any = obj
    while True:
        written = None
        level = len(stack)
        if not isinstance(value, dict | list):
            written = orjson.dumps(value)
        elif level < _TRY_EVERY or level % _TRY_EVERY == 0:  # a failed try walks 254 levels
            with contextlib.suppress(orjson.JSONEncodeError):
                written = orjson.dumps(value)
        if written is not None:
            yield written
        elif isinstance(value, dict):
            yield b"{"
            stack.append(_Open(iter(value.items()), is_dict=True))
        else:
            yield b"["
            stack.append(_Open(iter(value), is_dict=False))
        while stack:  # the next value to write, closing the containers that are done
            top = stack[-1]
            item: Any = next(top.items, _DONE)
            if item is not _DONE:
                break
            stack.pop()
            yield b"}" if top.is_dict else b"]"
        else:
            return
        if top.started:
            yield b","
        top.started = True
        if top.is_dict:
            key, value = item
            yield orjson.dumps(key) + b":"
        else:
            value = item


@dataclass
class _Open:
    """A container being written: its remaining items, and whether one went out already."""

    items: Iterator[Any]
    is_dict: bool
    started: bool = False


_DONE: Final = object()


def inexact_number(written: bytes, obj: Any) -> str | None:
    """Where ``obj`` (``written`` is its JSON) holds a number orjson read inexactly, else None.

    orjson writes doubles of 1e16 and more with an exponent after a digit (``1.2e+29``): a
    body written without one holds none, so only bodies with one (or with such text) are
    walked. Any double of magnitude 2**63 or more counts (the literal ``1e19`` too): such
    bodies go upstream as they came.

    >>> inexact_number(b'{"seed":1.2e+29}', {"seed": 1.2e29})
    'seed'
    >>> inexact_number(b'{"seed":7,"t":"size+1"}', {"seed": 7, "t": "size+1"}) is None
    True
    """
    if not _exponent_after_digit(written) or not _has_big_double(obj):
        return None
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:  # again, naming the place this time
        path, value = stack.pop()
        if isinstance(value, float) and _big(value):
            return path or "(the body)"
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
    return None  # pragma: no cover - _has_big_double found one


def _exponent_after_digit(written: bytes) -> bool:
    at = written.find(b"e+")
    while at > 0:
        if written[at - 1] in _DIGITS:
            return True
        at = written.find(b"e+", at + 2)
    return False


_DIGITS: Final = frozenset(b"0123456789")


def _has_big_double(obj: Any) -> bool:
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float) and _big(value):
            return True
    return False


def _big(value: float) -> bool:
    return not math.isfinite(value) or abs(value) >= 2.0**63

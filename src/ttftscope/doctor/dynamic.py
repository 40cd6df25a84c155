"""Name the values that change between two renderings of one conversation's prompt.

A prompt prefix that changes on every request (a timestamp in the system prompt, a request
id, a counter, tools serialized with their keys in another order) defeats prefix caching from
that point on. :func:`find_dynamic` looks at where two prompts diverge, widens the differing
span to the value around it and classifies it by its shape; :func:`key_order_change` finds
tool definitions that are equal except for the order of their JSON keys.

Pure text and JSON: imports nothing but the standard library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DynamicKind",
    "DynamicValue",
    "classify",
    "common_prefix",
    "find_dynamic",
    "key_order_change",
]

DynamicKind = Literal[
    "timestamp", "date", "time", "uuid", "random_id", "counter", "json_key_order", "other"
]


@dataclass(frozen=True)
class DynamicValue:
    """One value that differs between prompt A and prompt B; ``char`` is its offset in A.

    >>> DynamicValue("uuid", "0f8e…", "9a1b…", 42).kind
    'uuid'
    """

    kind: DynamicKind
    before: str
    after: str
    char: int


_EDGE = r"(?<![0-9A-Za-z])"
_END = r"(?![0-9A-Za-z])"
_TZ = r"(?:Z|[+-]\d{2}:?\d{2})?"
# Most specific first: a timestamp contains a date and a time, a UUID contains hex runs.
_SHAPES: tuple[tuple[DynamicKind, re.Pattern[str]], ...] = (
    (
        "timestamp",
        re.compile(_EDGE + r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?" + _TZ + _END),
    ),
    (
        "uuid",
        re.compile(
            _EDGE + r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}"
            r"-[0-9a-fA-F]{12}" + _END
        ),
    ),
    # epoch seconds (2001..2286) and milliseconds
    ("timestamp", re.compile(_EDGE + r"(?:1\d{9}|1\d{12})(?:\.\d+)?" + _END)),
    ("date", re.compile(_EDGE + r"\d{4}-\d{2}-\d{2}" + _END)),
    ("date", re.compile(_EDGE + r"\d{1,2}/\d{1,2}/\d{2,4}" + _END)),
    ("time", re.compile(_EDGE + r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?" + _TZ + _END)),
    ("counter", re.compile(_EDGE + r"\d{1,9}" + _END)),
    ("random_id", re.compile(r"(?<![0-9A-Za-z_-])[0-9A-Za-z_-]{8,}(?![0-9A-Za-z_-])")),
)
_WINDOW = 48  # how far before a divergence a value may start (a full ISO timestamp fits)


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """Length of the longest common prefix of two strings or lists (slice compares in C).

    >>> common_prefix("abcd", "abxd"), common_prefix([1, 2], [1, 2, 3])
    (2, 2)
    """
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _looks_random(value: str) -> bool:
    """An id, not a word: at least one digit (or all hex) among eight or more characters."""
    return any(c.isdigit() for c in value) or re.fullmatch(r"[0-9a-fA-F]{8,}", value) is not None


def classify(before: str, after: str) -> DynamicKind:
    """The kind of value that ``before`` and ``after`` both are (``other`` if none fits).

    >>> classify("2026-12-01T10:00:00Z", "2026-12-01T10:00:05Z")
    'timestamp'
    >>> classify("7", "8"), classify("8", "7"), classify("req_8f3a9c2b", "req_1d0e77aa")
    ('counter', 'other', 'random_id')
    """
    for kind, shape in _SHAPES:
        if shape.fullmatch(before) and shape.fullmatch(after):
            if kind == "counter" and int(after) <= int(before):
                continue
            if kind == "random_id" and not (_looks_random(before) and _looks_random(after)):
                continue
            return kind
    return "other"


def _value_at(a: str, b: str, at: int, shift: int, floor: int) -> DynamicValue | None:
    """The classified value covering A's ``at`` (B's ``at + shift``), from ``floor`` on."""
    for kind, shape in _SHAPES:
        for match in shape.finditer(a, max(floor, at - _WINDOW)):
            if match.start() > at:
                break
            if at > match.end():
                continue
            other = shape.match(b, match.start() + shift)
            if other is None or other.end() <= at + shift:
                continue
            before, after = match.group(), other.group()
            if classify(before, after) == kind:
                return DynamicValue(kind, before, after, match.start())
    return None


_WORD = re.compile(r"[0-9A-Za-z_\-:.+]*")


def _word_span(a: str, b: str, at: int, shift: int, floor: int) -> DynamicValue:
    """The differing word-ish run around ``at`` in both texts, unclassified."""
    start = at
    while start > floor and _WORD.fullmatch(a[start - 1]) and at - start < _WINDOW:
        start -= 1
    # a long run (base64, a minified blob) is shown by its start only
    end_a = min(max(_end_of_word(a, at), at + 1), at + _WINDOW)
    end_b = min(max(_end_of_word(b, at + shift), at + shift + 1), at + shift + _WINDOW)
    return DynamicValue("other", a[start:end_a], b[start + shift : end_b], start)


def _end_of_word(text: str, at: int) -> int:
    match = _WORD.match(text, at)
    return at if match is None else match.end()


def find_dynamic(
    a: str, b: str, at: int, *, until: int | None = None, limit: int = 8
) -> list[DynamicValue]:
    """The values that differ between ``a`` and ``b``, from their first divergence ``at``.

    After each value the texts are compared again from its end; the search stops where they
    no longer line up (an insertion, a rewrite), after an unclassified difference, at A's
    offset ``until`` (where what B could reuse ends), or after ``limit`` values.

    >>> a = "time 2026-12-01T10:00:00Z id 3 rest"
    >>> b = "time 2026-12-01T10:00:07Z id 10 rest"
    >>> [(v.kind, v.after) for v in find_dynamic(a, b, 23)]
    [('timestamp', '2026-12-01T10:00:07Z'), ('counter', '10')]
    """
    found: list[DynamicValue] = []
    shift = floor = 0  # B's offset from A once values of other lengths were passed
    stop = len(a) if until is None else min(until, len(a))
    while at < stop and len(found) < limit:
        value = _value_at(a, b, at, shift, floor) or _word_span(a, b, at, shift, floor)
        found.append(value)
        end_a = value.char + len(value.before)
        shift += len(value.after) - len(value.before)
        rest = common_prefix(a[end_a:], b[end_a + shift :])
        if value.kind == "other" or rest < 4 or end_a + rest >= stop:
            break
        floor, at = end_a, end_a + rest
    return found


def _order_diff(a: object, b: object, path: str) -> tuple[str, str] | None:
    """The first place (path and key orders) where ``a`` and ``b`` differ in key order only."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if list(a) != list(b):
            return f"{path}: {', '.join(map(str, a))}", f"{path}: {', '.join(map(str, b))}"
        for key in a:
            found = _order_diff(a[key], b[key], f"{path}.{key}")
            if found:
                return found
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _order_diff(x, y, f"{path}[{i}]")
            if found:
                return found
    return None


def key_order_change(a: object, b: object, *, path: str = "tools") -> tuple[str, str] | None:
    """Where two JSON values are equal with sorted keys but differ as sent: the key orders.

    >>> key_order_change([{"name": "f", "type": "x"}], [{"type": "x", "name": "f"}])
    ('tools[0]: name, type', 'tools[0]: type, name')
    >>> key_order_change([{"a": 1}], [{"a": 2}]) is None
    True
    """
    if a == b and json.dumps(a) == json.dumps(b):
        return None
    if json.dumps(a, sort_keys=True, default=str) != json.dumps(b, sort_keys=True, default=str):
        return None
    return _order_diff(a, b, path)

"""The JSON policy: what orjson reads (any depth to 1024) is written back byte for byte."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.gateway.transport.jsoncodec import (
    MAX_DEPTH,
    JsonRejected,
    dumps,
    inexact_number,
    loads,
    loads_as_vllm,
)

_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5)
_small = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@st.composite
def _nested(draw: st.DrawFn) -> bytes:
    """Compact JSON text nested up to about :data:`MAX_DEPTH` levels (a chain of lists and objects,
    each level with small siblings from a drawn pool), written here by hand."""
    depth = draw(st.integers(1, MAX_DEPTH - 8))  # the siblings nest a few levels more
    pool = [orjson.dumps(v) for v in draw(st.lists(_small, min_size=1, max_size=4))]
    rnd = random.Random(draw(st.integers(0, 2**32)))  # one draw: cheap for 1000 levels
    text = orjson.dumps(draw(_scalars))
    for _ in range(depth):
        siblings = rnd.sample(pool, rnd.randint(0, min(2, len(pool))))
        if rnd.random() < 0.5:
            at = rnd.randint(0, len(siblings))
            text = b"[" + b",".join([*siblings[:at], text, *siblings[at:]]) + b"]"
        else:
            pairs = [b'"s%d":' % i + v for i, v in enumerate(siblings)]
            text = b"{" + b",".join([*pairs, b'"deep":' + text]) + b"}"
    return text


@settings(max_examples=60, deadline=None)
@given(_nested())
def test_what_parses_is_written_back_exactly_at_any_depth(text: bytes) -> None:
    assert dumps(loads(text)) == text


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000])
def test_past_the_limit_the_message_names_it(depth: int) -> None:
    with pytest.raises(JsonRejected, match=f"deeper than {MAX_DEPTH} levels"):
        loads(b"[" * depth + b"]" * depth)


def test_not_json_says_so() -> None:
    with pytest.raises(JsonRejected, match="not valid JSON"):
        loads(b'{"a": ')


def test_the_limit_is_orjsons_own() -> None:
    # if orjson ever reads deeper, MAX_DEPTH (and the README's line) must follow it
    orjson.loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))


@given(st.integers(2**64, 2**200) | st.integers(-(2**200), -(2**63) - 1), st.booleans())
def test_integers_beyond_64_bits_are_found_wherever_they_are(big: int, nested: bool) -> None:
    raw = json.dumps({"seed": 1, "x": [{"y": big}] if nested else big}).encode()
    body = loads(raw)
    assert inexact_number(dumps(body), body) == ("x[0].y" if nested else "x")


@given(_small)
def test_numbers_orjson_reads_exactly_pass(value: Any) -> None:
    body = {"v": value}
    assert inexact_number(dumps(body), body) is None


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"t": "cut \\udc80"}', {"t": "cut \udc80"}),
        (b'["\\ud83d", "\\ude00"]', ["\ud83d", "\ude00"]),
        (b'{"x": NaN}', {"x": math.nan}),
        (b'{"x": -Infinity}', {"x": -math.inf}),
        (b'\xef\xbb\xbf{"a": 1}', {"a": 1}),
        ('{"a": "é"}'.encode("utf-16-le"), {"a": "é"}),
    ],
    ids=["lone_low", "lone_pair_apart", "nan", "infinity", "bom", "utf16"],
)
def test_what_vllms_parser_reads_is_read_and_marked_inexact(raw: bytes, value: Any) -> None:
    got, exact = loads_as_vllm(raw)
    assert not exact
    assert repr(got) == repr(value)  # nan != nan: compared as written
    with pytest.raises(JsonRejected, match="not valid JSON"):
        loads(raw)  # orjson alone refuses it


def test_a_body_with_a_lone_surrogate_is_written_as_valid_json() -> None:
    body, _ = loads_as_vllm(b'{"t": "a\\udc80b", "n": [1, "\xc3\xa9"]}')
    assert dumps(body) == b'{"t": "a\\udc80b", "n": [1, "\\u00e9"]}'.replace(b" ", b"")


@pytest.mark.parametrize("raw", [b'{"a": ', b"{'a': 1}", b'{"a": nan}', b"\xff{}"])
def test_what_neither_parser_reads_is_still_refused(raw: bytes) -> None:
    with pytest.raises(JsonRejected, match="not valid JSON"):
        loads_as_vllm(raw)


def test_too_deep_is_refused_by_its_limit_not_parsed_again() -> None:
    with pytest.raises(JsonRejected, match=f"deeper than {MAX_DEPTH}"):
        loads_as_vllm(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))

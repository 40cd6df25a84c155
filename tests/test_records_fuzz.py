"""Property: every record round-trips through the JSONL file, and a torn file reads a prefix.

What may change on the way is documented in :mod:`ttftscope.records`: lone surrogates become
U+FFFD and non-finite floats become null. Everything else comes back equal.
"""

from __future__ import annotations

import math
import tempfile
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ttftscope.errors import FailureKind
from ttftscope.records import (
    PartSource,
    RecordWriter,
    RequestRecord,
    ServerPart,
    SpanService,
    SpanTiming,
    clean_text,
    read_records_report,
)

# Everything that has ever broken a line, a codec or a parser, mixed into ordinary text.
_NASTY = st.sampled_from(
    ["\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x00", "\ufeff",
     "\ud800", "\udfff", "\ud83d", "\ude00", "😀", "é", "€", '"', "\\", "\\u2028", "\x7f"]
)  # fmt: skip
# Not st.text() alone: it almost never draws surrogates; and a draw per character is slow.
_ODD = st.one_of(_NASTY, st.characters(categories=["Cs"]))
TEXT = st.one_of(
    st.text(max_size=16),
    st.tuples(st.text(max_size=8), _ODD, st.text(max_size=4), _ODD).map("".join),
)
FLOATS = st.floats()  # nan, ±inf, -0.0 and subnormals included
INTS = st.integers(min_value=-(2**70), max_value=2**70)

_BASE: dict[object, st.SearchStrategy[Any]] = {
    str: TEXT,
    int: INTS,
    float: FLOATS,
    bool: st.booleans(),
    FailureKind: st.sampled_from(FailureKind),
    dict[str, bool]: st.dictionaries(TEXT, st.booleans(), max_size=4),
    list[str]: st.lists(TEXT, max_size=4),
    dict[ServerPart, PartSource]: st.dictionaries(
        st.sampled_from(typing.get_args(ServerPart)),
        st.sampled_from(typing.get_args(PartSource)),
        max_size=4,
    ),
    list[SpanTiming]: st.lists(
        st.builds(
            SpanTiming,
            service=st.sampled_from(typing.get_args(SpanService)),
            name=TEXT,
            start_ms=st.floats(allow_nan=False, allow_infinity=False),
            end_ms=st.floats(allow_nan=False, allow_infinity=False),
            counts=st.dictionaries(TEXT, INTS, max_size=2),
        ),
        max_size=3,
    ),
}


def _strategy(annotation: object) -> st.SearchStrategy[Any]:
    """A strategy for a field's type; a new kind of field fails here until it gets one."""
    if annotation in _BASE:
        return _BASE[annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return st.sampled_from(typing.get_args(annotation))
    if isinstance(annotation, types.UnionType):
        return st.one_of(*(_strategy(a) for a in typing.get_args(annotation)))
    if annotation is type(None):
        return st.none()
    raise AssertionError(f"no strategy for a RequestRecord field of type {annotation!r}")


RECORDS = st.fixed_dictionaries(
    {name: _strategy(f.annotation) for name, f in RequestRecord.model_fields.items()}
).map(RequestRecord.model_validate)


def _as_stored(value: object) -> object:
    """The value a record field holds after a trip through the file (see records docs)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {clean_text(k): v for k, v in value.items()}
    if isinstance(value, list):
        return [_as_stored(v) for v in value]
    if isinstance(value, SpanTiming):
        fields = {name: _as_stored(getattr(value, name)) for name in SpanTiming.model_fields}
        return SpanTiming.model_validate(fields)
    return value


def stored(record: RequestRecord) -> RequestRecord:
    fields = {name: _as_stored(getattr(record, name)) for name in RequestRecord.model_fields}
    return RequestRecord.model_validate(fields)


def _valid_unicode(record: RequestRecord) -> bool:
    try:
        record.model_dump_json()
    except ValueError:
        return False
    return True


def in_file(records: list[RequestRecord], check: Callable[[Path, bytes], None]) -> None:
    with tempfile.TemporaryDirectory() as d:  # not tmp_path: one file per example
        path = Path(d) / "r.jsonl"
        with RecordWriter(path) as w:
            for r in records:
                w.write(r)
        check(path, path.read_bytes())


@settings(max_examples=300, deadline=None)
@given(records=st.lists(RECORDS, min_size=1, max_size=3))
def test_every_record_round_trips(records: list[RequestRecord]) -> None:
    def check(path: Path, raw: bytes) -> None:
        assert raw.count(b"\n") == len(records)
        assert len(raw.decode("utf-8").splitlines()) == len(records)
        got = read_records_report(path)
        assert got.skipped == 0
        assert got.records == [stored(r) for r in records]
        for r, back in zip(records, got.records, strict=True):
            if _valid_unicode(r) and r == stored(r):
                assert back == r  # nothing to sanitize: an exact copy

    in_file(records, check)


@settings(max_examples=200, deadline=None)
@given(records=st.lists(RECORDS, min_size=1, max_size=3), cut=st.floats(0, 1))
def test_a_file_cut_anywhere_reads_back_a_prefix(records: list[RequestRecord], cut: float) -> None:
    expected = [stored(r) for r in records]

    def check(path: Path, raw: bytes) -> None:
        at = round(cut * len(raw))
        path.write_bytes(raw[:at])
        got = read_records_report(path)
        whole_lines = raw[:at].count(b"\n")
        assert got.records == expected[: len(got.records)]
        # Every line that kept its "\n" is a record; a torn tail is at most one skipped line.
        assert whole_lines <= len(got.records) <= whole_lines + 1
        assert got.skipped <= 1
        assert len(got.records) + got.skipped == whole_lines + (at > 0 and raw[at - 1] != 10)

    in_file(records, check)


def test_every_byte_offset_of_a_nasty_file() -> None:
    nasty = [
        RequestRecord(run_id="€\u2028😀", index=i, variant="ids", phase="cold", ok=False, error=e)
        for i, e in enumerate(["wörld\x85", "\ud800 lone", "line\u2029two\r\n"])
    ]
    expected = [stored(r) for r in nasty]

    def check(path: Path, raw: bytes) -> None:
        for at in range(len(raw) + 1):
            path.write_bytes(raw[:at])
            got = read_records_report(path)
            assert got.records == expected[: len(got.records)], at
            assert len(got.records) >= raw[:at].count(b"\n"), at

    in_file(nasty, check)

"""Naming dynamic values: the classifier, the scan from a divergence, reordered JSON keys."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftscope.doctor.dynamic import (
    DynamicKind,
    classify,
    common_prefix,
    find_dynamic,
    key_order_change,
)

KINDS: set[DynamicKind] = {
    "timestamp",
    "date",
    "time",
    "uuid",
    "random_id",
    "counter",
    "json_key_order",
    "other",
}
moments = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@pytest.mark.parametrize(
    ("before", "after", "kind"),
    [
        ("2026-12-01T10:00:00Z", "2026-12-01T10:00:05Z", "timestamp"),
        ("2026-12-01 10:00:00.123456", "2026-12-01 10:00:01.5", "timestamp"),
        ("2026-12-01T10:00:00+01:00", "2026-12-01T10:00:00+0200", "timestamp"),
        ("1764583200", "1764583260", "timestamp"),
        ("1764583200123", "1764583260999", "timestamp"),
        ("2026-12-01", "2026-12-02", "date"),
        ("12/01/2026", "12/02/2026", "date"),
        ("10:00", "10:05", "time"),
        ("10:00:59", "10:01:00", "time"),
        ("3f9a1c2e-8b7d-4e6f-9a0b-1c2d3e4f5a6b", "9b1e2f3a-4c5d-7e6f-8a7b-9c0d1e2f3a4b", "uuid"),
        ("7", "8", "counter"),
        ("99", "100", "counter"),
        ("req_8f3a9c2b", "req_1d0e77aa", "random_id"),
        ("deadbeefcafe", "0badc0de1234", "random_id"),
        ("8", "7", "other"),  # a number that goes down is not a counter
        ("Monday", "Tuesday", "other"),
        ("abcdefghij", "klmnopqrst", "other"),  # words, not ids: no digit, not hex
    ],
)
def test_classify_names_the_common_shapes(before: str, after: str, kind: DynamicKind) -> None:
    assert classify(before, after) == kind


@given(moments, moments)
def test_any_two_iso_timestamps_are_timestamps(a: datetime, b: datetime) -> None:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    assert classify(a.strftime(fmt), b.strftime(fmt)) == "timestamp"


@given(st.uuids(version=4), st.uuids(version=1), st.booleans())
def test_any_two_uuids_are_uuids(a: uuid.UUID, b: uuid.UUID, upper: bool) -> None:
    before, after = str(a), str(b)
    if upper:
        before = before.upper()
    assert classify(before, after) == "uuid"


@given(st.integers(0, 10**9 - 1), st.integers(1, 10**6))
def test_an_integer_that_grows_is_a_counter(start: int, step: int) -> None:
    after = start + step
    if after < 10**9:
        assert classify(str(start), str(after)) == "counter"


hex_ids = st.text("0123456789abcdef", min_size=8, max_size=40).filter(
    lambda s: any(c.isalpha() for c in s)
)


@given(hex_ids, hex_ids)
def test_hex_ids_are_random_ids(a: str, b: str) -> None:
    assert classify(a, b) == "random_id"


@given(st.text(max_size=60), st.text(max_size=60))
def test_classify_takes_any_text(a: str, b: str) -> None:
    assert classify(a, b) in KINDS


@given(st.text(max_size=80), st.text(min_size=1, max_size=80), st.text(max_size=80))
def test_find_dynamic_starts_at_or_before_the_divergence(head: str, x: str, y: str) -> None:
    a, b = head + x, head + y
    at = common_prefix(a, b)
    if at >= len(a):
        return
    found = find_dynamic(a, b, at)
    assert found and found[0].char <= at
    assert all(v.kind in KINDS for v in found)
    assert a[found[0].char : found[0].char + len(found[0].before)] == found[0].before


def test_find_dynamic_names_every_value_while_the_texts_line_up() -> None:
    a = "now 2026-12-01T10:00:00Z id 3f9a1c2e-8b7d-4e6f-9a0b-1c2d3e4f5a6b turn 9 of rules"
    b = "now 2026-12-01T10:00:09Z id 9b1e2f3a-4c5d-4e6f-8a7b-9c0d1e2f3a4b turn 10 of rules"
    found = find_dynamic(a, b, common_prefix(a, b))
    assert [v.kind for v in found] == ["timestamp", "uuid", "counter"]
    assert [v.char for v in found] == [a.index("2026"), a.index("3f9a"), a.index("9 of")]


def test_find_dynamic_stops_where_the_texts_no_longer_line_up() -> None:
    a = "system: be brief. 2026-12-01 tools follow"
    b = "system: be nice and kind to everyone. 2026-12-02 tools follow"
    found = find_dynamic(a, b, common_prefix(a, b))
    assert [v.kind for v in found] == ["other"]


def test_find_dynamic_stops_at_until() -> None:
    a, b = "v=1 and w=5 end", "v=2 and w=6 end"
    assert len(find_dynamic(a, b, 2)) == 2
    assert len(find_dynamic(a, b, 2, until=5)) == 1


def test_common_prefix_of_lists_and_strings() -> None:
    assert common_prefix("", "x") == 0
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix("x" * 1000 + "a", "x" * 1000 + "b") == 1000


def test_key_order_change_finds_the_nested_place() -> None:
    a = [{"type": "function", "function": {"name": "f", "parameters": {"a": 1, "b": 2}}}]
    b = [{"type": "function", "function": {"name": "f", "parameters": {"b": 2, "a": 1}}}]
    assert key_order_change(a, b) == (
        "tools[0].function.parameters: a, b",
        "tools[0].function.parameters: b, a",
    )


def test_key_order_change_is_none_for_equal_or_really_different_tools() -> None:
    tools = [{"name": "f", "type": "x"}]
    assert key_order_change(tools, tools) is None
    assert key_order_change(tools, [{"type": "y", "name": "f"}]) is None
    assert key_order_change(None, tools) is None

"""Sinks: each line is on disk as soon as written; a torn line never swallows the next."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings

from tests.test_records_fuzz import RECORDS
from ttftscope.bench.output.sink import JsonlSink, line_of
from ttftscope.errors import ConfigError
from ttftscope.records import RequestRecord, read_records_report, record_line


def rec(i: int) -> RequestRecord:
    return RequestRecord(run_id="r", index=i, variant="chat", phase="warm", ok=True, target="t")


def test_lines_are_flushed_while_the_sink_is_open(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    sink = JsonlSink(path)
    for i in range(3):
        sink.put(rec(i))
    deadline = time.monotonic() + 30  # waits for the lines, not for a fixed time
    while len(read_records_report(path).records) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [r.index for r in read_records_report(path).records] == [0, 1, 2]  # before close
    sink.close()


def test_a_torn_line_is_ended_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"schema_version": 1, "run_id": "r", "ind', encoding="utf-8")
    with JsonlSink(path) as sink:
        sink.put(rec(7))
    got = read_records_report(path)
    assert [r.index for r in got.records] == [7] and got.skipped_lines == (1,)


def test_an_unwritable_place_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ConfigError, match="pick a writable --result-dir"):
        JsonlSink(tmp_path / "f" / "r.jsonl")


@settings(max_examples=80, deadline=None)
@given(RECORDS)
def test_the_fast_line_is_the_shared_writers_line(record: RequestRecord) -> None:
    assert line_of(record) == record_line(record)
    assert line_of(record, {"notes", "error"}) == record_line(record, exclude={"notes", "error"})

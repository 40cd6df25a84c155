"""Records survive a killed writer: every finished line stays readable."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from ttftscope.errors import ConfigError, FailureKind
from ttftscope.records import (
    SCHEMA_VERSION,
    RecordWriter,
    RequestRecord,
    SpanTiming,
    read_records,
    read_records_report,
)


def rec(index: int = 0, **kw: object) -> RequestRecord:
    return RequestRecord.model_validate(
        {"run_id": "r", "index": index, "variant": "chat", "phase": "warm", "ok": True, **kw}
    )


def test_records_are_appended_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        for i in range(3):
            w.write(rec(i))
    with path.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "r", "ind')  # writer killed mid-line
    with RecordWriter(path) as w:  # a later run appends, never truncates
        w.write(RequestRecord(run_id="s", index=0, variant="ids", phase="cold", ok=False))
    got = read_records_report(path)
    # The later run starts a new line, so the torn half line does not swallow its record.
    assert [(r.run_id, r.index) for r in got.records] == [("r", 0), ("r", 1), ("r", 2), ("s", 0)]
    assert got.skipped_lines == (4,)
    assert all(r.schema_version == SCHEMA_VERSION for r in got.records)


SEPARATORS = "\x85\u2028\u2029\r\x0b\x0c\x1c\x1d\x1e"


def test_line_separators_in_text_stay_inside_one_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    texts = [f"line{sep}two" for sep in SEPARATORS]
    with RecordWriter(path) as w:
        for i, text in enumerate(texts):
            w.write(rec(i, ok=False, error_kind="server_error", error=text, notes=[text]))
    raw = path.read_text(encoding="utf-8")
    assert len(raw.splitlines()) == len(texts)  # what editors and line tools see, too
    got = read_records(path)
    assert [r.error for r in got] == texts
    assert [r.notes for r in got] == [[t] for t in texts]


def test_reader_splits_only_at_newline(tmp_path: Path) -> None:
    # Files from before the writer escaped them hold U+2028 etc. raw inside strings.
    path = tmp_path / "old.jsonl"
    line = rec(error="a\u2028b\u2029c\x85d").model_dump_json()
    assert "\u2028" in line
    path.write_text(line + "\n" + line + "\n", encoding="utf-8")
    got = read_records_report(path)
    assert [r.error for r in got.records] == ["a\u2028b\u2029c\x85d"] * 2
    assert got.skipped == 0


def test_lone_surrogates_are_written_as_replacement_characters(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    bad = rec(
        ok=False,
        error_kind=FailureKind.SERVER_ERROR,
        error="engine \ud800 dead",
        model="m\udfff",
        notes=["\ud83d\ude00 pair", "lone \ud83d"],
        checks={"k\ud800": True},
    )
    with RecordWriter(path) as w:
        w.write(bad)
        w.write(rec(1))
    got = read_records(path)
    assert [r.index for r in got] == [0, 1]
    assert got[0].error == "engine \ufffd dead"
    assert got[0].model == "m\ufffd"
    assert got[0].notes == ["😀 pair", "lone \ufffd"]  # a split pair is put back together
    assert got[0].checks == {"k\ufffd": True}
    assert got[0].error_kind is FailureKind.SERVER_ERROR
    assert bad.error == "engine \ud800 dead"  # the writer does not change the caller's record


def test_non_finite_floats_read_back_as_null(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(queue_ms=math.nan, prefill_ms=math.inf, t_wall=-math.inf, connect_ms=1.5))
    (got,) = read_records(path)
    assert (got.queue_ms, got.prefill_ms, got.t_wall, got.connect_ms) == (None, None, None, 1.5)


def test_torn_multibyte_character_at_the_end_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(0, error="wörld"))
        w.write(rec(1))
    whole = rec(2, error="€uro").model_dump_json().encode()
    cut = whole.index("€".encode()) + 2  # two of the three bytes of €
    with path.open("ab") as fh:
        fh.write(whole[:cut])
    got = read_records_report(path)
    assert [r.index for r in got.records] == [0, 1]
    assert got.skipped_lines == (3,)


def test_bad_lines_in_the_middle_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    good = [rec(i).model_dump_json().encode() for i in range(3)]
    lines = [
        good[0],
        b'{"run_id": "r\xe2\x82',  # torn mid-character, then another run appended
        good[1],
        b"",  # blank: nothing lost, not counted
        b"[" * 5000 + b"]" * 5000,  # too deep for any parser
        b'{"index": ' + b"1" * 5000 + b"}",  # a number no int parser takes
        b'{"run_id": "r", "index": 0}',  # JSON, but not a record
        b"\xff\xfe not utf-8",
        good[2],
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    got = read_records_report(path)
    assert [r.index for r in got.records] == [0, 1, 2]
    assert got.skipped_lines == (2, 5, 6, 7, 8)
    assert got.skipped == 5
    assert read_records(path) == got.records


def test_missing_file_has_no_records(tmp_path: Path) -> None:
    assert read_records(tmp_path / "nope.jsonl") == []
    assert read_records_report(tmp_path / "nope.jsonl").skipped == 0


def test_a_directory_is_our_error_not_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        read_records(tmp_path)
    assert str(tmp_path) in info.value.message and "directory" in info.value.message
    assert info.value.hint is not None and ".jsonl" in info.value.hint


def test_an_unreadable_file_is_our_error_not_an_os_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("")

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)  # chmod is no test when run as root
    with pytest.raises(ConfigError) as info:
        read_records(path)
    assert info.value.message == f"cannot read records from {path}: Permission denied"
    assert info.value.hint is not None and "permissions" in info.value.hint


def test_a_span_timing_refuses_a_time_that_a_line_could_not_store() -> None:
    # a line stores nan as null; a span read back with a null time would be dropped whole
    with pytest.raises(ValidationError):
        SpanTiming(service="server", name="llm_request", start_ms=float("nan"), end_ms=1.0)

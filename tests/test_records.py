"""Records survive a killed writer: every finished line stays readable."""

from __future__ import annotations

from pathlib import Path

from ttftscope.records import SCHEMA_VERSION, ProbeRecord, RecordWriter, read_records


def test_records_are_appended_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        for i in range(3):
            w.write(ProbeRecord(run_id="r", index=i, variant="chat", phase="warm", ok=True))
    with path.open("a") as fh:
        fh.write('{"schema_version": 1, "run_id": "r", "ind')  # writer killed mid-line
    with RecordWriter(path) as w:  # a later run appends, never truncates
        w.write(ProbeRecord(run_id="s", index=0, variant="ids", phase="cold", ok=False))
    got = read_records(path)
    assert [(r.run_id, r.index) for r in got] == [("r", 0), ("r", 1), ("r", 2)]
    assert all(r.schema_version == SCHEMA_VERSION for r in got)

"""Records an older ttftscope wrote still read (files on disk outlive the code that wrote them)."""

from __future__ import annotations

import json
from pathlib import Path

from ttftscope.errors import FailureKind
from ttftscope.records import SCHEMA_VERSION, RecordWriter, RequestRecord, read_records_report

# written by hand as schema version 1 (``ProbeRecord``) wrote its lines: a probe's cold
# request with the server's view, a bench request through a gateway, a 429 retried
V1 = Path(__file__).parent / "data" / "records" / "v1-probe-and-bench.jsonl"


def test_a_version_1_file_reads_every_record_with_its_values() -> None:
    got = read_records_report(V1)
    assert got.skipped_lines == ()
    probe, bench, limited = got.records
    assert (probe.run_id, probe.phase, probe.variant) == ("20250301-101500", "cold", "chat")
    assert (probe.client_ttft_ms, probe.prefill_ms, probe.server_frontend_ms) == (
        412.5,
        350.0,
        28.0,
    )
    assert probe.checks == {
        "server_ttft_le_client": True,
        "queue_prefill_le_server_ttft": True,
        "one_observation_each": True,
    }
    assert (bench.target, bench.session, bench.turn, bench.shard) == ("gateway", 3, 2, "1/2")
    assert (bench.cached_tokens, bench.content_chunks, bench.tpot_ms) == (98304, 216, 6.075)
    assert limited.ok is False
    assert limited.error_kind is FailureKind.RATE_LIMITED
    assert (limited.status, limited.retry_after, limited.attempt) == (429, "2", 2)


def test_a_version_1_record_is_read_as_the_current_version() -> None:
    assert SCHEMA_VERSION == 3
    records = read_records_report(V1).records
    assert [r.schema_version for r in records] == [3, 3, 3]


def test_a_version_1_record_written_again_carries_the_current_version(tmp_path: Path) -> None:
    old = read_records_report(V1).records[0]
    with RecordWriter(tmp_path / "r.jsonl") as w:
        w.write(old)
    line = json.loads((tmp_path / "r.jsonl").read_text(encoding="utf-8"))
    assert line["schema_version"] == 3
    v1_line = json.loads(V1.read_text(encoding="utf-8").splitlines()[0])
    # version 3's trace fields and the server's own render time (vLLM 0.34+), empty: nothing
    # a version 1 line said is lost or changed
    added: dict[str, object] = {
        "server_render_ms": None,
        "trace_id": None,
        "request_id": None,
        "part_sources": {},
        "gateway_ms": None,
        "spans": [],
    }
    assert {k: v for k, v in line.items() if k != "schema_version"} == {
        **{k: v for k, v in v1_line.items() if k != "schema_version"},
        **added,
    }


def test_a_record_of_another_version_keeps_its_number() -> None:
    # only versions 1 and 2 are known to be version 3's fields; anything else is read as it says
    rec = RequestRecord.model_validate(
        {
            "schema_version": 7,
            "run_id": "r",
            "index": 0,
            "variant": "chat",
            "phase": "cold",
            "ok": True,
        }
    )
    assert rec.schema_version == 7

"""The rules over runs together: notes on what cannot be judged, and no advice that
contradicts another (a queueing run's front end is not called tokenization)."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    failed,
    queue_samples,
    record,
    write_probe_dir,
)
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord, Variant
from ttftscope.results.runs import load_runs

_CLIENT_ONLY = {
    "server_ttft_ms": None,
    "queue_ms": None,
    "prefill_ms": None,
    "server_frontend_ms": None,
    "outside_server_ms": None,
    "prefix_hits": None,
}


def _client_only(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r.model_copy(update=_CLIENT_ONLY) for r in records]


def _findings(*paths: Path) -> tuple[list[Finding], list[str]]:
    return diagnose_runs(load_runs(list(paths)))


def _of(findings: list[Finding], fid: str) -> list[Finding]:
    return [f for f in findings if f.id == fid]


def test_a_queueing_run_is_not_also_called_tokenization_bound(tmp_path: Path) -> None:
    # the fresh-clone contradiction: front end 30% of TTFT beside a saturated queue
    recs = bench_records(30, Parts(queue=300.0, prefill=100.0, frontend=250.0))
    BenchDir(records=recs, samples=queue_samples(20, waiting_peak=9)).write(tmp_path)
    findings, notes = _findings(tmp_path)
    assert [f.id for f in findings] == ["queueing"]
    assert "not a tokenization problem" in findings[0].remedy
    assert any("not judged as tokenization while requests queue" in n for n in notes)


def test_a_measured_ids_saving_stands_beside_a_queue_that_no_longer_denies_it(
    tmp_path: Path,
) -> None:
    # a sequential probe whose every request queued 60 ms, and text vs ids measured
    variants: tuple[Variant, ...] = ("text", "ids") * 3
    sweep = [(size, variant) for size in (2000, 16000, 32000) for variant in variants]
    recs = [
        record(
            i,
            Parts(frontend=2.0 if v == "ids" else 3.0 + size / 200, queue=60.0),
            variant=v,
            size=size,
        )
        for i, (size, v) in enumerate(sweep)
    ]
    write_probe_dir(tmp_path, recs)
    findings, notes = _findings(tmp_path)
    assert sorted(f.id for f in findings if f.gates) == ["queueing", "tokenization-bound"]
    (queue,) = [f for f in findings if f.id == "queueing"]
    assert "not a tokenization problem" not in queue.remedy and "will not fix" not in queue.remedy
    assert queue.remedy.startswith("its --max-num-seqs cannot be seen")
    assert not any("not judged" in n for n in notes)


def test_what_cannot_be_judged_is_a_note(tmp_path: Path) -> None:
    BenchDir(
        records=[failed(i, run_id="b", target="direct") for i in range(3)], summary={"run_id": "b"}
    ).write(tmp_path / "failed")
    BenchDir(records=_client_only(bench_records(5, Parts()))).write(tmp_path / "client")
    _, notes = _findings(tmp_path / "failed", tmp_path / "client")
    assert "failed: no successful request to measure; see the failures" in notes
    assert any(n.startswith("client: the records have no server-side parts") for n in notes)

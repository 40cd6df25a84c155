"""The doctor's own work is never the user's problem: client tokenization its live probe
timed (ttftscope's tokenizer) is no finding about the user's client (issue 35, item 2)."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.doctor.rules.tokenize import DOCTOR_PROBE
from ttftscope.records import RequestRecord
from ttftscope.results.runs import load_runs


def _tokenized(notes: list[str]) -> list[RequestRecord]:
    # client tokenization 300 ms of ~350 ms, growing with the context
    return [
        record(i, Parts(tokenize=size / 27, frontend=5.0, prefill=20.0), size=size).model_copy(
            update={"notes": notes}
        )
        for i, size in enumerate((2000, 2000, 2000, 8000, 8000, 8000))
    ]


def _client_findings(tmp: Path, notes: list[str]) -> list[str]:
    write_probe_dir(tmp, _tokenized(notes))
    findings, _ = diagnose_runs(load_runs([tmp]))
    return [f.title for f in findings if "client-side tokenization" in f.title]


def test_the_live_doctors_own_tokenization_is_not_the_users_client(tmp_path: Path) -> None:
    assert _client_findings(tmp_path, [DOCTOR_PROBE]) == []


def test_the_same_records_from_another_client_are_a_finding(tmp_path: Path) -> None:
    (title,) = _client_findings(tmp_path, [])
    assert title.startswith("TTFT is ") and "client-side tokenization (chat)" in title

"""The doctor's own work is never the user's problem (issue 35, item 2): client tokenization
that ttftscope did itself (the live doctor's probe, any probe's chat variant, which counts
tokens with ttftscope's tokenizer) is no finding about the user's client; the same
tokenization in the user's own records (``instrument``) is."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.doctor.scenarioserver import MODEL, Costs, ScenarioServer
from tests.doctor.truthtable import SIZES, SlowTokenizer, doctor_records
from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.client.endpoint import Endpoint
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.records import DOCTOR_PROBE, PROBE_TOKENIZED, RecordWriter, RequestRecord
from ttftscope.results.runs import load_runs


def _tokenized(notes: list[str]) -> list[RequestRecord]:
    # client tokenization 300 ms of ~350 ms, growing with the context
    return [
        record(i, Parts(tokenize=size / 27, frontend=5.0, prefill=20.0), size=size).model_copy(
            update={"notes": notes}
        )
        for i, size in enumerate((2000, 2000, 2000, 8000, 8000, 8000))
    ]


def _client_findings(tmp: Path, records: list[RequestRecord]) -> list[str]:
    write_probe_dir(tmp, records)
    findings, _ = diagnose_runs(load_runs([tmp]))
    return [f.title for f in findings if "client-side tokenization" in f.title]


def test_the_live_doctors_own_tokenization_is_not_the_users_client(tmp_path: Path) -> None:
    assert _client_findings(tmp_path, _tokenized([DOCTOR_PROBE])) == []


def test_a_probes_own_tokenization_is_not_the_users_client(tmp_path: Path) -> None:
    assert _client_findings(tmp_path, _tokenized([PROBE_TOKENIZED])) == []


def test_the_same_records_from_another_client_are_a_finding(tmp_path: Path) -> None:
    (title,) = _client_findings(tmp_path, _tokenized([]))
    assert title.startswith("TTFT is ") and "client-side tokenization (chat)" in title


def test_the_users_records_beside_the_probes_own_are_still_judged(tmp_path: Path) -> None:
    own = _tokenized([PROBE_TOKENIZED])
    theirs = [r.model_copy(update={"index": 10 + r.index}) for r in _tokenized(["instrument"])]
    (title,) = _client_findings(tmp_path, own + theirs)
    assert "client-side tokenization (chat)" in title


def test_tokenization_timed_off_the_call_counts_in_the_ttft_a_tokenizing_client_sees(
    tmp_path: Path,
) -> None:
    # instrument times the client's tokenization on its own thread, beside a TTFT without
    # it: 300 ms of tokenization before a 50 ms TTFT is 86% of 350 ms, not "600%"
    recs = [
        r.model_copy(update={"client_ttft_ms": r.wire_ttft_ms, "notes": ["instrument"]})
        for r in _tokenized([])
    ]
    (title,) = _client_findings(tmp_path, recs)
    tok = 8000 / 27
    wire = 5.0 + 20.0 + 10.0
    assert title.startswith(f"TTFT is {tok / (tok + wire):.0%} client-side tokenization")


def test_a_real_probe_with_a_slow_tokenizer_is_not_the_users_client(tmp_path: Path) -> None:
    """The README's probe against a healthy server, its own tokenizer slow (~300 ms at 8,000
    tokens): its records say the tokenization was ttftscope's, and the doctor finds nothing."""
    with ScenarioServer(Costs()) as srv:
        ep = Endpoint(base_url=f"{srv.root}/v1", metrics_url=f"{srv.root}/metrics", model=MODEL)
        opts = ProbeOptions(context_tokens=SIZES, repeat=3, num_warmups=1, max_tokens=4)
        with RecordWriter(tmp_path / "probe-own.jsonl") as writer:
            run = asyncio.run(
                run_probe(ep, opts, writer=writer, local_tokenizer=SlowTokenizer(9.0))
            )
    chat = [r for r in run.records if r.variant == "chat"]
    assert chat and all(r.tokenize_ms and PROBE_TOKENIZED in r.notes for r in chat)
    assert max(r.tokenize_ms or 0.0 for r in chat) >= 200.0  # the cost that was left out
    found = doctor_records(tmp_path)
    assert [f.id for f in found.findings if f.gates] == [], found.verdict()

"""Text vs ids is judged on the pairs the probe sent, and only on them.

Another client's traffic (a shared server) marks some requests, which are then left out: the
comparison must neither pair requests of different pairs nor fall back to the share of the
one form's leftover requests (tests/e2e/test_doctor.py's healthy probe, seen failing both
ways on a loaded machine: a ~26 ms "saving" from one text request, no ids request beside it).
"""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.doctor.rules.tokenize import server_tokenization_findings
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord, Variant
from ttftscope.results.runs import load_runs

SIZE = 500


def _findings(tmp: Path, recs: list[RequestRecord]) -> list[Finding]:
    write_probe_dir(tmp, recs)
    (run,) = load_runs([tmp])
    return server_tokenization_findings(run)


def _sent_in_pairs(ttfts: list[float]) -> list[RequestRecord]:
    """Pairs as the probe sends them (text first, then ids first, alternating), both
    requests of pair k taking ``ttfts[k]``: ids save nothing."""
    recs: list[RequestRecord] = []
    for k, ttft in enumerate(ttfts):
        order: tuple[Variant, Variant] = ("text", "ids") if k % 2 == 0 else ("ids", "text")
        for variant in order:
            parts = Parts(frontend=ttft - 60.0, prefill=50.0, outside=10.0)
            recs.append(record(len(recs), parts, variant=variant, size=SIZE))
    return recs


def _marked(recs: list[RequestRecord], variant: str, pairs: set[int]) -> list[RequestRecord]:
    """``recs`` with the ``variant`` request of each pair in ``pairs`` marked shared."""
    return [
        r.model_copy(update={"contaminated": r.variant == variant and r.index // 2 in pairs})
        for r in recs
    ]


def test_a_left_out_request_does_not_shift_the_pairs(tmp_path: Path) -> None:
    # the machine slows down pair by pair; within a pair text and ids take the same time
    recs = _marked(_sent_in_pairs([100.0, 160.0, 220.0, 280.0, 340.0, 400.0]), "text", {0})
    found = _findings(tmp_path, recs)
    # k-th measured text against k-th ids read the drift as ids saving 60 ms in every pair
    assert not [f for f in found if f.saving_ms], found


def test_no_measured_pair_decides_nothing_whatever_the_leftover_share(tmp_path: Path) -> None:
    recs = _marked(_sent_in_pairs([66.0] * 5), "ids", {0, 1, 2, 3, 4})  # every ids request
    recs = [  # text: front end 26 of 66 ms (39%), as the e2e run measured
        r.model_copy(update={"server_frontend_ms": 26.0, "prefill_ms": 30.0})
        if r.variant == "text"
        else r
        for r in recs
    ]
    (found,) = _findings(tmp_path, recs)
    assert found.severity == "info" and found.saving_ms is None, found
    assert found.remedy.startswith("not decided: run `ttftscope probe --ab ids --repeat")
    assert "text vs ids at ~1,000 tokens: no pair had both requests measured" in [
        e.fact for e in found.evidence
    ]

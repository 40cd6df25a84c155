"""The gateway's own hop against the saving it brings, one statement (issue 35, "One story"):
where a run measured direct and through the gateway, "send token ids" and "the network path
through the gateway" become one finding with the net effect measured pair by pair."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.report.fixtures import BenchDir, Parts, record, write_probe_dir
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord
from ttftscope.results.runs import Run, RunPart, load_runs


def _pairs(direct: list[Parts], gateway: list[Parts]) -> list[RequestRecord]:
    """The probe's direct-vs-gateway series: direct and gateway alternating, one pair a turn."""
    out: list[RequestRecord] = []
    for d, g in zip(direct, gateway, strict=True):
        out.append(record(len(out), d, variant="direct"))
        out.append(record(len(out), g, variant="gateway", gateway_ms=2.0))
    return out


def _about_the_gateway(tmp: Path, records: list[RequestRecord]) -> list[Finding]:
    write_probe_dir(tmp, records)
    findings, _ = diagnose_runs(load_runs([tmp]))
    return [f for f in findings if f.id in ("tokenization-bound", "network-path")]


def _facts(f: Finding) -> str:
    return " | ".join(e.fact for e in f.evidence)


def test_ids_that_save_more_than_the_hop_costs_are_one_statement_with_the_net(
    tmp_path: Path,
) -> None:
    # direct: front end 200-204 ms; through the gateway: 5 ms, but 50 ms more outside
    direct = [Parts(frontend=200.0 + k, prefill=20.0, outside=10.0) for k in range(5)]
    gateway = [Parts(frontend=5.0, prefill=20.0, outside=60.0 + k) for k in range(5)]
    (f,) = _about_the_gateway(tmp_path, _pairs(direct, gateway))
    # per pair: net (230 + k) − (85 + k) = 145; ids remove 195 + k; the hop costs 50 + k
    assert f.id == "tokenization-bound" and f.severity == "warning"
    assert f.title == (
        "through the gateway TTFT is 145 ms shorter than direct: ids save 197 ms of server "
        "front end, its own hop costs 52 ms"
    )
    assert f.saving_ms == 145.0 and f.part_ms == 202.0
    facts = _facts(f)
    assert (
        "direct − gateway TTFT per pair (the net): 145 ms (95% interval 145 to 145 ms, 5 pairs)"
        in facts
    )
    assert "(what ids remove): 197 ms (95% interval" in facts
    assert "(the gateway's hop): 52 ms (95% interval" in facts
    assert f.remedy.endswith("(the saving is net of its own hop, ~52 ms here)")
    assert "`ttftscope gateway" in f.remedy


def test_a_hop_that_costs_more_than_the_ids_save_is_one_network_statement(
    tmp_path: Path,
) -> None:
    direct = [Parts(frontend=30.0, prefill=20.0, outside=10.0 + k) for k in range(5)]
    gateway = [Parts(frontend=5.0, prefill=20.0, outside=120.0 + 2 * k) for k in range(5)]
    (f,) = _about_the_gateway(tmp_path, _pairs(direct, gateway))
    # per pair: gateway − direct = 85 + k; ids remove 25; the hop costs 110 + k
    assert f.id == "network-path" and f.severity == "warning"
    assert f.title == (
        "through the gateway TTFT is 87 ms longer than direct: ids save 25 ms of server front "
        "end, its own hop costs 112 ms"
    )
    assert f.saving_ms == 87.0 and f.part_ms == 112.0
    assert "run it on the server's host" in f.remedy


_ms = st.floats(min_value=0.0, max_value=300.0, allow_nan=False)


@st.composite
def _gateway_runs(draw: st.DrawFn) -> Run:
    n = draw(st.integers(min_value=1, max_value=6))
    direct = [Parts(frontend=draw(_ms), prefill=20.0, outside=draw(_ms)) for _ in range(n)]
    gateway = [Parts(frontend=draw(_ms), prefill=20.0, outside=draw(_ms)) for _ in range(n)]
    part = RunPart(
        kind="probe",
        key="p",
        label="p",
        source=Path("p.jsonl"),
        records=tuple(_pairs(direct, gateway)),
    )
    return Run(kind="probe", key="p", label="p", parts=(part,))


@settings(max_examples=80, deadline=None)
@given(_gateway_runs())
def test_one_statement_about_the_gateway_that_agrees_with_its_figures(run: Run) -> None:
    findings, _ = diagnose_runs([run])
    about = [
        f
        for f in findings
        if (f.id == "tokenization-bound" and "passthrough" not in f.remedy)  # not: ids unsent
        or (f.id == "network-path" and "gateway" in f.remedy)  # not: the direct path's own
    ]
    assert len(about) == 1  # never a pair pulling different ways
    (f,) = about
    net = re.search(r"the net\): (-?[\d,]+) ms", f.evidence[0].fact)
    assert net is not None
    shown = float(net.group(1).replace(",", ""))
    if f.saving_ms is not None and f.part_ms is not None:
        assert f.saving_ms <= f.part_ms + 1e-9
    if re.match(r"through the gateway TTFT is [\d,]+ ms shorter", f.title):
        assert f.severity == "warning" and shown > 0
        quoted = re.search(r"is ([\d,]+) ms shorter", f.title)
        assert quoted is not None and float(quoted.group(1).replace(",", "")) == shown
    if re.match(r"through the gateway TTFT is [\d,]+ ms longer", f.title):
        assert f.severity == "warning" and shown < 0 and f.saving_ms is not None
        quoted = re.search(r"is ([\d,]+) ms longer", f.title)
        assert quoted is not None and float(quoted.group(1).replace(",", "")) == -shown


def test_a_bench_pairs_a_sessions_turns_in_one_round_of_its_targets(tmp_path: Path) -> None:
    """Bench deals each session's turns to its targets in turn (direct, gateway, direct, …):
    a session's two turns of one round are a pair (traced, so each has its parts)."""
    recs = []
    for i in range(16):
        session, turn = i % 4, i // 4
        gateway = (session + turn) % 2 == 1
        parts = (
            Parts(frontend=5.0, prefill=20.0, outside=40.0)
            if gateway
            else Parts(frontend=150.0, prefill=20.0, outside=10.0)
        )
        target = "gateway" if gateway else "direct"
        recs.append(record(i, parts, run_id="bench-1", target=target, session=session, turn=turn))
    BenchDir(records=recs).write(tmp_path)
    findings, _ = diagnose_runs(load_runs([tmp_path]))
    (f,) = [f for f in findings if f.id in ("tokenization-bound", "network-path")]
    # each pair: (150 + 20 + 10) − (5 + 20 + 40) = 115 ms
    assert f.title == (
        "through the gateway TTFT is 115 ms shorter than direct: ids save 145 ms of server "
        "front end, its own hop costs 30 ms"
    )
    assert "(direct and gateway, 8 pairs)" in f.evidence[0].source

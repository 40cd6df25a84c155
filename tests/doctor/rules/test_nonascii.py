"""The server's slow non-ASCII tokenization path, from the probe's paired chat and non-ASCII
series (issue 35): named with what the slow path costs per request, measured pair by pair;
the same cost per token in both scripts is no finding."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.doctor.rules.nonascii import slow_path_findings
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord
from ttftscope.results.runs import Run, RunPart, load_runs

SIZE = 8000


def _series(ascii_ms: list[float], wide_ms: list[float]) -> list[RequestRecord]:
    """Warm chat requests, then the same in non-ASCII letters (8,500 prompt tokens each)."""
    chat = [record(i, Parts(frontend=ms), size=SIZE) for i, ms in enumerate(ascii_ms)]
    wide = [
        record(10 + i, Parts(frontend=ms), variant="non_ascii", size=SIZE)
        for i, ms in enumerate(wide_ms)
    ]
    return chat + wide


def _findings(tmp: Path, records: list[RequestRecord]) -> list[Finding]:
    write_probe_dir(tmp, records)
    (run,) = load_runs([tmp])
    return slow_path_findings(run)


def test_a_slow_non_ascii_path_is_named_with_its_measured_cost(tmp_path: Path) -> None:
    # ASCII 10-12 ms, non-ASCII 300-320 ms at the same prompt tokens: ~290 ms a request
    ascii_ms, wide_ms = [10.0, 11.0, 12.0, 10.0, 11.0], [300.0, 310.0, 320.0, 305.0, 301.0]
    (f,) = _findings(tmp_path, _series(ascii_ms, wide_ms))
    assert f.id == "non-ascii-slow-path" and f.severity == "warning"
    excess = sorted(w - a for a, w in zip(ascii_ms, wide_ms, strict=True))
    assert f.saving_ms == excess[2]  # the median pair, as the evidence's interval states it
    assert f.part_ms == 305.0
    assert f"{305 / 11:.1f}× the time per token" in f.title  # the medians per token
    facts = " | ".join(e.fact for e in f.evidence)
    assert f"per pair: {excess[2]:.0f} ms (95% interval" in facts and "5 pairs" in facts
    assert "an estimate" in facts  # no render time in these records
    assert "`ttftscope gateway" in f.remedy


def test_the_same_cost_per_token_in_both_scripts_is_no_finding(tmp_path: Path) -> None:
    assert _findings(tmp_path, _series([100, 110, 105], [104, 108, 101])) == []


def test_a_surcharge_the_pairs_cannot_decide_says_how_many_to_run(tmp_path: Path) -> None:
    (f,) = _findings(tmp_path, _series([10, 10, 10], [40, 400, 12]))
    assert f.severity == "info" and f.saving_ms is None
    assert "`ttftscope probe --non-ascii --repeat" in f.remedy


def test_the_measured_render_time_is_read_where_recorded(tmp_path: Path) -> None:
    recs = [
        r.model_copy(update={"server_render_ms": (r.server_frontend_ms or 0.0) - 5.0})
        for r in _series([15, 16, 17], [300, 310, 320])
    ]
    (f,) = _findings(tmp_path, recs)
    assert f.saving_ms == 294.0 and f.part_ms == 305.0
    assert "request_render_duration_seconds): measured" in f.evidence[-1].fact


def test_the_slow_path_is_not_also_called_tokenization_bound(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, _series([10, 11, 12, 10, 11], [300, 310, 320, 305, 301]))
    findings, _ = diagnose_runs(load_runs([tmp_path]))
    assert [f.id for f in findings if f.gates] == ["non-ascii-slow-path"]


_fe = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_fe, _fe), min_size=1, max_size=6))
def test_a_slow_path_finding_agrees_with_its_pairs(pairs: list[tuple[float, float]]) -> None:
    """Over generated pairs: a warning only when every figure it quotes points its way, its
    saving the quoted per-pair median and never above the part it removes."""
    ascii_ms, wide_ms = [a for a, _ in pairs], [w for _, w in pairs]
    part = RunPart(
        kind="probe",
        key="p",
        label="p",
        source=Path("p.jsonl"),
        records=tuple(_series(ascii_ms, wide_ms)),
    )
    found = slow_path_findings(Run(kind="probe", key="p", label="p", parts=(part,)))
    excess = [w - a for a, w in pairs]  # equal prompt tokens: no scaling
    for f in found:
        quoted = re.search(r"per pair: (-?[\d,]+) ms", f.evidence[1].fact)
        assert quoted is not None
        if f.severity == "warning":
            assert f.saving_ms is not None and f.part_ms is not None
            assert f.saving_ms <= f.part_ms and f.saving_ms >= 20.0
            assert quoted.group(1) == f"{f.saving_ms:,.0f}"  # one figure, shown twice
            assert len(pairs) >= 3 and statistics.median(excess) >= 20.0
        else:
            assert f.saving_ms is None and "--repeat" in f.remedy

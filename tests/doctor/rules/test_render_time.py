"""The server-side tokenization finding reads the server's measured render time (issue 35):
vLLM 0.34's ``vllm:request_render_duration_seconds`` per request, ``server_render_ms``.

Where the records carry it, the finding's figure, evidence and saving are that measured
time (the front end's remainder also holds IPC and waiting in the API server); where they do
not, the finding says its figure is an estimate.
"""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.doctor.rules.tokenize import server_tokenization_findings
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord
from ttftscope.results.runs import load_runs

# front end 300 ms of ~340 ms at 8,000 tokens, growing with the context
_SIZES = (2000, 2000, 2000, 8000, 8000, 8000)


def _records(render: float | None) -> list[RequestRecord]:
    out = []
    for i, size in enumerate(_SIZES):
        rec = record(i, Parts(frontend=size / 26.0, prefill=20.0, outside=10.0), size=size)
        measured = None if render is None else render * size / 8000
        out.append(rec.model_copy(update={"server_render_ms": measured}))
    return out


def _finding(tmp: Path, render: float | None) -> Finding:
    write_probe_dir(tmp, _records(render))
    (run,) = load_runs([tmp])
    (f,) = server_tokenization_findings(run)
    return f


def test_the_measured_render_time_is_the_figure_and_the_saving(tmp_path: Path) -> None:
    f = _finding(tmp_path, render=240.0)
    assert f.saving_ms == 240.0  # the server's render time, not the front end's 308 ms
    assert f.part_ms == 240.0
    facts = " | ".join(e.fact for e in f.evidence)
    assert "server-side tokenization 240 ms of" in facts
    assert "request_render_duration_seconds" in facts and "measured, not estimated" in facts
    assert "estimated:" not in facts


def test_without_the_render_time_the_finding_says_it_is_estimated(tmp_path: Path) -> None:
    f = _finding(tmp_path, render=None)
    front = 8000 / 26.0  # 307.69 ms: the estimate, rounded to 307.7, is held to its part
    assert f.saving_ms == f.part_ms == front
    facts = " | ".join(e.fact for e in f.evidence)
    assert "the saving is estimated" in facts
    assert "measured, not estimated" not in facts

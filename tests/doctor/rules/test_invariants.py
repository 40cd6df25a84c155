"""Invariants of the doctor's findings over generated record sets (hypothesis).

- A saving never exceeds the measured part its remedy removes; for the per-request
  tokenization finding that part is recomputed here, independently, from the records.
- Text vs ids is recommended only when the pairs decide that ids help by more than 5 ms and
  5%. With three pairs the bootstrap median's 95% interval runs from the smallest paired
  difference to the largest, so the rule is checked by hand: every pair must beat the
  minimum; every pair below it is "does not help" (no recommendation); a mix is "not
  decided", a finding that names the repeat count to run.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.report.fixtures import Parts, record
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord, Variant
from ttftscope.results.runs import Run, RunPart

SIZES = (2000, 16000)
REPEAT = 3
_ms = st.floats(min_value=0.0, max_value=400.0, allow_nan=False)


@st.composite
def _parts(draw: st.DrawFn, variant: Variant, tokenized: bool = False) -> Parts:
    tokenize = draw(_ms) if variant == "chat" and tokenized else None
    return Parts(
        frontend=draw(_ms),
        prefill=draw(st.floats(min_value=1.0, max_value=400.0)),
        outside=draw(st.floats(min_value=0.0, max_value=50.0)),
        tokenize=tokenize,
        hit_rate=draw(st.floats(min_value=0.0, max_value=1.0)),
    )


@st.composite
def probe_runs(draw: st.DrawFn) -> Run:
    """A probe with --ab ids: per size a chat series, then text and ids sent in pairs."""
    recs: list[RequestRecord] = []
    tokenized = draw(st.booleans())  # the client tokenizes every chat request, or none
    for size in SIZES:
        for _ in range(REPEAT):
            parts = draw(_parts("chat", tokenized))
            recs.append(record(len(recs), parts, variant="chat", size=size))
        for _ in range(REPEAT):
            for variant in ("text", "ids"):
                recs.append(record(len(recs), draw(_parts(variant)), variant=variant, size=size))
    part = RunPart(
        kind="probe", key="probe:p", label="p", source=Path("p.jsonl"), records=tuple(recs)
    )
    return Run(kind="probe", key="probe:p", label="p", parts=(part,))


def _ttfts(run: Run, variant: str, size: int) -> list[float]:
    return [
        r.client_ttft_ms or 0.0
        for r in sorted(run.records, key=lambda r: r.index)
        if r.variant == variant and r.context_tokens_target == size
    ]


def _clamped(saving: float, part: float) -> float:
    """The rule's saving (to 0.1 ms), never above its part."""
    return min(round(saving, 1), part)


def _part_median(run: Run, series: str, field: str) -> float:
    """The median of ``field`` over the series' requests at the largest context."""
    top = max(SIZES)
    values = [
        getattr(r, field)
        for r in run.records
        if r.variant == series and r.context_tokens_target == top and getattr(r, field) is not None
    ]
    return float(statistics.median(values))


def _series_of(f: Finding) -> str:
    found = re.search(r"\((chat|text|ids)\)", f.title)
    assert found is not None, f.title
    return found[1]


@settings(max_examples=150, deadline=None)
@given(probe_runs())
def test_no_saving_exceeds_the_part_it_removes(run: Run) -> None:
    findings, _ = diagnose_runs([run])
    for f in findings:
        if f.saving_ms is None:
            continue
        assert f.part_ms is not None and f.saving_ms <= f.part_ms, f
        if f.id == "tokenization-bound":
            field = "tokenize_ms" if "client-side" in f.title else "server_frontend_ms"
            assert f.part_ms == pytest.approx(_part_median(run, _series_of(f), field))


@settings(max_examples=150, deadline=None)
@given(probe_runs())
def test_ids_are_recommended_only_when_every_pair_beats_the_minimum(run: Run) -> None:
    findings, _ = diagnose_runs([run])
    text, ids = _ttfts(run, "text", max(SIZES)), _ttfts(run, "ids", max(SIZES))
    diffs = [a - b for a, b in zip(text, ids, strict=True)]
    minimum = max(5.0, 0.05 * statistics.median(text))
    server = [f for f in findings if f.id == "tokenization-bound" and "server-side" in f.title]
    recommends = [f for f in server if f.remedy.startswith("send token ids")]
    undecided = [f for f in server if f.remedy.startswith("not decided")]
    if recommends:
        assert all(d > minimum for d in diffs), (diffs, minimum)
        assert all(
            f.saving_ms == _clamped(statistics.median(diffs), f.part_ms or 0.0) for f in recommends
        )
    if all(d < minimum for d in diffs):
        assert not recommends and not undecided
    for f in undecided:
        assert not all(d > minimum for d in diffs) and not all(d < minimum for d in diffs)
        assert f.severity == "info" and re.search(r"--repeat \d+`", f.remedy)


def test_the_issues_example_recommends_nothing() -> None:
    # "median TTFT text 227 ms vs ids 324 ms ... → send token ids (saves ~113 ms)"
    recs: list[RequestRecord] = []
    for size in SIZES:
        for k in range(REPEAT):
            chat = Parts(frontend=113.0 + k, prefill=60.0, outside=10.0)
            recs.append(record(len(recs), chat, variant="chat", size=size))
        for text_fe, ids_fe in ((157.0, 254.0), (170.0, 230.0), (145.0, 280.0)):
            recs.append(
                record(len(recs), Parts(frontend=text_fe, prefill=60.0), variant="text", size=size)
            )
            recs.append(
                record(len(recs), Parts(frontend=ids_fe, prefill=60.0), variant="ids", size=size)
            )
    part = RunPart(
        kind="probe", key="probe:p", label="p", source=Path("p.jsonl"), records=tuple(recs)
    )
    findings, _ = diagnose_runs([Run(kind="probe", key="probe:p", label="p", parts=(part,))])
    assert not [f for f in findings if "token ids" in f.remedy or "not decided" in f.remedy]

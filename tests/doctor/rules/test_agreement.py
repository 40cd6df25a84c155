"""A finding and the figures beside it agree (hypothesis, over generated probe runs):

- a text-vs-ids fact quotes the same medians as the report's "measured:" line for that
  switch, and a finding that advises ids never sits beside a line where ids were slower;
- a tokenization finding's median TTFT is the one the "where TTFT goes" chart shows for
  its series.

Numbers are read back from the rendered text, as a reader would compare them.
"""

from __future__ import annotations

import re

from hypothesis import given, settings

from tests.doctor.rules.test_invariants import SIZES, probe_runs
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.report.compare import comparisons
from ttftscope.report.where import where_lines
from ttftscope.results.runs import Run

_FACT = re.compile(r"median TTFT text ([\d,]+) ms vs ids ([\d,]+) ms")
_LINE = re.compile(r"median TTFT ([\d,.]+) → ([\d,.]+) ms")
_OF = re.compile(r"server-side tokenization [\d,]+ ms of ([\d,]+) ms median TTFT")


def _n(text: str) -> float:
    return float(text.replace(",", ""))


def _measured(run: Run) -> tuple[float, float] | None:
    lines = [c.text for c in comparisons([run]) if c.subject.startswith("token ids instead")]
    found = _LINE.search(lines[0]) if lines else None
    return None if found is None else (_n(found[1]), _n(found[2]))


@settings(max_examples=100, deadline=None)
@given(probe_runs())
def test_a_finding_and_the_measured_line_quote_the_same_medians_and_sign(run: Run) -> None:
    findings, _ = diagnose_runs([run])
    line = _measured(run)
    for f in findings:
        for e in f.evidence:
            fact = _FACT.search(e.fact)
            if fact is None:
                continue
            assert line is not None
            text, ids = _n(fact[1]), _n(fact[2])
            assert abs(text - line[0]) <= 0.6 and abs(ids - line[1]) <= 0.6, (e.fact, line)
        if f.remedy.startswith("send token ids"):
            assert line is not None and line[1] < line[0], (f.title, line)


@settings(max_examples=100, deadline=None)
@given(probe_runs())
def test_a_findings_median_ttft_is_the_charts(run: Run) -> None:
    findings, _ = diagnose_runs([run])
    chart = {
        line[:24].strip(): _n(line[25:34].strip().removesuffix(" ms"))
        for line in where_lines([run])[1:-1]
    }
    for f in findings:
        series = re.search(r"\((chat|text|ids)\)", f.title)
        for e in f.evidence:
            found = _OF.search(e.fact)
            if found is None or series is None:
                continue
            shown = chart[f"{series[1]} at {max(SIZES):,} tokens"]
            assert abs(_n(found[1]) - shown) <= 0.6, (e.fact, shown)

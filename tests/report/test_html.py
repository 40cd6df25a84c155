"""The page is one self-contained file: plotly inlined once, nothing fetched, text escaped."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.offline  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.report.fixtures import write_mixed_dirs
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.errors import ConfigError
from ttftscope.findings import Diagnosis
from ttftscope.report.html import render_html, write_report
from ttftscope.results.runs import Run, load_runs

# anything the browser would fetch: src/href attributes, CSS url() and @import
_FETCHES = re.compile(r"""(?:\bsrc|\bhref)\s*=\s*["']?([^"'\s>]+)|url\(\s*["']?([^"')]+)|@import""")
_TAGS = re.compile(r"<(script|link|img|iframe|source)\b[^>]*>", re.IGNORECASE)


def _diagnosis(runs: list[Run]) -> Diagnosis:
    """What the CLI hands the report: the doctor's diagnosis of the runs."""
    findings, notes = diagnose_runs(runs)
    return Diagnosis.of(findings, ["runs"], notes)


def _page(tmp_path: Path) -> str:
    runs = load_runs(write_mixed_dirs(tmp_path))
    return render_html(runs, _diagnosis(runs), generated="2026-01-01 00:00")


def test_plotly_is_inlined_exactly_once_and_every_figure_calls_it(tmp_path: Path) -> None:
    page = _page(tmp_path)
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert page.count("Plotly.newPlot(") == 6
    # the library, one per figure, and the one that redraws a plot when its section opens
    assert len(re.findall(r"<script\b", page)) == 8


def test_nothing_is_loaded_from_the_network(tmp_path: Path) -> None:
    html_only = _page(tmp_path).replace(plotly.offline.get_plotlyjs(), "")
    for tag in _TAGS.finditer(html_only):
        assert not re.search(r"\b(src|href)\s*=", tag.group(0)), tag.group(0)
    fetched = [m.group(0) for m in _FETCHES.finditer(html_only)]
    assert fetched == []
    assert "https://cdn" not in html_only and "fonts.googleapis" not in html_only


def test_the_diagnosis_comes_first_and_result_text_is_escaped(tmp_path: Path) -> None:
    page = _page(tmp_path)
    body = page[page.index("<body>") :]
    assert body.index('id="diagnosis"') < body.index('id="ttft-cdf"')
    assert "<b>agents</b>" not in body and "&lt;b&gt;agents&lt;/b&gt;" in body
    # the doctor's finding on the probe, its remedy's command as code, and the measured A/B
    assert "server-side tokenization (chat) and grows with context" in body
    assert "<code>ttftscope gateway --upstream URL --model-dir DIR</code>" in body
    assert "token ids instead of text at 8,000 tokens: median TTFT" in body


def test_write_report_makes_the_folder_and_an_unwritable_path_says_what_to_do(
    tmp_path: Path,
) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path))
    path = write_report(runs, _diagnosis(runs), tmp_path / "out" / "r.html")
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="--out"):
        write_report(runs, _diagnosis(runs), blocker / "r.html")

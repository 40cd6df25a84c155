"""The page is one self-contained file: plotly inlined once, nothing fetched, text escaped."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.offline  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.report.fixtures import write_mixed_dirs
from ttftscope.errors import ConfigError
from ttftscope.report.html import render_html, write_report
from ttftscope.report.verdict import verdict
from ttftscope.results.runs import load_runs

# anything the browser would fetch: src/href attributes, CSS url() and @import
_FETCHES = re.compile(r"""(?:\bsrc|\bhref)\s*=\s*["']?([^"'\s>]+)|url\(\s*["']?([^"')]+)|@import""")
_TAGS = re.compile(r"<(script|link|img|iframe|source)\b[^>]*>", re.IGNORECASE)


def _page(tmp_path: Path) -> str:
    runs = load_runs(write_mixed_dirs(tmp_path))
    return render_html(runs, verdict(runs), generated="2026-01-01 00:00")


def test_plotly_is_inlined_exactly_once_and_every_figure_calls_it(tmp_path: Path) -> None:
    page = _page(tmp_path)
    assert page.count(plotly.offline.get_plotlyjs()) == 1
    assert page.count("Plotly.newPlot(") == 5
    assert len(re.findall(r"<script\b", page)) == 6  # the library, then one per figure


def test_nothing_is_loaded_from_the_network(tmp_path: Path) -> None:
    html_only = _page(tmp_path).replace(plotly.offline.get_plotlyjs(), "")
    for tag in _TAGS.finditer(html_only):
        assert not re.search(r"\b(src|href)\s*=", tag.group(0)), tag.group(0)
    fetched = [m.group(0) for m in _FETCHES.finditer(html_only)]
    assert fetched == []
    assert "https://cdn" not in html_only and "fonts.googleapis" not in html_only


def test_the_verdict_comes_first_and_result_text_is_escaped(tmp_path: Path) -> None:
    page = _page(tmp_path)
    body = page[page.index("<body>") :]
    assert body.index('id="verdict"') < body.index('id="ttft-cdf"')
    assert "<b>agents</b>" not in body and "&lt;b&gt;agents&lt;/b&gt;" in body
    assert "<code>ttftscope gateway</code>" in body


def test_write_report_makes_the_folder_and_an_unwritable_path_says_what_to_do(
    tmp_path: Path,
) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path))
    path = write_report(runs, verdict(runs), tmp_path / "out" / "r.html")
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="--out"):
        write_report(runs, verdict(runs), blocker / "r.html")

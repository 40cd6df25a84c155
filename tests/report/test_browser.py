"""The report in a real headless browser: loads offline from file://, every plot draws data,
and the console stays clean.

Skipped only where Debian's chromium is missing and ``CI`` is unset; in CI a missing browser
fails, with the command that installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import plotly.graph_objects as go  # type: ignore[import-untyped, unused-ignore]
import plotly.offline  # type: ignore[import-untyped, unused-ignore]
import pytest

from tests.report import browser
from tests.report.browser import open_report
from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    probe_records,
    queue_samples,
    write_mixed_dirs,
    write_probe_dir,
)
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Diagnosis
from ttftscope.report.html import write_report
from ttftscope.results.runs import Run, load_runs

PLOTS = ("ttft-cdf", "ttft-parts", "queue", "hit-rate", "tokenization", "waterfall")


def _diagnosis(runs: list[Run]) -> Diagnosis:
    """What the CLI hands the report: the doctor's diagnosis of the runs."""
    findings, notes = diagnose_runs(runs)
    return Diagnosis.of(findings, ["runs"], notes)


def require_chromium() -> None:
    """Return if the browser is there; else skip, or fail in CI."""
    if browser.browser_available():
        return
    if os.environ.get("CI"):
        pytest.fail("/usr/bin/chromium is missing: run `bash scripts/install_browser.sh` first")
    pytest.skip("no /usr/bin/chromium (bash scripts/install_browser.sh installs it)")


@pytest.fixture
def chromium() -> None:
    require_chromium()


@pytest.mark.usefixtures("chromium")
def test_report_renders_every_plot_offline_without_console_errors(tmp_path: Path) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path / "results"))
    assert len(runs) == 3  # a probe, a bench run merged from two shards, another bench run
    path = write_report(runs, _diagnosis(runs), tmp_path / "report.html")
    page = open_report(path, expect_plots=len(PLOTS))
    # "where TTFT goes" leads the page, the others follow in their order
    assert [p.id for p in page.plots] == ["ttft-parts", *(p for p in PLOTS if p != "ttft-parts")]
    assert [p.id for p in page.plots if not p.has_data] == []
    assert page.console_errors == [] and page.page_errors == []
    assert page.network == []  # nothing but the file itself was requested
    # as a reader sees it: no label over another, and a CDF of a handful of curves
    assert {p.id: p.overlaps for p in page.plots if p.overlaps} == {}
    (cdf,) = [p for p in page.plots if p.id == "ttft-cdf"]
    assert cdf.shown <= 6 < cdf.traces


@pytest.mark.usefixtures("chromium")
def test_a_probe_sweep_and_a_bench_on_one_server_read_without_overlaps(tmp_path: Path) -> None:
    sweep = probe_records(sizes=(0, 2000, 8000), variants=("chat", "text", "ids"))
    write_probe_dir(tmp_path / "probe", sweep)
    bench = BenchDir(
        records=bench_records(12, Parts(queue=30.0), targets=("direct", "gateway")),
        samples=queue_samples(12, targets=("direct",)),
        summary={"run_id": "bench-1", "label": "agent sessions"},
    )
    runs = load_runs([tmp_path / "probe", bench.write(tmp_path / "bench")])
    path = write_report(runs, _diagnosis(runs), tmp_path / "report.html")
    page = open_report(path, expect_plots=len(PLOTS), width=1280)
    assert [p.id for p in page.plots if not p.has_data] == []
    assert {p.id: p.overlaps for p in page.plots if p.overlaps} == {}


@pytest.mark.usefixtures("chromium")
def test_the_harness_sees_network_use_and_script_errors(tmp_path: Path) -> None:
    # the checks above mean something only if a page that breaks them is caught
    path = tmp_path / "bad.html"
    path.write_text(
        '<!doctype html><html><head><script src="https://cdn.example.invalid/x.js"></script>'
        "</head><body><script>console.error('boom'); undefinedFunction();</script></body></html>"
    )
    page = open_report(path, expect_plots=0)
    assert page.network == ["https://cdn.example.invalid/x.js"]
    assert "boom" in page.console_errors
    assert any("undefinedFunction" in e for e in page.page_errors)


def test_a_missing_browser_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "browser_available", lambda: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"scripts/install_browser\.sh"):
        require_chromium()


@pytest.mark.usefixtures("chromium")
def test_the_harness_sees_a_legend_drawn_over_an_axis_title(tmp_path: Path) -> None:
    # the report's old layout: a legend below the plot, where the x axis title also goes
    fig = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=f"series {i}") for i in range(8)])
    fig.update_layout(
        xaxis_title="TTFT (ms, client)", legend={"orientation": "h", "y": -0.12, "x": 0}
    )
    body = fig.to_html(full_html=False, include_plotlyjs=False, div_id="bad")
    path = tmp_path / "overlap.html"
    path.write_text(
        f"<!doctype html><html><head><script>{plotly.offline.get_plotlyjs()}</script></head>"
        f"<body style='width:560px'>{body}</body></html>",
        encoding="utf-8",
    )
    (plot,) = open_report(path, expect_plots=1, width=600).plots
    assert "legend0 × x-title0" in plot.overlaps


@pytest.mark.usefixtures("chromium")
def test_the_first_screen_is_the_verdict_and_where_ttft_goes(tmp_path: Path) -> None:
    runs = load_runs(write_mixed_dirs(tmp_path / "results"))
    path = write_report(runs, _diagnosis(runs), tmp_path / "report.html")
    page = open_report(path, expect_plots=len(PLOTS), width=1280)
    folded = page.folded
    # only "where TTFT goes" is drawn before a reader opens anything; the rest is folded
    assert folded["visible"] == ["ttft-parts"]
    assert folded["verdict"].startswith("The main bottleneck: ")
    assert 0 <= folded["verdictTop"] < 200
    assert folded["summaries"][0].startswith("The findings (")
    assert any(s.startswith("More plots: ") for s in folded["summaries"])

"""The report in a real headless browser: loads offline from file://, every plot draws data,
and the console stays clean.

Skipped only where Debian's chromium is missing and ``CI`` is unset; in CI a missing browser
fails, with the command that installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.report import browser
from tests.report.browser import open_report
from tests.report.fixtures import write_mixed_dirs
from ttftscope.doctor.diagnose import diagnose_runs
from ttftscope.findings import Diagnosis
from ttftscope.report.html import write_report
from ttftscope.results.runs import Run, load_runs

PLOTS = ("ttft-cdf", "ttft-parts", "queue", "hit-rate", "tokenization")


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
    assert [p.id for p in page.plots] == list(PLOTS)
    assert [p.id for p in page.plots if not p.has_data] == []
    assert page.console_errors == [] and page.page_errors == []
    assert page.network == []  # nothing but the file itself was requested


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

"""``ttftscope report``: writes the page, prints the verdict and where the page is."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tests.report.fixtures import BenchDir, Parts, bench_records, probe_records, write_probe_dir
from ttftscope.cli.report import report
from ttftscope.results.runs import NoResults


def test_report_writes_beside_the_first_directory_and_prints_the_verdict(tmp_path: Path) -> None:
    write_probe_dir(tmp_path / "res", probe_records())
    result = CliRunner().invoke(report, [str(tmp_path / "res")])
    assert result.exit_code == 0, result.output
    page = tmp_path / "res" / "report.html"
    assert page.is_file() and page.stat().st_size > 1_000_000
    lines = result.output.splitlines()
    assert lines[0] == "Verdict: act on this"
    assert lines[1].startswith("act chat at 8,000 tokens: server front end")
    assert lines[-1] == f"report: {page}"


def test_out_names_the_file_and_notes_go_to_stderr(tmp_path: Path) -> None:
    BenchDir(records=bench_records(6, Parts(prefill=90.0))).write(tmp_path / "b")
    out = tmp_path / "pages" / "bench.html"
    result = CliRunner().invoke(report, [str(tmp_path / "b"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert result.stdout.startswith("Verdict: healthy")
    assert "note: b: no readable bench-summary.json" in result.stderr


def test_a_directory_without_results_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(report, [str(tmp_path / "empty")])
    assert isinstance(result.exception, NoResults)
    assert "holds no probe or bench results" in str(result.exception)
    assert not (tmp_path / "empty" / "report.html").exists()


def test_at_least_one_directory_is_required() -> None:
    result = CliRunner().invoke(report, [])
    assert result.exit_code == 2 and "RESULT_DIR" in result.output

"""``ttftscope report``: writes the page, prints the doctor's diagnosis and where the page is."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.report.fixtures import BenchDir, Parts, bench_records, probe_records, write_probe_dir
from tests.results.traced import mixed
from ttftscope.cli.report import report
from ttftscope.results.runs import NoResults


def test_report_writes_beside_the_first_directory_and_prints_the_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    write_probe_dir(tmp_path / "res", probe_records())
    result = CliRunner().invoke(report, [str(tmp_path / "res")])
    assert result.exit_code == 0, result.output  # a finding does not fail the report
    page = tmp_path / "res" / "report.html"
    assert page.is_file() and page.stat().st_size > 1_000_000
    lines = result.output.splitlines()
    assert lines[0] == "doctor (what these records say):"
    # the verdict leads, then where TTFT goes; the findings follow
    assert lines[1].startswith("The main bottleneck: TTFT is 59% server-side tokenization")
    assert "where TTFT goes (median ms per request, each part a letter):" in lines
    assert "! TTFT is 59% server-side tokenization (chat) and grows with context" in lines
    assert "measured: token ids instead of text at 8,000 tokens" in result.output
    assert lines[-1] == f"report: {page}"


def test_out_names_the_file_and_notes_follow_the_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    BenchDir(records=bench_records(6, Parts(prefill=90.0))).write(tmp_path / "b")
    out = tmp_path / "pages" / "bench.html"
    result = CliRunner().invoke(report, [str(tmp_path / "b"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert result.stdout.splitlines()[1].startswith("✓ no problem found in what was checked")
    assert "note: b: no readable bench-summary.json" in result.stdout


def test_a_directory_without_results_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(report, [str(tmp_path / "empty")])
    assert isinstance(result.exception, NoResults)
    assert "holds no probe or bench results" in str(result.exception)
    assert not (tmp_path / "empty" / "report.html").exists()


def test_at_least_one_directory_is_required() -> None:
    result = CliRunner().invoke(report, [])
    assert result.exit_code == 2 and "RESULT_DIR" in result.output


def test_a_traced_bench_prints_its_per_request_parts_within_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "80")
    BenchDir(records=mixed()).write(tmp_path / "traced")
    result = CliRunner().invoke(report, [str(tmp_path / "traced")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()[:-1]  # the last names the page's path
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "per-request TTFT parts (ms), traced" in result.output
    (p50,) = [line.split() for line in lines if line.startswith(" 8K–16K")]
    # gateway at 8K–16K: queue, prefill, front end, gateway, outside medians (ms)
    assert p50 == ["8K–16K", "gateway", "5", "p50", "25.0", "115", "2.0", "2.5", "6.5"]

"""Runs in subfolders of a result path: found (``bench --result-dir results/run1`` beside a
probe in ``results/``), each counted once, and what lies beyond the bounds named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import BenchDir, Parts, bench_records, probe_records, write_probe_dir
from ttftscope.doctor.gather import read_recorded
from ttftscope.results import folders
from ttftscope.results.runs import NoResults, load_runs


def readme_layout(root: Path) -> Path:
    """What the README's commands write: a probe into results/, a bench into results/run1."""
    results = root / "results"
    write_probe_dir(results, probe_records(run_id="probe-1"), stamp="20260101-000000")
    BenchDir(
        records=bench_records(6, Parts(), targets=("direct", "gateway")),
        summary={"run_id": "bench-1", "completed": 12, "failed": 0},
    ).write(results / "run1")
    return results


def test_report_and_doctor_find_the_bench_in_a_subfolder(tmp_path: Path) -> None:
    results = readme_layout(tmp_path)
    runs = load_runs([results])
    assert sorted((r.kind, r.key) for r in runs) == [
        ("bench", "bench:bench-1"),
        ("probe", "probe:probe-1"),
    ]
    bench = next(r for r in runs if r.kind == "bench")
    assert len(bench.records) == 12 and bench.label == "run1"
    recorded = read_recorded([results])  # doctor --records results/
    assert sorted(r.kind for r in recorded.runs) == ["bench", "probe"]


def test_a_folder_given_and_reached_inside_another_counts_once(tmp_path: Path) -> None:
    results = readme_layout(tmp_path)
    runs = load_runs([results, results / "run1", results / "run1" / ".." / "run1"])
    assert len(runs) == 2
    assert sum(len(r.records) for r in runs) == 24 + 12  # the probe's 24, the bench's 12


def test_deeper_folders_are_named_not_dropped_unsaid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folders, "MAX_DEPTH", 1)
    results = readme_layout(tmp_path)
    BenchDir(records=bench_records(2, Parts()), summary={"run_id": "deep"}).write(
        results / "nightly" / "run2"
    )
    runs = load_runs([results])
    assert {r.key for r in runs} == {"bench:bench-1", "probe:probe-1"}
    notes = [n for r in runs for n in r.notes]
    assert (
        f"{results}: not read: 1 folder(s) with results (nightly/run2), more than 1 levels "
        "down (pass those folders themselves)" in notes
    )
    assert len(load_runs([results / "nightly"])) == 1  # passed itself, it is read


def test_only_skipped_results_is_an_error_that_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folders, "MAX_DEPTH", 0)
    BenchDir(records=bench_records(2, Parts()), summary={"run_id": "x"}).write(tmp_path / "r")
    with pytest.raises(NoResults, match=r"holds no probe or bench results; .* \(r\)"):
        load_runs([tmp_path])


def test_folders_past_the_count_bound_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folders, "MAX_FOLDERS", 2)
    for name in ("a", "b", "c"):
        BenchDir(records=bench_records(2, Parts()), summary={"run_id": name}).write(tmp_path / name)
    found = folders.result_folders(tmp_path)
    assert [p.name for p in found.found] == [tmp_path.name, "a"]
    assert found.skipped == (
        f"{tmp_path}: not read: 2 folder(s) with results (b, c), past the first 2 folders "
        "(pass those folders themselves)",
    )


def test_hidden_folders_and_folders_without_results_say_nothing(tmp_path: Path) -> None:
    results = readme_layout(tmp_path)
    (results / ".venv" / "lib").mkdir(parents=True)
    (results / ".venv" / "lib" / "x.jsonl").write_text("{}\n")
    (results / "plots").mkdir()
    assert all("not read" not in n for r in load_runs([results]) for n in r.notes)

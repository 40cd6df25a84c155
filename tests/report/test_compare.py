"""Measured A/Bs: each pair's medians, a probe at its largest context, runs named when several."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import BenchDir, Parts, bench_records, probe_records, write_probe_dir
from ttftscope.report.compare import compare, comparisons
from ttftscope.results.runs import load_runs


def test_a_probe_compares_text_with_ids_at_its_largest_context(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, probe_records(sizes=(0, 16000)))
    found = comparisons(load_runs([tmp_path]))
    # fixtures at 16,000 tokens: text 83+k front end + 20+k prefill + 8+k outside + 0.1
    assert [(c.subject, c.text) for c in found] == [
        ("token ids instead of text at 16,000 tokens", "median TTFT 114 → 33.1 ms (-71%)")
    ]


def test_bench_targets_are_compared_with_the_first(tmp_path: Path) -> None:
    records = bench_records(10, Parts(frontend=50.0), targets=("direct", "gw"))
    records += [r.model_copy(update={"target": "gw2"}) for r in records if r.target == "gw"]
    BenchDir(records=records).write(tmp_path)
    assert [c.subject for c in comparisons(load_runs([tmp_path]))] == [
        "gw vs direct",
        "gw2 vs direct",
    ]


def test_runs_side_by_side_are_named_and_a_single_series_compares_nothing(tmp_path: Path) -> None:
    write_probe_dir(tmp_path / "p", probe_records(variants=("text", "ids")))
    BenchDir(records=bench_records(5, Parts()), summary={"label": "nightly"}).write(tmp_path / "b")
    found = comparisons(load_runs([tmp_path / "p", tmp_path / "b"]))
    assert [c.subject for c in found] == [
        "probe-20260101-000000 · token ids instead of text at 8,000 tokens"
    ]


def test_compare_needs_both_sides() -> None:
    assert compare([], [1.0]) is None and compare([None], [2.0]) is None
    assert compare([200.0, 100.0], [50.0]) == "median TTFT 150 → 50.0 ms (-67%)"

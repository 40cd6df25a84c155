"""The truth table: for each injected bottleneck the doctor names it first, with a saving
within 25% of the injected cost and nothing else above "info"; a healthy server gets "no
problem found", three runs in a row.

Each injected cost is 300-400 ms, over a healthy server whose whole TTFT is a few ms: noise
from a loaded machine is small beside it. The injected cost is the scenario server's own
accounting, never the doctor's figure.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doctor.truthtable import HEALTHY, SCENARIOS, TOLERANCE, Row, Scenario, run_scenario


def _explain(row: Row) -> str:
    return (
        f"{row.scenario}: expected {row.expected}, named {row.named} (raised {row.raised}), "
        f"saving {row.saving_ms} ms vs injected {row.injected_ms} ms"
    )


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.expected], ids=lambda s: s.name)
def test_the_injected_bottleneck_is_named_first_with_its_cost(
    scenario: Scenario, tmp_path: Path
) -> None:
    row = run_scenario(scenario, tmp_path)
    assert row.named == row.expected, _explain(row)
    assert row.raised == (row.expected,), _explain(row)
    assert scenario.says in row.title, row.title
    if row.injected_ms is not None:
        assert row.injected_ms >= 200.0  # large beside the noise of a loaded machine
        assert row.saving_ms is not None, _explain(row)
        assert abs(row.saving_ms - row.injected_ms) <= TOLERANCE * row.injected_ms, _explain(row)
    assert row.ok


def test_a_healthy_server_gets_no_problem_found_three_runs_in_a_row(tmp_path: Path) -> None:
    (healthy,) = [s for s in SCENARIOS if s.expected is None]
    for k in range(3):
        row = run_scenario(healthy, tmp_path / str(k))
        assert row.named == HEALTHY and row.raised == (), _explain(row)


def test_the_table_is_wrong_when_the_saving_is_off_by_more_than_a_quarter() -> None:
    row = Row("x", "queueing", "queueing", 220.0, 300.0, ("queueing",))
    assert not row.ok
    assert Row("x", "queueing", "queueing", 230.0, 300.0, ("queueing",)).ok
    assert not Row("x", "queueing", "queueing", 300.0, 300.0, ("queueing", "network-path")).ok
    assert not Row("x", "queueing", "network-path", 300.0, 300.0, ("network-path",)).ok
    client = Row("x", "tokenization-bound", "tokenization-bound", 300.0, 300.0, ("x",))
    assert not dataclasses.replace(client, title="TTFT is 90% client-side", says="server-side").ok


def test_the_benchmark_prints_the_table_when_run_as_a_script() -> None:
    """``python benchmarks/doctor_truth_table.py``, from the repository root, as the README
    says: the tests' tooling it imports is found without the caller setting a path."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "benchmarks/doctor_truth_table.py", "--scenario", "healthy"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.split() == [
        "healthy",
        "no",
        "problem",
        "found",
        "no",
        "problem",
        "found",
        "-",
        "-",
        "yes",
    ]

"""The doctor's truth table: one injected bottleneck per scenario, what the doctor named.

Each scenario starts the stand-in vLLM of ``tests/doctor/scenarioserver.py`` with one known
cost (network delay, a front end that grows with the prompt, four sessions at once on an
engine of two slots, prefill with the cache off, 429s, an application's slow client
tokenizer, the time first in the system prompt, or none), puts its load on it (the real
probe, a bench of concurrent sessions, or an application recorded by ``instrument``) and
diagnoses the records as ``ttftscope doctor --no-live --records DIR`` does. Prints one JSON
line per scenario, then a readable table. ``tests/doctor/test_truth_table.py`` asserts the
same rows.

    .venv/bin/python benchmarks/doctor_truth_table.py [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

# the repository root: the scenario server and the table are the tests' tooling, not installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.doctor.truthtable import SCENARIOS, Row, run_scenario


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def table(rows: list[Row]) -> str:
    """The rows, one a line, at 80 columns."""
    head = f"{'scenario':<19} {'expected':<19} {'named':<19} {'saving':>6} {'injected':>8}  ok"
    lines = [head, "-" * 80]
    for r in rows:
        lines.append(
            f"{r.scenario:<19} {r.expected:<19} {r.named:<19} {_ms(r.saving_ms):>6} "
            f"{_ms(r.injected_ms):>8}  {'yes' if r.ok else 'NO'}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="The doctor's truth table.")
    names = [s.name for s in SCENARIOS]
    parser.add_argument(
        "--scenario", action="append", choices=names, help="only these (default: every one)"
    )
    chosen = parser.parse_args().scenario or names
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(x for x in SCENARIOS if x.name in chosen):
            row = run_scenario(s, Path(tmp) / str(i))
            print(json.dumps(asdict(row) | {"ok": row.ok}), flush=True)
            rows.append(row)
    print()
    print(table(rows))


if __name__ == "__main__":
    main()

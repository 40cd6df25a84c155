""" "Where TTFT goes" in the terminal: a bar per series from the doctor's own medians."""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.report.where import where_lines
from ttftscope.results.runs import load_runs


def test_each_part_is_its_share_of_the_bar_in_letters(tmp_path: Path) -> None:
    parts = Parts(outside=10.0, frontend=20.0, queue=0.0, prefill=30.0)
    write_probe_dir(tmp_path, [record(i, parts, size=8000) for i in range(3)])
    lines = where_lines(load_runs([tmp_path]), width=95)  # a 60-letter bar: 1 letter a ms
    assert lines[0] == "where TTFT goes (median ms per request, each part a letter):"
    assert lines[1] == f"{'chat at 8,000 tokens':<24} {'60 ms':>9} " + "n" * 10 + "f" * 20 + (
        "p" * 30
    )
    assert lines[2] == "  n outside the server · f server front end · q queue · p prefill"


def test_bars_share_one_scale_and_never_pass_the_width(tmp_path: Path) -> None:
    recs = [record(i, Parts(outside=1.0, frontend=1.0, prefill=1.0), size=2000) for i in range(3)]
    recs += [record(9 + i, Parts(frontend=97.0, prefill=200.0), size=8000) for i in range(3)]
    recs += [
        record(20 + i, Parts(frontend=33.3, prefill=33.3, outside=33.4), variant="text", size=8000)
        for i in range(3)
    ]
    write_probe_dir(tmp_path, recs)
    lines = where_lines(load_runs([tmp_path]))
    assert all(len(line) <= 80 for line in lines)
    bars = {line[:24].strip(): line[35:] for line in lines[1:-1]}
    assert len(bars["chat at 8,000 tokens"]) == 45  # the longest: the whole width
    assert len(bars["text at 8,000 tokens"]) == round(100 / 307 * 45)

"""Queue and hit-rate timelines: from the sampler when it ran, else from the records."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    probe_records,
    queue_samples,
    write_probe_dir,
)
from ttftscope.report.timeline import hit_rate_timelines, peak_waiting, queue_timelines
from ttftscope.results.files import Sample, read_jsonl
from ttftscope.results.runs import Run, RunPart, load_runs


def test_samples_give_one_queue_line_per_target_from_the_run_start(tmp_path: Path) -> None:
    BenchDir(
        records=bench_records(4, Parts(), targets=("direct", "gateway")),
        samples=queue_samples(9, waiting_peak=6, targets=("direct", "gateway")),
    ).write(tmp_path)
    (run,) = load_runs([tmp_path])
    lines = queue_timelines(run)
    assert [(line.name, line.source) for line in lines] == [
        ("direct", "samples"),
        ("gateway", "samples"),
    ]
    assert lines[0].t[0] == 0.0 and lines[0].t[-1] == pytest.approx(2.0)
    assert max(lines[0].values) == 6.0
    assert peak_waiting(run) == 6.0


def test_hit_rate_from_counter_deltas_survives_a_restart() -> None:
    counts = ((0, 0, 0), (1, 50, 100), (2, 140, 200), (3, 10, 20), (4, 10, 20))
    samples = tuple(Sample(t=t, prefix_hits=h, prefix_queries=q) for t, h, q in counts)
    part = RunPart(kind="bench", key="k", label="b", source=Path("d"), samples=samples)
    (line,) = hit_rate_timelines(Run(kind="bench", key="k", label="b", parts=(part,)))
    # idle interval (no queries) has no point; the counter reset counts from zero
    assert line.t == (1.0, 2.0, 3.0) and line.values == (0.5, 0.9, 0.5)


def test_without_samples_the_records_are_the_timeline(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, probe_records(variants=("chat",)))
    (run,) = load_runs([tmp_path])
    (queue,) = queue_timelines(run)
    (hits,) = hit_rate_timelines(run)
    assert queue.source == hits.source == "records"
    assert len(hits.t) == 8 and hits.t[0] == 0.0 and list(hits.t) == sorted(hits.t)
    assert set(hits.values) == {0.0, 0.95}  # cold requests miss, warm ones hit


def test_sample_lines_of_the_wrong_shape_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text('{"t": 0, "waiting": 1}\n{"waiting": 2}\n{"t": "x"}\n[1]\n{"t": 1, "wa')
    samples, skipped = read_jsonl(path, Sample)
    assert [s.waiting for s in samples] == [1.0]
    assert skipped == (2, 3, 4, 5)

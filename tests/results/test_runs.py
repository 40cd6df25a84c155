"""Result directories as runs: probe files, bench directories, shards merged, gaps named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.fixtures import (
    BenchDir,
    Parts,
    bench_records,
    failed,
    probe_records,
    queue_samples,
    write_probe_dir,
)
from ttftscope.results.parts import records_breakdown, split_series
from ttftscope.results.runs import NoResults, load_runs


def test_a_probe_directory_is_one_run_per_probe_file_with_its_model(tmp_path: Path) -> None:
    write_probe_dir(tmp_path, probe_records(run_id="first"), stamp="20260101-000000")
    write_probe_dir(tmp_path, probe_records(run_id="second"), stamp="20260101-010000")
    runs = load_runs([tmp_path])
    assert [r.kind for r in runs] == ["probe", "probe"]
    assert [r.key for r in runs] == ["probe:first", "probe:second"]
    assert runs[0].model == "tiny" and len(runs[0].records) == 24
    assert runs[0].label == "probe-20260101-000000"
    assert runs[0].notes == ()


def test_bench_directory_reads_records_samples_and_summary(tmp_path: Path) -> None:
    BenchDir(
        records=bench_records(10, Parts(), targets=("direct", "gateway")),
        samples=queue_samples(8, targets=("direct", "gateway")),
        summary={"run_id": "bench-1", "label": "nightly", "completed": 20, "failed": 0},
    ).write(tmp_path / "b")
    (run,) = load_runs([tmp_path / "b"])
    assert (run.kind, run.key, run.label) == ("bench", "bench:bench-1", "nightly")
    assert len(run.records) == 20 and len(run.samples) == 16
    assert [s.name for s in split_series(run)] == ["direct", "gateway"]
    assert run.bench_summaries[0].completed == 20
    assert run.notes == ()


def test_bench_directory_without_summary_or_samples_still_reads_and_says_so(
    tmp_path: Path,
) -> None:
    BenchDir(records=bench_records(5, Parts()), records_name="my-records").write(
        tmp_path / "only-records"
    )
    # request logs (bodies as sent, for the doctor) sit beside records and are not records
    (tmp_path / "only-records" / "requests.jsonl").write_text('{"prompt": "hi"}\n')
    (run,) = load_runs([tmp_path / "only-records"])
    assert not any("requests.jsonl" in n for n in run.notes)
    assert run.kind == "bench" and run.key == "bench:bench-1" and len(run.records) == 5
    assert any("no readable bench-summary.json" in n for n in run.notes)
    assert any("no samples.jsonl" in n for n in run.notes)


def test_summary_only_bench_directory_and_bad_fields_are_tolerated(tmp_path: Path) -> None:
    BenchDir(
        summary={"run_id": "s", "completed": 7, "duration": "long", "new_metric": {"x": 1}}
    ).write(tmp_path / "s")
    (run,) = load_runs([tmp_path / "s"])
    (summary,) = run.bench_summaries
    assert summary.completed == 7 and summary.duration is None
    assert any("ignored duration" in n for n in run.notes)
    assert any("no request records" in n for n in run.notes)


def test_torn_and_foreign_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = write_probe_dir(tmp_path, probe_records())
    with path.open("ab") as fh:
        fh.write(b'{"not": "a record"}\n{"run_id": "run-a", "ind')
    (run,) = load_runs([tmp_path])
    assert len(run.records) == 24
    assert any("skipped 2 line(s)" in n and "lines 25, 26" in n for n in run.notes)


def test_shards_of_one_run_merge_into_one_run_equal_to_the_unsharded_one(tmp_path: Path) -> None:
    whole = bench_records(12, Parts(queue=40.0))
    for index in (1, 2):
        mine = [
            r.model_copy(update={"shard": f"{index}/2"})
            for r in whole
            if r.session is not None and r.session % 2 == index - 1
        ]
        BenchDir(
            records=mine,
            summary={"run_id": "bench-1", "seed": 7, "shard": f"{index}/2", "completed": 6},
        ).write(tmp_path / f"shard{index}")
    BenchDir(records=whole, summary={"run_id": "bench-1", "completed": 12}).write(tmp_path / "all")
    merged = load_runs([tmp_path / "shard1", tmp_path / "shard2"])
    (unsharded,) = load_runs([tmp_path / "all"])
    assert len(merged) == 1
    (run,) = merged
    assert len(run.parts) == 2 and run.label == "shard1 (+1 shard)"
    assert not [n for n in run.notes if "missing" in n]
    assert sorted(r.index for r in run.records) == sorted(r.index for r in unsharded.records)
    assert records_breakdown(run.records) == records_breakdown(unsharded.records)


def test_shards_sharing_one_directory_are_read_by_their_file_endings(tmp_path: Path) -> None:
    whole = bench_records(8, Parts())
    for index in (1, 2):
        mine = [r for r in whole if r.session is not None and r.session % 2 == index - 1]
        BenchDir(
            records=[r.model_copy(update={"shard": f"{index}/2"}) for r in mine],
            samples=queue_samples(4),
            summary={"run_id": "bench-1", "shard": f"{index}/2", "completed": len(mine)},
            tail=f".shard-{index}-of-2",
        ).write(tmp_path / "shared")
    (run,) = load_runs([tmp_path / "shared"])
    assert [p.shard for p in run.parts] == [(1, 2), (2, 2)]
    assert len(run.records) == 8 and len(run.samples) == 8 and run.label == "shared"
    assert not [n for n in run.notes if "missing" in n]


def test_summary_only_shards_without_a_run_id_merge_by_seed(tmp_path: Path) -> None:
    for index in (1, 2):
        BenchDir(summary={"seed": 7, "shard": f"{index}/2", "completed": 5}).write(
            tmp_path / f"s{index}"
        )
    BenchDir(summary={"seed": 8, "shard": "1/2", "completed": 5}).write(tmp_path / "other")
    runs = load_runs([tmp_path / "s1", tmp_path / "s2", tmp_path / "other"])
    assert [len(r.parts) for r in runs] == [2, 1]
    assert sum(s.completed or 0 for s in runs[0].bench_summaries) == 10


def test_two_unsharded_runs_of_one_workload_stay_apart(tmp_path: Path) -> None:
    # bench's run id hashes the workload: a rerun after a server change has the same one
    for name in ("before", "after"):
        BenchDir(records=bench_records(4, Parts()), summary={"run_id": "same"}).write(
            tmp_path / name
        )
    runs = load_runs([tmp_path / "before", tmp_path / "after"])
    assert [(r.label, len(r.records)) for r in runs] == [("before", 4), ("after", 4)]


def test_different_runs_stay_apart_and_a_directory_given_twice_counts_once(
    tmp_path: Path,
) -> None:
    BenchDir(records=bench_records(4, Parts()), summary={"run_id": "one"}).write(tmp_path / "a")
    BenchDir(records=bench_records(4, Parts(), run_id="two"), summary={"run_id": "two"}).write(
        tmp_path / "b"
    )
    runs = load_runs([tmp_path / "a", tmp_path / "b", tmp_path / "a"])
    assert [r.key for r in runs] == ["bench:one", "bench:two"]
    assert [len(r.records) for r in runs] == [4, 4]


def test_a_shard_given_twice_starts_another_run_and_gaps_are_named(tmp_path: Path) -> None:
    for name in ("x", "y"):
        BenchDir(
            records=bench_records(2, Parts(), shard="1/3"), summary={"run_id": "r", "shard": "1/3"}
        ).write(tmp_path / name)
    runs = load_runs([tmp_path / "x", tmp_path / "y"])
    assert [r.label for r in runs] == ["x", "y"]
    for run in runs:
        assert "shards 2, 3 of 3 are missing: the figures cover part of the workload" in run.notes


def test_equal_labels_are_made_unique(tmp_path: Path) -> None:
    for name in ("a", "b"):
        BenchDir(records=bench_records(2, Parts()), summary={"label": "nightly"}).write(
            tmp_path / name
        )
    assert [r.label for r in load_runs([tmp_path / "a", tmp_path / "b"])] == [
        "nightly",
        "nightly (2)",
    ]


def test_a_records_file_can_be_given_instead_of_its_directory(tmp_path: Path) -> None:
    path = write_probe_dir(tmp_path, [*probe_records(), failed(99)])
    (run,) = load_runs([path])
    assert run.kind == "probe" and len(run.records) == 25


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_nothing_to_read_is_an_error_that_says_what_to_pass(tmp_path: Path, make: str) -> None:
    path = tmp_path / "x"
    if make == "empty":
        path.mkdir()
    elif make == "file":
        path.write_text("hello")
    with pytest.raises(NoResults) as info:
        load_runs([path])
    assert info.value.exit_code == 2
    assert "ttftscope probe --result-dir" in str(info.value)

"""The bench's live line: it keeps up with fast runs and ends on the true counts."""

from __future__ import annotations

import io

from rich.console import Console

from ttftscope.cli.bench_progress import BenchProgress
from ttftscope.records import RequestRecord


def _record(i: int, ok: bool = True) -> RequestRecord:
    return RequestRecord(
        run_id="r", index=i, variant="chat", phase="warm", ok=ok, client_ttft_ms=10.0 + i % 7
    )


def test_the_bar_ends_on_every_record_however_fast_they_came() -> None:
    out = io.StringIO()
    with BenchProgress(Console(file=out, force_terminal=True, width=80)) as progress:
        progress.start(2000)
        for i in range(2000):
            progress.record(_record(i, ok=i % 100 != 0))
        bar = progress._bar
        assert bar is not None
        task = bar.tasks[0]
        assert task.completed == 2000
        assert "ok 1980 fail 20" in task.description and "p50 13ms" in task.description


def test_a_pipe_gets_plain_lines_and_the_last_one_has_the_totals() -> None:
    out = io.StringIO()
    with BenchProgress(Console(file=out, force_terminal=False, width=80)) as progress:
        progress.start(3)
        for i in range(3):
            progress.record(_record(i))
    assert out.getvalue().splitlines()[-1].startswith("bench: 3/3 done")


def test_the_bar_says_warm_up_and_counts_the_warm_ups_then_the_measured_requests() -> None:
    out = io.StringIO()
    with BenchProgress(Console(file=out, force_terminal=True, width=80)) as progress:
        bar = progress._bar
        assert bar is not None
        progress.warmup(0, 2)
        progress.warmup(1, 2)
        task = bar.tasks[0]
        assert "warm-up" in task.description and (task.completed, task.total) == (1, 2)
        progress.warmup(2, 2)
        progress.start(64)
        progress.record(_record(0))
        task = bar.tasks[0]
        assert "warm-up" not in task.description and (task.completed, task.total) == (1, 64)


def test_a_pipe_is_told_once_that_warm_ups_run() -> None:
    out = io.StringIO()
    with BenchProgress(Console(file=out, force_terminal=False, width=80)) as progress:
        for done in range(3):
            progress.warmup(done, 2)
    assert out.getvalue().splitlines() == ["bench: warm-up: 2 unmeasured request(s)"]

"""Queue depth and prefix hit rate over a run's time, from samples or from the records.

Bench's sampler reads each server's ``/metrics`` every ~250 ms (``samples.jsonl``; a line
per server, named by the targets behind it), which shows the queue between requests too.
Without it (a probe, a bench run without sampler) each record's ``waiting_before`` and
``prefix_hit_rate`` at its start time are the timeline. Time is in seconds from the run's
first sample or request. Hit-rate counters are as scraped, so the rate of an interval is
Δhits / Δqueries; a counter that goes down is a server restart.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ttftscope.results.files import Sample
from ttftscope.results.parts import series_name
from ttftscope.results.runs import Run
from ttftscope.results.servers import server_figures

Source = Literal["samples", "records"]


@dataclass(frozen=True)
class Timeline:
    """One line over time: ``name`` (a target, or "server") and its points."""

    name: str
    t: tuple[float, ...]
    values: tuple[float, ...]
    source: Source


def _by_target(run: Run, samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    """Samples by the server they read, named by the targets behind it as the report's bars
    name it ("direct + gateway" for one vLLM that a gateway target reaches too)."""
    behind = {f.source: f.name for f in server_figures(run) if f.source}
    out: dict[str, list[Sample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        if s.ok:
            name = behind.get(s.source or "") or s.target or " + ".join(s.targets)
            out.setdefault(name or s.source or "server", []).append(s)
    return out


def _clock(samples: Sequence[Sample]) -> Callable[[Sample], float]:
    """Seconds from the run's first sample: wall clock when every sample has it, so that
    shards started at different moments line up; else each sample's own ``t``."""
    if samples and all(s.t_wall is not None for s in samples):
        t0 = min(s.t_wall or 0.0 for s in samples)
        return lambda s: (s.t_wall or 0.0) - t0
    t0 = min((s.t for s in samples), default=0.0)
    return lambda s: s.t - t0


def queue_timelines(run: Run) -> list[Timeline]:
    """Waiting requests over time, one line per sampled target (else per series).

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> part = RunPart(kind="bench", key="k", label="b", source=Path("d"),
    ...                samples=(Sample(t=10.0, waiting=0), Sample(t=10.25, waiting=3)))
    >>> queue_timelines(Run(kind="bench", key="k", label="b", parts=(part,)))[0].values
    (0.0, 3.0)
    """
    if any(s.waiting is not None for s in run.samples):
        clock = _clock(run.samples)
        return [
            Timeline(
                name,
                tuple(clock(s) for s in mine if s.waiting is not None),
                tuple(s.waiting for s in mine if s.waiting is not None),
                "samples",
            )
            for name, mine in _by_target(run, run.samples).items()
            if any(s.waiting is not None for s in mine)
        ]
    return _from_records(run, "waiting")


def hit_rate_timelines(run: Run) -> list[Timeline]:
    """Prefix hit rate over time: per sampling interval, else each request's own.

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> s = tuple(Sample(t=t, prefix_hits=h, prefix_queries=q)
    ...           for t, h, q in ((0, 0, 0), (1, 90, 100), (2, 90, 100), (3, 280, 300)))
    >>> part = RunPart(kind="bench", key="k", label="b", source=Path("d"), samples=s)
    >>> line = hit_rate_timelines(Run(kind="bench", key="k", label="b", parts=(part,)))[0]
    >>> line.t, line.values
    ((1.0, 3.0), (0.9, 0.95))
    """
    counted = [s for s in run.samples if s.prefix_hits is not None and s.prefix_queries is not None]
    if not counted:
        return _from_records(run, "hit_rate")
    clock = _clock(run.samples)
    out = []
    for name, mine in _by_target(run, counted).items():
        points = _interval_rates(mine, clock)
        if points:
            out.append(
                Timeline(name, tuple(t for t, _ in points), tuple(v for _, v in points), "samples")
            )
    return out


def _interval_rates(
    samples: Sequence[Sample], clock: Callable[[Sample], float]
) -> list[tuple[float, float]]:
    """(end of interval, Δhits/Δqueries) for each interval that saw queries."""
    counts = [(clock(s), s.prefix_hits or 0.0, s.prefix_queries or 0.0) for s in samples]
    out = []
    for (_, h0, q0), (t, h1, q1) in itertools.pairwise(counts):
        dh, dq = h1 - h0, q1 - q0
        if dq < 0:  # counters reset: the server restarted, the new counts are the interval's
            dh, dq = h1, q1
        if dq > 0:
            out.append((t, min(max(dh / dq, 0.0), 1.0)))
    return out


def _from_records(run: Run, what: Literal["waiting", "hit_rate"]) -> list[Timeline]:
    timed = [r for r in run.records if r.t_wall is not None and r.ok]
    if not timed:
        return []
    t0 = min(r.t_wall for r in timed if r.t_wall is not None)
    lines: dict[str, list[tuple[float, float]]] = {}
    for r in sorted(timed, key=lambda r: r.t_wall or 0.0):
        value = r.waiting_before if what == "waiting" else r.prefix_hit_rate
        if value is not None and r.t_wall is not None:
            lines.setdefault(series_name(r), []).append((r.t_wall - t0, value))
    return [
        Timeline(name, tuple(t for t, _ in pts), tuple(v for _, v in pts), "records")
        for name, pts in lines.items()
    ]


def peak_waiting(run: Run) -> float | None:
    """The most requests seen waiting at once: samples, records or the bench summary.

    >>> from pathlib import Path; from ttftscope.results.runs import RunPart
    >>> part = RunPart(kind="bench", key="k", label="b", source=Path("d"),
    ...                samples=(Sample(t=0, waiting=2), Sample(t=1, waiting=7)))
    >>> peak_waiting(Run(kind="bench", key="k", label="b", parts=(part,)))
    7.0
    """
    values = [v for line in queue_timelines(run) for v in line.values]
    values += [s.peak_waiting for s in run.bench_summaries if s.peak_waiting is not None]
    return max(values) if values else None

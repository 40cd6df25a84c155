"""The server's queue over a few seconds: ``/metrics`` scraped every ~0.5 s, for the doctor.

One scrape says what the queue held at one instant; a queue that stays means requests wait
for the server, which is the first sign of queueing. The window's first and last scrapes
also give the queue time of the requests that finished in between
(``vllm:request_queue_time_seconds``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from ttftscope.errors import TtftscopeError
from ttftscope.metrics.names import Reader, detect_engine
from ttftscope.metrics.prom import MetricsSnapshot, SampleView, metrics_delta
from ttftscope.metrics.scrape import ascrape_metrics
from ttftscope.stats import median

__all__ = [
    "DEFAULT_SECONDS",
    "INTERVAL_S",
    "Gauges",
    "LiveSamples",
    "Sampling",
    "gauges",
    "peak",
    "sample_queue",
]

DEFAULT_SECONDS = 5.0
INTERVAL_S = 0.5


@dataclass(frozen=True)
class Gauges:
    """The queue's gauges in one scrape (None where the server does not export one)."""

    waiting: float | None = None
    running: float | None = None
    kv_usage: float | None = None  # 0..1


def gauges(view: SampleView) -> Gauges:
    """The waiting, running and KV-usage gauges of one scrape.

    >>> from ttftscope.metrics.prom import parse_metrics
    >>> gauges(parse_metrics("vllm:num_requests_waiting 6\\nvllm:num_requests_running 2"))
    Gauges(waiting=6.0, running=2.0, kv_usage=None)
    """
    reader = Reader(view, detect_engine(view), {})
    return Gauges(
        waiting=reader.gauge("waiting"),
        running=reader.gauge("running"),
        kv_usage=reader.gauge("kv_cache_usage"),
    )


@dataclass(frozen=True)
class LiveSamples:
    """What the queue's gauges read over the window, scrape by scrape.

    >>> s = LiveSamples("u", 1.0, (Gauges(6, 2), Gauges(0, 2), Gauges(5, 2)))
    >>> s.waiting, round(s.waited_share, 2)
    ([6, 0, 5], 0.67)
    """

    source: str
    seconds: float  # the window as measured, first scrape to last
    samples: tuple[Gauges, ...]
    mean_queue_ms: float | None = None  # of requests that finished inside the window
    finished: int = 0  # how many did
    notes: list[str] = field(default_factory=list)

    @property
    def waiting(self) -> list[float]:
        """The waiting gauge of each scrape that had one."""
        return [g.waiting for g in self.samples if g.waiting is not None]

    @property
    def waited_share(self) -> float:
        """The share of scrapes in which some request waited."""
        got = self.waiting
        return sum(1 for w in got if w > 0) / len(got) if got else 0.0

    def figures(self) -> str:
        """Waiting min/median/max and the share of scrapes above 0, in words.

        >>> LiveSamples("u", 2.0, (Gauges(6, 2), Gauges(6, 2))).figures()
        'waiting 6 / 6 / 6 (min / median / max) over 2 scrapes in 2.0 s; above 0 in 100%'
        """
        w = self.waiting
        mid = median(w) or 0.0
        return (
            f"waiting {min(w):.0f} / {mid:.0f} / {max(w):.0f} (min / median / max) over "
            f"{len(w)} scrapes in {self.seconds:.1f} s; above 0 in {self.waited_share:.0%}"
        )


Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Sampling:
    """How long to sample and how: the clock and the sleeper are injectable for tests."""

    seconds: float = DEFAULT_SECONDS
    interval_s: float = INTERVAL_S
    on_sample: Callable[[int, int], None] | None = None  # (done, total)
    sleep: Sleep = asyncio.sleep
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def window(
        cls, seconds: float, on_sample: Callable[[int, int], None] | None = None
    ) -> Sampling:
        """``seconds`` scraped every 0.5 s, or in quarters when that is shorter: a short
        window still takes enough scrapes (five) for the rule to judge.

        >>> Sampling.window(5.0).count, Sampling.window(0.2).count
        (11, 5)
        """
        interval = min(INTERVAL_S, seconds / 4) if seconds > 0 else INTERVAL_S
        return cls(seconds=seconds, interval_s=interval, on_sample=on_sample)

    @property
    def count(self) -> int:
        """Scrapes in the window, the first one included.

        >>> Sampling(seconds=5.0).count, Sampling(seconds=0.0).count
        (11, 1)
        """
        return max(round(self.seconds / self.interval_s), 0) + 1


def _queue_ms(first: MetricsSnapshot, last: MetricsSnapshot) -> tuple[float | None, int]:
    """Mean queue time of the requests that finished between two scrapes, and their count."""
    window = metrics_delta(first, last)
    total, count, _ = Reader(window, detect_engine(last), {}).hist("queue")
    if total is None or not count:
        return None, 0
    return total / count * 1000.0, int(count)


async def sample_queue(
    url: str, client: httpx.AsyncClient, how: Sampling, headers: dict[str, str] | None = None
) -> LiveSamples:
    """Scrape ``url`` every ``how.interval_s`` until ``how.seconds`` passed (both ends in).

    A scrape that fails is a note; the others still count.

    >>> async def watch() -> LiveSamples:
    ...     async with httpx.AsyncClient() as client:
    ...         return await sample_queue(metrics_url, client, Sampling.window(0.2))
    >>> got = asyncio.run(watch()); got.waiting, got.waited_share
    ([0.0, 0.0, 0.0, 0.0, 0.0], 0.0)
    """
    snaps: list[MetricsSnapshot] = []
    notes: list[str] = []
    start, total = how.clock(), how.count
    for k in range(total):
        await how.sleep(max(start + k * how.interval_s - how.clock(), 0.0))
        try:
            snaps.append(await ascrape_metrics(url, client=client, headers=headers))
        except TtftscopeError as exc:
            notes.append(f"a /metrics scrape failed while sampling: {exc.message}")
        if how.on_sample is not None:
            how.on_sample(k + 1, total)
    mean_q, finished = _queue_ms(snaps[0], snaps[-1]) if len(snaps) > 1 else (None, 0)
    return LiveSamples(
        source=url,
        seconds=how.clock() - start,
        samples=tuple(gauges(s) for s in snaps),
        mean_queue_ms=mean_q,
        finished=finished,
        notes=list(dict.fromkeys(notes)),
    )


def peak(values: Sequence[float | None]) -> float | None:
    """The largest known value, or None.

    >>> peak([None, 2.0, 1.0]), peak([None])
    (2.0, None)
    """
    known = [v for v in values if v is not None]
    return max(known) if known else None

"""The live line ``ttftscope bench`` shows while it runs: a rich bar on a terminal, plain
lines every 10 s into a pipe, with TTFT p50/p99, counts and the waiting queue.
"""

from __future__ import annotations

import time

from rich.console import Console

from ttftscope.bench.observe.sampler import ScrapeSample
from ttftscope.bench.output.live import LiveStats
from ttftscope.cli.progress import LiveBarOwner, fit_description, live_bar
from ttftscope.records import RequestRecord

__all__ = ["BenchProgress"]

_BAR = 12  # the bar's width in columns
_PLAIN_EVERY_S = 10.0
_BAR_EVERY_S = 0.1  # rich redraws the bar 10 times a second


class BenchProgress(LiveBarOwner):
    """A live bar with TTFT p50/p99, counts and the waiting queue; plain lines into a pipe.

    >>> import io
    >>> with BenchProgress(Console(file=io.StringIO())) as p:
    ...     p.start(2)
    >>> p.live.total
    2
    """

    def __init__(self, console: Console) -> None:
        self.console, self.live = console, LiveStats()
        self._waiting: dict[str, float] = {}
        self._last_line = time.monotonic()
        self._last_show = 0.0
        self._done = 0

    def __enter__(self) -> BenchProgress:
        if self.console.is_terminal:
            self._bar, self._task = live_bar(self.console, "bench: starting", None, _BAR)
        return self

    def stage(self, text: str) -> None:
        """What the run does now (before the measured requests: building, warming up)."""
        if self._bar is not None and self._task is not None:
            fitted = fit_description(f"bench: {text}", self.console.width, _BAR, 9)
            self._bar.update(self._task, description=fitted)
        else:
            self.console.print(f"bench: {text}", highlight=False)

    def warmup(self, done: int, total: int) -> None:
        """Warm-ups (unmeasured) under way: the bar counts them under "warm-up"."""
        if self._bar is not None and self._task is not None:
            text = fit_description("bench: warm-up (unmeasured)", self.console.width, _BAR, 9)
            self._bar.update(self._task, description=text, total=total, completed=done)
        elif done == 0:
            self.console.print(f"bench: warm-up: {total} unmeasured request(s)", highlight=False)

    def note(self, text: str) -> None:
        """A line that stays (above the bar on a terminal): what the run changed."""
        self.console.print(f"bench: {text}", highlight=False)

    def start(self, total: int) -> None:
        """The measured requests begin; ``total`` of them are planned."""
        self.live.total = total
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=total, completed=0)

    def record(self, rec: RequestRecord) -> None:
        """One request finished (warmups update nothing)."""
        if rec.phase == "warmup":
            return
        self.live.add(rec)
        self._done += 1
        self._show()

    def sample(self, sample: ScrapeSample) -> None:
        """A scrape: the waiting queue shown is the sum over the servers sampled."""
        if sample.waiting is not None:
            self._waiting[sample.source] = sample.waiting
            self.live.waiting = sum(self._waiting.values())

    def _show(self) -> None:
        s = self.live
        now = time.monotonic()
        if self._done != s.total and now - self._last_show < _BAR_EVERY_S:
            return  # percentiles of every record so far: not per record at 1,000 req/s
        self._last_show = now
        p50, p99 = s.ttft_percentile(50), s.ttft_percentile(99)
        wait = "" if s.waiting is None else f" wait {s.waiting:g}"
        text = f"p50 {_ms(p50)} p99 {_ms(p99)} ok {s.completed} fail {s.failed}{wait}"
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=text, completed=self._done)
        elif time.monotonic() - self._last_line >= _PLAIN_EVERY_S or self._done == s.total:
            self.console.print(f"bench: {self._done}/{s.total} done · {s.line()}", highlight=False)
            self._last_line = time.monotonic()


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}ms"

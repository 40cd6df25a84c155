"""Probe progress: a live bar on a terminal, a plain line now and then into a pipe."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column

from ttftscope.records import RequestRecord

_BAR = 20  # the bar's width in columns
_PLAIN_EVERY_S = 10.0  # into a pipe: one status line at most this often, plus each stage


_CLOCK = len("0:00:00")


def live_bar(
    console: Console, description: str, total: int | None, width: int
) -> tuple[Progress, TaskID]:
    """A started, transient progress bar (description, bar, done/total, elapsed) and its task.

    >>> import io
    >>> bar, task = live_bar(Console(file=io.StringIO()), "x", 3, 10); bar.stop()
    """
    count = len(f"{total}/{total}") if total is not None else 9
    bar = Progress(
        TextColumn("{task.description}", table_column=Column(no_wrap=True)),
        BarColumn(bar_width=width, table_column=Column(no_wrap=True)),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=count)),
        TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=_CLOCK)),
        console=console,
        transient=True,
    )
    bar.start()
    return bar, bar.add_task(fit_description(description, console.width, width, count), total=total)


class LiveBarOwner:
    """What the progress displays share: a live bar on a terminal (none into a pipe), its
    task, and the bar stopped when the display's block ends."""

    _bar: Progress | None = None
    _task: TaskID | None = None

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()


def fit_description(text: str, columns: int, bar_width: int, count_width: int) -> str:
    """``text`` cut with an ellipsis so the bar, the count and the clock keep their room.

    A count or a clock squeezed to "56/1…" or "0:00:…" says nothing; the description can
    lose its tail.

    >>> fit_description("probe: context 32000 tokens: chat requests", 50, 10, 7)
    'probe: context 32000 …'
    """
    room = columns - bar_width - count_width - _CLOCK - 4  # three gaps and the last column
    if len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…"


class RequestProgress(LiveBarOwner):
    """Counts finished requests out of ``total`` and shows what the probe is doing.

    >>> import io
    >>> with RequestProgress(2, Console(file=io.StringIO())) as p:
    ...     p.stage("context 0 tokens: chat requests")
    >>> p.done
    0
    """

    def __init__(self, total: int, console: Console) -> None:
        self.total, self.done, self.console = total, 0, console
        self._last_line = time.monotonic()
        self._stage = "starting"
        self._count = len(f"{total}/{total}")

    def __enter__(self) -> RequestProgress:
        if self.console.is_terminal:
            self._bar, self._task = live_bar(self.console, "probe: starting", self.total, _BAR)
        return self

    def stage(self, text: str) -> None:
        """What the probe does now (shown in the bar, or as one line into a pipe)."""
        self._stage = text
        if self._bar is not None and self._task is not None:
            fitted = fit_description(f"probe: {text}", self.console.width, _BAR, self._count)
            self._bar.update(self._task, description=fitted)
        else:
            self.console.print(f"probe: {text} ({self.done}/{self.total} requests done)")
            self._last_line = time.monotonic()

    def record(self, rec: RequestRecord) -> None:
        """One request finished (successfully or not)."""
        self.done += 1
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)
        elif time.monotonic() - self._last_line >= _PLAIN_EVERY_S or self.done == self.total:
            self.console.print(f"probe: {self.done}/{self.total} requests done ({self._stage})")
            self._last_line = time.monotonic()


class SampleProgress(LiveBarOwner):
    """Scrapes of a sampling window: a live bar on a terminal, one line into a pipe.

    >>> import io; out = io.StringIO()
    >>> with SampleProgress(5.0, 11, Console(file=out)) as p:
    ...     p.sample(1, 11)
    >>> print(out.getvalue().strip())
    watching the server's queue (/metrics) for 5 s; --sample-seconds 0 skips it…
    """

    def __init__(self, seconds: float, total: int, console: Console) -> None:
        self.seconds, self.total, self.console = seconds, total, console

    def __enter__(self) -> SampleProgress:
        if self.console.is_terminal:
            text = f"sampling /metrics ({self.seconds:g} s)"
            self._bar, self._task = live_bar(self.console, text, self.total, _BAR)
        else:
            self.console.print(
                f"watching the server's queue (/metrics) for {self.seconds:g} s; "
                "--sample-seconds 0 skips it…",
                highlight=False,
            )
        return self

    def sample(self, done: int, total: int) -> None:
        """``done`` of ``total`` scrapes taken."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total)
            self.total = total

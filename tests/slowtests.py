"""A pytest plugin that says which test is still running when one takes long.

A single e2e test against vLLM on CPU can run for minutes; with ``-q`` pytest prints its dot
only at the end, so the terminal looked hung. While a test runs past ``first_s``, a line
names it every ``every_s`` seconds. The lines go to a duplicate of the terminal's file
descriptor taken before any test runs, because pytest's fd-level capture redirects fd 1
while a test runs.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Generator

import pytest

FIRST_S = 5.0
EVERY_S = 10.0


class SlowTicker:
    r"""Decides, at each ``tick``, whether a running test deserves a "still running" line.

    >>> lines: list[str] = []
    >>> t = SlowTicker(lines.append, first_s=10, every_s=15)
    >>> t.begin("tests/e2e/test_x.py::test_y", now=0.0)
    >>> for now in (9.0, 10.0, 20.0, 25.0):
    ...     t.tick(now=now)
    >>> t.end(); t.tick(now=60.0)  # a finished test is not named again
    >>> print("\n".join(lines))
      … tests/e2e/test_x.py::test_y still running (10 s)
      … tests/e2e/test_x.py::test_y still running (25 s)
    """

    def __init__(self, write: Callable[[str], None], *, first_s: float, every_s: float) -> None:
        self._write, self._first, self._every = write, first_s, every_s
        self._lock = threading.Lock()
        self._test: str | None = None
        self._t0 = 0.0
        self._due = 0.0

    def begin(self, nodeid: str, *, now: float) -> None:
        with self._lock:
            self._test, self._t0, self._due = nodeid, now, now + self._first

    def end(self) -> None:
        with self._lock:
            self._test = None

    def tick(self, *, now: float) -> None:
        with self._lock:
            if self._test is None or now < self._due:
                return
            self._due = now + self._every
            self._write(f"  … {self._test} still running ({now - self._t0:.0f} s)")


class _Plugin:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self.ticker = SlowTicker(self._say, first_s=FIRST_S, every_s=EVERY_S)
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="slow-test-ticker", daemon=True).start()

    def _say(self, line: str) -> None:
        os.write(self._fd, f"\n{line}\n".encode())

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.ticker.tick(now=time.monotonic())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        self.ticker.begin(item.nodeid, now=time.monotonic())
        try:
            yield
        finally:
            self.ticker.end()

    def pytest_unconfigure(self) -> None:
        self._stop.set()
        os.close(self._fd)


def register(config: pytest.Config) -> None:
    """Install the ticker when the run reports to a terminal or a pipe (not under xdist)."""
    if config.option.capture == "no" or not hasattr(sys.stdout, "fileno"):
        return  # output is not captured: the test's own lines show
    try:
        fd = os.dup(sys.stdout.fileno())
    except (OSError, ValueError):
        return
    config.pluginmanager.register(_Plugin(fd), "ttftscope-slow-tests")

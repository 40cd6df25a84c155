"""How the local server's long steps tell a person what they are doing.

Whole lines go through a :data:`Progress` callback (the default, :func:`say_stderr`, prints
them on stderr). A long step runs under a :class:`Ticker`, which says one line when the step
starts and one with its elapsed time when it ends; in between, on a terminal it redraws one
status line in place about once a second (the step, its elapsed seconds and the latest line
of the step's log, e.g. pip's ``Downloading torch-… (180 MB)``), and elsewhere it says a plain
line every 15 s. :func:`run_with_progress` runs a command that way with its output in a log.

The in-place line is drawn only on a terminal the default reporter writes to: a caller that
passes its own :data:`Progress` receives whole lines only (the periodic ones included).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import TextIO

Progress = Callable[[str], None]
Detail = Callable[[], str | None]

# the lines in which pip says where it is (no progress bar reaches a log file)
PIP_PREFIXES = (
    "Collecting ",
    "Downloading ",
    "Using cached ",
    "Processing ",
    "Obtaining ",
    "Building wheel",
    "Preparing metadata",
    "Installing collected packages",
    "Attempting uninstall",
    "Successfully installed",
)
_TAIL_BYTES = 65536
_ERASE = "\x1b[K"  # erase to the end of the line


@dataclass(frozen=True)
class Pace:
    """How often a :class:`Ticker` reports, and the clock it reads (tests inject both).

    >>> Pace().plain_s
    15.0
    """

    live_s: float = 1.0
    plain_s: float = 15.0
    clock: Callable[[], float] = monotonic


DEFAULT_PACE = Pace()


def say_stderr(line: str) -> None:
    """The default :data:`Progress`: one flushed ``[ttftscope]`` line on stderr.

    >>> say_stderr("hello")  # [ttftscope] hello, on stderr
    """
    print(f"[ttftscope] {line}", file=sys.stderr, flush=True)


def status_stream(say: Progress) -> TextIO | None:
    """Where in-place updates go: stderr when ``say`` is :func:`say_stderr`, else nowhere.

    >>> status_stream(print) is None
    True
    """
    return sys.stderr if say is say_stderr else None


def last_log_line(
    log: Path,
    start: int = 0,
    prefixes: Sequence[str] = (),
    max_chars: int = 120,
    ignore: re.Pattern[str] | None = None,
) -> str | None:
    """The latest non-empty line of ``log`` after byte ``start`` (one of ``prefixes`` if given;
    none that ``ignore`` matches).

    Only the last 64 KiB are read, so calling it once a second on a growing log is cheap.

    >>> last_log_line(Path("/nonexistent.log")) is None
    True
    """
    try:
        with log.open("rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(start, end - _TAIL_BYTES))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        found = line.strip()
        if ignore is not None and ignore.search(found):
            continue
        if found and (not prefixes or found.startswith(tuple(prefixes))):
            return found if len(found) <= max_chars else found[: max_chars - 1] + "…"
    return None


def _columns(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return columns or shutil.get_terminal_size().columns  # 0: a terminal of unknown width


def _cut(text: str, room: int) -> str:
    if len(text) <= room:
        return text
    return text[: room - 1] + "…" if room > 1 else ""


def status_line(label: str, seconds: float, last: str | None, width: int) -> str:
    """The in-place status line, at most ``width`` characters: the elapsed time comes first,
    so it is never the part cut; the log line goes before the label does.

    >>> status_line("installing vLLM's dependencies (step 2/3, torch pinned)", 271.4,
    ...             "Downloading torch-2.13.0 (180 MB)", 50)
    "  271 s · installing vLLM's dependencies (step 2/…"
    >>> status_line("building", 3, "wheel", 80)
    '  3 s · building · wheel'
    """
    head = f"  {seconds:.0f} s · "
    label = _cut(label, width - len(head))
    line = head + label
    room = width - len(line) - 3
    if last and room >= 8:  # a detail of a few characters says nothing
        line += " · " + _cut(last, room)
    return line


class Ticker:
    """One long step's progress: a start line, elapsed time while it runs, an end line.

    ``done`` makes the end line from the elapsed seconds (default ``"<label>: done in N s"``);
    a step that raised, or whose ``ok`` was set False, ends with ``"<label>: failed after N s"``.

    >>> lines: list[str] = []
    >>> with Ticker("building the model", lines.append):
    ...     pass
    >>> lines
    ['building the model …', 'building the model: done in 0 s']
    """

    def __init__(
        self,
        label: str,
        say: Progress,
        *,
        announce: str | None = None,
        detail: Detail | None = None,
        done: Callable[[float], str] | None = None,
        stream: TextIO | None = None,
        pace: Pace = DEFAULT_PACE,
    ) -> None:
        self.label, self.ok = label, True
        self._say, self._detail, self._pace = say, detail, pace
        self._announce = announce or f"{label} …"
        self._done = done or (lambda s: f"{label}: done in {s:.0f} s")
        self._stream = stream if stream is not None else status_stream(say)
        self.live = self._stream is not None and self._stream.isatty()
        self._t0 = pace.clock()
        self._next_plain = pace.plain_s
        self._drawn = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def elapsed(self) -> float:
        """Seconds since the step started."""
        return self._pace.clock() - self._t0

    def tick(self) -> None:
        """Report once: redraw the status line (terminal), or say a line when one is due."""
        seconds = self.elapsed()
        last = self._detail() if self._detail is not None else None
        if self.live:
            self._draw(seconds, last)
        elif seconds >= self._next_plain:
            step = self._pace.plain_s
            self._next_plain = (seconds // step + 1) * step
            suffix = f"; last: {last}" if last else ""
            self._say(f"… still {self.label}, {seconds:.0f} s{suffix}")

    def _draw(self, seconds: float, last: str | None) -> None:
        assert self._stream is not None
        width = max(_columns(self._stream) - 1, 20)  # a wrapped line cannot be redrawn
        text = status_line(self.label, seconds, last, width)
        self._stream.write(f"\r{text}{_ERASE}")
        self._stream.flush()
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn and self._stream is not None:
            self._stream.write(f"\r{_ERASE}")
            self._stream.flush()
            self._drawn = False

    def _tick_quietly(self) -> None:
        with contextlib.suppress(Exception):  # showing progress must never fail the step itself
            self.tick()

    def _run(self) -> None:
        while not self._stop.wait(self._pace.live_s):
            self._tick_quietly()

    def __enter__(self) -> Ticker:
        self._say(self._announce)
        self._t0 = self._pace.clock()
        self._tick_quietly()  # on a terminal the status line shows at once
        self._thread = threading.Thread(target=self._run, name="ttftscope-ticker", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with contextlib.suppress(OSError, ValueError):
            self._clear()
        seconds = self.elapsed()
        ok = self.ok and exc_type is None
        self._say(self._done(seconds) if ok else f"{self.label}: failed after {seconds:.0f} s")


def run_with_progress(
    cmd: Sequence[str],
    log: Path,
    label: str,
    say: Progress,
    *,
    env: Mapping[str, str] | None = None,
    announce: str | None = None,
    stream: TextIO | None = None,
    pace: Pace = DEFAULT_PACE,
) -> int:
    """Run ``cmd`` with its output appended to ``log`` under a :class:`Ticker`; its exit code.

    ``announce`` replaces the ticker's start line (default ``"<label> …"``). The detail shown
    while it runs is the latest pip line (``Collecting``, ``Downloading``, …) the command
    wrote, or else its latest line.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     run_with_progress(["true"], Path(tmp) / "x.log", "doing x", lambda _: None)
    0
    """
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        start = log.stat().st_size

        def detail() -> str | None:
            return last_log_line(log, start, PIP_PREFIXES) or last_log_line(log, start)

        ticker = Ticker(label, say, announce=announce, detail=detail, stream=stream, pace=pace)
        with ticker:
            proc = subprocess.run(
                list(cmd), stdout=fh, stderr=subprocess.STDOUT, env=env, check=False
            )
            code = proc.returncode
            ticker.ok = code == 0
    return code

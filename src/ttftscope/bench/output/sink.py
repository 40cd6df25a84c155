"""JSONL files written as a run goes: every line flushed at once, fsynced in the background.

:class:`~ttftscope.records.RecordWriter` fsyncs each record (~3 ms here) on the caller's
thread; under load that would stall the event loop that stamps every other request's
tokens. A sink writes the same lines (:func:`line_of`, the shared writer's line) and
flushes each one (a killed process keeps every line written before), while a thread fsyncs
the file once a second and at close, for a machine that goes down. Writing on the loop
costs ~10-20 us a line; a writer thread would cost more, in GIL hand-overs.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel

from ttftscope.errors import ConfigError
from ttftscope.records import record_line

# What record_line escapes besides JSON's own escapes: line ends str.splitlines() sees.
_LINE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def line_of(item: BaseModel, exclude: set[str] | None = None) -> str:
    """:func:`~ttftscope.records.record_line`'s line, ~20x cheaper when no text needs mending.

    The shared writer validates a cleaned copy of every record (~90 us); a direct dump
    (~5 us) gives the same line unless some text holds a lone surrogate (the dump then
    fails, or mends a dict key into U+FFFD): those lines go the shared way.

    >>> from ttftscope.records import RequestRecord
    >>> rec = RequestRecord(run_id="a\u2028b", index=0, variant="chat", phase="cold", ok=True)
    >>> line_of(rec) == record_line(rec)
    True
    """
    try:
        line = item.model_dump_json(exclude=exclude).translate(_LINE_BREAKS)
    except ValueError:  # a lone surrogate has no UTF-8 form
        return record_line(item, exclude=exclude)
    return record_line(item, exclude=exclude) if "\ufffd" in line else line


class JsonlSink:
    """Append models to a JSONL file, one flushed line each; fsync off the caller's thread.

    >>> import tempfile; from ttftscope.records import RequestRecord
    >>> p = Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> with JsonlSink(p) as sink:
    ...     sink.put(RequestRecord(run_id="r", index=0, variant="chat", phase="cold", ok=True))
    >>> len(p.read_text().splitlines())
    1
    """

    def __init__(
        self, path: Path, *, exclude: set[str] | None = None, fsync_every_s: float = 1.0
    ) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")
            if self._fh.tell() > 0 and not _ends_with_newline(path):
                self._fh.write("\n")  # a killed writer's half line must not swallow ours
        except OSError as exc:
            raise _unwritable(path, exc) from None
        self.path, self.exclude = path, exclude
        self.written = 0
        self._closed = threading.Event()
        self._syncer = threading.Thread(
            target=self._sync, args=(fsync_every_s,), name=f"fsync:{path.name}", daemon=True
        )
        self._syncer.start()

    def put(self, item: BaseModel) -> None:
        """Write one model as a line and flush it (to the OS: a killed run keeps it)."""
        try:
            self._fh.write(line_of(item, self.exclude) + "\n")
            self._fh.flush()
        except OSError as exc:  # a full disk: the run cannot keep its promise, stop it
            raise _unwritable(self.path, exc) from None
        self.written += 1

    def _sync(self, every_s: float) -> None:
        fd = self._fh.fileno()
        while not self._closed.wait(every_s):
            with contextlib.suppress(OSError):  # put() reports a failing disk
                os.fsync(fd)

    def close(self) -> None:
        """Fsync and close the file."""
        self._closed.set()
        self._syncer.join()
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
        except OSError as exc:
            raise _unwritable(self.path, exc) from None
        finally:
            self._fh.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _unwritable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(
        f"cannot write {path}: {exc.strerror or exc}",
        hint="free disk space or pick a writable --result-dir; lines written before are kept",
    )


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"

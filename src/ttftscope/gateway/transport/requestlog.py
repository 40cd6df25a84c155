"""The request log: each request body received, one JSON line, written off the hot path.

Only with ``gateway.log_prompts = true`` and ``gateway.request_log`` set. A line is the
body as the client sent it plus ``"ttftscope": {"t_wall", "model", "upstream"}``; no
header (so no key) is ever written. Requests are queued and a writer thread serializes,
appends and flushes them, so a slow disk never delays an answer.

>>> RequestLog.from_settings(None, True) is None
True
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ttftscope.errors import ConfigError
from ttftscope.gateway.transport.jsoncodec import dumps

log = logging.getLogger("ttftscope.gateway")
_Item = tuple[Mapping[str, Any], dict[str, Any]] | None


class RequestLog:
    """Appends request bodies to ``path`` as JSON lines, from a writer thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._file: BinaryIO | None = None

    @classmethod
    def from_settings(cls, path: Path | None, log_prompts: bool) -> RequestLog | None:
        """The log the settings ask for, or None (and an info line if prompts are kept out).

        >>> RequestLog.from_settings(Path("r.jsonl"), True).path.name
        'r.jsonl'
        """
        if path is None:
            return None
        if not log_prompts:
            log.info(
                "gateway.request_log is set but gateway.log_prompts is false: "
                "prompts are not logged"
            )
            return None
        return cls(path.expanduser())

    def open(self) -> None:
        """Open the file for appending and start the writer."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab")
        except OSError as exc:
            raise ConfigError(
                f"cannot open the request log {self.path} ({exc.strerror})",
                hint="set gateway.request_log to a writable file, or unset it",
            ) from None
        self._thread = threading.Thread(target=self._run, name="request-log", daemon=True)
        self._thread.start()
        log.info("request bodies (prompts included) are logged to %s", self.path)

    def write(self, body: Mapping[str, Any], *, model: str, upstream: str) -> None:
        """Queue one received body (it must not change afterwards; the gateway never does)."""
        meta = {"t_wall": time.time(), "model": model, "upstream": upstream}
        self._queue.put((body, meta))

    def close(self) -> None:
        """Write what is queued, then stop the writer and close the file."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _run(self) -> None:
        assert self._file is not None
        failed = False
        while (item := self._queue.get()) is not None:
            body, meta = item
            line = dumps({**body, "ttftscope": meta}) + b"\n"
            try:
                self._file.write(line)
                self._file.flush()
            except OSError as exc:
                if not failed:  # once: a full disk would otherwise log every request
                    log.warning("request log %s: write failed (%s)", self.path, exc.strerror)
                failed = True

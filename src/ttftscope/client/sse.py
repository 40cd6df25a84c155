"""Incremental Server-Sent Events decoder (the WHATWG subset OpenAI-compatible servers use).

Bytes go in as they arrive from the socket, whole events come out as soon as their blank line
is seen, so the caller can time-stamp the first event precisely.

>>> d = SSEDecoder()
>>> d.feed(b'data: {"a": 1}\\n\\nda')
[SSEEvent(event='message', data='{"a": 1}', id=None)]
>>> d.feed(b"ta: [DONE]\\n\\n")[0].is_done
True
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["SSEDecoder", "SSEEvent"]

_LINE_END = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``event`` defaults to ``"message"`` as in the spec.

    >>> SSEEvent(data="[DONE]").is_done
    True
    """

    event: str = "message"
    data: str = ""
    id: str | None = None

    @property
    def is_done(self) -> bool:
        """True for the OpenAI end-of-stream sentinel ``data: [DONE]``."""
        return self.data.strip() == "[DONE]"


class SSEDecoder:
    """Turn a byte stream into :class:`SSEEvent` objects, whatever the chunk boundaries.

    Lines end in ``\\n``, ``\\r\\n`` or ``\\r``; ``data:`` lines of one event are joined with
    ``\\n``; ``:`` lines are comments (ignored, counted in :attr:`comments`); a blank line ends
    the event; ``id`` is sticky across events and ``retry`` is kept in :attr:`retry_ms`.
    UTF-8 sequences split across chunks are reassembled; invalid bytes become U+FFFD.

    >>> d = SSEDecoder()
    >>> d.feed(b": keep-alive\\r\\nevent: ping\\r\\ndata: a\\r\\ndata: b\\r")
    []
    >>> d.feed(b"\\n\\r\\n")
    [SSEEvent(event='ping', data='a\\nb', id=None)]
    >>> d.comments
    1
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._started = False
        # A lone \r at a chunk end is already a complete line end; remember it so that a \n
        # opening the next chunk is read as the second half of \r\n, not as an empty line.
        self._skip_lf = False
        self._data: list[str] = []
        self._has_data = False
        self._event = ""
        self._last_id: str | None = None
        self.comments = 0
        self.retry_ms: int | None = None
        self.closed = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        return self._feed_text(self._utf8.decode(chunk))

    def close(self) -> list[SSEEvent]:
        """Signal end of stream; return any event still pending.

        Unlike a browser (which drops an unterminated final event), the last unterminated
        line and event are dispatched: some servers end with ``data: [DONE]\\n`` and no blank line.
        """
        if self.closed:
            return []
        self.closed = True
        events = self._feed_text(self._utf8.decode(b"", final=True))
        if self._pending:
            line = "".join(self._pending)
            self._pending.clear()
            self._line(line, events)
        self._dispatch(events)
        return events

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix(_BOM)
        if self._skip_lf and text.startswith("\n"):
            text = text[1:]
        self._skip_lf = False
        if "\n" not in text and "\r" not in text:
            self._pending.append(text)  # no line end yet: don't rescan a growing line per chunk
            return []
        buf = "".join(self._pending) + text if self._pending else text
        self._pending.clear()
        events: list[SSEEvent] = []
        if "\r" not in buf:  # the usual case: splitting is ~3x cheaper than the regex
            *lines, rest = buf.split("\n")
            for line in lines:
                self._line(line, events)
            if rest:
                self._pending.append(rest)
            return events
        pos = 0
        for m in _LINE_END.finditer(buf):
            self._line(buf[pos : m.start()], events)
            pos = m.end()
            if m.group() == "\r" and pos == len(buf):
                self._skip_lf = True
        if pos < len(buf):
            self._pending.append(buf[pos:])
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if line.startswith("data: "):  # the usual line, parsed as the general rule below does
            self._data.append(line[6:])
            self._has_data = True
            return
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            self.comments += 1
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value) < 16:
            self.retry_ms = int(value)  # longer is no delay, and int() refuses 4,300+ digits

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._has_data:
            events.append(
                SSEEvent(
                    event=self._event or "message", data="\n".join(self._data), id=self._last_id
                )
            )
        self._data = []
        self._has_data = False
        self._event = ""

"""The total deadline of one exchange, its stream included (``gateway.request_timeout_s``).

Past it the app is cancelled (a stream's upstream connection closes: vLLM aborts the
request) and the client hears why in its API's format: a 504 if no answer had started,
else an error event that ends the event stream (headers are gone by then). The default
suits long agent turns: a 100K-token Claude Code turn can stream for minutes.

>>> async def app(scope: Any, receive: Any, send: Any) -> None:
...     await asyncio.sleep(10)
>>> sent: list[Any] = []
>>> async def send(message: Any) -> None:
...     sent.append(message)
>>> asyncio.run(Deadline(app, 0.01)({"type": "http", "path": "/v1/completions"}, None, send))
>>> sent[0]["status"]
504
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from ttftscope.gateway.transport.apierrors import (
    ErrorFormat,
    api_format,
    error_response,
    stream_error,
)

# the last words to a client that does not read: they may wait this long for it
_GRACE_S = 5.0
# the scope extension whose "close" closes the client's connection (the bounded protocol's)
CLOSE_EXTENSION = "ttftscope.close"
# the deadline the running exchange is under (one task per exchange)
_CURRENT: ContextVar[Deadline | None] = ContextVar("ttftscope_deadline", default=None)


def expired() -> bool:
    """Whether the running exchange was cancelled by its deadline (not by anyone else).

    >>> expired()
    False
    """
    deadline = _CURRENT.get()  # set only inside an exchange's task
    return deadline is not None and asyncio.current_task() in deadline._late


def close_connection(scope: Any) -> None:
    """Close the client's connection through the server's :data:`CLOSE_EXTENSION` (an answer
    begun that cannot be finished: the client sees it cut, never whole); a server without it
    closes an answer left unfinished itself (uvicorn, logging an error).

    >>> closed: list[bool] = []
    >>> close_connection({"extensions": {CLOSE_EXTENSION: {"close": lambda: closed.append(1)}}})
    >>> closed, close_connection({})
    ([1], None)
    """
    close = scope.get("extensions", {}).get(CLOSE_EXTENSION, {}).get("close")
    if close is not None:
        close()


class Deadline:
    """ASGI middleware: ``app`` gets at most ``seconds`` per HTTP exchange.

    No timer per request (one costs ~5-10 us at its start, on the way to the first token):
    a sweep, every ``seconds / 4`` (at most 1 s) while exchanges are open, cancels the late.
    """

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds
        self._tick = min(1.0, seconds / 4)
        self._open: dict[asyncio.Task[Any], float] = {}  # exchange -> when it is due
        self._late: set[asyncio.Task[Any]] = set()
        self._sweep_at: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        self._open[task] = loop.time() + self.seconds
        if self._sweep_at is None:
            self._sweep_at = loop.call_later(self._tick, self._sweep)
        seen = _Watched(send)
        token = _CURRENT.set(self)
        try:
            await self.app(scope, receive, seen)
        except asyncio.CancelledError:
            if task not in self._late:
                raise  # cancelled by someone else (the server stopping)
            task.uncancel()
            await self._expire(seen, api_format(scope.get("path", "")))
            if seen.started and not seen.stream and not seen.done:
                close_connection(scope)  # a whole answer passed on as it came: cut, not ended
        finally:
            _CURRENT.reset(token)
            self._open.pop(task, None)
            self._late.discard(task)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for task, due in self._open.items():
            # one being cancelled already (its client left) ends anyway: a second cancel
            # would reach it as one CancelledError and be taken for the first
            if due <= now and task not in self._late and not task.cancelling():
                self._late.add(task)
                task.cancel()
        self._sweep_at = loop.call_later(self._tick, self._sweep) if self._open else None

    async def _expire(self, seen: _Watched, fmt: ErrorFormat) -> None:
        message = (
            f"the request took longer than the gateway allows ({self.seconds:g} s, "
            "gateway.request_timeout_s)"
        )
        try:
            async with asyncio.timeout(_GRACE_S):
                if not seen.started:
                    response = error_response(fmt, 504, message)
                    start = {"type": "http.response.start", "status": 504}
                    await seen.send({**start, "headers": response.raw_headers})
                    await seen.send({"type": "http.response.body", "body": response.body})
                elif seen.stream and not seen.done:
                    event = stream_error(fmt, message, status=504)
                    await seen.send(
                        {"type": "http.response.body", "body": event, "more_body": True}
                    )
                    await seen.send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            pass  # the server closes an answer left unfinished


class _Watched:
    """``send``, noting how far the answer got."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.started = self.stream = self.done = False

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            for name, value in message.get("headers", ()):
                if name.lower() == b"content-type":
                    self.stream = value.startswith(b"text/event-stream")
        elif not message.get("more_body", False):
            self.done = True
        await self.send(message)

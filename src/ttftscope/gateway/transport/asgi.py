"""The gateway's server side as plain ASGI: no Starlette machinery on any route.

Every request is read, answered and streamed here directly, and ended when its client
leaves (:class:`Watch`); the app's one routing table says which endpoint answers it
(:class:`HotPath`'s ``find``). Starlette's ``Request``, routing and ``StreamingResponse``
(a task group per stream) cost a few hundred microseconds per request, a good share of the
~1 ms a Python hop may add; only its ``Response`` classes are kept, as plain data.

>>> header([(b"authorization", b"Bearer k")], "authorization")
'Bearer k'
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from starlette.responses import Response, StreamingResponse

from ttftscope.gateway.transport.deadline import close_connection, expired
from ttftscope.gateway.transport.hoptrace import CURRENT, begin
from ttftscope.tracing.emit import SpanEmitter
from ttftscope.tracing.names import GATEWAY_SERVICE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# what answers one request once its route is found (the app's routing table binds it)
Endpoint = Callable[[Scope, Receive], Awaitable[Response]]
# when a client left: before its answer began (counted 499), or during its stream
Phase = Literal["before_answer", "mid_stream"]


def cancel_status() -> int | None:
    """Why the running request was cancelled, as the status it is counted with: 504 its
    deadline passed, 499 its client left, None anything else (the server stopping).

    >>> cancel_status() is None
    True
    """
    if expired():
        return 504
    watch = _WATCH.get()
    return 499 if watch is not None and watch.left else None


_WATCH: ContextVar[Watch | None] = ContextVar("ttftscope_watch", default=None)


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


class BodyTooLarge(Exception):
    """The request body is larger than the gateway accepts."""


class CutShort(Exception):
    """Raised by a response body sent in part whose rest cannot follow (an upstream broke
    off a JSON answer passed through): the client's connection is closed, so the client sees
    a truncated answer, not a hang or an end that looks whole."""


def header(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    """The first value of header ``name`` (lower case) in ASGI scope headers, or None.

    >>> header([(b"a", b"1"), (b"a", b"2")], "a"), header([], "a")
    ('1', None)
    """
    key = name.encode("latin-1")
    for k, v in headers:
        if k == key:
            return v.decode("latin-1")
    return None


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body; :class:`BodyTooLarge` past ``limit`` bytes.

    >>> async def one() -> dict[str, Any]:
    ...     return {"type": "http.request", "body": b"{}"}
    >>> asyncio.run(read_body(one, 10))
    b'{}'
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class Watch:
    """Watches one request for its client leaving, from the moment its body has been read.

    Uvicorn does not cancel a handler whose client disconnects: without this, a request
    waiting on vLLM's headers or reading a whole answer would hold vLLM's work until it ended
    or timed out. :meth:`receive` is the handler's receive; once it has passed on the body's
    last part, one task waits on the channel (which then only says the client left) and
    cancels the request's task: whatever it awaits (an encode, the upstream's headers, its
    body, the next stream chunk) stops, and the upstream connection closes, so vLLM aborts.

    >>> async def client_leaves() -> bool:
    ...     said = iter([{"type": "http.request", "body": b"{}"}, {"type": "http.disconnect"}])
    ...     async def receive() -> Message:
    ...         return next(said)
    ...     watch = Watch(receive)
    ...     _ = await watch.receive()  # the body: watching starts
    ...     try:
    ...         await asyncio.sleep(60)  # waiting on the upstream
    ...     except asyncio.CancelledError:
    ...         return watch.left
    ...     return False
    >>> asyncio.run(client_leaves())
    True
    """

    def __init__(self, receive: Receive) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.left = False
        self._task, self._receive = task, receive
        self._done = False
        self._watcher: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        message = await self._receive()
        last = message["type"] == "http.request" and not message.get("more_body", False)
        if last and self._watcher is None:  # from here on receive() waits for a disconnect
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return message

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        # a request being cancelled already (its deadline) ends anyway: a second cancel
        # would reach it as one CancelledError, taken for this one
        if not self._done and not self._task.cancelling():
            self.left = True
            self._task.cancel()

    def stop(self) -> None:
        """The response is sent, or about to be: a disconnect from here on changes nothing."""
        self._done = True
        if self._watcher is not None:
            self._watcher.cancel()


async def send_response(response: Response, send: Send, watch: Watch) -> None:
    """Send a Starlette response ourselves; a stream stops when its client leaves."""
    start = {
        "type": "http.response.start",
        "status": response.status_code,
        "headers": response.raw_headers,
    }
    if not isinstance(response, StreamingResponse):
        watch.stop()
        await send(start)
        await send({"type": "http.response.body", "body": response.body})
        return
    await send(start)
    chunks = response.body_iterator
    try:
        async for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    finally:
        watch.stop()
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:  # the relay's own cleanup: the upstream closes unless read out
            await aclose()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


@dataclass(frozen=True)
class Found:
    """What answers one request: its ``endpoint``, and whether the request is ``traced``
    (the routes served by model: the hop a trace is about)."""

    endpoint: Endpoint
    traced: bool = False


class HotPath:
    """ASGI app: every HTTP request answered by the endpoint ``find`` gives for its scope,
    as plain ASGI; ``lifespan`` runs around the server's life (as Starlette runs it).

    A traced request's trace headers go on to the upstream; with an ``emitter`` it is also
    traced (:mod:`~ttftscope.gateway.transport.hoptrace`), its spans emitted once the answer
    is sent.
    """

    def __init__(
        self,
        find: Callable[[Scope], Found],
        lifespan: Callable[[], AbstractAsyncContextManager[None]],
        on_left: Callable[[Phase], None] = lambda phase: None,
        emitter: SpanEmitter | None = None,
    ) -> None:
        self.find = find
        self.lifespan = lifespan
        self.on_left = on_left
        self.emitter = emitter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not served (the server refuses the upgrade)
        found = self.find(scope)
        hop = begin(scope["headers"], on=self.emitter is not None) if found.traced else None
        if hop is None:  # tracing off, no trace headers: nothing more than before
            await self._serve(found.endpoint, scope, receive, send)
            return
        token = CURRENT.set(hop)
        status = 500
        try:
            status = await self._serve(found.endpoint, scope, receive, send)
        except asyncio.CancelledError:
            status = cancel_status() or status
            raise
        finally:
            CURRENT.reset(token)
            if hop.ctx is not None and self.emitter is not None:
                self.emitter.emit_later(GATEWAY_SERVICE, hop.finish(scope["path"], status))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Start-up and shut-down, told to the server as Starlette's router tells it."""
        started = False
        await receive()
        try:
            async with self.lifespan():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()
        except BaseException:
            text = traceback.format_exc()
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": text})
            raise
        else:
            await send({"type": "lifespan.shutdown.complete"})

    async def _serve(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer one request; the status sent (499: the client left first)."""
        watch = Watch(receive)
        watching = _WATCH.set(watch)
        phase: Phase = "before_answer"
        status = 500
        try:
            response = await endpoint(scope, watch.receive)
            status = response.status_code
            phase = "mid_stream"
            await send_response(response, send, watch)
        except asyncio.CancelledError:
            if not watch.left or expired():
                raise
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()  # ours, not the server's: the request ends here, quietly
            self.on_left(phase)
            status = 499 if phase == "before_answer" else status
        except CutShort:
            close_connection(scope)
        finally:
            watch.stop()
            _WATCH.reset(watching)
        return status

"""The gateway's hot path as plain ASGI: the POST routes skip Starlette's machinery.

A request to ``/v1/chat/completions`` or ``/v1/completions`` is read, answered and
streamed here directly; every other request (models, health, metrics, 404s, lifespan)
goes to the Starlette app. Starlette's ``Request``, routing and ``StreamingResponse``
(a task group per stream) cost a few hundred microseconds per request, a good share of
the ~1 ms a Python hop may add.

>>> header([(b"authorization", b"Bearer k")], "authorization")
'Bearer k'
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from starlette.responses import Response, StreamingResponse

from ttftscope.gateway.hoptrace import CURRENT, begin
from ttftscope.tracing.emit import SpanEmitter
from ttftscope.tracing.names import GATEWAY_SERVICE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


class BodyTooLarge(Exception):
    """The request body is larger than the gateway accepts."""


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


async def send_response(response: Response, send: Send, receive: Receive) -> None:
    """Send a Starlette response ourselves (a stream watches for the client leaving)."""
    start = {
        "type": "http.response.start",
        "status": response.status_code,
        "headers": response.raw_headers,
    }
    await send(start)
    if isinstance(response, StreamingResponse):
        await _stream(response, send, receive)
    else:
        await send({"type": "http.response.body", "body": response.body})


async def _stream(response: StreamingResponse, send: Send, receive: Receive) -> None:
    task = asyncio.current_task()
    assert task is not None
    state = {"done": False, "gone": False}

    async def watch() -> None:
        # after the request body, receive() returns only when the client goes away
        while (await receive())["type"] != "http.disconnect":
            pass
        if not state["done"]:
            state["gone"] = True
            task.cancel()  # stop waiting on the upstream now: closing it aborts vLLM's work

    watcher = asyncio.ensure_future(watch())
    chunks = response.body_iterator
    try:
        try:
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            state["done"] = True
            watcher.cancel()
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not state["gone"]:
            raise
        task.uncancel()


class HotPath:
    """ASGI app: ``routes`` (path → handler) served directly, the rest by ``fallback``.

    Each routed request's trace headers go on to the upstream; with an ``emitter`` the
    request is also traced (:mod:`~ttftscope.gateway.hoptrace`), its spans emitted once the
    answer is sent.
    """

    def __init__(
        self,
        fallback: Any,
        routes: Mapping[str, Callable[[Scope, Receive], Awaitable[Response]]],
        method_not_allowed: Callable[[str, str], Response],
        emitter: SpanEmitter | None = None,
    ) -> None:
        self.fallback = fallback
        self.routes = routes
        self.method_not_allowed = method_not_allowed
        self.emitter = emitter

    @property
    def state(self) -> Any:
        """The fallback Starlette app's ``state`` (where the gateway lives)."""
        return self.fallback.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None:
            await self.fallback(scope, receive, send)
            return
        if scope["method"] != "POST":
            refusal = self.method_not_allowed(scope["method"], scope["path"])
            await send_response(refusal, send, receive)
            return
        hop = begin(scope["headers"], on=self.emitter is not None)
        if hop is None:  # tracing off, no trace headers: nothing more than before
            await send_response(await handler(scope, receive), send, receive)
            return
        token = CURRENT.set(hop)
        status = 500
        try:
            response = await handler(scope, receive)
            status = response.status_code
            await send_response(response, send, receive)
        finally:
            CURRENT.reset(token)
            if hop.ctx is not None and self.emitter is not None:
                self.emitter.emit(GATEWAY_SERVICE, hop.spans(scope["path"], status))

"""Stored Responses: ``GET /v1/responses/{id}`` (``?stream=true&starting_after=N`` too),
``POST /v1/responses/{id}/cancel`` and ``GET /v1/responses/{id}/input_items``, forwarded to
the upstream that created the response, whose answer (vLLM's store, its errors) is relayed.

A response created through the gateway with ``store`` on (vLLM with its response store
enabled; ``background: true`` needs it) is remembered when its answer, or the
``response.created`` event of its stream, comes back: its id → the upstream its model was
routed to (:class:`ResponseOwners`, bounded). An id the gateway has not seen (created
before a restart, or past the bound) is asked of each upstream in order until one answers
other than 404. The key is checked as on every route; errors are in OpenAI's format.

>>> owners = ResponseOwners(limit=2)
>>> for rid in ("resp_a", "resp_b", "resp_c"):
...     owners.remember(rid, "local")
>>> owners.owner("resp_a"), owners.owner("resp_c")
(None, 'local')
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, Literal
from urllib.parse import parse_qsl, quote

import orjson
from starlette.responses import Response, StreamingResponse

from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Call, Gateway
from ttftscope.gateway.transport.apierrors import openai_error

Handler = Callable[[Call], Awaitable[Response]]
# pydantic's lax booleans, as vLLM reads its ``stream`` query parameter
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_HEAD = 64 << 10  # bytes of a stream searched for its response.created event


class ResponseOwners:
    """Which upstream created each stored response seen through the gateway: the newest
    ``limit`` ids (an id is ~30 bytes: 100K of them are a few MB)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._owners: OrderedDict[str, str] = OrderedDict()

    def remember(self, response_id: str, upstream: str) -> None:
        self._owners[response_id] = upstream
        self._owners.move_to_end(response_id)
        while len(self._owners) > self.limit:
            self._owners.popitem(last=False)

    def owner(self, response_id: str) -> str | None:
        return self._owners.get(response_id)

    def seen(self, gw: Gateway, answer: object) -> None:
        """Remember the response ``answer`` describes (a Responses object) if it is stored."""
        if not isinstance(answer, dict) or answer.get("store") is not True:
            return
        rid, model = answer.get("id"), answer.get("model")
        if not isinstance(rid, str) or not isinstance(model, str):
            return
        up = next((u for u in gw.upstreams if model in u.models), None)
        if up is not None:
            self.remember(rid, up.name)


def remembering(owners: ResponseOwners, handler: Handler) -> Handler:
    """``handler`` (``POST /v1/responses``) whose stored responses ``owners`` remembers."""

    async def handle(call: Call) -> Response:
        gw = call.gw
        response = await handler(call)
        if response.status_code != 200:
            return response
        if isinstance(response, StreamingResponse):
            if response.media_type == "text/event-stream":  # not a huge JSON passed on
                response.body_iterator = _watched(response.body_iterator, gw, owners)
            return response
        with contextlib.suppress(orjson.JSONDecodeError):
            owners.seen(gw, orjson.loads(response.body))
        return response

    return handle


async def _watched(
    chunks: AsyncIterable[Any], gw: Gateway, owners: ResponseOwners
) -> AsyncIterator[Any]:
    """``chunks`` unchanged; the first event (``response.created``) read on the way."""
    head: bytes | None = b""
    try:
        async for chunk in chunks:
            if head is not None and isinstance(chunk, bytes):
                head += chunk
                if b"\n\n" in head or len(head) > _HEAD:
                    owners.seen(gw, _created(head))
                    head = None
            yield chunk
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def _created(head: bytes) -> object:
    """The response of the stream's first event, if it is ``response.created``.

    >>> _created(b'event: response.created\\ndata: {"response": {"id": "r"}}\\n\\n')
    {'id': 'r'}
    """
    event = head.split(b"\n\n", 1)[0]
    for line in event.splitlines():
        if line.startswith(b"data:"):
            try:
                data = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return None
            return data.get("response") if isinstance(data, dict) else None
    return None


def stored_route(owners: ResponseOwners, suffix: str) -> Handler:
    """The handler of ``/v1/responses/{response_id}`` + ``suffix``."""
    method: Literal["GET", "POST"] = "POST" if suffix == "/cancel" else "GET"

    async def endpoint(call: Call) -> Response:
        rid = call.params["response_id"]
        path = f"/responses/{quote(rid, safe='')}{suffix}"
        query = call.scope.get("query_string", b"").decode("latin-1")
        # the last value of a repeated parameter, as Starlette's query_params reads it
        asked = dict(parse_qsl(query, keep_blank_values=True)).get("stream", "")
        stream = suffix == "" and asked.lower() in _TRUE
        target = f"{path}?{query}" if query else path
        call.up, response = await _ask(call.gw, owners, rid, target, method, stream=stream)
        return response

    return endpoint


async def _ask(
    gw: Gateway,
    owners: ResponseOwners,
    rid: str,
    target: str,
    method: Literal["GET", "POST"],
    *,
    stream: bool,
) -> tuple[Upstream | None, Response]:
    """The upstream asked last and its answer; for an id not seen, the first upstream's that
    is not a 404."""
    if not gw.upstreams:
        return None, openai_error(404, f"no upstream is configured to hold response {rid!r}")
    response: Response | None = None
    up: Upstream | None = None
    for up in _candidates(gw, owners.owner(rid)):
        response = await forward(up, target, b"", stream=stream, metrics=gw.metrics, method=method)
        if response.status_code != 404:
            if response.status_code < 400:
                owners.remember(rid, up.name)
            break
    assert response is not None
    return up, response


def _candidates(gw: Gateway, owner: str | None) -> list[Upstream]:
    """The upstream that created the response; not known: every upstream, in order."""
    known = [up for up in gw.upstreams if up.name == owner]
    return known or list(gw.upstreams)

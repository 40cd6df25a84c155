"""The gateway's one routing table and the one request handler every route goes through.

Each :class:`Route` names its methods and path, its API's error format, who may call it
(:data:`Access`), the label it is counted under and its handler. :func:`handle` wraps every
handler the same way, so no route can skip a step: the key (unless the route is public;
``/metrics`` follows ``gateway.metrics_public``), the body read, parsed, checked and routed
by its model (the routes served by model), errors in the route's format (a refusal with its
status, a client gone while sending its body 499, anything else a logged 500), and the
count in ``requests_total``, a request ended by its client leaving (499) or its deadline
(504) included. The deadline itself and the watch for a client leaving hold every request
(:mod:`~ttftscope.gateway.transport.deadline`, :class:`~ttftscope.gateway.transport.asgi.Watch`).
A path not in the table is a 404, a method its path does not serve a 405, each in the
path's API format.

>>> async def ok(call: Call) -> Response:
...     return Response(b"ok")
>>> table = RouteTable([Route(frozenset({"GET"}), "/v1/things/{thing_id}", "openai", "key",
...     None, ok)])
>>> route, params = table.match("/v1/things/t1")
>>> route is not None and route.path, params
('/v1/things/{thing_id}', {'thing_id': 't1'})
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from starlette.responses import Response

from ttftscope.gateway.state import Call, Gateway
from ttftscope.gateway.transport.apierrors import (
    BadRequest,
    ErrorFormat,
    api_format,
    error_response,
)
from ttftscope.gateway.transport.asgi import (
    ClientGone,
    Found,
    HotPath,
    Receive,
    Scope,
    cancel_status,
)
from ttftscope.tracing.emit import SpanEmitter

__all__ = ["Access", "GatewayApp", "Handler", "Route", "RouteTable", "handle"]

log = logging.getLogger("ttftscope.gateway")
# who may call a route: keyed callers, anyone, or as gateway.metrics_public says
Access = Literal["key", "public", "metrics"]
Handler = Callable[[Call], Awaitable[Response]]
_PARAM = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Route:
    """One entry of the table. ``path`` may hold ``{name}`` parts, each one path segment
    (handed to the handler in ``Call.params``); ``label`` is the route label counted in
    ``requests_total`` (None: not counted, as a liveness probe or a scrape is not);
    ``by_model``: the body is read, checked and routed by its model before the handler."""

    methods: frozenset[str]
    path: str
    fmt: ErrorFormat
    access: Access
    label: str | None
    handler: Handler
    by_model: bool = False


class RouteTable:
    """The routes, found by path: exact paths by one dict look-up (the hot POST routes),
    paths with parameters by pattern."""

    def __init__(self, routes: Sequence[Route]) -> None:
        self.routes = tuple(routes)
        self._exact = {r.path: r for r in self.routes if "{" not in r.path}
        self._patterns = [
            (re.compile("^" + _PARAM.sub(r"(?P<\1>[^/]+)", r.path) + "$"), r)
            for r in self.routes
            if "{" in r.path
        ]

    def match(self, path: str) -> tuple[Route | None, dict[str, str]]:
        """The route serving ``path`` and its path parameters."""
        route = self._exact.get(path)
        if route is not None:
            return route, {}
        for pattern, route in self._patterns:
            if (m := pattern.match(path)) is not None:
                return route, m.groupdict()
        return None, {}

    def find(self, gw: Gateway, scope: Scope) -> Found:
        """What answers the request of ``scope`` (a 404 or 405 when nothing in the table)."""
        method, path = scope["method"], scope["path"]
        route, params = self.match(path)
        if route is None:
            served = ", ".join(r.path for r in self.routes)
            words = f"{method} {path} is not served by the gateway (it serves {served})"
            return Found(functools.partial(_refuse, 404, words))
        allowed = route.methods | ({"HEAD"} if "GET" in route.methods else set())
        if method not in allowed:
            words = f"{method} {path}: only {', '.join(sorted(route.methods))} is served here"
            return Found(functools.partial(_refuse, 405, words))
        return Found(functools.partial(handle, gw, route, params), traced=route.by_model)


async def _refuse(status: int, words: str, scope: Scope, receive: Receive) -> Response:
    """A request the table has no route for, answered in its path's API format."""
    return error_response(api_format(scope["path"]), status, words)


async def handle(
    gw: Gateway, route: Route, params: dict[str, str], scope: Scope, receive: Receive
) -> Response:
    """Answer one request of ``route``: every step but the handler's own is here."""
    call = Call(gw, scope, params)
    try:
        _admit(gw, route, scope)
        if route.by_model:
            call.raw, call.body, call.up = await gw.read(scope, receive)
        response = await route.handler(call)
    except BadRequest as exc:
        response = error_response(route.fmt, exc.status, exc.message, headers=exc.headers)
    except ClientGone:
        response = Response(status_code=499)
    except asyncio.CancelledError:  # the client left (499) or the deadline passed (504)
        if route.label is not None and (status := cancel_status()) is not None:
            gw.count(route.label, call.up, call.mode, Response(status_code=status))
        raise
    except Exception:
        log.exception("gateway: %s %s failed", scope["method"], route.path)
        message = "the gateway failed on this request (its log says why)"
        response = error_response(route.fmt, 500, message)
    if route.label is None:
        return response
    return gw.count(route.label, call.up, call.mode, response)


def _admit(gw: Gateway, route: Route, scope: Scope) -> None:
    """Refuse a caller without a valid key where the route asks for one."""
    if route.access == "public":
        return
    if route.access == "metrics":
        if gw.settings.metrics_public:
            return
        try:
            gw.check_key(scope["headers"])
        except BadRequest as exc:  # upstream names, models and traffic are not public
            hint = " (or gateway.metrics_public = true)"
            raise BadRequest(exc.status, exc.message + hint) from None
        return
    gw.check_key(scope["headers"])


class GatewayApp(HotPath):
    """The gateway as an ASGI app: its state (``gateway``) and its routes (``table``)."""

    def __init__(self, gateway: Gateway, table: RouteTable, emitter: SpanEmitter | None) -> None:
        @contextlib.asynccontextmanager
        async def lifespan() -> AsyncIterator[None]:
            await gateway.start()
            try:
                yield
            finally:
                await gateway.close()
                if emitter is not None:
                    emitter.shutdown()

        self.gateway, self.table = gateway, table
        left = gateway.metrics.client_disconnects
        super().__init__(
            lambda scope: self.table.find(gateway, scope),
            lifespan,
            on_left=lambda phase: left.labels(phase).inc(),
            emitter=emitter,
        )

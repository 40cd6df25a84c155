"""The gateway's app: each API's routes in, token ids (or text) to the right upstream.

Routes: ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/messages``,
``/v1/messages/count_tokens`` and ``/v1/responses`` (routed by ``model``; served as plain
ASGI, :mod:`ttftscope.gateway.transport.asgi`, by each API's ``apis/<api>/endpoint``),
``GET /v1/models`` (the union), ``GET /health``, ``GET /metrics``, and the stored Responses
(``GET /v1/responses/{id}``, ``POST …/cancel``, ``GET …/input_items``: to the upstream that
created the response, :mod:`~ttftscope.gateway.apis.responses.stored`) (Starlette); anything
else is a 404 in OpenAI's format. See :mod:`ttftscope.gateway` for what each stage owns.

>>> sorted(create_app(GatewaySettings()).routes)[:2]
['/v1/chat/completions', '/v1/completions']
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.apis.chat.endpoint import chat_completions
from ttftscope.gateway.apis.completions.endpoint import completions
from ttftscope.gateway.apis.messages.endpoint import count_tokens, messages
from ttftscope.gateway.apis.responses.endpoint import responses
from ttftscope.gateway.apis.responses.stored import ResponseOwners, remembering, stored_route
from ttftscope.gateway.pipeline.upstreams import environment
from ttftscope.gateway.proving.conformance import StartupChecks
from ttftscope.gateway.state import Gateway
from ttftscope.gateway.transport.apierrors import BadRequest, anthropic_error, openai_error
from ttftscope.gateway.transport.asgi import HotPath, Receive, Scope
from ttftscope.tracing.emit import SpanEmitter

_SERVED = (
    "/v1/chat/completions, /v1/completions, /v1/messages, /v1/messages/count_tokens, "
    "/v1/responses, GET /v1/responses/{id} (and /cancel, /input_items), /v1/models, /health, "
    "/metrics"
)


async def models(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        gw.check_key(request.scope["headers"])
    except BadRequest as exc:
        return openai_error(exc.status, exc.message)
    data = []
    for up in gw.upstreams:
        await up.refresh_models()
        for model in up.models:
            card: dict[str, Any] = {
                "id": model,
                "object": "model",
                "owned_by": up.name,
                "created": int(time.time()),
            }
            if model in up.max_model_len:
                card["max_model_len"] = up.max_model_len[model]
            data.append(card)
    return JSONResponse({"object": "list", "data": data})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def metrics(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    if not gw.settings.metrics_public:  # upstream names, models and traffic are not public
        try:
            gw.check_key(request.scope["headers"])
        except BadRequest as exc:
            return openai_error(exc.status, exc.message + " (or gateway.metrics_public = true)")
    return Response(gw.metrics.exposition(), media_type="text/plain; version=0.0.4")


async def not_served(request: Request) -> Response:
    message = (
        f"{request.method} {request.url.path} is not served by the gateway (it serves {_SERVED})"
    )
    if request.url.path.startswith("/v1/messages"):
        return anthropic_error(404, message)
    return openai_error(404, message)


def method_not_allowed(method: str, path: str) -> Response:
    message = f"{method} {path}: only POST is served here"
    if path.startswith("/v1/messages"):
        return anthropic_error(405, message)
    return openai_error(405, message)


def create_app(
    settings: GatewaySettings,
    *,
    env: Mapping[str, str] | None = None,
    emitter: SpanEmitter | None = None,
) -> HotPath:
    """The gateway as an ASGI app; upstreams are probed when it starts (lifespan).

    With an ``emitter`` (:func:`~ttftscope.tracing.emit.open_emitter`) every request is
    traced; it is shut down (its queued spans sent) when the app stops.

    >>> from ttftscope.config.schema import GatewaySettings
    >>> create_app(GatewaySettings()).state.gateway.upstreams
    []
    """
    prover = StartupChecks(settings.version_poll_seconds)
    gateway = Gateway(settings, environment() if env is None else env, prover=prover)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.close()
            if emitter is not None:
                emitter.shutdown()

    owners = ResponseOwners()
    stored = [
        Route(f"/v1/responses/{{response_id}}{tail}", stored_route(owners, tail), methods=[verb])
        for tail, verb in (("", "GET"), ("/cancel", "POST"), ("/input_items", "GET"))
    ]
    routes = [
        *stored,
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/{path:path}", not_served, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gateway

    def bound(
        handler: Callable[[Gateway, Scope, Receive], Awaitable[Response]],
    ) -> Callable[[Scope, Receive], Awaitable[Response]]:
        return lambda scope, receive: handler(gateway, scope, receive)

    hot = {
        "/v1/chat/completions": bound(chat_completions),
        "/v1/completions": bound(completions),
        "/v1/messages": bound(messages),
        "/v1/messages/count_tokens": bound(count_tokens),
        "/v1/responses": bound(remembering(owners, responses)),
    }
    left = gateway.metrics.client_disconnects
    return HotPath(
        app,
        hot,
        method_not_allowed,
        on_left=lambda phase: left.labels(phase).inc(),
        emitter=emitter,
    )

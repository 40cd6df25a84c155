"""The gateway's app: each API's routes in, token ids (or text) to the right upstream.

Its routes are one table (:func:`route_table`), every entry served through the one request
handler (:mod:`~ttftscope.gateway.routing`) as plain ASGI
(:mod:`~ttftscope.gateway.transport.asgi`): ``POST /v1/chat/completions``,
``/v1/completions``, ``/v1/messages``, ``/v1/messages/count_tokens`` and ``/v1/responses``
(routed by ``model``, by each API's ``apis/<api>/endpoint``), the stored Responses
(``GET /v1/responses/{id}``, ``POST …/cancel``, ``GET …/input_items``: to the upstream that
created the response, :mod:`~ttftscope.gateway.apis.responses.stored`), ``GET /v1/models``
(the union), ``GET /health`` and ``GET /metrics``; anything else is a 404. See
:mod:`ttftscope.gateway` for what each layer owns.

>>> [route.path for route in create_app(GatewaySettings()).table.routes][:2]
['/v1/chat/completions', '/v1/completions']
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, Response

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.apis.chat.endpoint import chat_completions
from ttftscope.gateway.apis.completions.endpoint import completions
from ttftscope.gateway.apis.messages.endpoint import count_tokens, messages
from ttftscope.gateway.apis.responses.endpoint import responses
from ttftscope.gateway.apis.responses.stored import ResponseOwners, remembering, stored_route
from ttftscope.gateway.pipeline.upstreams import environment
from ttftscope.gateway.proving.conformance import StartupChecks
from ttftscope.gateway.routing import GatewayApp, Handler, Route, RouteTable
from ttftscope.gateway.state import Call, Gateway
from ttftscope.gateway.transport.apierrors import ErrorFormat
from ttftscope.tracing.emit import SpanEmitter

_POST, _GET = frozenset({"POST"}), frozenset({"GET"})


async def models(call: Call) -> Response:
    """The models every upstream serves, as OpenAI's model list."""
    data = []
    for up in call.gw.upstreams:
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


async def health(call: Call) -> Response:
    return JSONResponse({"status": "ok"})


async def metrics(call: Call) -> Response:
    return Response(call.gw.metrics.exposition(), media_type="text/plain; version=0.0.4")


def _api(path: str, fmt: ErrorFormat, label: str, handler: Handler) -> Route:
    """A POST route of an API: keyed, counted, its body routed by model."""
    return Route(_POST, path, fmt, "key", label, handler, by_model=True)


def route_table(owners: ResponseOwners) -> RouteTable:
    """Every route the gateway serves (``owners``: who created each stored response)."""
    stored = [
        Route(frozenset({verb}), f"/v1/responses/{{response_id}}{tail}", "openai", "key",
              "responses_stored", stored_route(owners, tail))
        for tail, verb in (("", "GET"), ("/cancel", "POST"), ("/input_items", "GET"))
    ]  # fmt: skip
    return RouteTable(
        [
            _api("/v1/chat/completions", "openai", "chat", chat_completions),
            _api("/v1/completions", "openai", "completions", completions),
            _api("/v1/messages", "anthropic", "messages", messages),
            _api("/v1/messages/count_tokens", "anthropic", "count_tokens", count_tokens),
            _api("/v1/responses", "openai", "responses", remembering(owners, responses)),
            *stored,
            Route(_GET, "/v1/models", "openai", "key", None, models),
            Route(_GET, "/health", "openai", "public", None, health),
            # upstream names, models and traffic: keyed unless gateway.metrics_public
            Route(_GET, "/metrics", "openai", "metrics", None, metrics),
        ]
    )


def create_app(
    settings: GatewaySettings,
    *,
    env: Mapping[str, str] | None = None,
    emitter: SpanEmitter | None = None,
) -> GatewayApp:
    """The gateway as an ASGI app; upstreams are probed when it starts (lifespan).

    With an ``emitter`` (:func:`~ttftscope.tracing.emit.open_emitter`) every request is
    traced; it is shut down (its queued spans sent) when the app stops.

    >>> from ttftscope.config.schema import GatewaySettings
    >>> create_app(GatewaySettings()).gateway.upstreams
    []
    """
    prover = StartupChecks(settings.version_poll_seconds)
    gateway = Gateway(settings, environment() if env is None else env, prover=prover)
    return GatewayApp(gateway, route_table(ResponseOwners()), emitter)

"""The gateway's app: OpenAI routes in, token ids (or text) to the right upstream.

Routes: ``POST /v1/chat/completions`` and ``/v1/completions`` (routed by ``model``; served
as plain ASGI, :mod:`ttftscope.gateway.asgi`), ``GET /v1/models`` (the union),
``GET /health``, ``GET /metrics`` (Starlette); anything else is an OpenAI-format 404. See
:mod:`ttftscope.gateway` for what each stage owns.

>>> app = create_app(GatewaySettings())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.asgi import (
    BodyTooLarge,
    ClientGone,
    HotPath,
    Receive,
    Scope,
    header,
    read_body,
)
from ttftscope.gateway.forward import forward, openai_error
from ttftscope.gateway.idsbody import chat_ids_body, splice_ids
from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.requestlog import RequestLog
from ttftscope.gateway.sessions import Encoded
from ttftscope.gateway.translate import (
    CannotTranslate,
    ChatStreamTranslator,
    chat_response,
    completions_body,
)
from ttftscope.gateway.upstreams import Upstream, environment, upstreams_from
from ttftscope.gateway.verify import Verifier
from ttftscope.gateway.vllm_chat import PassThrough, prepare_chat

log = logging.getLogger("ttftscope.gateway")
SESSION_HEADER = "x-ttftscope-session"


class BadRequest(Exception):
    """The client's request cannot be served; ``status`` and a message that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Gateway:
    """State shared by the routes: upstreams, metrics, limits, inbound keys."""

    def __init__(self, settings: GatewaySettings, env: Mapping[str, str]) -> None:
        self.settings, self.env = settings, env
        self.metrics = GatewayMetrics()
        self.upstreams = upstreams_from(settings.upstreams)
        self.verifier = Verifier(settings.verify_every, self.metrics)
        var = settings.api_keys_env
        raw = env.get(var, "") if var else ""
        self.keys = [k.strip().encode() for k in raw.split(",") if k.strip()]
        self.max_body = int(settings.max_body_mb * (1 << 20))
        self._seen: dict[tuple[str, str], float] = {}
        self.request_log = RequestLog.from_settings(settings.request_log, settings.log_prompts)

    async def start(self) -> None:
        if self.request_log is not None:
            self.request_log.open()
        share = (self.settings.cache_mb << 20) // max(1, len(self.upstreams))
        for up in self.upstreams:
            await up.start(cache_bytes=share, shadow_every=self.settings.shadow_every, env=self.env)
            self.metrics.upstream_api.labels(up.name, up.api or "text").set(1)
            if up.plain_via_completions:  # plain chats go the other way
                self.metrics.upstream_api.labels(up.name, "completions").set(1)

    async def close(self) -> None:
        for up in self.upstreams:
            await up.close()
        if self.request_log is not None:
            self.request_log.close()

    # -- request plumbing ----------------------------------------------------------------
    def check_key(self, authorization: str | None) -> None:
        """Refuse a request without a valid inbound key (when keys are configured)."""
        if not self.keys:
            return
        given = (authorization or "").removeprefix("Bearer ").strip().encode()
        # compare with every key, always: timing says nothing about which one came close
        if sum(hmac.compare_digest(given, key) for key in self.keys) == 0:
            raise BadRequest(401, "a valid gateway API key is required (Authorization: Bearer)")

    async def body(self, scope: Scope, receive: Receive) -> tuple[bytes, dict[str, Any]]:
        declared = header(scope["headers"], "content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise BadRequest(413, self._too_large())
        try:
            raw = await read_body(receive, self.max_body)
        except BodyTooLarge:
            raise BadRequest(413, self._too_large()) from None
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(400, f"the request body is not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise BadRequest(400, "the request body must be a JSON object")
        if not isinstance(body.get("model"), str):
            raise BadRequest(400, "the request needs a 'model' string naming a served model")
        return raw, body

    def _too_large(self) -> str:
        return (
            f"the request body is larger than {self.settings.max_body_mb:g} MB "
            "(gateway.max_body_mb)"
        )

    async def route(self, model: str) -> Upstream:
        for refresh in (False, True):
            for up in self.upstreams:
                if model in up.models:
                    return up
            if refresh:
                break
            for up in self.upstreams:
                await up.refresh_models()
        served = sorted({m for up in self.upstreams for m in up.models})
        raise BadRequest(404, f"The model `{model}` does not exist. Served: {', '.join(served)}")

    def count(self, route: str, up: Upstream | None, mode: str, response: Response) -> Response:
        name = up.name if up is not None else "-"
        labels = (route, name, mode, str(response.status_code))
        # counted once the response is under way: metrics wait, the first token does not
        asyncio.get_running_loop().call_soon(self._count, labels)
        return response

    def _count(self, labels: tuple[str, str, str, str]) -> None:
        self.metrics.requests.labels(*labels).inc()

    def passthrough(self, up: Upstream, reason: str) -> str:
        """Count a request sent upstream as text, by reason; its mode label."""
        self.metrics.passthrough.labels(up.name, reason).inc()
        return "text"

    def account(self, up: Upstream, enc: Encoded) -> None:
        """Record one encode in ``/metrics``, while the upstream works on the request."""
        asyncio.get_running_loop().call_soon(self._account, up, enc)

    def _account(self, up: Upstream, enc: Encoded) -> None:
        m = self.metrics
        m.tokenize_seconds.labels(up.name).observe(enc.seconds)
        m.tokens_reused.labels(up.name).inc(enc.reused_tokens)
        m.chars_encoded.labels(up.name).inc(enc.encoded_chars)
        m.prompt_tokens.labels(up.name).inc(len(enc.ids))
        m.widenings.inc(enc.widenings)
        m.full_fallbacks.inc(enc.full_fallback)
        assert up.cache is not None
        st = up.cache.stats
        m.cache_entries.set(sum(u.cache.stats.entries for u in self.upstreams if u.cache))
        m.cache_bytes.set(sum(u.cache.stats.nbytes for u in self.upstreams if u.cache))
        totals = (
            ("evictions", m.cache_evictions, st.evictions),
            ("forks", m.cache_forks, st.forks),
            ("shadow_checks", m.shadow_checks, st.shadow_checks),
            ("shadow_mismatches", m.shadow_mismatches, st.shadow_mismatches),
        )
        for name, counter, value in totals:
            # the cache keeps running totals; a Prometheus counter only takes increments
            seen = self._seen.get((up.name, name), 0.0)
            if value > seen:
                counter.inc(value - seen)
                self._seen[(up.name, name)] = value


# -- routes ------------------------------------------------------------------------------
async def chat_completions(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    up: Upstream | None = None
    mode = "text"
    try:
        headers = scope["headers"]
        gw.check_key(header(headers, "authorization"))
        raw, body = await gw.body(scope, receive)
        up = await gw.route(body["model"])
        if gw.request_log is not None:
            gw.request_log.write(body, model=body["model"], upstream=up.name)
        mode, response = await _chat(gw, up, raw, body, header(headers, SESSION_HEADER))
    except BadRequest as exc:
        response = openai_error(exc.status, exc.message)
    except ClientGone:
        response = Response(status_code=499)
    return gw.count("chat", up, mode, response)


async def _chat(
    gw: Gateway, up: Upstream, raw: bytes, body: dict[str, Any], pin: str | None
) -> tuple[str, Response]:
    stream = body.get("stream") is True

    async def as_text(reason: str | None) -> tuple[str, Response]:
        if reason is not None:
            gw.passthrough(up, reason)
        return "text", await forward(
            up, "/chat/completions", raw, stream=stream, metrics=gw.metrics
        )

    if up.api is None or up.renderer is None or up.cache is None:
        return await as_text(None)
    try:
        inputs = prepare_chat(body, up.renderer.source)
        prompt = up.renderer.render(inputs.messages, tools=inputs.tools, **inputs.template_kwargs)
    except PassThrough as exc:
        return await as_text(exc.reason)
    except Exception as exc:  # a template that raises: vLLM answers it its own way
        log.info("upstream %s: render failed (%s); sent as text", up.name, type(exc).__name__)
        return await as_text("render_error")
    enc = await up.cache.encode(prompt, pin)
    gw.account(up, enc)
    if not await gw.verifier.agrees(up, body, enc.ids):
        return await as_text("verify_mismatch")
    if up.api == "completions" or up.plain_via_completions:
        try:
            return "ids", await _via_completions(gw, up, body, enc, stream)
        except CannotTranslate as exc:  # raised before anything is sent
            if up.api == "completions":
                return await as_text(exc.reason)
    data = chat_ids_body(body, enc.ids_json)
    return "ids", await forward(up, "/chat/completions", data, stream=stream, metrics=gw.metrics)


async def _via_completions(
    gw: Gateway, up: Upstream, body: dict[str, Any], enc: Encoded, stream: bool
) -> Response:
    """The chat answered by ``/v1/completions`` with the ids; :class:`CannotTranslate` first
    when that answer would not be exactly the chat's."""
    out = completions_body(body, enc.ids, max_model_len=up.chat_default_limit(body["model"]))
    del out["prompt"]  # the ids go in as one array, not through a dict re-dump
    data = splice_ids(out, "prompt", enc.ids_json)
    model = body["model"]
    if stream:
        options = body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        tr = ChatStreamTranslator(model=model, include_usage=usage)
        return await forward(
            up,
            "/completions",
            data,
            stream=True,
            metrics=gw.metrics,
            rewrite_stream=(tr.feed, tr.close),
        )

    def to_chat(answer: bytes) -> bytes:
        return orjson.dumps(chat_response(orjson.loads(answer), model=model))

    return await forward(
        up, "/completions", data, stream=False, metrics=gw.metrics, rewrite_body=to_chat
    )


async def completions(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    up: Upstream | None = None
    mode = "text"
    try:
        gw.check_key(header(scope["headers"], "authorization"))
        raw, body = await gw.body(scope, receive)
        up = await gw.route(body["model"])
        if gw.request_log is not None:
            gw.request_log.write(body, model=body["model"], upstream=up.name)
        stream = body.get("stream") is True
        prompt = body.get("prompt")
        data = raw
        if up.cache is not None and up.api is not None and isinstance(prompt, str):
            enc = await up.cache.encode(prompt, header(scope["headers"], SESSION_HEADER))
            gw.account(up, enc)
            rest = {k: v for k, v in body.items() if k != "prompt"}
            data, mode = splice_ids(rest, "prompt", enc.ids_json), "ids"
        elif up.api is not None:
            mode = gw.passthrough(up, "prompt_not_text")
        response = await forward(up, "/completions", data, stream=stream, metrics=gw.metrics)
    except BadRequest as exc:
        response = openai_error(exc.status, exc.message)
    except ClientGone:
        response = Response(status_code=499)
    return gw.count("completions", up, mode, response)


async def models(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    try:
        gw.check_key(request.headers.get("authorization"))
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
    return Response(gw.metrics.exposition(), media_type="text/plain; version=0.0.4")


async def not_served(request: Request) -> Response:
    return openai_error(
        404,
        f"{request.method} {request.url.path} is not served by the gateway "
        "(it serves /v1/chat/completions, /v1/completions, /v1/models, /health, "
        "/metrics)",
    )


def method_not_allowed(method: str, path: str) -> Response:
    return openai_error(405, f"{method} {path}: only POST is served here")


def create_app(settings: GatewaySettings, *, env: Mapping[str, str] | None = None) -> HotPath:
    """The gateway as an ASGI app; upstreams are probed when it starts (lifespan).

    >>> from ttftscope.config.schema import GatewaySettings
    >>> create_app(GatewaySettings()).state.gateway.upstreams
    []
    """
    gateway = Gateway(settings, environment() if env is None else env)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.close()

    routes = [
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
    }
    return HotPath(app, hot, method_not_allowed)

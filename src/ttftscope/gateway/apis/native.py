"""An agent API vLLM serves itself (messages, responses): the same body upstream, ids added.

vLLM converts an Anthropic or Responses request to a chat request and copies the body's
``kv_transfer_params`` into it, so the gateway forwards the client's own body with
``kv_transfer_params.prompt_token_ids`` and vLLM still writes its own answer (blocks, tool
calls, stop reasons, events). The conversion to vLLM's chat body is the API's own
(``apis/<api>/convert.py``), handed in by its endpoint.

>>> from ttftscope.gateway.apis.native import serve_native
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.responses import Response

from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import encode_chat, prepare, takes_ids
from ttftscope.gateway.pipeline.inputpolicy import stream_of
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.render import Convert
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Gateway, internal_error, session_pin
from ttftscope.gateway.transport.apierrors import BadRequest, ErrorFormat, error_response
from ttftscope.gateway.transport.asgi import ClientGone, Receive, Scope, cancel_status
from ttftscope.gateway.transport.idsbody import kv_ids_body
from ttftscope.gateway.transport.jsoncodec import InexactNumber


async def serve_native(
    gw: Gateway,
    scope: Scope,
    receive: Receive,
    *,
    api: NativeApi,
    convert: Convert,
    path: str,
    fmt: ErrorFormat,
) -> Response:
    """Answer one request of ``api`` (converted by ``convert``; upstream ``path``), errors
    in ``fmt``."""
    up: Upstream | None = None
    mode = "text"
    try:
        raw, body, up = await gw.read(scope, receive)
        stream = stream_of(body)  # gw.read checked it
        data, mode = await _with_ids(gw, up, raw, body, scope, api, convert)
        response = await forward(up, path, data, stream=stream, metrics=gw.metrics, fmt=fmt)
    except BadRequest as exc:
        response = error_response(fmt, exc.status, exc.message, headers=exc.headers)
    except ClientGone:
        response = Response(status_code=499)
    except asyncio.CancelledError:  # the client left (499) or the deadline passed (504)
        if (status := cancel_status()) is not None:
            gw.count(api, up, mode, Response(status_code=status))
        raise
    except Exception:
        response = internal_error(fmt, api)
    return gw.count(api, up, mode, response)


async def _with_ids(
    gw: Gateway,
    up: Upstream,
    raw: bytes,
    body: dict[str, Any],
    scope: Scope,
    api: NativeApi,
    convert: Convert,
) -> tuple[bytes, str]:
    """The bytes to send and the mode: the body with ids, or as it came (text)."""
    if not takes_ids(up, api):
        if up.api is not None:  # an ids upstream that takes ids on chat only
            gw.passthrough(up, "upstream_api")
        return raw, "text"
    try:
        chat, prompt = await prepare(gw, up, body, len(raw), api, convert)
        pin = session_pin(scope["headers"], body)
        enc = await encode_chat(gw, up, chat, prompt, pin=pin, api=api, native=body)
    except PassThrough as exc:
        return raw, gw.passthrough(up, exc.reason)
    try:
        return kv_ids_body(body, enc.ids_json), "ids"
    except InexactNumber:  # its bytes go as they came
        return raw, gw.passthrough(up, "inexact_number")

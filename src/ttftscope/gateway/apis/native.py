"""An agent API vLLM serves itself (messages, responses): the same body upstream, ids added.

vLLM converts an Anthropic or Responses request to a chat request and copies the body's
``kv_transfer_params`` into it, so the gateway forwards the client's own body with
``kv_transfer_params.prompt_token_ids`` and vLLM still writes its own answer (blocks, tool
calls, stop reasons, events). The conversion to vLLM's chat body is the API's own
(``apis/<api>/convert.py``), handed in by its endpoint.

>>> from ttftscope.gateway.apis.native import serve_native
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import Convert, encode_chat, prepare, takes_ids
from ttftscope.gateway.pipeline.inputpolicy import stream_of
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Call, Gateway, session_pin
from ttftscope.gateway.transport.apierrors import ErrorFormat
from ttftscope.gateway.transport.asgi import Scope
from ttftscope.gateway.transport.idsbody import kv_ids_body
from ttftscope.gateway.transport.jsoncodec import InexactNumber


async def serve_native(
    call: Call,
    *,
    api: NativeApi,
    convert: Convert,
    path: str,
    fmt: ErrorFormat,
) -> Response:
    """Answer one request of ``api`` (converted by ``convert``; upstream ``path``), errors
    in ``fmt``."""
    gw, up, body = call.gw, call.routed, call.body
    stream = stream_of(body)  # gw.read checked it
    data, call.mode = await _with_ids(gw, up, call.raw, body, call.scope, api, convert)
    return await forward(up, path, data, stream=stream, metrics=gw.metrics, fmt=fmt)


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

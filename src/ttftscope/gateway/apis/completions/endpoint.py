"""``POST /v1/completions``: a text prompt encoded incrementally, its ids spliced in.

>>> from ttftscope.gateway.apis.completions.endpoint import completions
"""

from __future__ import annotations

import asyncio

from starlette.responses import Response

from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import encode_prompt
from ttftscope.gateway.pipeline.inputpolicy import stream_of
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Gateway, internal_error, session_pin
from ttftscope.gateway.transport.apierrors import BadRequest, openai_error
from ttftscope.gateway.transport.asgi import ClientGone, Receive, Scope, cancel_status
from ttftscope.gateway.transport.idsbody import splice_ids
from ttftscope.gateway.transport.jsoncodec import InexactNumber


async def completions(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    """One completions request, answered by the routed upstream."""
    up: Upstream | None = None
    mode = "text"
    try:
        raw, body, up = await gw.read(scope, receive)
        stream = stream_of(body)  # gw.read checked it
        prompt = body.get("prompt")
        data = raw
        if up.cache is not None and up.api is not None and isinstance(prompt, str):
            pin = session_pin(scope["headers"], body)
            enc = await encode_prompt(gw, up, body["model"], prompt, pin)
            rest = {k: v for k, v in body.items() if k != "prompt"}
            try:
                data, mode = splice_ids(rest, "prompt", enc.ids_json), "ids"
            except InexactNumber:  # its bytes go as they came
                mode = gw.passthrough(up, "inexact_number")
        elif up.api is not None:
            mode = gw.passthrough(up, "prompt_not_text")
        response = await forward(up, "/completions", data, stream=stream, metrics=gw.metrics)
    except BadRequest as exc:
        response = openai_error(exc.status, exc.message, headers=exc.headers)
    except ClientGone:
        response = Response(status_code=499)
    except asyncio.CancelledError:  # the client left (499) or the deadline passed (504)
        if (status := cancel_status()) is not None:
            gw.count("completions", up, mode, Response(status_code=status))
        raise
    except Exception:
        response = internal_error("openai", "completions")
    return gw.count("completions", up, mode, response)

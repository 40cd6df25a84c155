"""``POST /v1/completions``: a text prompt encoded incrementally, its ids spliced in.

>>> from ttftscope.gateway.apis.completions.endpoint import completions
"""

from __future__ import annotations

from starlette.responses import Response

from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import encode_prompt
from ttftscope.gateway.pipeline.inputpolicy import stream_of
from ttftscope.gateway.state import Call, session_pin
from ttftscope.gateway.transport.idsbody import splice_ids
from ttftscope.gateway.transport.jsoncodec import InexactNumber


async def completions(call: Call) -> Response:
    """One completions request, answered by the routed upstream."""
    gw, up, body = call.gw, call.routed, call.body
    stream = stream_of(body)  # gw.read checked it
    prompt = body.get("prompt")
    data = call.raw
    if up.cache is not None and up.api is not None and isinstance(prompt, str):
        pin = session_pin(call.scope["headers"], body)
        enc = await encode_prompt(gw, up, body["model"], prompt, pin)
        rest = {k: v for k, v in body.items() if k != "prompt"}
        try:
            data, call.mode = splice_ids(rest, "prompt", enc.ids_json), "ids"
        except InexactNumber:  # its bytes go as they came
            call.mode = gw.passthrough(up, "inexact_number")
    elif up.api is not None:
        call.mode = gw.passthrough(up, "prompt_not_text")
    return await forward(up, "/completions", data, stream=stream, metrics=gw.metrics)

"""``POST /v1/messages`` (Claude Code) and ``/v1/messages/count_tokens``, on the id path.

Messages: vLLM's Anthropic → chat conversion reproduced
(:mod:`~ttftscope.gateway.apis.messages.vllm_messages`), the ids sent in the Anthropic body's own
``kv_transfer_params``, vLLM's Anthropic answer relayed (streamed or not). Errors of the
gateway's own are in Anthropic's format. ``?beta=true`` (Claude Code) changes nothing.

count_tokens is answered by the gateway from its own rendering and encoder, the way vLLM
counts (the rendered prompt's ids), with no upstream call; what cannot be reproduced is
asked of the upstream.

>>> from ttftscope.gateway.apis.messages.endpoint import messages
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from ttftscope.gateway.apis.messages.convert import messages_as_chat
from ttftscope.gateway.apis.native import serve_native
from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import encode_chat, prepare, takes_ids
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Call, Gateway, session_pin
from ttftscope.gateway.transport.asgi import Scope


async def messages(call: Call) -> Response:
    """One Anthropic Messages request, answered by vLLM's ``/v1/messages``."""
    return await serve_native(
        call,
        api="messages",
        convert=messages_as_chat,
        path="/messages",
        fmt="anthropic",
    )


async def count_tokens(call: Call) -> Response:
    """``input_tokens`` of an Anthropic request, counted by the gateway."""
    gw, up, body = call.gw, call.routed, call.body
    n = None
    if takes_ids(up, "messages"):
        n = await _count(gw, up, body, len(call.raw), call.scope)
    if n is None:
        return await forward(
            up,
            "/messages/count_tokens",
            call.raw,
            stream=False,
            metrics=gw.metrics,
            fmt="anthropic",
        )
    call.mode = "ids"
    answer = {"input_tokens": n, "context_management": {"original_input_tokens": n}}
    return Response(orjson.dumps(answer), media_type="application/json")


async def _count(
    gw: Gateway, up: Upstream, body: dict[str, Any], size: int, scope: Scope
) -> int | None:
    if not isinstance(body.get("model"), str) or not body["model"]:
        return None  # vLLM's 400 says what is wrong
    try:
        chat, prompt = await prepare(gw, up, body, size, "messages", messages_as_chat)
        pin = session_pin(scope["headers"], body)
        # no length bound: Claude Code counts to learn when to compact a long conversation
        enc = await encode_chat(gw, up, chat, prompt, pin=pin, api="messages", bounded=False)
    except PassThrough as exc:
        gw.passthrough(up, exc.reason)
        return None
    return len(enc.ids)

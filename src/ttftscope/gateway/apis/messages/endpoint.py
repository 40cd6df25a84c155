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

import asyncio
from typing import Any

import orjson
from starlette.responses import Response

from ttftscope.gateway.apis.messages.convert import messages_as_chat
from ttftscope.gateway.apis.native import serve_native
from ttftscope.gateway.pipeline.forward import forward
from ttftscope.gateway.pipeline.idpath import encode_chat, prepare, takes_ids
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Gateway, internal_error, session_pin
from ttftscope.gateway.transport.apierrors import BadRequest, anthropic_error
from ttftscope.gateway.transport.asgi import ClientGone, Receive, Scope, cancel_status


async def messages(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    """One Anthropic Messages request, answered by vLLM's ``/v1/messages``."""
    return await serve_native(
        gw,
        scope,
        receive,
        api="messages",
        convert=messages_as_chat,
        path="/messages",
        fmt="anthropic",
    )


async def count_tokens(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    """``input_tokens`` of an Anthropic request, counted by the gateway."""
    up: Upstream | None = None
    mode = "text"
    try:
        raw, body, up = await gw.read(scope, receive)
        n = await _count(gw, up, body, len(raw), scope) if takes_ids(up, "messages") else None
        if n is None:
            response = await forward(
                up, "/messages/count_tokens", raw, stream=False, metrics=gw.metrics, fmt="anthropic"
            )
        else:
            mode = "ids"
            answer = {"input_tokens": n, "context_management": {"original_input_tokens": n}}
            response = Response(orjson.dumps(answer), media_type="application/json")
    except BadRequest as exc:
        response = anthropic_error(exc.status, exc.message, headers=exc.headers)
    except ClientGone:
        response = Response(status_code=499)
    except asyncio.CancelledError:  # the client left (499) or the deadline passed (504)
        if (status := cancel_status()) is not None:
            gw.count("count_tokens", up, mode, Response(status_code=status))
        raise
    except Exception:
        response = internal_error("anthropic", "count_tokens")
    return gw.count("count_tokens", up, mode, response)


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

"""``POST /v1/chat/completions``: the chat's ids to vLLM's chat (``kv_transfer_params``), or
translated to ``/v1/completions`` where that answers exactly (``translate``).

>>> from ttftscope.gateway.apis.chat.endpoint import chat_completions
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from ttftscope.gateway.apis.chat.convert import as_chat
from ttftscope.gateway.apis.chat.translate import CannotTranslate, completions_body
from ttftscope.gateway.apis.chat.translate_answers import ChatStreamTranslator, chat_response
from ttftscope.gateway.pipeline.forward import answer_object, forward
from ttftscope.gateway.pipeline.idpath import encode_chat, prepare, takes_ids
from ttftscope.gateway.pipeline.inputpolicy import lax_bool, stream_of
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.sessions import Encoded
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.state import Call, Gateway, session_pin
from ttftscope.gateway.transport.idsbody import chat_ids_body, splice_ids
from ttftscope.gateway.transport.jsoncodec import InexactNumber, dumps


async def chat_completions(call: Call) -> Response:
    """One chat request, answered by the routed upstream."""
    pin = session_pin(call.scope["headers"], call.body)
    call.mode, response = await _chat(call.gw, call.routed, call.raw, call.body, pin)
    return response


async def _chat(
    gw: Gateway, up: Upstream, raw: bytes, body: dict[str, Any], pin: str | None
) -> tuple[str, Response]:
    stream = stream_of(body)  # gw.read checked it

    async def as_text(reason: str | None) -> tuple[str, Response]:
        if reason is not None:
            gw.passthrough(up, reason)
        return "text", await forward(
            up, "/chat/completions", raw, stream=stream, metrics=gw.metrics
        )

    if not takes_ids(up, "chat"):
        return await as_text(None)
    try:
        _, prompt = await prepare(gw, up, body, len(raw), "chat", as_chat)
        enc = await encode_chat(gw, up, body, prompt, pin=pin, api="chat")
    except PassThrough as exc:
        return await as_text(exc.reason)
    if up.api == "completions" or up.plain_via_completions:
        try:
            return "ids", await _via_completions(gw, up, body, enc, stream)
        except CannotTranslate as exc:  # raised before anything is sent
            if up.api == "completions":
                return await as_text(exc.reason)
        except InexactNumber:  # its bytes go as they came
            return await as_text("inexact_number")
    try:
        data = chat_ids_body(body, enc.ids_json)
    except InexactNumber:  # its bytes go as they came
        return await as_text("inexact_number")
    return "ids", await forward(up, "/chat/completions", data, stream=stream, metrics=gw.metrics)


async def _via_completions(
    gw: Gateway, up: Upstream, body: dict[str, Any], enc: Encoded, stream: bool
) -> Response:
    """The chat answered by ``/v1/completions`` with the ids; :class:`CannotTranslate` first
    when that answer would not be exactly the chat's (:class:`InexactNumber` when the body
    cannot be re-written exactly)."""
    out = completions_body(body, enc.ids, max_model_len=up.chat_default_limit(body["model"]))
    del out["prompt"]  # the ids go in as one array, not through a dict re-dump
    data = splice_ids(out, "prompt", enc.ids_json)
    model = body["model"]
    if stream:
        options = body.get("stream_options")
        usage = isinstance(options, dict) and _lax_true(options.get("include_usage"))
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
        return dumps(chat_response(answer_object(answer), model=model))

    return await forward(
        up, "/completions", data, stream=False, metrics=gw.metrics, rewrite_body=to_chat
    )


def _lax_true(value: object) -> bool:
    """Whether vLLM reads ``value`` as true (it refuses what is neither: so does the upstream)."""
    try:
        return lax_bool(value) is True
    except ValueError:
        return False

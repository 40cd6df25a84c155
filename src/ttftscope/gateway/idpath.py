"""The id path every endpoint shares: a chat body in vLLM's form → rendered prompt → exact ids.

Each endpoint first turns its own API's body into the chat body vLLM derives from it
(chat: the body itself; messages: :mod:`~ttftscope.gateway.vllm_messages`; responses:
:mod:`~ttftscope.gateway.vllm_responses`). From there the stages are the same: vLLM's chat
rewrites (:func:`~ttftscope.gateway.vllm_chat.prepare_chat`), the template render, the
session cache's incremental encode (pinned to the client's conversation when it names one),
the encode's metrics, and verification against the upstream's own rendering. Whatever
cannot be reproduced raises :class:`~ttftscope.gateway.vllm_chat.PassThrough`, and the
endpoint sends its request as text.

>>> from ttftscope.config.schema import UpstreamSettings
>>> from ttftscope.gateway.upstreams import Upstream
>>> up = Upstream("u", UpstreamSettings(base_url="http://h:1/v1", mode="text"))
>>> takes_ids(up, "messages")
False
"""

from __future__ import annotations

import logging
from typing import Any

from ttftscope.gateway.sessions import Encoded
from ttftscope.gateway.state import Gateway
from ttftscope.gateway.upstreams import Upstream
from ttftscope.gateway.verify import GatewayApi
from ttftscope.gateway.vllm_chat import ChatInputs, PassThrough, prepare_chat

log = logging.getLogger("ttftscope.gateway")


def takes_ids(up: Upstream, api: GatewayApi) -> bool:
    """Whether ``up`` takes ids for ``api`` at all (else its requests go as text, uncounted).

    Chat works over either ids API; messages and responses only where vLLM's own endpoint
    takes ``kv_transfer_params`` (a chat-ids upstream of a reproduced version).
    """
    if up.api is None or up.renderer is None or up.cache is None:
        return False
    return api == "chat" or up.api == "chat-ids"


def render(up: Upstream, inputs: ChatInputs) -> str:
    """The prompt ``up``'s template renders for ``inputs``; PassThrough if it raises."""
    assert up.renderer is not None, "takes_ids() first"
    try:
        return up.renderer.render(inputs.messages, tools=inputs.tools, **inputs.template_kwargs)
    except Exception as exc:  # a template that raises: vLLM answers it its own way
        log.info("upstream %s: render failed (%s); sent as text", up.name, type(exc).__name__)
        raise PassThrough("render_error", type(exc).__name__) from None


def render_chat(up: Upstream, chat_body: dict[str, Any]) -> str:
    """vLLM's rewrites, then the render: the prompt text of ``chat_body`` on ``up``."""
    return render(up, chat_inputs(up, chat_body))


def chat_inputs(up: Upstream, chat_body: dict[str, Any]) -> ChatInputs:
    """vLLM's chat rewrites of ``chat_body`` for ``up``'s template (PassThrough if unsure)."""
    assert up.renderer is not None, "takes_ids() first"
    return prepare_chat(chat_body, up.renderer.source)


async def encode_chat(
    gw: Gateway,
    up: Upstream,
    chat_body: dict[str, Any],
    inputs: ChatInputs,
    *,
    pin: str | None,
    api: GatewayApi,
    native: dict[str, Any] | None = None,
) -> Encoded:
    """The exact ids of the prompt ``inputs`` render on ``up``, checked against the
    upstream's own rendering of ``chat_body`` (or of ``native``, the request in its own
    API, where the upstream reports that) when due."""
    prompt = render(up, inputs)
    assert up.cache is not None
    enc = await up.cache.encode(prompt, pin)
    gw.account(up, enc)
    if not await gw.verifier.agrees(up, chat_body, enc.ids, api, native):
        raise PassThrough("verify_mismatch", "the upstream's own rendering differs")
    return enc

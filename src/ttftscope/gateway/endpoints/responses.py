"""``POST /v1/responses`` (Codex), stateless, on the id path.

vLLM's Responses → chat conversion reproduced (:mod:`~ttftscope.gateway.vllm_responses`),
the ids sent in the Responses body's own ``kv_transfer_params``, vLLM's answer (items,
events) relayed. Stateful requests (``previous_response_id``, ``store: true``,
``conversation``, ``background``) need the server's own store: they go as text, counted.
So do Harmony models (gpt-oss: vLLM renders them its own way and ignores forwarded ids) and
tokenizers that add special tokens (vLLM encodes a Responses prompt with them; the session
cache encodes without).

>>> from ttftscope.gateway.endpoints.responses import responses
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from ttftscope.gateway.asgi import Receive, Scope
from ttftscope.gateway.endpoints.native import serve_native
from ttftscope.gateway.passthrough import PassThrough
from ttftscope.gateway.state import Gateway
from ttftscope.gateway.upstreams import Upstream
from ttftscope.gateway.vllm_chat import ChatInputs
from ttftscope.gateway.vllm_responses import responses_inputs, responses_to_chat

_HARMONY = frozenset({"gpt_oss"})


async def responses(gw: Gateway, scope: Scope, receive: Receive) -> Response:
    """One Responses request, answered by vLLM's ``/v1/responses``."""
    return await serve_native(
        gw, scope, receive, api="responses", path="/responses", fmt="openai", convert=_to_chat
    )


def _to_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    assert up.renderer is not None and up.tok is not None, "takes_ids() first"
    if up.model_type in _HARMONY:  # vLLM renders Harmony messages and ignores the ids
        raise PassThrough("unsupported_item", f"a {up.model_type} model (Harmony)")
    if up.adds_special_tokens:  # vLLM encodes this API's prompt with them (chat: without)
        raise PassThrough("add_special_tokens", "the tokenizer adds special tokens")
    chat = responses_to_chat(body)  # once: the body is converted, then rewritten as chat
    return chat, responses_inputs(chat, up.renderer.source)

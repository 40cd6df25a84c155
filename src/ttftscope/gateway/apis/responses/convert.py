"""A Responses body → the chat body vLLM converts it to on one upstream, and its inputs.

The conversion itself is vLLM's, reproduced in :mod:`.vllm_responses`; here, what the
upstream's model and tokenizer rule out (Harmony models, tokenizers that add special tokens).

>>> responses_as_chat.__name__
'responses_as_chat'
"""

from __future__ import annotations

from typing import Any

from ttftscope.gateway.apis.responses.vllm_responses import responses_inputs, responses_to_chat
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs

__all__ = ["responses_as_chat"]

_HARMONY = frozenset({"gpt_oss"})


def responses_as_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    """The chat body vLLM converts a Responses ``body`` to on ``up``, and its template inputs."""
    assert up.renderer is not None and up.tok is not None, "takes_ids() first"
    if up.model_type in _HARMONY:  # vLLM renders Harmony messages and ignores the ids
        raise PassThrough("unsupported_item", f"a {up.model_type} model (Harmony)")
    if up.adds_special_tokens:  # vLLM encodes this API's prompt with them (chat: without)
        raise PassThrough("add_special_tokens", "the tokenizer adds special tokens")
    chat = responses_to_chat(body, up.profile)  # converted once, then rewritten as chat
    return chat, responses_inputs(chat, up.renderer.source, up.profile)

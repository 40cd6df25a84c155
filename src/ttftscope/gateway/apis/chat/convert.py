"""The chat API's conversion: the body is vLLM's chat body already; its rewrites remain.

>>> as_chat.__name__
'as_chat'
"""

from __future__ import annotations

from typing import Any

from ttftscope.gateway.pipeline.idpath import chat_inputs
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs

__all__ = ["as_chat"]


def as_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    """The chat API's conversion: the body is vLLM's chat body already."""
    return body, chat_inputs(up, body)

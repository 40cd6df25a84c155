"""An Anthropic body → the chat body vLLM converts it to on one upstream, and its inputs.

The conversion itself is vLLM's, reproduced in :mod:`.vllm_messages`; what it reads of the
upstream (its template merges an inline system message or not; the effort its template is
probed with for disabled thinking, once per template) is found here.

>>> messages_as_chat.__name__
'messages_as_chat'
"""

from __future__ import annotations

from typing import Any

from ttftscope.gateway.apis.messages.vllm_messages import (
    disabled_thinking_effort,
    merges_inline_system,
    messages_to_chat,
)
from ttftscope.gateway.pipeline.idpath import chat_inputs, render
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs

__all__ = ["messages_as_chat"]

# the effort vLLM probes once per template for Anthropic thinking "disabled"
_DISABLED: dict[str, str] = {}


def messages_as_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    """The chat body vLLM converts an Anthropic ``body`` to on ``up``, and its template inputs."""
    assert up.renderer is not None, "takes_ids() first"
    merge = merges_inline_system(up.renderer.source)
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    effort = _disabled_effort(up) if kind in ("disabled", "between_tools") else "none"
    chat = messages_to_chat(
        body, merge_inline_system=merge, disabled_effort=effort, profile=up.profile
    )
    return chat, chat_inputs(up, chat)


def _disabled_effort(up: Upstream) -> str:
    """The effort vLLM maps Anthropic's disabled thinking to on ``up``'s template."""
    assert up.renderer is not None
    source = up.renderer.source
    if source not in _DISABLED:

        def render_hi(effort: str) -> str | None:
            chat = {"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": effort}
            try:
                return render(up, chat_inputs(up, chat))
            except PassThrough:
                return None

        _DISABLED[source] = disabled_thinking_effort(render_hi)
    return _DISABLED[source]

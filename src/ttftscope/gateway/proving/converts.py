"""Every API's conversion on one upstream in one table, and the prompt each renders.

One :data:`~ttftscope.gateway.pipeline.idpath.Convert` per API (chat: the body itself;
messages: vLLM's Anthropic → chat; responses: vLLM's Responses → chat), each reading the
upstream's template and version profile. The endpoints pass their own to the id path; the
start-up conformance check, ``gateway check`` and the oracle tests render through
:func:`local_prompt`, which uses the same functions, so what is proven is what is served.

>>> sorted(CONVERTS)
['chat', 'messages', 'responses']
"""

from __future__ import annotations

from typing import Any

from ttftscope.gateway.apis.chat.convert import as_chat
from ttftscope.gateway.apis.messages.convert import messages_as_chat
from ttftscope.gateway.apis.responses.convert import responses_as_chat
from ttftscope.gateway.pipeline.idpath import Convert, render
from ttftscope.gateway.pipeline.passthrough import converted
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import Upstream

__all__ = ["CONVERTS", "local_prompt"]

CONVERTS: dict[NativeApi, Convert] = {
    "chat": as_chat,
    "messages": messages_as_chat,
    "responses": responses_as_chat,
}


def local_prompt(up: Upstream, api: NativeApi, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The chat body and prompt text ``up`` renders for ``body`` of ``api`` (PassThrough if
    the gateway would send it as text); its ids are ``up.tok.encode(prompt)``."""
    chat, inputs = converted(lambda: CONVERTS[api](up, body))
    return chat, render(up, inputs)

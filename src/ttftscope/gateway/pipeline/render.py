"""The render stage: a chat body in vLLM's form → its template inputs → the prompt text.

Every API's conversion (:data:`Convert`, one in each ``apis/<api>/convert.py``) ends here:
vLLM's chat rewrites of the chat body for the upstream's template and version
(:func:`chat_inputs`), then the upstream's template (:func:`render`).

>>> from ttftscope.config.schema import UpstreamSettings
>>> from ttftscope.gateway.pipeline.upstreams import Upstream
>>> up = Upstream("u", UpstreamSettings(base_url="http://h:1/v1", mode="text"))
>>> inputs = prepare_chat({"messages": [{"role": "user", "content": "hi"}]}, "", up.profile)
>>> inputs.messages
[{'role': 'user', 'content': 'hi'}]
>>> try:
...     render(up, inputs)  # a text upstream has no template loaded
... except AssertionError as exc:
...     print(exc)
takes_ids() first
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs, prepare_chat

__all__ = ["Convert", "chat_inputs", "render"]

# the chat body vLLM derives from an API body on this upstream, and its template inputs
Convert = Callable[[Upstream, dict[str, Any]], tuple[dict[str, Any], ChatInputs]]


def render(up: Upstream, inputs: ChatInputs) -> str:
    """The prompt ``up``'s template renders for ``inputs``; PassThrough if it raises."""
    assert up.renderer is not None, "takes_ids() first"
    try:
        return up.renderer.render(inputs.messages, tools=inputs.tools, **inputs.template_kwargs)
    except Exception as exc:  # a template that raises: vLLM answers it its own way
        raise PassThrough("render_error", type(exc).__name__) from None


def chat_inputs(up: Upstream, chat_body: dict[str, Any]) -> ChatInputs:
    """vLLM's chat rewrites of ``chat_body`` for ``up``'s template (PassThrough if unsure)."""
    assert up.renderer is not None, "takes_ids() first"
    return prepare_chat(chat_body, up.renderer.source, up.profile)

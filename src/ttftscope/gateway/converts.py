"""Each API's body → the chat body vLLM derives from it on one upstream, and its prompt and ids.

One :data:`Convert` per API (chat: the body itself; messages: vLLM's Anthropic → chat;
responses: vLLM's Responses → chat), each reading the upstream's template and version
profile. The endpoints, the start-up conformance check, ``gateway check`` and the oracle
tests all render through :func:`local_prompt`, so what is proven is what is served.

>>> from ttftscope.gateway.converts import CONVERTS
>>> sorted(CONVERTS)
['chat', 'messages', 'responses']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ttftscope.gateway.passthrough import PassThrough, converted
from ttftscope.gateway.shapes import NativeApi
from ttftscope.gateway.upstreams import Upstream
from ttftscope.gateway.vllm_chat import ChatInputs, prepare_chat
from ttftscope.gateway.vllm_messages import (
    disabled_thinking_effort,
    merges_inline_system,
    messages_to_chat,
)
from ttftscope.gateway.vllm_responses import responses_inputs, responses_to_chat

__all__ = ["CONVERTS", "Convert", "NativeApi", "chat_inputs", "local_prompt", "render"]

# the chat body vLLM derives from an API body on this upstream, and its template inputs
Convert = Callable[[Upstream, dict[str, Any]], tuple[dict[str, Any], ChatInputs]]
_HARMONY = frozenset({"gpt_oss"})
# the effort vLLM probes once per template for Anthropic thinking "disabled"
_DISABLED: dict[str, str] = {}


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


def as_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    """The chat API's conversion: the body is vLLM's chat body already."""
    return body, chat_inputs(up, body)


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


def responses_as_chat(up: Upstream, body: dict[str, Any]) -> tuple[dict[str, Any], ChatInputs]:
    """The chat body vLLM converts a Responses ``body`` to on ``up``, and its template inputs."""
    assert up.renderer is not None and up.tok is not None, "takes_ids() first"
    if up.model_type in _HARMONY:  # vLLM renders Harmony messages and ignores the ids
        raise PassThrough("unsupported_item", f"a {up.model_type} model (Harmony)")
    if up.adds_special_tokens:  # vLLM encodes this API's prompt with them (chat: without)
        raise PassThrough("add_special_tokens", "the tokenizer adds special tokens")
    chat = responses_to_chat(body, up.profile)  # converted once, then rewritten as chat
    return chat, responses_inputs(chat, up.renderer.source, up.profile)


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

"""When the gateway cannot reproduce vLLM's rendering: :class:`PassThrough` and its reasons.

Every conversion (chat, Anthropic Messages, Responses) and the id path raise it for a request
they cannot reproduce exactly; the request then goes upstream as text, and ``reason`` is a
metric label. :func:`converted` turns an unexpected shape inside a conversion into one.

>>> PassThrough("echo", "echo is set").detail
'echo is set'
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal, TypeVar

log = logging.getLogger("ttftscope.gateway")

__all__ = ["ChatPassReason", "PassReason", "PassThrough", "converted"]

ChatPassReason = Literal[
    "invalid_request",  # vLLM answers 400 (at render time, or certainly at validation)
    "kv_transfer_params",  # the client sends its own; vLLM would use or ignore those
    "echo",  # vLLM ignores forwarded ids with echo
    "request_chat_template",  # a template in the request (400 unless the server trusts it)
    "continue_final_message",  # the render is cut after the last message; not reproduced
    "add_special_tokens",  # vLLM's tokenizer call would add special tokens
    "truncate_prompt_tokens",  # forwarded ids skip vLLM's truncation
    "return_prompt_text",  # forwarded ids have no prompt text to return
    "non_text_content",  # media parts: vLLM ignores forwarded ids and renders itself
    "unsupported_content",  # text-like parts not reproduced (refusal, thinking, strings, keys)
    "unsupported_role",  # roles beyond system, developer, user, assistant, tool
    "unsupported_message",  # message fields whose handling is not reproduced
    "unsupported_tool",  # tool definitions whose validation or coercion is not reproduced
    "unsupported_tool_call",  # assistant tool calls not of type function (400 at render)
    "unsupported_value",  # a field vLLM would coerce (e.g. "true" for a boolean)
    "template_kwargs",  # chat_template_kwargs that change the call itself (tools, tokenize, …)
    "content_format",  # the template's content format cannot be told for certain
    "template",  # the template does not compile or reads variables the renderer lacks
]
# and those of the stages around this one (the endpoints' conversions, the id path)
PassReason = Literal[
    ChatPassReason,
    "stateful",  # Responses state kept by the server (previous_response_id, store, conversation)
    "unsupported_item",  # a Responses input item or field whose conversion is not reproduced
    "unsupported_block",  # an Anthropic content block or field whose conversion is not reproduced
    "render_error",  # the template raised: vLLM answers that its own way
    "verify_mismatch",  # the upstream's own rendering differed (logged where)
    "upstream_api",  # the upstream takes no ids on this API (not chat-ids)
    "conversion_error",  # a conversion raised on a shape it does not expect: vLLM answers it
    "unproven_shape",  # a shape class the upstream's conformance check did not prove
]


class PassThrough(Exception):
    """The request must go upstream as text: ``reason`` (a metric label) and ``detail``.

    >>> PassThrough("echo", "echo is set").reason
    'echo'
    """

    def __init__(self, reason: PassReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: PassReason = reason
        self.detail = detail


def converted(convert: Callable[[], _T]) -> _T:
    """``convert()``, a conversion of a client's body (to vLLM's chat body, to template inputs);
    an error it raises on a shape it does not expect (a list where a string goes, values
    nested past what ``repr`` and ``json`` take) becomes ``PassThrough("conversion_error")``:
    the body then goes as text and vLLM answers it, rather than the gateway failing.

    >>> converted(lambda: {}["missing"])
    Traceback (most recent call last):
    ...
    ttftscope.gateway.pipeline.passthrough.PassThrough: conversion_error: KeyError
    """
    try:
        return convert()
    except _CONVERSION_ERRORS as exc:
        log.info("a body could not be converted (%s); sent as text", type(exc).__name__)
        raise PassThrough("conversion_error", type(exc).__name__) from None


_T = TypeVar("_T")
_CONVERSION_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError)

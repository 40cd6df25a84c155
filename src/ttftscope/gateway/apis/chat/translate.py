"""Chat ↔ completions translation for upstreams that cannot take chat token ids.

The gateway renders a chat request into ids itself; an upstream without a chat-ids entry
(older vLLM, other engines) then gets ``prompt: [ids]`` on ``/v1/completions``, and the answer
is turned back into the objects vLLM 0.32's own ``/v1/chat/completions`` would have sent, field
for field and in vLLM's key order, so an OpenAI SDK client cannot tell the difference.

Only requests whose chat answer is a pure function of the completions answer are translated;
the rest (tools, structured outputs, logprobs, reasoning, streamed ``n>1``, unknown fields …)
raise :class:`CannotTranslate` and go upstream as text. Assumed: the upstream chat runs with no
tool or reasoning parser and ``--response-role assistant`` (a parser splits chat's output).
This module owns the request side (:func:`completions_body`, the refusals); the answers,
whole and streamed, are turned back in ``translate_answers`` (re-exported here).
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any, Final, Literal

from ttftscope.gateway.apis.chat.translate_answers import (
    ROLE,
    is_int,
)
from ttftscope.gateway.pipeline.inputpolicy import InvalidField, stream_of

__all__ = [
    "CannotTranslate", "TranslateReason",
    "completions_body",
]  # fmt: skip

TranslateReason = Literal[
    "tools", "tool_choice", "response_format", "structured_outputs", "logprobs", "reasoning",
    "n_stream", "beam_search", "echo", "prompt_text", "multimodal", "role", "prompt_token_ids",
    "context_length", "max_tokens_unknown", "invalid", "unknown_field",
]  # fmt: skip


class CannotTranslate(Exception):
    """The request must go upstream as text; ``reason`` is a metric label.

    >>> e = CannotTranslate("tools", "tools are set")
    >>> e.reason, str(e)
    ('tools', 'tools: tools are set')
    """

    def __init__(self, reason: TranslateReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: TranslateReason = reason
        self.detail = detail


# Same name, type and default on vLLM 0.32's ChatCompletionRequest and CompletionRequest, and
# the same use in to_sampling_params / get_max_tokens / the renderer: sent on verbatim, so the
# upstream validates them exactly as chat would (same errors for bad values).
_FORWARDED: Final = frozenset(
    {
        "model", "frequency_penalty", "logit_bias", "presence_penalty", "seed", "stop",
        "stream", "stream_options", "temperature", "top_p", "user", "top_k", "min_p",
        "repetition_penalty", "watermarking", "length_penalty", "stop_token_ids",
        "include_stop_str_in_output", "ignore_eos", "min_tokens", "skip_special_tokens",
        "spaces_between_special_tokens", "truncate_prompt_tokens", "truncation_side",
        "allowed_token_ids", "bad_words", "priority", "request_id", "session_id",
        "return_tokens_as_token_ids", "return_token_ids", "routed_experts_prompt_start",
        "return_token_offsets", "mm_payload", "return_mm_kwargs", "cache_salt",
        "kv_transfer_params", "ec_transfer_params", "vllm_xargs", "repetition_detection",
        "stream_interval",
    }
)  # fmt: skip

# Already rendered into the ids by the caller (vLLM's chat preprocessing): nothing to send.
_PROMPT_SIDE: Final = frozenset(
    {
        "messages", "chat_template", "chat_template_kwargs", "documents",
        "add_generation_prompt", "continue_final_message", "add_special_tokens",
    }
)  # fmt: skip

# Chat-only behaviour a completions answer cannot reproduce: field → (reason, the values
# under which the field changes nothing). Compared with ==, as pydantic's lax bools are.
_REFUSED: Final[dict[str, tuple[TranslateReason, tuple[object, ...]]]] = {
    "tools": ("tools", (None,)), "parallel_tool_calls": ("tools", (None, True)),
    "tool_choice": ("tool_choice", (None, "none")),
    "response_format": ("response_format", (None,)),
    "structured_outputs": ("structured_outputs", (None,)),
    "logprobs": ("logprobs", (None, False)), "top_logprobs": ("logprobs", (None, 0)),
    "prompt_logprobs": ("logprobs", (None,)), "logprob_token_ids": ("logprobs", (None, [])),
    "reasoning_effort": ("reasoning", (None,)), "include_reasoning": ("reasoning", (True,)),
    "thinking_token_budget": ("reasoning", (None,)),
    "use_beam_search": ("beam_search", (False,)), "echo": ("echo", (False,)),
    "return_prompt_text": ("prompt_text", (None, False)),
    "media_io_kwargs": ("multimodal", (None,)), "mm_processor_kwargs": ("multimodal", (None,)),
}  # fmt: skip

_MAPPED: Final = frozenset({"n", "max_tokens", "max_completion_tokens"})  # handled by name
_KNOWN: Final = _FORWARDED | _PROMPT_SIDE | _MAPPED | _REFUSED.keys()


def completions_body(
    chat_body: Mapping[str, Any],
    ids: list[int],
    *,
    max_model_len: int | None,
    generation_max_tokens: int | None = None,
) -> dict[str, Any]:
    """The ``/v1/completions`` request that generates exactly what ``chat_body`` would.

    ``max_completion_tokens`` (else ``max_tokens``) becomes ``max_tokens``. Without either,
    chat takes what is left of the context (``max_model_len - len(ids)``, after
    ``truncate_prompt_tokens``) capped by generation_config ``max_new_tokens``: pass that as
    ``generation_max_tokens``, else no cap is assumed. Unknown ``max_model_len`` →
    ``max_tokens_unknown``; no room left → ``context_length`` (chat gives its own 400).

    >>> completions_body({"messages": [], "stream": True, "n": 2}, [1], max_model_len=9)
    Traceback (most recent call last):
    ...
    ttftscope.gateway.apis.chat.translate.CannotTranslate: n_stream: n=2 cannot be streamed as chat
    >>> completions_body({"messages": [], "seed": 1}, [1, 2], max_model_len=9,
    ...                  generation_max_tokens=5)
    {'prompt': [1, 2], 'seed': 1, 'max_tokens': 5}
    """
    _check_refused(chat_body)
    unknown = sorted(set(chat_body) - _KNOWN)
    if unknown:
        raise CannotTranslate("unknown_field", f"not translated: {', '.join(unknown)}")
    _check_prompt_side(chat_body)
    out: dict[str, Any] = {"model": chat_body["model"]} if "model" in chat_body else {}
    out["prompt"] = list(ids)
    for name, value in chat_body.items():
        if name in _FORWARDED and name != "model":
            out[name] = value
    n = _n(chat_body)
    if n is not None:
        out["n"] = n
    out["max_tokens"] = _max_tokens(chat_body, len(ids), max_model_len, generation_max_tokens)
    return out


def _check_refused(body: Mapping[str, Any]) -> None:
    for name, (reason, neutral) in _REFUSED.items():
        if name in body and body[name] not in neutral:
            value = reprlib.repr(body[name])  # bounded: a client's value may nest 1000 deep
            raise CannotTranslate(reason, f"{name}={value} has no completions equivalent")
    kv = body.get("kv_transfer_params")
    if isinstance(kv, Mapping) and kv.get("prompt_token_ids") is not None:
        # chat would generate from these ids, not from the ones the gateway rendered
        raise CannotTranslate("prompt_token_ids", "kv_transfer_params.prompt_token_ids is set")


def _check_prompt_side(body: Mapping[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise CannotTranslate("invalid", "messages must be a list of objects")
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            not isinstance(p, Mapping) or p.get("type") != "text" for p in content
        ):
            raise CannotTranslate("multimodal", "a message has a non-text content part")
    generation_prompt = body.get("add_generation_prompt", True)
    if body.get("continue_final_message") and generation_prompt:
        raise CannotTranslate("invalid", "continue_final_message needs add_generation_prompt")
    # Without a generation prompt chat answers in the last message's role, not "assistant".
    last_role = messages[-1].get("role") if messages else None
    if not generation_prompt and last_role != ROLE:
        raise CannotTranslate("role", f"the answer would have role {last_role!r}")


def _n(body: Mapping[str, Any]) -> int | None:
    n = body.get("n")
    if n is None:
        return None  # chat takes null as 1; completions' n is not nullable
    if not is_int(n) or n < 1:
        raise CannotTranslate("invalid", f"n={reprlib.repr(n)}")
    if n > 1 and _streams(body):
        raise CannotTranslate("n_stream", f"n={n} cannot be streamed as chat")
    return int(n)


def _streams(body: Mapping[str, Any]) -> bool:
    try:
        return stream_of(body)  # as vLLM reads it: "no" does not stream
    except InvalidField as exc:
        raise CannotTranslate("invalid", str(exc)) from None


def _max_tokens(
    body: Mapping[str, Any], n_ids: int, max_model_len: int | None, cap: int | None
) -> object:
    for name in ("max_completion_tokens", "max_tokens"):
        if body.get(name) is not None:
            return body[name]  # same clamping and errors on both endpoints
    if max_model_len is None:
        raise CannotTranslate("max_tokens_unknown", "no max_tokens and max_model_len unknown")
    limit = body.get("truncate_prompt_tokens")
    if limit is not None and not is_int(limit):
        raise CannotTranslate("invalid", f"truncate_prompt_tokens={reprlib.repr(limit)}")
    prompt_len = n_ids if limit is None or limit < 0 else min(n_ids, limit)
    left = max_model_len - prompt_len
    if left <= 0:
        # chat rejects (or generates nothing); completions would reject another way
        raise CannotTranslate("context_length", f"{prompt_len} ids, {max_model_len} context")
    return left if cap is None else min(left, cap)

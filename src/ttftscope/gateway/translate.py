"""Chat ↔ completions translation for upstreams that cannot take chat token ids.

The gateway renders a chat request into ids itself; an upstream without a chat-ids entry
(older vLLM, other engines) then gets ``prompt: [ids]`` on ``/v1/completions``, and the answer
is turned back into the objects vLLM 0.32's own ``/v1/chat/completions`` would have sent, field
for field and in vLLM's key order, so an OpenAI SDK client cannot tell the difference.

Only requests whose chat answer is a pure function of the completions answer are translated;
the rest (tools, structured outputs, logprobs, reasoning, streamed ``n>1``, unknown fields …)
raise :class:`CannotTranslate` and go upstream as text. Assumed: the upstream chat runs with no
tool or reasoning parser and ``--response-role assistant`` (a parser splits chat's output).
Upstream errors (HTTP error bodies, in-stream ``{"error": …}`` events) are not touched, nor
are events the translator cannot read (not JSON, nested past ``json``'s reach); a lone
surrogate the upstream sent escaped stays escaped. A stream never stops on what it carries.
"""

from __future__ import annotations

import json
import reprlib
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from ttftscope.client.sse import SSEDecoder, SSEEvent
from ttftscope.gateway.inputpolicy import InvalidField, stream_of
from ttftscope.gateway.jsoncodec import dumps

__all__ = [
    "CannotTranslate", "ChatStreamTranslator", "TranslateReason", "chat_response",
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
_ROLE: Final = "assistant"  # vLLM's --response-role default

# vLLM 0.32's ChatCompletionResponse field order; prompt_logprobs and prompt_text stay null.
_RESPONSE_KEYS: Final = (
    "id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
    "usage", "prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params",
    "ec_transfer_params", "metrics",
)  # fmt: skip
_USAGE_DEFAULTS: Final[dict[str, object]] = {
    "prompt_tokens": 0, "total_tokens": 0, "completion_tokens": 0,
    "prompt_tokens_details": None, "completion_tokens_details": None,
}  # fmt: skip
_MESSAGE_NULLS: Final = ("refusal", "annotations", "audio", "function_call", "reasoning")


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
    ttftscope.gateway.translate.CannotTranslate: n_stream: n=2 cannot be streamed as chat
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
    if not generation_prompt and last_role != _ROLE:
        raise CannotTranslate("role", f"the answer would have role {last_role!r}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _n(body: Mapping[str, Any]) -> int | None:
    n = body.get("n")
    if n is None:
        return None  # chat takes null as 1; completions' n is not nullable
    if not _is_int(n) or n < 1:
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
    if limit is not None and not _is_int(limit):
        raise CannotTranslate("invalid", f"truncate_prompt_tokens={reprlib.repr(limit)}")
    prompt_len = n_ids if limit is None or limit < 0 else min(n_ids, limit)
    left = max_model_len - prompt_len
    if left <= 0:
        # chat rejects (or generates nothing); completions would reject another way
        raise CannotTranslate("context_length", f"{prompt_len} ids, {max_model_len} context")
    return left if cap is None else min(left, cap)


def _chat_id(upstream_id: object) -> str:
    """vLLM names both ``<prefix>-<X-Request-Id or request_id>``: swap the prefix.

    >>> _chat_id("cmpl-abc"), _chat_id("xyz")
    ('chatcmpl-abc', 'chatcmpl-xyz')
    """
    if isinstance(upstream_id, str):
        return "chatcmpl-" + upstream_id.removeprefix("cmpl-")
    return f"chatcmpl-{uuid.uuid4().hex}"


def _sse(obj: Mapping[str, Any]) -> str:
    # pydantic's model_dump_json: compact separators, UTF-8 text left unescaped
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:  # an upstream value nested too deep for json: orjson's loop
        text = dumps(obj).decode()
    return f"data: {text}\n\n"


def _raw_event(data: str) -> str:
    return "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


def _completion_chunk(data: str) -> dict[str, Any] | None:
    """``data`` as a completions chunk object (a list of object choices), else None."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested past json's stack
        return None
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if isinstance(choices, list) and all(
        isinstance(c, dict) and _is_int(c.get("index", 0)) for c in choices
    ):
        return obj  # type: ignore[no-any-return]
    return None


class ChatStreamTranslator:
    """Completions SSE bytes in (any chunking), vLLM-shaped chat chunk SSE bytes out.

    ``request_id`` is vLLM's base id (``X-Request-Id`` header, else body ``request_id``):
    chunks get ``chatcmpl-<request_id>``. Unset ``request_id``/``created`` come from the first
    upstream chunk (``cmpl-<base>`` names the same base when the request id was forwarded).
    The role chunk goes out with the first upstream chunk, as vLLM sends it with the first
    engine output. ``include_usage`` is the client's: when false, usage the caller forced
    upstream is dropped (but kept in :attr:`usage`). ``system_fingerprint`` is copied where
    the upstream puts it, which is chat's place when ``stream_options`` went through
    unchanged. Unknowable here: ``prompt_tokens_details.created_cache_tokens``.

    >>> t = ChatStreamTranslator(model="m", include_usage=False)
    >>> out = t.feed(b'data: {"id":"cmpl-1","created":7,"choices":[{"index":0,"text":"Hi",'
    ...              b'"finish_reason":"stop","stop_reason":null}]}\\n\\ndata: [DONE]\\n\\n')
    >>> print(out.decode().replace("\\n\\n", "\\n"), end="")  # doctest: +NORMALIZE_WHITESPACE
    data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}
    data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}
    data: [DONE]
    """  # noqa: E501

    def __init__(
        self,
        *,
        model: str,
        created: int | None = None,
        request_id: str | None = None,
        include_usage: bool,
    ) -> None:
        self._model = model
        self._created = created
        self._id = None if request_id is None else f"chatcmpl-{request_id}"
        self._include_usage = include_usage
        self._prefix: dict[str, Any] = {}  # id, object, created, model: fixed by the 1st chunk
        self._decoder = SSEDecoder()
        self._opened: set[int] = set()  # choice indexes whose role chunk went out
        self._done = False
        self.usage: dict[str, Any] | None = None
        """The last usage the upstream sent (continuous or final), whatever ``include_usage``."""

    def feed(self, chunk: bytes) -> bytes:
        """Translate the events ``chunk`` completes; ``b""`` while an event is still partial."""
        return self._emit(self._decoder.feed(chunk))

    def close(self) -> bytes:
        """Flush an unterminated last event. A stream cut before ``[DONE]`` stays cut."""
        return self._emit(self._decoder.close())

    def _emit(self, events: Iterable[SSEEvent]) -> bytes:
        out: list[str] = []
        for event in events:
            if not self._done:  # vLLM sends nothing after [DONE]; neither do we
                out.extend(self._translate(event))
        # a lone surrogate the upstream sent escaped (\\ud800) goes on escaped: valid JSON
        return "".join(out).encode("utf-8", "backslashreplace")

    def _translate(self, event: SSEEvent) -> list[str]:
        if event.is_done:
            self._done = True
            return ["data: [DONE]\n\n"]
        obj = _completion_chunk(event.data)
        if obj is None:
            return [_raw_event(event.data)]  # {"error": …} and anything unknown: unchanged
        self._bind(obj)
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]
        if not obj["choices"]:
            return self._usage_chunk(obj)
        return [line for choice in obj["choices"] for line in self._choice(obj, choice)]

    def _bind(self, obj: Mapping[str, Any]) -> None:
        if self._prefix:
            return
        created = obj.get("created") if self._created is None else self._created
        self._prefix = {
            "id": self._id or _chat_id(obj.get("id")),
            "object": "chat.completion.chunk",
            "created": created if _is_int(created) else int(time.time()),
            "model": self._model,
        }

    def _choice(self, obj: Mapping[str, Any], choice: Mapping[str, Any]) -> list[str]:
        index = choice.get("index", 0)
        usage = obj.get("usage") if self._include_usage else None
        out = []
        if index not in self._opened:
            self._opened.add(index)
            out.append(self._role_chunk(index, choice, usage))
        part = _part(index, {"content": choice.get("text") or ""})
        if choice.get("finish_reason") is not None:
            part["finish_reason"] = choice["finish_reason"]
            part["stop_reason"] = choice.get("stop_reason")
        part["token_ids"] = choice.get("token_ids")
        chunk = {**self._prefix, "choices": [part]}
        if isinstance(usage, dict):
            chunk["usage"] = _continuous_usage(usage)
        if obj.get("system_fingerprint") is not None:
            chunk["system_fingerprint"] = obj["system_fingerprint"]
        out.append(_sse(chunk))
        return out

    def _role_chunk(self, index: int, choice: Mapping[str, Any], usage: object) -> str:
        chunk = {**self._prefix, "choices": [_part(index, {"role": _ROLE, "content": ""})]}
        if isinstance(usage, dict):
            prompt = usage.get("prompt_tokens")
            chunk["usage"] = _continuous_usage(
                {"prompt_tokens": prompt, "total_tokens": prompt, "completion_tokens": 0}
            )
        # completions sends the prompt ids in its first choice; chat atop its first chunk
        chunk["prompt_token_ids"] = choice.get("prompt_token_ids")
        chunk["prompt_text"] = None
        return _sse(chunk)

    def _usage_chunk(self, obj: Mapping[str, Any]) -> list[str]:
        if not self._include_usage:
            return []
        chunk = {**self._prefix, "choices": []}
        for key, value in obj.items():  # usage, system_fingerprint, metrics: same on both
            if key not in chunk and value is not None:
                chunk[key] = value
        return [_sse(chunk)]


def _part(index: int, delta: dict[str, str]) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}


def _continuous_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    # chat's per-chunk UsageInfo sets completion_tokens_details (null without a parser)
    return {**usage, "completion_tokens_details": usage.get("completion_tokens_details")}


def chat_response(completion: Mapping[str, Any], *, model: str) -> dict[str, Any]:
    """The ``chat.completion`` vLLM's chat would answer, from a ``text_completion``.

    vLLM's field order and nulls (``model_dump()``); no ``tool_calls`` key, as vLLM's
    ``ChatMessage`` drops an empty list. ``usage`` is the upstream's (the true
    ``prompt_tokens``); unknowable: ``prompt_tokens_details.created_cache_tokens`` (null).
    An error body comes back unchanged.

    >>> r = chat_response({"id": "cmpl-9", "created": 5, "choices": [{"index": 0,
    ...     "text": "Hi", "finish_reason": "length", "stop_reason": None}],
    ...     "usage": {"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1}}, model="m")
    >>> r["id"], r["choices"][0]["message"]["content"], r["choices"][0]["finish_reason"]
    ('chatcmpl-9', 'Hi', 'length')
    >>> chat_response({"error": {"message": "x"}}, model="m")
    {'error': {'message': 'x'}}
    """
    choices = completion.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, Mapping) for c in choices):
        return dict(completion)
    out: dict[str, Any] = {key: completion.get(key) for key in _RESPONSE_KEYS}
    created = out["created"]
    out["id"] = _chat_id(out["id"])
    out["object"] = "chat.completion"
    out["created"] = created if _is_int(created) else int(time.time())
    out["model"] = model
    out["choices"] = [_chat_choice(c) for c in choices]
    if isinstance(out["usage"], Mapping):  # model_dump() writes every UsageInfo field
        out["usage"] = {k: out["usage"].get(k, d) for k, d in _USAGE_DEFAULTS.items()}
    out["prompt_token_ids"] = choices[0].get("prompt_token_ids") if choices else None
    return out


def _chat_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    message = {"role": _ROLE, "content": choice.get("text"), **dict.fromkeys(_MESSAGE_NULLS)}
    return {
        "index": choice.get("index", 0),
        "message": message,
        "logprobs": None,
        "finish_reason": choice.get("finish_reason") or "stop",  # chat's own fallback
        "stop_reason": choice.get("stop_reason"),
        "token_ids": choice.get("token_ids"),
        "routed_experts": choice.get("routed_experts"),
    }

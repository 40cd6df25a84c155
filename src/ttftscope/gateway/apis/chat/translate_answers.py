"""Completions answers back into the chat answers vLLM 0.32 would have sent (``translate``).

A ``text_completion`` becomes a ``chat.completion`` (:func:`chat_response`), a completions
stream becomes chat chunks (:class:`ChatStreamTranslator`), field for field and in vLLM's key
order. Upstream errors (HTTP error bodies, in-stream ``{"error": …}`` events) are not touched,
nor are events the translator cannot read (not JSON, nested past ``json``'s reach); a lone
surrogate the upstream sent escaped stays escaped. A stream never stops on what it carries.

>>> chat_response({"id": "cmpl-1", "choices": []}, model="m")["id"]
'chatcmpl-1'
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ttftscope.client.sse import SSEDecoder, SSEEvent
from ttftscope.gateway.transport.jsoncodec import dumps

__all__ = ["ROLE", "ChatStreamTranslator", "chat_response", "is_int"]

ROLE: Final = "assistant"  # vLLM's --response-role default
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


def is_int(value: object) -> bool:
    """An integer as JSON has them (``true`` is not 1).

    >>> is_int(3), is_int(True), is_int(3.0)
    (True, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool)


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
        isinstance(c, dict) and is_int(c.get("index", 0)) for c in choices
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
            "created": created if is_int(created) else int(time.time()),
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
        chunk = {**self._prefix, "choices": [_part(index, {"role": ROLE, "content": ""})]}
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
    out["created"] = created if is_int(created) else int(time.time())
    out["model"] = model
    out["choices"] = [_chat_choice(c) for c in choices]
    if isinstance(out["usage"], Mapping):  # model_dump() writes every UsageInfo field
        out["usage"] = {k: out["usage"].get(k, d) for k, d in _USAGE_DEFAULTS.items()}
    out["prompt_token_ids"] = choices[0].get("prompt_token_ids") if choices else None
    return out


def _chat_choice(choice: Mapping[str, Any]) -> dict[str, Any]:
    message = {"role": ROLE, "content": choice.get("text"), **dict.fromkeys(_MESSAGE_NULLS)}
    return {
        "index": choice.get("index", 0),
        "message": message,
        "logprobs": None,
        "finish_reason": choice.get("finish_reason") or "stop",  # chat's own fallback
        "stop_reason": choice.get("stop_reason"),
        "token_ids": choice.get("token_ids"),
        "routed_experts": choice.get("routed_experts"),
    }

"""The bytes that carry token ids upstream: small to parse, the id list serialized once.

A 100K-token prompt is ~0.6 MB of ids; re-dumping the whole request around it costs
the gateway ~2 ms. Here the rest of the body is dumped on its own and the ids are
spliced in as one ``orjson`` array.

With ``kv_transfer_params.prompt_token_ids`` vLLM 0.32 never renders ``messages``
(``renderers/online_renderer.py::OnlineRenderer.preprocess_chat`` leaves the
conversation empty), yet still validates them and reads: the last message's role (the
response role when ``add_generation_prompt`` is false), the assistant ``tool_calls``
count (tool-call ids of some parsers), whether any part is non-text (then it ignores
the ids), and the content part types (default multimodal LoRAs). Only message *text*
is unread, so :func:`trim_messages` empties text and keeps every key, role, type and
tool call: vLLM then parses ~0.3 MB less per 100K-token request and answers the same.
Callers send ids only for requests :func:`~ttftscope.gateway.vllm_chat.prepare_chat`
accepted (text parts only, no ``echo``), the cases where vLLM ignores the text.

>>> splice_ids({"model": "m"}, "prompt", [1, 2])
b'{"model":"m","prompt":[1,2]}'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson


def splice_ids(body: Mapping[str, Any], key: str, ids: Sequence[int]) -> bytes:
    """``body`` with ``key: ids`` added, as JSON bytes (``key`` must not be in ``body``).

    >>> splice_ids({"model": "m", "p": 1}, "prompt", [3])
    b'{"model":"m","p":1,"prompt":[3]}'
    """
    return _splice(body, orjson.dumps(key) + b":", ids, b"")


def chat_ids_body(body: Mapping[str, Any], ids: Sequence[int]) -> bytes:
    """The chat request for vLLM: text trimmed, ids in ``kv_transfer_params``.

    >>> chat_ids_body({"messages": [{"role": "user", "content": "hi"}]}, [7])[:37]
    b'{"messages":[{"role":"user","content"'
    >>> chat_ids_body({}, [7])
    b'{"kv_transfer_params":{"prompt_token_ids":[7]}}'
    """
    rest = {k: v for k, v in body.items() if k != "kv_transfer_params"}
    messages = rest.get("messages")
    if isinstance(messages, list):
        rest["messages"] = trim_messages(messages)
    return _splice(rest, b'"kv_transfer_params":{"prompt_token_ids":', ids, b"}")


def _splice(body: Mapping[str, Any], opening: bytes, ids: Sequence[int], closing: bytes) -> bytes:
    head = orjson.dumps(body)  # an object: ends with "}"
    sep = b"," if len(head) > 2 else b""
    return b"".join((head[:-1], sep, opening, orjson.dumps(ids), closing, b"}"))


def trim_messages(messages: list[Any]) -> list[Any]:
    """Messages with their text emptied (strings and text parts); all else kept.

    >>> trim_messages([{"role": "user", "content": [{"type": "text", "text": "a"}]}])
    [{'role': 'user', 'content': [{'type': 'text', 'text': ''}]}]
    """
    return [_trim(m) for m in messages]


def _trim(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": ""}
    if isinstance(content, list):
        parts = [
            {**p, "text": ""} if isinstance(p, dict) and isinstance(p.get("text"), str) else p
            for p in content
        ]
        return {**message, "content": parts}
    return message

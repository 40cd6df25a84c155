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
Callers send ids only for requests :func:`~ttftscope.gateway.pipeline.vllm_chat.prepare_chat`
accepted (text parts only, no ``echo``), the cases where vLLM ignores the text.

The rest of the body is written back as orjson read it, at any depth it reads
(:func:`~ttftscope.gateway.transport.jsoncodec.dumps`); a body holding a number orjson read
inexactly (an integer beyond 64 bits) raises
:class:`~ttftscope.gateway.transport.jsoncodec.InexactNumber`, and
goes upstream as it came.

A session's id array is also kept serialized (:class:`IdsJson`): a turn that keeps the first
k ids re-serializes only the blocks after them, not the whole ~0.3 MB list (~0.8 ms at 50K
ids here, twice that at 100K).

>>> splice_ids({"model": "m"}, "prompt", b"[1,2]")
b'{"model":"m","prompt":[1,2]}'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ttftscope.gateway.transport.jsoncodec import InexactNumber, dumps, inexact_number

# Ids per serialized block: a turn re-serializes at most one block before its first new id.
_BLOCK: Final = 1024


@dataclass
class IdsJson:
    """One session's ids as a JSON array, serialized block by block and kept between turns.

    ``update(ids, kept)`` needs ``ids[:kept]`` equal to the ids of the previous call (the
    incremental encoder's reused tokens); only the blocks from the first changed one on are
    serialized again.

    >>> j = IdsJson()
    >>> j.update([1, 2, 3], kept=0)
    b'[1,2,3]'
    >>> j.update([1, 2, 4, 5], kept=2)
    b'[1,2,4,5]'
    """

    blocks: list[bytes] = field(default_factory=list)  # _BLOCK ids each (the last: up to)

    @property
    def nbytes(self) -> int:
        """Bytes held by the serialized blocks."""
        return sum(len(b) for b in self.blocks)

    def update(self, ids: Sequence[int], kept: int) -> bytes:
        """The JSON array of ``ids``, reusing the blocks that lie within ``ids[:kept]``."""
        # every block before ``keep`` is full and inside the kept ids, so it is unchanged
        keep = min(max(kept, 0) // _BLOCK, len(self.blocks))
        del self.blocks[keep:]
        for start in range(keep * _BLOCK, len(ids), _BLOCK):
            self.blocks.append(orjson.dumps(ids[start : start + _BLOCK])[1:-1])
        return self.json()

    def json(self) -> bytes:
        """The JSON array of the ids of the last :meth:`update`.

        >>> IdsJson([b"1,2", b"3"]).json()
        b'[1,2,3]'
        """
        return b"[" + b",".join(self.blocks) + b"]"

    def fork(self) -> IdsJson:
        """A copy that can evolve on its own (the blocks themselves are immutable)."""
        return IdsJson(self.blocks.copy())


def splice_ids(body: Mapping[str, Any], key: str, ids_json: bytes) -> bytes:
    """``body`` with ``key`` set to an already serialized id array (``key`` not in ``body``).

    >>> splice_ids({"model": "m", "p": 1}, "prompt", orjson.dumps([3]))
    b'{"model":"m","p":1,"prompt":[3]}'
    """
    return _splice(body, orjson.dumps(key) + b":", ids_json, b"")


def chat_ids_body(body: Mapping[str, Any], ids_json: bytes) -> bytes:
    """The chat request for vLLM: text trimmed, the id array in ``kv_transfer_params``.

    >>> chat_ids_body({"messages": [{"role": "user", "content": "hi"}]}, b"[7]")[:37]
    b'{"messages":[{"role":"user","content"'
    >>> chat_ids_body({}, b"[7]")
    b'{"kv_transfer_params":{"prompt_token_ids":[7]}}'
    """
    rest = {k: v for k, v in body.items() if k != "kv_transfer_params"}
    messages = rest.get("messages")
    if isinstance(messages, list):
        rest["messages"] = trim_messages(messages)
    return _splice(rest, b'"kv_transfer_params":{"prompt_token_ids":', ids_json, b"}")


def kv_ids_body(body: Mapping[str, Any], ids_json: bytes) -> bytes:
    """``body`` as it came, with the id array in ``kv_transfer_params.prompt_token_ids``.

    For vLLM's Anthropic and Responses endpoints, whose conversions read the text of the
    messages (which blocks are empty, what a tool result says), so nothing is trimmed.

    >>> kv_ids_body({"model": "m", "kv_transfer_params": None}, b"[7]")
    b'{"model":"m","kv_transfer_params":{"prompt_token_ids":[7]}}'
    """
    rest = {k: v for k, v in body.items() if k != "kv_transfer_params"}
    return _splice(rest, b'"kv_transfer_params":{"prompt_token_ids":', ids_json, b"}")


def _splice(body: Mapping[str, Any], opening: bytes, ids_json: bytes, closing: bytes) -> bytes:
    head = dumps(body)  # an object: ends with "}"
    where = inexact_number(head, body)
    if where is not None:
        raise InexactNumber(f"{where}: a number beyond 64-bit integers, not re-written exactly")
    sep = b"," if len(head) > 2 else b""
    return b"".join((head[:-1], sep, opening, ids_json, closing, b"}"))


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

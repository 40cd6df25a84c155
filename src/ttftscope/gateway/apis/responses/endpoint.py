"""``POST /v1/responses`` (Codex), stateless, on the id path.

vLLM's Responses → chat conversion reproduced
(:mod:`~ttftscope.gateway.apis.responses.vllm_responses`), the ids sent in the Responses
body's own ``kv_transfer_params``, vLLM's answer (items, events) relayed. Stateful
requests (``previous_response_id``, ``store: true``,
``conversation``, ``background``) need the server's own store: they go as text, counted.
So do Harmony models (gpt-oss: vLLM renders them its own way and ignores forwarded ids) and
tokenizers that add special tokens (vLLM encodes a Responses prompt with them; the session
cache encodes without).

>>> from ttftscope.gateway.apis.responses.endpoint import responses
"""

from __future__ import annotations

from starlette.responses import Response

from ttftscope.gateway.apis.native import serve_native
from ttftscope.gateway.apis.responses.convert import responses_as_chat
from ttftscope.gateway.state import Call


async def responses(call: Call) -> Response:
    """One Responses request, answered by vLLM's ``/v1/responses``."""
    return await serve_native(
        call,
        api="responses",
        convert=responses_as_chat,
        path="/responses",
        fmt="openai",
    )

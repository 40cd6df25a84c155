"""Exactness against the real server: compare our ids with the upstream's own rendering.

The first ``gateway.verify_first`` ids requests of each (upstream, API, model), and every
Nth after that (``gateway.verify_every``), ask the upstream how it would have tokenized the
same chat (for messages and responses: the chat body vLLM converts them to):
``/v1/chat/completions/render`` where the server offers it (vLLM with
``--enable-scale-out``), else ``/tokenize`` with ``messages`` and ``tools``. Both are asked
with exactly the template variables the gateway rendered with (``chat_template_kwargs``: the
reasoning effort and ``enable_thinking`` included, which ``/tokenize`` has no field for). A
route that answers as absent or disabled (403, 404, 405, 501: vLLM's render without
``--enable-scale-out`` is a 403) is remembered per upstream and not asked again. A
difference is counted, logged with where the ids diverge, and that request goes upstream
as text, so the client still gets the server's own answer. A Responses request is checked
whole: vLLM's ``/v1/responses`` with ``enable_response_messages`` reports the ids of its own
conversion and rendering.

>>> first_difference([1, 2, 3], [1, 2, 4])
2
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.vllm_chat import prepare_chat
from ttftscope.gateway.transport.hop import HopError

log = logging.getLogger("ttftscope.gateway")
GatewayApi = Literal["chat", "completions", "messages", "responses"]
_TOKENIZE_FIELDS = ("model", "messages", "tools")
_RENDER, _TOKENIZE = "/chat/completions/render", "/tokenize"
# what a server answers for a route it does not serve (or serves disabled), whatever the body
_UNSERVED = frozenset({403, 404, 405, 501})


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    """Index of the first id where two id lists differ (the shorter length if one is a prefix).

    >>> first_difference([1, 2], [1, 2, 3])
    2
    """
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


class Verifier:
    """Decides which requests are checked and runs the check.

    >>> v = Verifier(every=0, first=2, metrics=GatewayMetrics())
    >>> [v.due("up", "messages", "m") for _ in range(3)], v.due("up", "chat", "m")
    ([True, True, False], True)
    """

    def __init__(self, every: int, first: int, metrics: GatewayMetrics) -> None:
        self.every, self.first, self.metrics = every, first, metrics
        self._seen = 0
        self._per_key: dict[tuple[str, str, str], int] = {}

    def due(self, upstream: str, api: GatewayApi, model: str) -> bool:
        """Whether this request is one to check (and count it)."""
        key = (upstream, api, model)
        n = self._per_key.get(key, 0)
        if n < self.first:
            self._per_key[key] = n + 1
            return True
        if self.every <= 0:
            return False
        self._seen += 1
        return self._seen % self.every == 0

    async def agrees(
        self,
        up: Upstream,
        body: Mapping[str, Any],
        ids: list[int],
        api: GatewayApi = "chat",
        native: Mapping[str, Any] | None = None,
    ) -> bool:
        """False only when the upstream's own ids for ``body`` differ from ``ids``.

        ``native`` is the request in its own API (responses): vLLM then reports the ids of
        its own conversion and rendering, a stronger check than the chat body's.
        """
        if not self.due(up.name, api, str(body.get("model"))):
            return True
        if api == "responses" and native is not None:
            theirs = await _responses_ids(up, native)
        else:
            theirs = await self._their_ids(up, body)
        if theirs is None:
            return True  # nothing to compare with: not a mismatch
        self.metrics.verify_checks.labels(up.name).inc()
        if theirs == ids:
            return True
        self.metrics.verify_mismatches.labels(up.name).inc()
        at = first_difference(ids, theirs)
        log.warning(
            "upstream %s: ids differ from the server's at token %d of %d/%d "
            "(ours %s, theirs %s); request sent as text",
            up.name,
            at,
            len(ids),
            len(theirs),
            ids[at : at + 5],
            theirs[at : at + 5],
        )
        return False

    async def _their_ids(self, up: Upstream, body: Mapping[str, Any]) -> list[int] | None:
        kwargs = template_kwargs(up, body)
        try:
            answer = await self._ask(up, _RENDER, rendered_query(body, kwargs))
            ids = answer.get("token_ids") or answer.get("prompt_token_ids") if answer else None
            if _ints(ids):
                return list(ids)
            answer = await self._ask(up, _TOKENIZE, tokenize_query(body, kwargs))
        except HopError:
            return None
        tokens = answer.get("tokens") if answer else None
        return list(tokens) if _ints(tokens) else None

    async def _ask(self, up: Upstream, route: str, query: dict[str, Any]) -> dict[str, Any] | None:
        """A 200's JSON object from ``route`` of ``up``; None otherwise (and a route the
        server does not serve is remembered, never asked again)."""
        if route in up.unserved:  # also what the start-up check found
            return None
        status, answer = await up.post_json(route, query, root=route == _TOKENIZE)
        if status in _UNSERVED:
            up.unserved[route] = f"HTTP {status}"
            log.info(
                "upstream %s: %s answers %d; checks use the next route", up.name, route, status
            )
        return answer if status == 200 and isinstance(answer, dict) else None


def template_kwargs(up: Upstream, body: Mapping[str, Any]) -> dict[str, Any]:
    """The template variables the gateway renders ``body`` with on ``up`` (vLLM's chat
    rewrites of its fields for ``up``'s version, reasoning effort included); the body's own
    ``chat_template_kwargs`` where they cannot be derived."""
    messages = body.get("messages")
    if up.renderer is not None and isinstance(messages, list) and messages:
        try:  # the variables do not depend on the messages: convert only the first
            first = {**body, "messages": messages[:1]}
            return prepare_chat(first, up.renderer.source, up.profile).template_kwargs
        except PassThrough:
            pass
    own = body.get("chat_template_kwargs")
    return dict(own) if isinstance(own, dict) else {}


def rendered_query(body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The chat body for vLLM's render, its template variables those of ``kwargs``.

    >>> rendered_query({"model": "m", "reasoning_effort": "none"}, {"enable_thinking": False})
    {'model': 'm', 'reasoning_effort': 'none', 'chat_template_kwargs': {'enable_thinking': False}}
    """
    return {**body, "chat_template_kwargs": dict(kwargs)}


def tokenize_query(body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's ``/tokenize`` request for the chat ``body`` rendered with ``kwargs`` (it has no
    field for the reasoning effort or documents: they go in ``chat_template_kwargs``).

    >>> tokenize_query({"model": "m", "messages": [], "reasoning_effort": "none"},
    ...                {"add_generation_prompt": True, "enable_thinking": False})
    {'model': 'm', 'messages': [], 'add_generation_prompt': True, \
'chat_template_kwargs': {'enable_thinking': False}}
    """
    query = {k: body[k] for k in _TOKENIZE_FIELDS if k in body}
    query["add_generation_prompt"] = kwargs.get("add_generation_prompt", True)
    rest = {k: v for k, v in kwargs.items() if k != "add_generation_prompt"}
    if rest:
        query["chat_template_kwargs"] = rest
    return query


async def _responses_ids(up: Upstream, body: Mapping[str, Any]) -> list[int] | None:
    """The prompt ids vLLM's ``/v1/responses`` renders for ``body`` (``enable_response_messages``
    returns them; one output token is generated, and the prefill warms the prefix cache for
    the request itself)."""
    query = {**body, "stream": False, "store": False, "max_output_tokens": 1}
    query["enable_response_messages"] = True
    try:
        status, answer = await up.post_json("/responses", query)
    except HopError:
        return None
    messages = answer.get("input_messages") if isinstance(answer, dict) else None
    first = messages[0] if isinstance(messages, list) and messages else None
    tokens = first.get("tokens") if isinstance(first, dict) else None
    return list(tokens) if status == 200 and _ints(tokens) else None


def _ints(value: object) -> TypeGuard[list[int]]:
    return isinstance(value, list) and all(isinstance(v, int) for v in value)

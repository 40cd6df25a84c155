"""An upstream's own rendering of one body, asked within bounds: what the start-up check compares.

In order, where served: the API's render route (``/v1/chat/completions/render``,
``/v1/messages/render``, ``/v1/responses/render``: vLLM's ``GenerateRequest``, ids in
``token_ids``), ``/tokenize`` with the chat body's messages, tools and template kwargs, and
a 1-token request with the ids whose ``usage`` must count exactly the ids sent. A route that
answers 404/405/501, or times out, is remembered per upstream (:class:`Routes`) and not
asked again until the next check.

Every answer is read within :data:`CHECK_TIMEOUT_S` in total and with a byte cap of four
times its expected size; a large answer is parsed on a thread. An upstream that answers
garbage, never ends its body or sends 100 MB costs one timeout or cap and a log line; the
event loop keeps serving.

>>> answer_cap(100, 2_000)
43968
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ttftscope.gateway.pipeline.shapes import NativeApi, Oracle
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.verify import template_kwargs, tokenize_query
from ttftscope.gateway.transport.hop import HopError
from ttftscope.gateway.transport.jsoncodec import dumps

__all__ = ["CHECK_TIMEOUT_S", "Routes", "Theirs", "answer_cap", "ask"]

log = logging.getLogger("ttftscope.gateway")
CHECK_TIMEOUT_S = 5.0  # one oracle request, headers to last byte
_PARSE_INLINE = 256 << 10  # a larger answer is parsed on a thread
# 403: vLLM's render routes on a server without --enable-scale-out
_NOT_SERVED = frozenset({403, 404, 405, 501})
RENDER_PATHS: dict[NativeApi, str] = {
    "chat": "/chat/completions/render",
    "messages": "/messages/render",
    "responses": "/responses/render",
}
PROBE_PATHS: dict[NativeApi, str] = {
    "chat": "/chat/completions",
    "messages": "/messages",
    "responses": "/responses",
}


class Unanswered(Exception):
    """The upstream's answer could not be used (timeout, cap, transport, not JSON)."""


@dataclass
class Routes:
    """Which oracle routes an upstream does not serve (the upstream's own memory of them,
    ``Upstream.unserved``, shared with the verifier), and the check's time bounds."""

    dead: dict[str, str] = field(default_factory=dict)  # path -> why
    timeout_s: float = CHECK_TIMEOUT_S
    deadline: float = math.inf  # time.monotonic() at which the whole check gives up

    def left_s(self) -> float:
        """Seconds one more request may take (:class:`Unanswered` if none are left)."""
        left = min(self.timeout_s, self.deadline - time.monotonic())
        if left <= 0:
            raise Unanswered("the check ran out of time")
        return left


@dataclass(frozen=True)
class Theirs:
    """The upstream's answer for one body: its ids, or whether it used ours, and why."""

    oracle: Oracle
    ids: list[int] | None = None
    used: bool = False
    why: str = ""


def answer_cap(n_ids: int, body_bytes: int) -> int:
    """Four times the bytes an honest answer about ``n_ids`` ids for a body of
    ``body_bytes`` takes (each id ≤ 8 bytes of JSON, the body echoed, 4 KB of fields)."""
    return 4 * (n_ids * 8 + body_bytes + 4096) + 16 * 1024


async def post_bounded(
    up: Upstream, path: str, body: Mapping[str, Any], *, root: bool, cap: int, routes: Routes
) -> tuple[int, Any]:
    """POST ``body``; the status and parsed JSON answer, read within the check's bounds."""
    assert up.pool is not None, "Upstream.start() opens the connection pool"
    pool, data = up.pool, dumps(dict(body))
    target = pool.path(path, root=root)

    async def exchange() -> tuple[int, bytes]:
        resp = await pool.request("POST", target, data, up.headers, up.timeouts())
        resp.cap = cap
        parts, whole = await resp.read_capped()
        if not whole:
            resp.close()
            raise Unanswered(f"answer over {cap} bytes")
        return resp.status, b"".join(parts)

    left = routes.left_s()
    try:
        status, raw = await asyncio.wait_for(exchange(), left)
    except TimeoutError:
        raise Unanswered(f"no whole answer within {left:.3g} s") from None
    except HopError as exc:
        raise Unanswered(str(exc)) from None
    try:
        parsed = await _parse(raw)
    except orjson.JSONDecodeError:
        if status in _NOT_SERVED:
            return status, None
        raise Unanswered(f"HTTP {status}, not JSON") from None
    return status, parsed


async def _parse(raw: bytes) -> Any:
    if len(raw) <= _PARSE_INLINE:
        return orjson.loads(raw)
    return await asyncio.to_thread(orjson.loads, raw)


async def ask(
    up: Upstream,
    api: NativeApi,
    native: Mapping[str, Any],
    chat: Mapping[str, Any],
    ids: list[int],
    routes: Routes,
    order: tuple[Oracle, ...] = ("render", "tokenize", "probe"),
) -> Theirs:
    """The upstream's rendering of ``native`` (an ``api`` body; ``chat`` its chat body,
    ``ids`` the gateway's), from the first oracle of ``order`` that answers."""
    tried: list[str] = []
    for oracle in order:
        try:
            theirs = await _one(up, api, oracle, native, chat, ids, routes)
        except Unanswered as exc:
            tried.append(f"{oracle}: {exc}")
            continue
        if theirs is not None:
            return theirs
        tried.append(f"{oracle}: {routes.dead.get(_route(api, oracle), 'not served')}")
    return Theirs("none", why="; ".join(tried) or "nothing asked")


def _route(api: NativeApi, oracle: Oracle) -> str:
    return {"render": RENDER_PATHS[api], "tokenize": "/tokenize"}.get(oracle, PROBE_PATHS[api])


async def _one(
    up: Upstream,
    api: NativeApi,
    oracle: Oracle,
    native: Mapping[str, Any],
    chat: Mapping[str, Any],
    ids: list[int],
    routes: Routes,
) -> Theirs | None:
    """One oracle's answer; None when its route is not served (remembered)."""
    path = _route(api, oracle)
    if path in routes.dead:
        return None
    if oracle == "probe":
        return await _probe(up, api, native, ids, routes)
    if oracle == "render":
        query, root = dict(native), False
    else:
        # the template variables the gateway rendered with (the effort has no field there)
        query, root = tokenize_query(chat, template_kwargs(up, chat)), True
    try:
        status, answer = await post_bounded(
            up, path, query, root=root, cap=answer_cap(len(ids), len(dumps(query))), routes=routes
        )
    except Unanswered as exc:
        if "within" in str(exc):
            routes.dead[path] = str(exc)  # a route that hangs is not asked again
        raise
    if status in _NOT_SERVED:
        routes.dead[path] = f"HTTP {status}"
        return None
    key = "token_ids" if oracle == "render" else "tokens"
    got = answer.get(key) if isinstance(answer, dict) else None
    if status != 200 or not _ints(got):
        brief = up.scrub(_brief(answer).encode()).decode(errors="replace")
        raise Unanswered(f"HTTP {status}, no {key}: {brief}")
    return Theirs(oracle, ids=got)


def _usage_key(api: NativeApi) -> Literal["prompt_tokens", "input_tokens"]:
    return "prompt_tokens" if api == "chat" else "input_tokens"


async def _probe(
    up: Upstream, api: NativeApi, native: Mapping[str, Any], ids: list[int], routes: Routes
) -> Theirs:
    """A 1-token request of ``api`` with ``ids`` and a few more (a server that renders the
    messages itself counts ``len(ids)``): proven only if its usage counts all it was sent."""
    ids = [*ids, *ids[:8]]
    query = {k: v for k, v in native.items() if k not in ("max_tokens", "max_output_tokens")}
    query["max_output_tokens" if api == "responses" else "max_tokens"] = 1
    query.update(stream=False, temperature=0, kv_transfer_params={"prompt_token_ids": ids})
    path = PROBE_PATHS[api]
    status, answer = await post_bounded(
        up, path, query, root=False, cap=answer_cap(len(ids), len(dumps(query))), routes=routes
    )
    usage = answer.get("usage") if isinstance(answer, dict) else None
    counted = usage.get(_usage_key(api)) if isinstance(usage, dict) else None
    if status in _NOT_SERVED:
        routes.dead[path] = f"HTTP {status}"
        raise Unanswered(f"HTTP {status}")
    used = status == 200 and counted == len(ids)
    why = f"usage counted {counted} of {len(ids)} ids sent (HTTP {status})"
    return Theirs("probe", used=used, why=why)


def _brief(answer: Any) -> str:
    """A short, key-free description of an answer that is not what was asked for."""
    if isinstance(answer, dict):
        error = answer.get("error") or answer.get("message") or answer.get("detail")
        text = error.get("message") if isinstance(error, dict) else error
        return str(text)[:120] if text else f"keys {sorted(answer)[:6]}"
    return type(answer).__name__


def _ints(value: object) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)

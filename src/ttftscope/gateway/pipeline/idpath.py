"""The id path every endpoint shares: a chat body in vLLM's form → rendered prompt → exact ids.

Each endpoint hands :func:`prepare` its own API's conversion to the chat body vLLM derives
from the body (``apis/<api>/convert.py``). From there the stages are the same: vLLM's chat
rewrites (:func:`~ttftscope.gateway.pipeline.vllm_chat.prepare_chat`), the template render
(:func:`chat_inputs`, :func:`render`), the session cache's incremental encode (pinned
to the client's conversation when it names one), the encode's metrics, and verification
against the upstream's own rendering. Whatever cannot be reproduced raises
:class:`~ttftscope.gateway.pipeline.passthrough.PassThrough`, and the endpoint sends its
request as text. What the stages use of the running gateway is :class:`Stages`
(``state.Gateway`` is one), so this layer never imports the layers above it.

Nothing here that grows with the conversation runs on the event loop: the conversion and
render of a large body (:func:`prepare`) and long encodes run on the gateway's
:class:`~ttftscope.gateway.runtime.workpool.WorkPool`; a full pool is a 503 with ``Retry-After``.
A prompt longer than the model's ``max_model_len`` is refused with vLLM's 400 before it
goes upstream (and before it is encoded, when its characters alone show it).

>>> from ttftscope.config.schema import UpstreamSettings
>>> from ttftscope.gateway.pipeline.upstreams import Upstream
>>> up = Upstream("u", UpstreamSettings(base_url="http://h:1/v1", mode="text"))
>>> takes_ids(up, "messages")
False
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.pipeline.passthrough import PassThrough, converted
from ttftscope.gateway.pipeline.sessions import Encoded
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.pipeline.verify import GatewayApi, Verifier
from ttftscope.gateway.pipeline.vllm_chat import ChatInputs, prepare_chat
from ttftscope.gateway.runtime.workpool import Overloaded, WorkPool
from ttftscope.gateway.transport.apierrors import BadRequest
from ttftscope.gateway.transport.hoptrace import traced
from ttftscope.tracing.names import ENCODED_TOKENS, REUSED_TOKENS

log = logging.getLogger("ttftscope.gateway")
T = TypeVar("T")
# a body this small converts and renders in well under a millisecond: no thread hop
_INLINE_BODY = 64 << 10
# an API's conversion (``apis/<api>/convert.py``): the chat body vLLM derives from an API body
# on this upstream, and its template inputs
Convert = Callable[[Upstream, dict[str, Any]], tuple[dict[str, Any], ChatInputs]]


class Stages(Protocol):
    """What the id path uses of the running gateway (``state.Gateway``): its metrics, work
    pool and verifier, and where an encode is accounted."""

    metrics: GatewayMetrics
    pool: WorkPool
    verifier: Verifier

    def account(self, up: Upstream, enc: Encoded) -> None: ...


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


def takes_ids(up: Upstream, api: GatewayApi) -> bool:
    """Whether ``up`` takes ids for ``api`` at all (else its requests go as text, uncounted).

    Chat works over either ids API; messages and responses only where vLLM's own endpoint
    takes ``kv_transfer_params`` (a chat-ids upstream of a reproduced version).
    """
    if up.api is None or up.renderer is None or up.cache is None:
        return False
    return api == "chat" or up.api == "chat-ids"


async def prepare(
    gw: Stages, up: Upstream, body: dict[str, Any], size: int, api: NativeApi, convert: Convert
) -> tuple[dict[str, Any], str]:
    """The chat body ``body`` (of ``api``, converted by ``convert``) converts to on ``up`` and
    the prompt it renders,
    on the work pool when the body (``size`` bytes) is large: conversion and render are pure
    Python (~10 ms for a 100K-token conversation, ~0.3 s for 20K messages). A body whose
    shape classes ``up``'s conformance check did not all prove raises
    ``PassThrough("unproven_shape")`` (after the conversion's own reasons)."""

    hop = traced()  # read here: the pool's threads do not see the request's context

    def work() -> tuple[dict[str, Any], str]:
        if hop is None:
            chat, inputs = converted(lambda: convert(up, body))
            prompt = render(up, inputs)
        else:
            t0 = time.perf_counter_ns()
            chat, inputs = converted(lambda: convert(up, body))
            t1 = time.perf_counter_ns()
            hop.stage("rewrite", t0)
            prompt = render(up, inputs)
            hop.stage("render", t1)
        if up.shapes is not None:
            up.shapes.gate(api, body)
        return chat, prompt

    if size <= _INLINE_BODY:
        return work()
    return await _or_503(gw, gw.pool.run(work))


async def encode_prompt(
    gw: Stages, up: Upstream, model: object, prompt: str, pin: str | None, *, bounded: bool = True
) -> Encoded:
    """The ids of ``prompt`` from ``up``'s session cache, within the model's length unless
    not ``bounded`` (counting tokens: a client asks to learn that it must compact)."""
    assert up.cache is not None
    known = up.max_model_len.get(model) if isinstance(model, str) else None
    limit = known if bounded else None
    if limit is not None and len(prompt) > limit * max(up.token_chars, 1):
        raise BadRequest(400, _too_long(limit, f"more than {limit} (its {len(prompt)} characters)"))
    hop = traced()
    t0 = 0 if hop is None else time.perf_counter_ns()
    enc = await _or_503(gw, up.cache.encode(prompt, pin))
    if hop is not None:
        fresh = len(enc.ids) - enc.reused_tokens
        hop.stage("encode", t0, {REUSED_TOKENS: enc.reused_tokens, ENCODED_TOKENS: fresh})
    gw.account(up, enc)
    if limit is not None and len(enc.ids) > limit:
        raise BadRequest(400, _too_long(limit, str(len(enc.ids))))
    return enc


def _too_long(limit: int, count: str) -> str:
    """vLLM's words for a prompt over ``max_model_len``."""
    return (
        f"This model's maximum context length is {limit} tokens. However, your request has "
        f"{count} input tokens. Please reduce the length of the input messages."
    )


async def _or_503(gw: Stages, job: Awaitable[T]) -> T:
    try:
        return await job
    except Overloaded as exc:
        gw.metrics.encode_refused.inc()
        retry = {"Retry-After": str(exc.retry_after_s)}
        raise BadRequest(503, str(exc), headers=retry) from None


async def encode_chat(
    gw: Stages,
    up: Upstream,
    chat_body: dict[str, Any],
    prompt: str,
    *,
    pin: str | None,
    api: GatewayApi,
    native: dict[str, Any] | None = None,
    bounded: bool = True,
) -> Encoded:
    """The exact ids of ``prompt`` (the render of ``chat_body`` on ``up``), checked against
    the upstream's own rendering of ``chat_body`` (or of ``native``, the request in its own
    API, where the upstream reports that) when due; see :func:`encode_prompt` for
    ``bounded``."""
    model = (native or chat_body).get("model")
    enc = await encode_prompt(gw, up, model, prompt, pin, bounded=bounded)
    if not await gw.verifier.agrees(up, chat_body, enc.ids, api, native):
        _demote(gw, up, api, native or chat_body)
        raise PassThrough("verify_mismatch", "the upstream's own rendering differs")
    return enc


def _demote(gw: Stages, up: Upstream, api: GatewayApi, body: dict[str, Any]) -> None:
    """After a verification mismatch, the request's shape classes go as text on ``up`` until
    the next start-up or version check proves them again; said in the log and ``/metrics``."""
    if up.shapes is None or api == "completions":
        return
    turned = up.shapes.demote(api, body, "verify: the upstream's own rendering differed")
    for shape in turned:
        gw.metrics.shape_ids.labels(up.name, api, shape).set(0)
    log.warning(
        "upstream %s: %s shape classes %s now go as text (a verified request differed)",
        up.name,
        api,
        ", ".join(turned),
    )

"""The gateway's shared state and request plumbing, used by every API.

:class:`Gateway` holds the upstreams, metrics, verifier, inbound keys and request log; its
methods read and check a request (key, size, JSON, model → upstream) and count what
happened. The APIs (``apis/``) build on it; the app (``app``) wires them up, and hands it
the start-up conformance check as its :class:`Prover` (``proving`` sits above the APIs, so
this module cannot import it).

>>> Gateway(GatewaySettings(), {}, prover=None).upstreams
[]
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from starlette.responses import Response

from ttftscope.config.schema import GatewaySettings
from ttftscope.errors import ConfigError
from ttftscope.gateway.metrics import GatewayMetrics
from ttftscope.gateway.pipeline.inputpolicy import (
    InvalidField,
    client_ids,
    max_token_id,
    stream_of,
    token_ids_problem,
)
from ttftscope.gateway.pipeline.sessions import Encoded
from ttftscope.gateway.pipeline.upstreams import Upstream, upstreams_from
from ttftscope.gateway.pipeline.verify import Verifier
from ttftscope.gateway.runtime.coldpool import ColdPool
from ttftscope.gateway.runtime.hosttuning import HOST
from ttftscope.gateway.runtime.workpool import WorkPool
from ttftscope.gateway.transport.apierrors import BadRequest
from ttftscope.gateway.transport.asgi import BodyTooLarge, Receive, Scope, header, read_body
from ttftscope.gateway.transport.hoptrace import traced
from ttftscope.gateway.transport.jsoncodec import JsonRejected, loads_as_vllm
from ttftscope.gateway.transport.requestlog import RequestLog
from ttftscope.tokenization.loader import Tokenizer

log = logging.getLogger("ttftscope.gateway")

# Headers that name a conversation, most specific first: ours, Claude Code's, Codex's.
SESSION_HEADERS = ("x-ttftscope-session", "x-claude-code-session-id", "session-id", "session_id")


def inbound_keys(settings: GatewaySettings, env: Mapping[str, str]) -> list[bytes]:
    """The inbound API keys: none without ``api_keys_env``; a setting that names a variable
    holding no key is refused, because the gateway would then serve anyone while its owner
    believes it checks keys.

    >>> inbound_keys(GatewaySettings(api_keys_env="GW_KEYS"), {"GW_KEYS": "a, b"})
    [b'a', b'b']
    >>> try:
    ...     inbound_keys(GatewaySettings(api_keys_env="GW_KEYS"), {"GW_KEYS": " , "})
    ... except ConfigError as exc:
    ...     print(exc.message)
    gateway.api_keys_env names GW_KEYS, which holds no key: the gateway would accept every request
    """
    var = settings.api_keys_env
    if not var:
        return []
    keys = [k.strip().encode() for k in env.get(var, "").split(",") if k.strip()]
    if not keys:
        state = "is not set" if var not in env else "holds no key"
        raise ConfigError(
            f"gateway.api_keys_env names {var}, which {state}: the gateway would accept "
            "every request",
            hint=f"export {var}=KEY1,KEY2 (comma-separated), or drop gateway.api_keys_env "
            "to run without inbound keys",
        )
    return keys


class Prover(Protocol):
    """What proves the ids upstreams once they are up (the start-up conformance check,
    ``proving.conformance.StartupChecks``), and stops re-proving them on close."""

    async def start(self, upstreams: list[Upstream], metrics: GatewayMetrics) -> None: ...

    async def stop(self) -> None: ...


class Gateway:
    """State shared by the routes: upstreams, metrics, limits, inbound keys. ``prover``
    proves the ids upstreams at start (None: no upstream is proven, so every ids upstream
    keeps the text it starts with)."""

    def __init__(
        self, settings: GatewaySettings, env: Mapping[str, str], *, prover: Prover | None
    ) -> None:
        self.settings, self.env = settings, env
        self.prover = prover
        self.metrics = GatewayMetrics()
        self.upstreams = upstreams_from(settings.upstreams)
        self.verifier = Verifier(settings.verify_every, settings.verify_first, self.metrics)
        self.keys = inbound_keys(settings, env)
        self.max_body = int(settings.max_body_mb * (1 << 20))
        self.pool = WorkPool(workers=settings.encode_workers, queue=settings.encode_queue)
        procs, auto = settings.processes(), settings.encode_processes == "auto"
        self.cold = ColdPool(processes=procs, required=not auto) if procs else None
        if self.cold is not None:
            cold = self.cold
            self.metrics.encode_processes.set_function(lambda: len(cold.pids))
        self.metrics.encode_jobs.set_function(lambda: self.pool.pending)
        self._seen: dict[tuple[str, str], float] = {}
        self.request_log = RequestLog.from_settings(settings.request_log, settings.log_prompts)
        self._tuned = False  # holds a share of HOST's tuning (start to close)

    async def start(self) -> None:
        if self.request_log is not None:
            self.request_log.open()
        share = (self.settings.cache_mb << 20) // max(1, len(self.upstreams))
        loaded: dict[Path, Tokenizer] = {}  # one tokenizer per model folder, however many serve it
        for up in self.upstreams:
            await up.start(
                cache_bytes=share,
                shadow_every=self.settings.shadow_every,
                env=self.env,
                pool=self.pool,
                cold=self.cold,
                loaded=loaded,
                max_answer=int(self.settings.max_answer_mb * (1 << 20)),
            )
            self.metrics.upstream_api.labels(up.name, up.api or "text").set(1)
            if up.plain_via_completions:  # plain chats go the other way
                self.metrics.upstream_api.labels(up.name, "completions").set(1)
        if self.prover is not None:
            await self.prover.start(self.upstreams, self.metrics)
        if self.cold is not None and self.cold.registered:
            self.cold.start()  # workers load the tokenizers while the first requests come
        # what start-up loaded (tokenizers, templates, engines: ~10^5 objects) lives as long
        # as the gateway: a full collection, which runs on whichever thread allocates (the
        # event loop too), then no longer walks it (~0.1 s each time, measured)
        HOST.tune()  # gc.freeze() and a 1 ms switch interval, given back by close()
        self._tuned = True

    async def close(self) -> None:
        if self.prover is not None:
            await self.prover.stop()
        for up in self.upstreams:
            await up.close()
        self.pool.close()
        if self.cold is not None:
            # waits for the job in hand (its queues closed: no leaked semaphore at exit),
            # off the loop: requests still finishing are not held up meanwhile
            await asyncio.to_thread(self.cold.close, wait=True)
        if self.request_log is not None:
            self.request_log.close()
        if self._tuned:
            self._tuned = False
            HOST.restore()

    # -- request plumbing ----------------------------------------------------------------
    def check_key(self, headers: list[tuple[bytes, bytes]]) -> None:
        """Refuse a request without a valid inbound key (when keys are configured).

        The key comes as ``Authorization: Bearer KEY`` (OpenAI clients) or ``x-api-key: KEY``
        (what Claude Code sends with ``ANTHROPIC_API_KEY``).
        """
        if not self.keys:
            return
        authorization = header(headers, "authorization") or ""
        if authorization.startswith("Bearer "):
            given = authorization.removeprefix("Bearer ").strip().encode()
        else:
            given = (header(headers, "x-api-key") or "").strip().encode()
        # compare with every key, always: timing says nothing about which one came close
        if sum(hmac.compare_digest(given, key) for key in self.keys) == 0:
            raise BadRequest(
                401,
                "a valid gateway API key is required (Authorization: Bearer KEY, or x-api-key)",
            )

    async def read(self, scope: Scope, receive: Receive) -> tuple[bytes, dict[str, Any], Upstream]:
        """Read the body, refuse fields vLLM would refuse, route by its model, log it: what
        every route served by model does once its key is checked (``routing``)."""
        raw, body, exact = await self.body(scope, receive)
        check_stream(scope["path"], body)  # vLLM validates before it looks at the model
        self.check_messages(body)
        up = await self.route(body["model"])
        if not exact:
            up = self.as_text(up)
        check_ids(scope["path"], body, up)
        if self.request_log is not None:
            self.request_log.write(body, model=body["model"], upstream=up.name)
        if (hop := traced()) is not None:
            hop.stage("parse", hop.start_ns)
        return raw, body, up

    def as_text(self, up: Upstream) -> Upstream:
        """``up`` for one request whose body the gateway cannot write back exactly (only
        vLLM's own parser reads it: a lone surrogate escape, NaN): without an ids API, so
        every endpoint sends its bytes as they came and vLLM answers them its own way."""
        if up.api is not None:
            self.passthrough(up, "lenient_json")
        return dataclasses.replace(up, api=None, plain_via_completions=False)

    async def body(self, scope: Scope, receive: Receive) -> tuple[bytes, dict[str, Any], bool]:
        """The raw body, parsed, and whether the gateway can write it back exactly."""
        declared = header(scope["headers"], "content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise BadRequest(413, self._too_large())
        try:
            raw = await read_body(receive, self.max_body)
        except BodyTooLarge:
            raise BadRequest(413, self._too_large()) from None
        try:
            body, exact = loads_as_vllm(raw)
        except JsonRejected as exc:
            raise BadRequest(400, str(exc)) from None
        if not isinstance(body, dict):
            raise BadRequest(400, "the request body must be a JSON object")
        if not isinstance(body.get("model"), str):
            raise BadRequest(400, "the request needs a 'model' string naming a served model")
        return raw, body, exact

    def check_messages(self, body: Mapping[str, Any]) -> None:
        """Refuse more messages (or Responses input items) than ``gateway.max_messages``:
        converting and rendering each costs Python time no thread can hide."""
        limit = self.settings.max_messages
        for key in ("messages", "input"):
            items = body.get(key)
            if isinstance(items, list) and len(items) > limit:
                raise BadRequest(
                    400,
                    f"the request has {len(items)} {key}; the gateway accepts at most {limit} "
                    "(gateway.max_messages)",
                )

    def _too_large(self) -> str:
        return (
            f"the request body is larger than {self.settings.max_body_mb:g} MB "
            "(gateway.max_body_mb)"
        )

    async def route(self, model: str) -> Upstream:
        for refresh in (False, True):
            for up in self.upstreams:
                if model in up.models:
                    return up
            if refresh:
                break
            for up in self.upstreams:
                await up.refresh_models()
        served = sorted({m for up in self.upstreams for m in up.models})
        raise BadRequest(404, f"The model `{model}` does not exist. Served: {', '.join(served)}")

    def count(self, route: str, up: Upstream | None, mode: str, response: Response) -> Response:
        name = up.name if up is not None else "-"
        labels = (route, name, mode, str(response.status_code))
        # counted once the response is under way: metrics wait, the first token does not
        asyncio.get_running_loop().call_soon(self._count, labels)
        return response

    def _count(self, labels: tuple[str, str, str, str]) -> None:
        self.metrics.requests.labels(*labels).inc()

    def passthrough(self, up: Upstream, reason: str) -> str:
        """Count a request sent upstream as text, by reason; its mode label."""
        self.metrics.passthrough.labels(up.name, reason).inc()
        return "text"

    def account(self, up: Upstream, enc: Encoded) -> None:
        """Record one encode in ``/metrics``, while the upstream works on the request."""
        asyncio.get_running_loop().call_soon(self._account, up, enc)

    def _account(self, up: Upstream, enc: Encoded) -> None:
        m = self.metrics
        m.tokenize_seconds.labels(up.name).observe(enc.seconds)
        m.tokens_reused.labels(up.name).inc(enc.reused_tokens)
        m.chars_encoded.labels(up.name).inc(enc.encoded_chars)
        m.prompt_tokens.labels(up.name).inc(len(enc.ids))
        m.widenings.inc(enc.widenings)
        m.full_fallbacks.inc(enc.full_fallback)
        assert up.cache is not None
        st = up.cache.stats
        m.cache_entries.set(sum(u.cache.stats.entries for u in self.upstreams if u.cache))
        m.cache_bytes.set(sum(u.cache.stats.nbytes for u in self.upstreams if u.cache))
        totals = (
            ("evictions", m.cache_evictions, st.evictions),
            ("forks", m.cache_forks, st.forks),
            ("shadow_checks", m.shadow_checks, st.shadow_checks),
            ("shadow_mismatches", m.shadow_mismatches, st.shadow_mismatches),
            ("cold_failures", m.encode_process_failures, st.cold_failures),
        )
        for name, counter, value in totals:
            # the cache keeps running totals; a Prometheus counter only takes increments
            seen = self._seen.get((up.name, name), 0.0)
            if value > seen:
                counter.inc(value - seen)
                self._seen[(up.name, name)] = value


@dataclasses.dataclass
class Call:
    """One request as the gateway's one request handler (``routing``) hands it to a route:
    its scope and path parameters and, for a route served by model, the body read, parsed and
    checked, and its upstream. The route says how it served the request in ``mode`` ("ids"
    or "text") and, when it picks an upstream itself, sets ``up``: the handler counts both.

    >>> Call(Gateway(GatewaySettings(), {}, prover=None), {"path": "/health"}).mode
    'text'
    """

    gw: Gateway
    scope: Scope
    params: dict[str, str] = dataclasses.field(default_factory=dict)
    raw: bytes = b""
    body: dict[str, Any] = dataclasses.field(default_factory=dict)
    up: Upstream | None = None
    mode: str = "text"

    @property
    def routed(self) -> Upstream:
        """The upstream the body's model routed to (on a route served by model)."""
        assert self.up is not None, "only a route served by model has its upstream read"
        return self.up


def check_stream(path: str, body: Mapping[str, Any]) -> None:
    """Refuse, as vLLM does, a ``stream`` value it cannot read."""
    try:
        if not path.endswith("/count_tokens"):  # no stream field there: vLLM ignores it
            stream_of(body)
    except InvalidField as exc:
        raise BadRequest(400, str(exc)) from None


def check_ids(path: str, body: Mapping[str, Any], up: Upstream) -> None:
    """Refuse client token ids outside ``up``'s vocabulary (when its tokenizer is loaded)
    before they reach the engine."""
    if up.tok is None:
        return
    for name, ids in client_ids(path, body):
        problem = token_ids_problem(name, ids, max_token_id(up.tok))
        if problem is not None:
            raise BadRequest(400, problem)


def session_pin(headers: list[tuple[bytes, bytes]], body: Mapping[str, Any]) -> str | None:
    """The conversation a request belongs to, when the client names it: a session header,
    else the body's ``prompt_cache_key`` (Codex, OpenAI SDK users). Other requests are
    matched by longest shared prefix alone.

    >>> session_pin([(b"x-claude-code-session-id", b"abc")], {}), session_pin([], {})
    ('x-claude-code-session-id:abc', None)
    >>> session_pin([], {"prompt_cache_key": "k1"})
    'prompt_cache_key:k1'
    """
    for name in SESSION_HEADERS:
        value = header(headers, name)
        if value:
            return f"{name}:{value}"
    key = body.get("prompt_cache_key")
    return f"prompt_cache_key:{key}" if isinstance(key, str) and key else None

"""The servers behind the gateway: address, key, models, and how token ids reach them.

Addresses and keys come only from the configuration (a key is read from the environment
variable the configuration names), never from a request. At start-up each ``ids`` upstream
is probed once to choose how ids travel:

- ``chat-ids``: the chat request itself with ``kv_transfer_params.prompt_token_ids``. vLLM
  0.32 then skips its template and tokenizer but keeps its tool-choice checks, parsers,
  sampling defaults and chat output. The probe sends ids of one conversation with the
  messages of another and accepts only if ``usage.prompt_tokens`` counts the ids: a server
  that ignores the field (or a KV connector that gives it other semantics) fails the probe.
- ``completions``: ``prompt: [ids]`` on ``/v1/completions``, answers translated to chat.
- neither works: the upstream is served as text, and the log and ``/metrics`` say why.

Before probing, the upstream's version is read (vLLM's ``GET /version``): vLLM 0.32 and newer
gets the profile of its release (:func:`~ttftscope.gateway.pipeline.profiles.profile_for`) and
is then proven shape class by shape class (:mod:`~ttftscope.gateway.proving.conformance`); an
older version, or a server that does not say, is served as text, and
``ttftscope_gateway_upstream_version{ids="no"}`` and the log say so. ``rust_frontend_version``
in that answer names vLLM's Rust front end (:attr:`Upstream.frontend`).

``plain_chats = "completions"`` on a chat-ids upstream sends the chats that ``/v1/completions``
answers exactly (no tools, reasoning, structured output, logprobs …; see ``translate``) there
too: vLLM's chat-ids path checks the id list in Python, ~1-6 ms more per 32K-100K-token
request here than ``/v1/completions`` with the same ids. Exact only on a server with no
``--reasoning-parser`` and the default ``--response-role``, which the gateway cannot see:
hence off by default.

>>> Upstream.headers_for("k")["Authorization"]
'Bearer k'
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from ttftscope.config.redact import redact
from ttftscope.config.schema import UpstreamSettings
from ttftscope.gateway.pipeline.modelfacts import caps_new_tokens, longest_token_chars, model_type
from ttftscope.gateway.pipeline.profiles import BASELINE, Profile, profile_for
from ttftscope.gateway.pipeline.sessions import SessionCache
from ttftscope.gateway.pipeline.shapes import ShapeTable
from ttftscope.gateway.runtime.coldpool import ColdPool
from ttftscope.gateway.runtime.workpool import WorkPool
from ttftscope.gateway.transport.hop import MAX_ANSWER, Answer, HopError, HopTimeouts, UpstreamPool
from ttftscope.gateway.transport.jsoncodec import dumps
from ttftscope.tokenization.chat import ChatRenderer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

log = logging.getLogger("ttftscope.gateway")
IdsApi = Literal["chat-ids", "completions"]
_SMALL_ANSWER = 64 << 10  # /version and 1-token probe answers: larger is not vLLM
_VERSION_TIMEOUT_S = 10.0
_MODELS_TTL_S = 60.0
_PROBE_TEXT = "gateway probe " * 12


@dataclass
class Upstream:
    """One configured server, with what the gateway learned about it."""

    name: str
    settings: UpstreamSettings
    api_key: str | None = None
    models: list[str] = field(default_factory=list)
    max_model_len: dict[str, int] = field(default_factory=dict)
    api: IdsApi | None = None  # None: served as text
    api_reason: str = ""
    # chat-ids upstream whose plain chats go to /v1/completions (plain_chats = "completions")
    plain_via_completions: bool = False
    capped_default: bool = False  # the model's generation_config sets max_new_tokens
    model_type: str | None = None  # config.json's model_type (gpt_oss: Harmony rendering)
    adds_special_tokens: bool = False  # the tokenizer's post-processor adds tokens (a BOS)
    version: str | None = None  # what GET /version said (None: no answer)
    # the upstream's routes that answered "not served" (vLLM's render routes without
    # --enable-scale-out: 403), path -> why: the start-up check and the verifier skip them
    unserved: dict[str, str] = field(default_factory=dict)
    profile: Profile = BASELINE  # how this version renders (the conversions read it)
    frontend: str | None = None  # rust_frontend_version from /version (None: Python's)
    shapes: ShapeTable | None = None  # what the conformance check proved (None: not run)
    tok: Tokenizer | None = None
    token_chars: int = 0  # the most characters one token of ``tok`` covers
    renderer: ChatRenderer | None = None
    cache: SessionCache | None = None
    pool: UpstreamPool | None = None
    _models_at: float = 0.0

    @staticmethod
    def headers_for(api_key: str | None) -> dict[str, str]:
        """Headers of every upstream request; the client's own credentials never pass."""
        out = {"Content-Type": "application/json"}
        if api_key:
            out["Authorization"] = f"Bearer {api_key}"
        return out

    @property
    def headers(self) -> dict[str, str]:
        return self.headers_for(self.api_key)

    def scrub(self, body: bytes) -> bytes:
        """``body`` with the key the gateway sent upstream masked: an upstream's 401 that
        quotes the credential it got ("Incorrect API key provided: sk-…") must not hand the
        gateway's own key to whichever client caused it.

        >>> key = "sk-0123456789abcdefXYZ"
        >>> up = Upstream("u", UpstreamSettings(base_url="http://h/v1"), api_key=key)
        >>> up.scrub(f"Incorrect API key provided: Bearer {key}".encode()).decode()
        'Incorrect API key provided: Bearer sk-…fXYZ'
        """
        if not self.api_key or self.api_key.encode() not in body:
            return body
        return body.replace(self.api_key.encode(), redact(self.api_key).encode())

    @property
    def mode(self) -> Literal["ids", "text"]:
        return "ids" if self.api is not None else "text"

    def timeouts(self) -> HopTimeouts:
        t = self.settings.timeout_seconds
        return HopTimeouts(connect_s=min(t, 30.0), read_s=t)

    async def post(
        self, path: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> Answer:
        """POST a JSON body to ``base_url`` + ``path``; the answer once its headers are in.

        ``headers`` go with it (the request's trace headers)."""
        return await self._request("POST", path, data, headers=headers)

    async def _request(
        self,
        method: Literal["GET", "POST"],
        path: str,
        data: bytes,
        *,
        root: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        assert self.pool is not None, "Upstream.start() opens the connection pool"
        target = self.pool.path(path, root=root)
        sent = self.headers if not headers else {**self.headers, **headers}
        return await self.pool.request(method, target, data, sent, self.timeouts())

    async def start(
        self,
        *,
        cache_bytes: int,
        shadow_every: int,
        env: Mapping[str, str],
        pool: WorkPool | None = None,
        cold: ColdPool | None = None,
        loaded: dict[Path, Tokenizer] | None = None,
        max_answer: int = MAX_ANSWER,
    ) -> None:
        """Open the connection pool, load the tokenizer, list models, choose the ids API.

        Whole answers are held up to ``max_answer`` bytes; long encodes run on ``pool``
        (the longest in ``cold``'s processes);
        ``loaded`` holds the tokenizers already loaded by model
        folder (another upstream serving the same model shares its ~25 MB tokenizer).
        """
        var = self.settings.api_key_env
        self.api_key = env.get(var) if var else None
        self.pool = UpstreamPool(self.settings.base_url, max_answer=max_answer)
        if self.settings.mode == "ids":
            self._load_tokenizer(cache_bytes, shadow_every, pool=pool, cold=cold, loaded=loaded)
        await self.refresh_models(force=True)
        if self.settings.mode == "ids":
            await self.adopt_version(*await self.read_version())
        route = self.api or ("none (text)" if self.settings.mode == "ids" else "none (mode text)")
        log.debug(
            "upstream %s: %s (version %s), models %s, ids via %s %s",
            self.name,
            self.settings.base_url,
            self.version or "not read",
            self.models,
            route,
            self.api_reason,
        )

    async def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def _load_tokenizer(
        self,
        cache_bytes: int,
        shadow_every: int,
        *,
        pool: WorkPool | None = None,
        cold: ColdPool | None = None,
        loaded: dict[Path, Tokenizer] | None = None,
    ) -> None:
        folder = self.settings.model_dir
        if folder is None:
            raise ValueError(
                f"upstream {self.name!r} is in ids mode but has no model_dir: set "
                f"gateway.upstreams.{self.name}.model_dir to the served model's folder "
                '(tokenizer and chat template), or mode = "text"'
            )
        where = Path(folder).expanduser().resolve()
        loaded = {} if loaded is None else loaded
        if where not in loaded:
            loaded[where] = load_tokenizer(where)
        self.tok = loaded[where]
        self.token_chars = longest_token_chars(self.tok)
        self.renderer = ChatRenderer(self.tok)
        self.cache = SessionCache(
            self.tok, max_bytes=cache_bytes, shadow_every=shadow_every, pool=pool, cold=cold
        )
        self.capped_default = caps_new_tokens(Path(folder).expanduser())
        self.model_type = model_type(Path(folder).expanduser())
        probe = "adds?"
        self.adds_special_tokens = self.tok.encode(
            probe, add_special_tokens=True
        ) != self.tok.encode(probe)

    def chat_default_limit(self, model: str) -> int | None:
        """The context length chat's default ``max_tokens`` derives from, if it is knowable.

        vLLM caps that default with generation_config's ``max_new_tokens`` unless started
        with ``--generation-config vllm``, which the gateway cannot see: with such a cap a
        chat without ``max_tokens`` has no known completions equivalent (None).
        """
        return None if self.capped_default else self.max_model_len.get(model)

    async def refresh_models(self, *, force: bool = False) -> None:
        """Re-read ``/v1/models`` (at most once a minute unless ``force``)."""
        if self.settings.models:
            self.models = list(self.settings.models)
            return
        if not force and time.monotonic() - self._models_at < _MODELS_TTL_S:
            return
        self._models_at = time.monotonic()
        try:
            data = await self.get_json("/models")
        except (HopError, ValueError) as exc:
            log.warning("upstream %s: GET /models failed (%s)", self.name, exc)
            return
        entries = data.get("data") if isinstance(data, dict) else None
        cards = [m for m in entries or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]
        self.models = [m["id"] for m in cards]
        self.max_model_len = {
            m["id"]: m["max_model_len"] for m in cards if isinstance(m.get("max_model_len"), int)
        }

    async def adopt_version(self, version: str | None, frontend: str | None) -> None:
        """Take ``version`` (and the Rust ``frontend``) as this server's: its profile, then
        the ids API probed again; older than 0.32 or not vLLM: text."""
        self.version, self.frontend, self.api, self.api_reason = version, frontend, None, ""
        self.unserved.clear()  # another server: its routes are asked again
        profile = profile_for(version)
        if profile is None:
            self.api_reason = f"(version {version or 'unknown'}: not vLLM 0.32 or newer; text)"
            return
        self.profile = profile
        await self._choose_api()

    async def read_version(self) -> tuple[str | None, str | None]:
        """``version`` and ``rust_frontend_version`` from ``GET /version`` (vLLM), or None;
        within 64 KB and 10 s."""

        async def exchange() -> Any:
            resp = await self._request("GET", "/version", b"", root=True)
            resp.cap = _SMALL_ANSWER
            raw = await resp.read()
            return orjson.loads(raw) if resp.status == 200 else None

        try:
            data = await asyncio.wait_for(exchange(), _VERSION_TIMEOUT_S)
        except (HopError, orjson.JSONDecodeError, TimeoutError) as exc:
            log.warning("upstream %s: GET /version failed (%s)", self.name, str(exc) or "timeout")
            return None, None
        got = data if isinstance(data, dict) else {}
        version, rust = got.get("version"), got.get("rust_frontend_version")
        return (
            version if isinstance(version, str) else None,
            str(rust) if isinstance(rust, (str, int, float)) else None,
        )

    async def get_json(self, path: str) -> Any:
        """GET ``base_url`` + ``path`` as JSON (ValueError unless the answer is a 200)."""
        resp = await self._request("GET", path, b"")
        raw = await resp.read()
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}")
        return orjson.loads(raw)

    async def post_json(
        self, path: str, body: Mapping[str, Any], *, root: bool = False
    ) -> tuple[int, Any]:
        """POST a small JSON body (probes, verification); status and parsed answer.

        ``path`` is under ``base_url`` (``/chat/completions``), or with ``root`` under the
        server's root (``/tokenize``).
        """
        resp = await self._request("POST", path, dumps(body), root=root)  # client bodies: any depth
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, None

    async def _small_post(self, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        resp = await self._request("POST", path, dumps(body))
        resp.cap = _SMALL_ANSWER
        raw = await resp.read()
        try:
            return resp.status, orjson.loads(raw)
        except orjson.JSONDecodeError:
            return resp.status, None

    async def _choose_api(self) -> None:
        wanted = self.settings.api
        if not self.models or self.tok is None or self.renderer is None:
            self.api, self.api_reason = None, "(no models listed: served as text until restart)"
            return
        ids = self.tok.encode(_PROBE_TEXT)
        for api in ("chat-ids", "completions") if wanted == "auto" else (wanted,):
            ok, why = await self._probe(api, ids)
            if ok:
                self.api, self.api_reason = api, f"(probe: prompt_tokens {len(ids)} as sent)"
                break
            self.api_reason += f"[{api}: {why}] "
        else:
            self.api = None
            return
        if self.api == "chat-ids" and self.settings.plain_chats == "completions":
            ok, why = await self._probe("completions", ids)
            self.plain_via_completions = ok
            self.api_reason += (
                "; plain chats via completions"
                if ok
                else f"; plain chats stay on chat-ids [completions: {why}]"
            )

    async def _probe(self, api: str, ids: list[int]) -> tuple[bool, str]:
        model = self.models[0]
        body: dict[str, Any] = {"model": model, "max_tokens": 1, "temperature": 0}
        if api == "chat-ids":
            body["messages"] = [{"role": "user", "content": "hi"}]
            body["kv_transfer_params"] = {"prompt_token_ids": ids}
            path = "/chat/completions"
        else:
            body["prompt"] = ids
            path = "/completions"
        try:  # a 1-token answer: within 64 KB and 10 s (a re-check runs while serving)
            status, answer = await asyncio.wait_for(self._small_post(path, body), 10.0)
        except (HopError, TimeoutError) as exc:
            return False, str(exc) or "no answer within 10 s"
        usage = answer.get("usage") if isinstance(answer, dict) else None
        counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if status == 200 and counted == len(ids):
            return True, "ok"
        return False, f"HTTP {status}, prompt_tokens {counted} for {len(ids)} ids"


def offline_upstream(model_dir: Path, version: str) -> Upstream:
    """An upstream of ``model_dir`` rendering as vLLM ``version`` does, with no server behind it:
    what the gateway sends that version (the oracle tests compare it with vLLM's own renderer).

    >>> up = offline_upstream(qwen2_dir, "0.34.0")
    >>> up.profile.name, up.version, up.renderer is not None
    ('0.34', '0.34.0', True)
    """
    profile = profile_for(version)
    if profile is None:
        raise ValueError(f"vLLM {version!r} has no profile: the gateway sends it only text")
    settings = UpstreamSettings(base_url="http://127.0.0.1:9/v1", model_dir=model_dir)
    up = Upstream(f"offline-{version}", settings, version=version, profile=profile)
    up._load_tokenizer(cache_bytes=1 << 20, shadow_every=0)
    return up


def upstreams_from(settings: Mapping[str, UpstreamSettings]) -> list[Upstream]:
    """One :class:`Upstream` per configured table, in configuration order.

    >>> [u.name for u in upstreams_from({"a": UpstreamSettings(base_url="http://h:1/v1")})]
    ['a']
    """
    return [Upstream(name, s) for name, s in settings.items()]


def environment() -> Mapping[str, str]:
    """The process environment (where upstream keys live)."""
    return os.environ

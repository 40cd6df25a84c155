"""A stand-in vLLM for the conformance check: what it serves and how it answers is set per test.

- ``GET /version``: ``version`` (and ``rust_frontend_version`` when ``rust``); None: 404.
- ``POST /v1/{chat/completions,messages,responses}/render`` (when ``render``) and
  ``/tokenize`` (when ``tokenize``) answer the ids of the gateway's own rendering, made by
  the gateway's renderer: these tests are about which oracle is asked, what is remembered,
  bounds and verdicts, not about exactness (that is the oracle tier's, against vLLM's own
  render servers; ``test_conformance`` checks plain chat against ``reference_ids`` too).
  ``wrong`` names shape classes whose answer gets one id more (a server that renders
  differently); ``hostile`` makes the chat render route answer garbage, 100 MB, or a body
  that drips forever.
- ``POST /v1/chat/completions``, ``/v1/messages``, ``/v1/responses``: usage counts the
  ``kv_transfer_params`` ids sent when ``uses_ids``, else a fixed 7 (a server that renders
  itself).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ttftscope.config.schema import UpstreamSettings
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.profiles import profile_for
from ttftscope.gateway.pipeline.shapes import NativeApi, shape_classes
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.proving.converts import local_prompt
from ttftscope.threadserver import ThreadServer

MODEL = "m"
Hostile = Literal["garbage", "huge", "drip"]
HUGE = 100 << 20


@dataclass
class FakeOptions:
    model_dir: Path
    version: str | None = "0.34.0"
    rust: str | None = None
    render: bool = True
    tokenize: bool = True
    uses_ids: bool = True
    wrong: frozenset[str] = frozenset()
    hostile: Hostile | None = None


@dataclass
class Seen:
    paths: list[str] = field(default_factory=list)
    sending: threading.Event = field(default_factory=threading.Event)  # hostile answer began
    finished: threading.Event = field(default_factory=threading.Event)  # … and stopped
    sent: int = 0  # bytes of the hostile answer handed to the transport
    generated: list[dict[str, Any]] = field(default_factory=list)  # bodies of generate requests


class FakeVllm(ThreadServer):
    def __init__(self, options: FakeOptions) -> None:
        self.options, self.seen = options, Seen()
        where = UpstreamSettings(base_url="http://x/v1", model_dir=options.model_dir)
        self._renderer = Upstream("fake", where)
        self._renderer._load_tokenizer(cache_bytes=1 << 20, shadow_every=0, loaded={})
        super().__init__(_app(self), name="fake vllm")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def ids(self, api: NativeApi, body: dict[str, Any]) -> list[int] | None:
        up = self._renderer
        up.profile = profile_for(self.options.version) or up.profile
        try:
            _, prompt = local_prompt(up, api, body)
        except PassThrough:
            return None
        assert up.tok is not None
        ids = up.tok.encode(prompt)
        if shape_classes(api, body) & self.options.wrong:
            ids.append(ids[-1])
        return ids


def _app(srv: FakeVllm) -> Starlette:
    opts = srv.options

    async def version(request: Request) -> Response:
        if opts.version is None:
            return Response(status_code=404)
        answer: dict[str, str] = {"version": opts.version}
        if opts.rust:
            answer["rust_frontend_version"] = opts.rust
        return JSONResponse(answer)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def render(request: Request) -> Response:
        srv.seen.paths.append(request.url.path)
        api = _api(request.url.path.removesuffix("/render"))
        if not opts.render:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if opts.hostile is not None and api == "chat":
            return _hostile(srv, opts.hostile)
        ids = srv.ids(api, orjson.loads(await request.body()))
        if ids is None:
            return JSONResponse({"error": {"message": "bad request"}}, status_code=400)
        return JSONResponse({"request_id": "r", "token_ids": ids, "model": MODEL})

    async def tokenize(request: Request) -> Response:
        srv.seen.paths.append(request.url.path)
        if not opts.tokenize:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        ids = srv.ids("chat", orjson.loads(await request.body()))
        if ids is None:
            return JSONResponse({"error": {"message": "bad request"}}, status_code=400)
        return JSONResponse({"count": len(ids), "tokens": ids})

    async def generate(request: Request) -> Response:
        srv.seen.paths.append(request.url.path)
        body = orjson.loads(await request.body())
        srv.seen.generated.append(body)
        kv = body.get("kv_transfer_params") or {}
        ids = kv.get("prompt_token_ids") if isinstance(kv, dict) else None
        n = len(ids) if opts.uses_ids and isinstance(ids, list) else 7
        key = "prompt_tokens" if _api(request.url.path) == "chat" else "input_tokens"
        return JSONResponse({"id": "x", "choices": [], "output": [], "usage": {key: n}})

    return Starlette(
        routes=[
            Route("/version", version, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/v1/chat/completions/render", render, methods=["POST"]),
            Route("/v1/messages/render", render, methods=["POST"]),
            Route("/v1/responses/render", render, methods=["POST"]),
            Route("/v1/chat/completions", generate, methods=["POST"]),
            Route("/v1/messages", generate, methods=["POST"]),
            Route("/v1/responses", generate, methods=["POST"]),
        ]
    )


def _api(path: str) -> NativeApi:
    if path.endswith("/messages"):
        return "messages"
    return "responses" if path.endswith("/responses") else "chat"


def _hostile(srv: FakeVllm, kind: Hostile) -> Response:
    if kind == "garbage":
        return Response(b"\x00\xffnot json {{{", media_type="application/json")
    return StreamingResponse(_endless(srv, kind), media_type="application/json")


async def _endless(srv: FakeVllm, kind: Hostile) -> AsyncIterator[bytes]:
    """100 MB of ids as fast as the reader takes them, or a byte every 20 ms for a minute."""
    srv.seen.sending.set()
    try:
        if kind == "huge":
            chunk = b'{"token_ids": [' + b"1," * (512 << 10)
            while srv.seen.sent < HUGE:
                srv.seen.sent += len(chunk)
                yield chunk
                await asyncio.sleep(0)  # where a reader's hang-up stops the stream
        else:
            yield b'{"token_ids": ['
            for _ in range(3000):
                await asyncio.sleep(0.02)  # the server's pace, not a test's wait
                srv.seen.sent += 2
                yield b"1,"
    finally:
        srv.seen.finished.set()
